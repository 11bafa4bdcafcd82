import { expect } from "vitest"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as Cli from "../../src/cli/index.ts"
import { expectRecordsAgree } from "../run-records.ts"

/**
 * `cohort demo` for one epoch on 4 ranks of `transport`, the demo's kill of rank 2 included (a
 * worker thread is terminated, a rank process gets SIGKILL: `cause`): checks the audit, the
 * records and the live lines, and returns the epoch's test accuracy. A whole training run: 10-15 s
 * on a quiet 2-core machine, several times that on a loaded one.
 */
export const demoEpoch = async (transport: "worker" | "websocket", cause: string, outDir: string): Promise<number> => {
  const out: Array<string> = []
  const err: Array<string> = []
  const io: Cli.Io = {
    out: (text) => void out.push(text),
    err: (text) => void err.push(text),
    isTerminal: false,
    progressStream: () => {
      throw new Error("no progress bars without a terminal")
    }
  }
  const code = await Cli.main(["demo", "--epochs", "1", "--transport", transport, "--out", outDir, "--json"], io)
  expect(code).toBe(0)
  const result = JSON.parse(out.join("")) as {
    readonly exitCode: number
    readonly epochs: ReadonlyArray<{
      readonly samplesCommitted: number
      readonly lost: number
      readonly duplicated: number
      readonly accuracy: number
    }>
  }
  expect(result.exitCode).toBe(0)
  expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[8000, 0, 0]])
  // Every record of the run lists the same evals (the last epoch's too), audits and deaths.
  const records = await expectRecordsAgree((result as unknown as RunTypes.RunResult).runDir, result as unknown as RunTypes.RunResult)
  expect([records.evals.map(([epoch]) => epoch), records.deaths.map(([rank, epoch]) => [rank, epoch])]).toEqual([[0], [[2, 0]]])
  // One epoch of the bundled MLP over 8,000 digits reaches about 0.89 test accuracy.
  expect(result.epochs[0]!.accuracy).toBeGreaterThan(0.85)
  // The live lines (on stderr with --json) follow time, a death comes before what it caused, and
  // the epoch's accuracy, pending when the epoch ends, follows on its own line.
  const lines = err.join("").trimEnd().split("\n")
  const seconds = lines.map((line) => Number(/^\[\s*([\d.]+)s\]/.exec(line)?.[1]))
  expect(seconds.every((s, i) => Number.isFinite(s) && (i === 0 || s >= seconds[i - 1]!))).toBe(true)
  const index = (pattern: RegExp): number => lines.findIndex((line) => pattern.test(line))
  const death = index(new RegExp(`\\] rank 2 lost \\(supervisor\\): killed by ${cause};`))
  expect(death).toBeGreaterThan(0)
  expect(index(/\] alert critical RankLost root\/rank2: rank 2 lost/)).toBeGreaterThan(death)
  expect(index(/\] decision: \d+ × ExtendPartition: remainder of rank 2 /)).toBeGreaterThan(death)
  const epochLine = index(/\] epoch 0 done: 8000 samples committed, lost 0, duplicated 0, 1 death, test accuracy pending$/)
  expect(epochLine).toBeGreaterThan(death)
  const evalLine = index(
    new RegExp(`\\] epoch 0 test accuracy ${result.epochs[0]!.accuracy.toFixed(4)} \\(eval on rank [013], loss \\d+\\.\\d{4}\\)$`)
  )
  expect(evalLine).toBeGreaterThan(epochLine)
  return result.epochs[0]!.accuracy
}
