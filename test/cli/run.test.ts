// demo and run through main with a stand-in launcher (split from test/cli.test.ts).
import { describe, expect, it } from "vitest"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as Cli from "../../src/cli/index.ts"
import { auditFailed, completed, eventsOf, runMain, unrecoverable, useScratch } from "./fixtures.ts"

const scratch = useScratch()

describe("demo and run", () => {
  const fakeLaunch =
    (result: RunTypes.RunResult, seen: Array<RunTypes.RunOptions>): Cli.Launch =>
    (options) => {
      seen.push(options)
      for (const event of eventsOf(result)) options.onEvent?.(event)
      return Promise.resolve(result)
    }

  it("demo runs the bundled trainer with the parsed options and prints the events, then the table", async () => {
    const seen: Array<RunTypes.RunOptions> = []
    const { code, out, err } = await runMain(["demo", "--seed", "7"], fakeLaunch(completed, seen))
    expect({ code, err }).toEqual({ code: 0, err: "" })
    expect(seen).toHaveLength(1)
    const options = seen[0]!
    expect(options.trainer).toMatch(/^file:\/\/.*\/src\/train\/mnist-trainer\.ts$/)
    expect(options.signal?.aborted).toBe(false)
    expect(options.stopSignal?.aborted).toBe(false)
    expect({ ...options, trainer: "", onEvent: undefined, onRankOutput: undefined, signal: undefined, stopSignal: undefined }).toEqual({
      trainer: "",
      worldSize: 4,
      epochs: 3,
      mode: "static",
      backend: "cpu",
      transport: "worker",
      kills: [{ rank: 2, atEpoch: 1, atFraction: 0.4, plan: "demo" }],
      hangs: [],
      heartbeatTimeoutMs: 10_000,
      coordinatorTimeoutMs: 10_000,
      failureLimit: undefined,
      rolePolicy: "fastest",
      onRepeatedCrash: "stop",
      livenessDetector: "fixed",
      rankMemoryMb: 1024,
      interruptGraceMs: 30_000,
      seed: 7,
      outDir: "runs",
      onEvent: undefined,
      onRankOutput: undefined,
      signal: undefined,
      stopSignal: undefined
    })
    expect(out).toBe(
      [
        "[   0.0s] run abc123: 4 ranks as worker threads, 3 epochs of 8000 samples, static mode; writing runs/abc123",
        "[  12.3s] alert critical RankLost root/rank2: rank 2 lost: killed by terminate",
        "[  12.3s] rank 2 lost (supervisor): killed by terminate; detected 1.3 ms after the fault; 1200 samples moved to the survivors 3.5 ms after the fault",
        "[   9.0s] epoch 0 done: 8000 samples committed, lost 0, duplicated 0, 0 deaths, test accuracy 0.9105",
        "[  19.0s] epoch 1 done: 8000 samples committed, lost 0, duplicated 0, 1 death, test accuracy 0.9350",
        "[  29.0s] epoch 2 done: 8000 samples committed, lost 0, duplicated 0, 0 deaths, test accuracy 0.9420",
        "[  41.2s] run ended: completed",
        ""
      ].join("\n") + Cli.renderResult(completed).out
    )
  })

  it("run passes the trainer as an absolute path and exits 1 with one line when the run is unrecoverable", async () => {
    const seen: Array<RunTypes.RunOptions> = []
    const { code, out, err } = await runMain(
      ["run", "--trainer", `${scratch()}/good-trainer.mjs`, "--failure-limit", "1", "--kill", "1@3"],
      fakeLaunch(unrecoverable, seen)
    )
    expect(seen.map((o) => [o.trainer, o.kills, o.failureLimit])).toEqual([
      [`${scratch()}/good-trainer.mjs`, [{ rank: 1, atSeconds: 3 }], { absolute: 1 }]
    ])
    expect(code).toBe(1)
    expect(out.endsWith(Cli.renderResult(unrecoverable).out)).toBe(true)
    expect(err).toBe(`${Cli.renderResult(unrecoverable).err}\n`)
  })

  it("passes --round-deadline-ms and --round-quorum to the run", async () => {
    const seen: Array<RunTypes.RunOptions> = []
    const { code } = await runMain(["demo", "--round-deadline-ms", "300", "--round-quorum", "0.6"], fakeLaunch(completed, seen))
    expect(code).toBe(0)
    expect(seen.map((o) => [o.roundDeadlineMs, o.roundQuorum])).toEqual([[300, 0.6]])
  })

  it("exits 4 when an audit failed", async () => {
    const { code, err } = await runMain(["demo", "--no-kill"], fakeLaunch(auditFailed, []))
    expect({ code, err }).toEqual({ code: 4, err: "cohort: audit failed: epoch 1 lost 5, duplicated 2\n" })
  })

  it("--json prints only the result as JSON on stdout and the events on stderr", async () => {
    const { code, out, err } = await runMain(["demo", "--json"], fakeLaunch(completed, []))
    expect(code).toBe(0)
    expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(completed)))
    expect(err.split("\n")[0]).toBe(
      "[   0.0s] run abc123: 4 ranks as worker threads, 3 epochs of 8000 samples, static mode; writing runs/abc123"
    )
  })

  it("--json sends what ranks print to stderr as [rank N] lines, never to stdout", async () => {
    const launch: Cli.Launch = (options) => {
      options.onRankOutput?.(1, "save to somewhere")
      return Promise.resolve(completed)
    }
    const { code, out, err } = await runMain(["demo", "--json"], launch)
    expect(code).toBe(0)
    expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(completed)))
    expect(err.split("\n")).toContain("[rank 1] save to somewhere")
  })

  it("exits 3 with one line when the launcher fails", async () => {
    const { code, out, err } = await runMain(["demo"], () => Promise.reject(new Error("worldSize: bad\nstack")))
    expect({ code, out, err }).toEqual({ code: 3, out: "", err: "cohort: the run failed: worldSize: bad\n" })
  })
})
