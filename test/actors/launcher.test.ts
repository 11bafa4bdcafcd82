import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { getPriority, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher.ts"
import * as Files from "../../src/platform/files.ts"
import type { RunOptions } from "../../actors/run-types.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const lineTrainer = fileURLToPath(new URL("../../examples/line-trainer.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-e2e-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const fast: Partial<RunOptions> = { heartbeatTimeoutMs: 3000, heartbeatIntervalMs: 200, tickMs: 50, batchSize: 8, averageEverySteps: 4, outDir }

type Result = Awaited<ReturnType<typeof Launcher.run>>

/** Threads of this process whose nice value is `nice` (Linux `/proc`; field 19 of a task's stat). */
const threadsAtNice = (nice: number): number =>
  readdirSync("/proc/self/task").filter((task) => {
    const stat = readFileSync(`/proc/self/task/${task}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]) === nice
  }).length

const clean = (result: Result) => result.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])

describe("end to end: real workers, a real trainer module, injected faults", () => {
  it("a killed worker and a hung one are declared by their detectors and every epoch's audit is clean", async () => {
    // 4,800 samples at 4 ms per batch of 8 over 2 to 4 ranks: each epoch lasts well over the
    // 2 s heartbeat timeout, so the hang (at 0.3 s) is caught during the run on every runtime.
    let niceThreads: number | undefined
    const launcherNice = getPriority(0)
    const result = await Launcher.run({
      ...fast,
      heartbeatTimeoutMs: 2000,
      trainer: steady,
      worldSize: 4,
      epochs: 2,
      kills: [{ rank: 1, atEpoch: 0, atFraction: 0.3 }],
      hangs: [{ rank: 2, atSeconds: 0.3 }],
      rankNice: 10,
      onEvent: (event) => {
        if (event.type === "progress" && niceThreads === undefined) niceThreads = threadsAtNice(10)
      }
    })
    // The ranks' threads run at the rank nice value asked for, 10 (Linux: a nice value per thread);
    // threads a rank starts afterwards inherit it (Bun's workers start 4 more), the launcher's not.
    if (process.platform === "linux" && launcherNice < 10) {
      expect(niceThreads).toBeGreaterThanOrEqual(4)
      expect(getPriority(0)).toBe(launcherNice)
    }
    expect(result.exitCode).toBe(0)
    expect(result.outcome.status).toBe("completed")
    expect(clean(result)).toEqual([[0, 4800, 0, 0], [1, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector]).sort()).toEqual([[1, "supervisor"], [2, "heartbeat"]])
    expect(result.deaths.find((d) => d.rank === 1)?.cause).toBe("killed by terminate")
    expect(result.outcome.failures).toEqual([1, 2])
    expect(result.runId).toMatch(/^[0-9A-Za-z]{10}$/) // never starts with "-", so `cohort report ID` works
    const events = readFileSync(join(result.runDir, "events.ndjson"), "utf8").trim().split("\n").map((line) => JSON.parse(line) as { type: string })
    expect(events[0]?.type).toBe("started")
    expect(events.filter((e) => e.type === "epoch")).toHaveLength(2)
    expect(events.filter((e) => e.type === "death")).toHaveLength(2)
    expect(JSON.parse(readFileSync(join(result.runDir, "summary.json"), "utf8")).exitCode).toBe(0)
  })

  it("progressive mode reclaims a killed rank's chunks with a clean audit", async () => {
    const result = await Launcher.run({ ...fast, trainer: steady, worldSize: 3, epochs: 1, mode: "progressive", kills: [{ rank: 0, atEpoch: 0, atFraction: 0.3 }, { rank: 1, atSeconds: 999 }] })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector])).toEqual([[0, "supervisor"]])
    // A fault the run ended before is reported, not silently dropped.
    expect(result.skippedFaults.map((f) => [f.rank, f.fault, f.reason.startsWith("the run ended after ")])).toEqual([[1, "kill", true]])
  })

  it("at the failure limit the survivors save and exit, and the outcome lists exactly the uncommitted ranges", async () => {
    const result = await Launcher.run({ ...fast, trainer: steady, worldSize: 3, epochs: 2, failureLimit: { absolute: 1 }, kills: [{ rank: 1, atEpoch: 0, atFraction: 0.3 }] })
    expect(result.exitCode).toBe(1)
    expect(result.outcome.reason).toBe("FailureLimitReached")
    expect([...result.outcome.exits].sort()).toEqual([0, 2])
    for (const rank of [0, 2]) expect(existsSync(join(result.runDir, "save", `rank${rank}`, "steady.json"))).toBe(true)
    expect(existsSync(join(result.runDir, "save", "rank1"))).toBe(false)
    const uncommitted = result.outcome.uncommitted!
    expect(uncommitted.epoch).toBe(0)
    expect(uncommitted.ranges.length).toBeGreaterThan(0)
    const total = uncommitted.ranges.reduce((sum, [, size]) => sum + size, 0)
    expect(total).toBeGreaterThan(0)
    expect(total).toBeLessThan(4800)
  })

  it("runs ranks as child processes too", async () => {
    const result = await Launcher.run({ ...fast, trainer: steady, worldSize: 2, epochs: 1, transport: "process", kills: [{ rank: 1, atEpoch: 0, atFraction: 0.3 }] })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector, d.cause])).toEqual([[1, "supervisor", "killed by SIGKILL"]])
  })

  it("the README's line trainer, which prints in save(), completes as child processes with no death; its lines reach onRankOutput and ranks/rank<N>.log", async () => {
    const printed: Array<readonly [number, string]> = []
    const result = await Launcher.run({
      trainer: lineTrainer,
      worldSize: 3,
      epochs: 2,
      transport: "process",
      outDir,
      onRankOutput: (rank, line) => printed.push([rank, line])
    })
    expect(result.deaths).toEqual([])
    expect(result.outcome.status).toBe("completed")
    expect(clean(result)).toEqual([[0, 262_144, 0, 0], [1, 262_144, 0, 0]])
    expect(result.exitCode).toBe(0)
    // The checkpoint holder saves after each epoch: one line per version, from whichever rank held the role.
    const checkpoints = join(Files.absolutePath(result.runDir), "checkpoints")
    expect(printed.map(([, line]) => line.replace(/: slope .*$/, ""))).toEqual([`save to ${checkpoints}/v0`, `save to ${checkpoints}/v1`])
    for (const rank of [0, 1, 2]) {
      const lines = printed.filter(([r]) => r === rank).map(([, line]) => `${line}\n`).join("")
      const log = join(result.runDir, "ranks", `rank${rank}.log`)
      expect(existsSync(log) ? readFileSync(log, "utf8") : "").toBe(lines)
    }
  }, 120_000)

  it("refuses bad options and bad trainers with a LaunchError naming the option", async () => {
    const bad = (options: RunOptions) => Launcher.run(options).then(() => "resolved", (e: Launcher.LaunchError) => `${e._tag} ${e.option}: ${e.reason}`)
    expect(await bad({ trainer: steady, worldSize: 4, kills: [{ rank: 9, atSeconds: 1 }] })).toBe("LaunchError kills/hangs: rank 9 is out of range [0, 4)")
    expect(await bad({ trainer: steady, worldSize: 0 })).toBe("LaunchError worldSize: must be an integer >= 1, got 0")
    expect(await bad({ trainer: steady, averageEverySteps: 0 })).toBe("LaunchError averageEverySteps: must be an integer > 0, got 0")
    expect(await bad({ trainer: steady, tickMs: -5 })).toBe("LaunchError tickMs: must be a number > 0, got -5")
    expect(await bad({ trainer: steady, rankNice: 20 })).toBe("LaunchError rankNice: must be an integer from 0 to 19, got 20")
    expect(await bad({ trainer: steady, rankNice: 2.5 })).toBe("LaunchError rankNice: must be an integer from 0 to 19, got 2.5")
    expect(await bad({ trainer: "no/such/trainer.ts" })).toBe("LaunchError trainer: no such file: no/such/trainer.ts")
    const noFactory = fileURLToPath(new URL("../fixtures/trainers/no-factory.ts", import.meta.url))
    expect(await bad({ trainer: noFactory })).toBe(`LaunchError trainer: ${noFactory}: the trainer module does not export createTrainer`)
  })
})

