import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import type * as RunTypes from "../../actors/run-types.ts"
import * as Cli from "../../src/cli/index.ts"
import { expectRecordsAgree } from "../run-records.ts"

const outDir = mkdtempSync(join(tmpdir(), "cohort-demo-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

describe("cohort demo", () => {
  // The cpu backend's accuracy on worker threads, which the ring's run below must match (within 0.01).
  let cpuAccuracy: number | undefined
  // The demo's kill: a worker thread is terminated; a rank process over WebSocket gets SIGKILL.
  for (const [transport, cause] of [["worker", "terminate"], ["websocket", "SIGKILL"]] as const) {
  it(`trains the bundled digits for one epoch on 4 ${transport} ranks with a clean audit`, async () => {
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
      readonly epochs: ReadonlyArray<{ readonly samplesCommitted: number; readonly lost: number; readonly duplicated: number; readonly accuracy: number }>
    }
    expect(result.exitCode).toBe(0)
    expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[8000, 0, 0]])
    // Every record of the run lists the same evals (the last epoch's too), audits and deaths.
    const records = await expectRecordsAgree((result as unknown as RunTypes.RunResult).runDir, result as unknown as RunTypes.RunResult)
    expect([records.evals.map(([epoch]) => epoch), records.deaths.map(([rank, epoch]) => [rank, epoch])]).toEqual([[0], [[2, 0]]])
    // One epoch of the bundled MLP over 8,000 digits reaches about 0.89 test accuracy.
    expect(result.epochs[0]!.accuracy).toBeGreaterThan(0.85)
    if (transport === "worker") cpuAccuracy = result.epochs[0]!.accuracy
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
    const evalLine = index(new RegExp(`\\] epoch 0 test accuracy ${result.epochs[0]!.accuracy.toFixed(4)} \\(eval on rank [013], loss \\d+\\.\\d{4}\\)$`))
    expect(evalLine).toBeGreaterThan(epochLine)
    // A whole training run: 10-15 s on a quiet 2-core machine, several times that on a loaded one.
  }, 120_000)
  }

  it("with --backend ring: the ranks all-reduce among themselves, the killed rank re-forms the ring, and the audit is clean", async () => {
    const out: Array<string> = []
    const io: Cli.Io = {
      out: (text) => void out.push(text),
      err: () => {},
      isTerminal: false,
      progressStream: () => {
        throw new Error("no progress bars without a terminal")
      }
    }
    const code = await Cli.main(["demo", "--epochs", "1", "--backend", "ring", "--out", outDir, "--json"], io)
    expect(code).toBe(0)
    const result = JSON.parse(out.join("")) as {
      readonly runDir: string
      readonly backend: string
      readonly ring: { readonly generations: number; readonly links: string }
      readonly deaths: ReadonlyArray<{ readonly rank: number }>
      readonly epochs: ReadonlyArray<{ readonly samplesCommitted: number; readonly lost: number; readonly duplicated: number; readonly accuracy: number }>
    }
    expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[8000, 0, 0]])
    expect(result.deaths.map((d) => d.rank)).toEqual([2])
    const records = await expectRecordsAgree(result.runDir, result as unknown as RunTypes.RunResult)
    expect(records.evals.map(([epoch]) => epoch)).toEqual([0])
    expect([result.backend, result.ring.generations, result.ring.links]).toEqual(["ring", 2, "area"])
    // One journal decision per ring generation, naming its members, not one per member.
    const journal = readFileSync(join(result.runDir, "events.ndjson"), "utf8").trim().split("\n").map((line) => JSON.parse(line) as { readonly type: string; readonly detail?: string })
    const formRings = journal.filter((e) => e.type === "decision" && /^FormRing/.test(e.detail ?? "")).map((e) => e.detail!.split(": ")[0])
    expect(formRings).toEqual(["FormRing generation 0 to ranks 0, 1, 2, 3", "FormRing generation 1 to ranks 0, 1, 3"])
    // The ring averages the same contributions as cpu (the members that trained since the last
    // round, with equal weights), so its accuracy is the cpu run's above, within 0.01.
    if (cpuAccuracy === undefined) throw new Error("run the whole file: this test compares with the cpu run above")
    expect(result.epochs[0]!.accuracy).toBeGreaterThanOrEqual(cpuAccuracy - 0.01)
  }, 120_000)
})
