import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs"
import { getPriority } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import * as Files from "../../src/platform/files.ts"
import type { RunEvent, RunOptions } from "../../actors/record/run-types.ts"
import { clean, fastRuns } from "./fast-runs.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const slowOnRank2 = fileURLToPath(new URL("../fixtures/trainers/slow-on-rank-2.ts", import.meta.url))
const lineTrainer = fileURLToPath(new URL("../../examples/line-trainer.ts", import.meta.url))
const { outDir, fast } = fastRuns("e2e")
/**
 * Batches of 32, for the cases whose kills, deadlines and audits do not count batches: an epoch of
 * 3 ranks is 50 batches a rank, not 200. The cases with a failure limit keep the batches of 8.
 */
const fewerBatches = { batchSize: 32 }

type Result = Awaited<ReturnType<typeof Launcher.run>>

/** Threads of this process whose nice value is `nice` (Linux `/proc`; field 19 of a task's stat). */
const threadsAtNice = (nice: number): number =>
  readdirSync("/proc/self/task").filter((task) => {
    const stat = readFileSync(`/proc/self/task/${task}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]) === nice
  }).length

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
    expect(clean(result)).toEqual([
      [0, 4800, 0, 0],
      [1, 4800, 0, 0]
    ])
    expect(result.deaths.map((d) => [d.rank, d.detector]).sort()).toEqual([
      [1, "supervisor"],
      [2, "heartbeat"]
    ])
    expect(result.deaths.find((d) => d.rank === 1)?.cause).toBe("killed by terminate")
    expect(result.outcome.failures).toEqual([1, 2])
    expect(result.runId).toMatch(/^[0-9A-Za-z]{10}$/) // never starts with "-", so `cohort report ID` works
    const events = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string })
    expect(events[0]?.type).toBe("started")
    expect(events.filter((e) => e.type === "epoch")).toHaveLength(2)
    expect(events.filter((e) => e.type === "death")).toHaveLength(2)
    expect(JSON.parse(readFileSync(join(result.runDir, "summary.json"), "utf8")).exitCode).toBe(0)
  })

  it("progressive mode reclaims a killed rank's chunks with a clean audit", async () => {
    const progress: Array<{ readonly rank: number; readonly samplesDone: number }> = []
    const result = await Launcher.run({
      ...fast,
      ...fewerBatches,
      trainer: steady,
      worldSize: 3,
      epochs: 1,
      mode: "progressive",
      kills: [
        { rank: 0, atEpoch: 0, atFraction: 0.3 },
        { rank: 1, atSeconds: 999 }
      ],
      onEvent: (event) => void (event.type === "progress" ? progress.push(event) : undefined)
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector])).toEqual([[0, "supervisor"]])
    // A fault the run ended before is reported, not silently dropped.
    expect(result.skippedFaults.map((f) => [f.rank, f.fault, f.reason.startsWith("the run ended after ")])).toEqual([[1, "kill", true]])
    // Its progress events count the chunks each rank completed (a progressive rank's list
    // position stays 0, as every progress event's did before).
    const last = new Map(progress.map((e) => [e.rank, e.samplesDone]))
    expect([1, 2].map((rank) => (last.get(rank) ?? 0) > 0)).toEqual([true, true])
  })

  it("with a round deadline, rounds close without the straggler (rank 2, ten times slower a batch), its contributions fold into later rounds, and the audit is clean", async () => {
    // Batches of 32: the straggler's 1,600 samples are 50 batches of 40 ms (2 s) rather than 200,
    // and its contribution every 4 batches (160 ms) still comes after the others' rounds' 50 ms deadline.
    const result = await Launcher.run({ ...fast, ...fewerBatches, trainer: slowOnRank2, worldSize: 3, epochs: 1, roundDeadlineMs: 50 })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths).toEqual([])
    expect(result.outcome.counters.roundsClosedAtDeadline).toBeGreaterThan(0)
    const rounds = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as RunEvent)
      .flatMap((e) => (e.type === "round" ? [e.contributors] : []))
    expect(rounds.filter((contributors) => contributors < 3).length).toBeGreaterThan(0)
  }, 90_000)

  it("a resumed run keeps its parent's round deadline and quorum; a parent it cannot mark resumed is told of with the path and cause", async () => {
    const parent = await Launcher.run({
      ...fast,
      trainer: steady,
      worldSize: 3,
      epochs: 2,
      roundDeadlineMs: 70,
      roundQuorum: 0.6,
      failureLimit: { absolute: 1 },
      kills: [{ rank: 1, atEpoch: 0, atFraction: 0.3 }]
    })
    expect(parent.exitCode).toBe(1)
    // A folder where the marker's temporary file goes: its write fails (EISDIR) even for root.
    const marker = join(parent.runDir, "resumed-by.json")
    mkdirSync(`${marker}.tmp`)
    const child = await Launcher.run({ resume: parent.runDir, outDir, onRankOutput: () => {} })
    expect(child.exitCode).toBe(0)
    const started = JSON.parse(readFileSync(join(child.runDir, "events.ndjson"), "utf8").split("\n")[0]!) as RunEvent
    expect(started.type === "started" && [started.options?.["roundDeadlineMs"], started.options?.["roundQuorum"]]).toEqual([70, 0.6])
    expect(existsSync(marker)).toBe(false)
    const faults = child.alerts.filter((a) => a.class === "StorageFault").map((a) => a.detail)
    expect(faults).toEqual([expect.stringContaining(`cannot write ${marker}: `)])
    expect(faults[0]).toContain("EISDIR")
  }, 90_000)

  it("at the failure limit the survivors save and exit, and the outcome lists exactly the uncommitted ranges", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: steady,
      worldSize: 3,
      epochs: 2,
      failureLimit: { absolute: 1 },
      kills: [{ rank: 1, atEpoch: 0, atFraction: 0.3 }]
    })
    expect(result.exitCode).toBe(1)
    expect(result.outcome.reason).toBe("FailureLimitReached")
    expect([...result.outcome.exits].sort()).toEqual([0, 2])
    expect(result.saves).toEqual({ saved: [0, 2], notSaved: [] })
    for (const rank of [0, 2]) expect(existsSync(join(result.runDir, "save", `rank${rank}`, "steady.json"))).toBe(true)
    expect(existsSync(join(result.runDir, "save", "rank1"))).toBe(false)
    const uncommitted = result.outcome.uncommitted!
    expect(uncommitted.epoch).toBe(0)
    expect(uncommitted.ranges.length).toBeGreaterThan(0)
    const total = uncommitted.ranges.reduce((sum, [, size]) => sum + size, 0)
    expect(total).toBeGreaterThan(0)
    expect(total).toBeLessThan(4800)
  })

  it("says which survivor did not finish its save: rank 2's save fails", async () => {
    const failing = fileURLToPath(new URL("../fixtures/trainers/save-fails-on-rank-2.ts", import.meta.url))
    const result = await Launcher.run({
      ...fast,
      trainer: failing,
      worldSize: 3,
      epochs: 1,
      failureLimit: { absolute: 1 },
      kills: [{ rank: 1, atEpoch: 0, atFraction: 0.3 }]
    })
    expect(result.exitCode).toBe(1)
    expect(result.saves).toEqual({ saved: [0], notSaved: [2] })
    expect(result.skippedFaults).toEqual([])
  })

  it("creates the folder a save is given, as the trainer contract says: checkpoints and a save-and-shutdown of a trainer that writes straight into it", async () => {
    const intoDir = fileURLToPath(new URL("../fixtures/trainers/save-into-dir.ts", import.meta.url))
    const result = await Launcher.run({
      ...fast,
      trainer: intoDir,
      worldSize: 3,
      epochs: 2,
      failureLimit: { absolute: 1 },
      kills: [{ rank: 1, atEpoch: 1, atFraction: 0.3 }]
    })
    expect(result.exitCode).toBe(1)
    expect(result.saves).toEqual({ saved: [0, 2], notSaved: [] })
    for (const rank of [0, 2]) expect(existsSync(join(result.runDir, "save", `rank${rank}`, "model.json"))).toBe(true)
    expect(existsSync(join(result.runDir, "checkpoints", "v0", "model.json"))).toBe(true)
  })

  it("runs ranks as child processes too", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: steady,
      ...fewerBatches,
      worldSize: 2,
      epochs: 1,
      transport: "process",
      kills: [{ rank: 1, atEpoch: 0, atFraction: 0.3 }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector, d.cause])).toEqual([[1, "supervisor", "killed by SIGKILL"]])
  })

  it("the journal has a line per averaging round: its epoch, number, contributions, how long it was open and its training loss; and, the trainer having no evaluate, says so once epoch 0's eval goes unanswered", async () => {
    // 2 ranks of 2,400 samples each, a contribution every 4 batches of 8: 75 rounds per epoch.
    const result = await Launcher.run({ ...fast, trainer: steady, worldSize: 2, epochs: 2 })
    expect(clean(result)).toEqual([
      [0, 4800, 0, 0],
      [1, 4800, 0, 0]
    ])
    type Round = {
      readonly type: "round"
      readonly ms: number
      readonly epoch: number
      readonly round: number
      readonly contributors: number
      readonly openMs: number
      readonly loss: number
    }
    const events = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; ms: number })
    const rounds = events.filter((e): e is Round => e.type === "round")
    expect(rounds.map((r) => [r.epoch, r.round, r.contributors])).toEqual(Array.from({ length: 150 }, (_, i) => [i < 75 ? 0 : 1, i, 2]))
    // The steady trainer's loss is its batch's size: 8 in every batch, so in every round's mean.
    expect(rounds.map((r) => r.loss)).toEqual(Array.from({ length: 150 }, () => 8))
    const epochEnds = events.filter((e) => e.type === "epoch").map((e) => e.ms)
    for (const r of rounds) {
      expect(r.openMs).toBeGreaterThanOrEqual(0)
      expect(r.ms).toBeLessThanOrEqual(epochEnds[r.epoch]!)
    }
    // Epoch 0's line cannot know yet; its eval rank going on into epoch 1 tells, and epoch 1's line says it at once.
    const evalLines = events
      .filter((e) => e.type === "epoch" || e.type === "noEval" || e.type === "eval")
      .map((e) => {
        const line = e as { type: string; summary?: { epoch: number }; epoch?: number; noEval?: true }
        return [line.type, line.summary?.epoch ?? line.epoch, line.noEval ?? false]
      })
    expect(evalLines).toEqual([
      ["epoch", 0, false],
      ["noEval", 0, false],
      ["epoch", 1, true]
    ])
  })

  it("runs ranks as child processes over WebSocket too: the process's kill is the cause, the joins are logged, nothing refused", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: steady,
      ...fewerBatches,
      worldSize: 2,
      epochs: 1,
      transport: "websocket",
      kills: [{ rank: 1, atEpoch: 0, atFraction: 0.3 }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector, d.cause, d.redistributed])).toEqual([[1, "supervisor", "killed by SIGKILL", true]])
    expect(result.outcome.exits).toEqual([0])
    expect(result.refusals).toEqual({})
    const events = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(events[0]).toMatchObject({ type: "started", transport: "websocket" })
    expect(events[1]).toMatchObject({ type: "listening", url: expect.stringMatching(/^ws:\/\/127\.0\.0\.1:\d+\/$/) })
    expect(
      events
        .filter((e) => e.type === "joined")
        .map((e) => [e.rank, e.address])
        .sort()
    ).toEqual([
      [0, "127.0.0.1"],
      [1, "127.0.0.1"]
    ])
    // The token never reaches the journal.
    expect(readFileSync(join(result.runDir, "events.ndjson"), "utf8")).not.toMatch(/runToken|token/)
  })

  const alwaysFails = fileURLToPath(new URL("../fixtures/trainers/always-fails.ts", import.meta.url))
  type Event = {
    readonly type: string
    readonly death?: { readonly rank: number; readonly stack?: string }
    readonly outcome?: { readonly reason?: string }
  }
  const journal = (result: Result): Array<Event> =>
    readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Event)
  /** The top frame of the trainer's throw, as each runtime prints it. */
  const trainerFrame = /^Error: trainBatch always fails\n\s+at (Object\.)?trainBatch \(/

  for (const transport of ["worker", "process"] as const) {
    it(`a trainer that throws on every batch stops the run after its second crash with TrainerFault and the stack (${transport})`, async () => {
      const result = await Launcher.run({ ...fast, trainer: alwaysFails, worldSize: 3, epochs: 1, transport })
      expect(result.exitCode).toBe(1)
      expect(result.outcome.reason).toBe("TrainerFault")
      // The first two crashes declared are the pair named; the third rank may crash too, after the end.
      const [first, second] = result.deaths
      expect(result.outcome.detail).toBe(
        `the trainer failed the same way on ranks ${first!.rank} and ${second!.rank}: trainBatch always fails`
      )
      expect(result.outcome.repeatedCrash?.ranks).toEqual([first!.rank, second!.rank])
      expect(result.outcome.repeatedCrash?.stack).toMatch(trainerFrame)
      for (const death of result.deaths) {
        expect([death.detector, death.cause]).toEqual(["supervisor", "crashed: trainBatch always fails"])
        expect(death.stack).toMatch(trainerFrame)
      }
      // C2: every declared death (each raised its RankLost alert) is listed, in the result, the
      // summary and the journal, whether it ended the run or came after the end.
      const lost = result.alerts.filter((a) => a.class === "RankLost").map((a) => Number(a.path.replace("root/rank", "")))
      expect(result.deaths.map((d) => d.rank)).toEqual(lost)
      expect(result.deaths.length).toBeGreaterThanOrEqual(2)
      for (const rank of result.outcome.failures) expect(lost).toContain(rank)
      const summary = JSON.parse(readFileSync(join(result.runDir, "summary.json"), "utf8")) as {
        deaths: Array<{ rank: number; stack: string }>
      }
      expect(summary.deaths.map((d) => d.rank)).toEqual(result.deaths.map((d) => d.rank))
      const events = journal(result)
      expect(events.filter((e) => e.type === "death").map((e) => e.death!.rank)).toEqual(result.deaths.map((d) => d.rank))
      expect(events.find((e) => e.type === "death")?.death?.stack).toMatch(trainerFrame)
      expect(events.at(-1)).toMatchObject({ type: "ended", outcome: { reason: "TrainerFault" } })
    })
  }

  // Breaker finding: a getParams that returned a Float64Array hung the run (every Params frame was
  // dropped by the schema), and one whose length changed killed ranks with close code 1009.
  it("a getParams that returns a Float64Array fails the run at formation with the reason; one that changes its length crashes the ranks with it and stops the run with TrainerFault", async () => {
    const badParams = fileURLToPath(new URL("../fixtures/trainers/bad-params.ts", import.meta.url))
    try {
      process.env["COHORT_TEST_BAD_PARAMS"] = "float64"
      await expect(Launcher.run({ ...fast, trainer: badParams, worldSize: 2, epochs: 1 })).rejects.toThrow(
        /^formation: rank [01] crashed: rank [01]: getParams\(\) must return a Float32Array, got Float64Array before the run formed/
      )
      process.env["COHORT_TEST_BAD_PARAMS"] = "grows"
      const result = await Launcher.run({ ...fast, trainer: badParams, worldSize: 2, epochs: 1 })
      const error = "getParams\\(\\) returned 5 values; it returned 4 at the start \\(the parameter count never changes\\)"
      expect([result.exitCode, result.outcome.reason]).toEqual([1, "TrainerFault"])
      expect(result.outcome.detail).toMatch(new RegExp(`^the trainer failed the same way on ranks [01] and [01]: ${error}$`))
      expect(result.deaths.map((death) => death.cause)).toEqual(
        result.deaths.map(() => expect.stringMatching(new RegExp(`^crashed: ${error}$`)))
      )
    } finally {
      delete process.env["COHORT_TEST_BAD_PARAMS"]
    }
  })

  it("with onRepeatedCrash continue every rank crashes, and all 4 deaths are listed with their detector and cause", async () => {
    const result = await Launcher.run({ ...fast, trainer: alwaysFails, worldSize: 4, epochs: 1, onRepeatedCrash: "continue" })
    expect(result.exitCode).toBe(1)
    expect([result.outcome.reason, result.outcome.detail]).toEqual(["AllRanksLost", "no survivor left"])
    expect(result.outcome.failures).toEqual([0, 1, 2, 3])
    expect(result.deaths.map((d) => d.rank).sort()).toEqual([0, 1, 2, 3])
    expect(new Set(result.deaths.map((d) => `${d.detector}: ${d.cause}`))).toEqual(
      new Set(["supervisor: crashed: trainBatch always fails"])
    )
    const events = journal(result)
    expect(
      events
        .filter((e) => e.type === "death")
        .map((e) => e.death!.rank)
        .sort()
    ).toEqual([0, 1, 2, 3])
    expect(events.filter((e) => e.type === "ended")).toHaveLength(1)
    expect(events.at(-1)).toMatchObject({ type: "ended", outcome: { reason: "AllRanksLost" } })
  })

  const leaks = fileURLToPath(new URL("../fixtures/trainers/leaks-on-rank-1.ts", import.meta.url))
  for (const transport of ["worker", "process"] as const) {
    // Every runtime enforces rankMemoryMb here: rank 1 keeps 4 MiB of typed arrays per batch,
    // which V8's heap limit never counts, so it is the rank's own check between batches (heap and
    // typed arrays) that stops it, under Node, Bun and Deno alike.
    it(`a rank that allocates without end dies Crashed out of memory at rankMemoryMb 64 while the others finish (${transport})`, async () => {
      const started = Date.now()
      const result = await Launcher.run({ ...fast, trainer: leaks, worldSize: 3, epochs: 1, transport, rankMemoryMb: 64 })
      expect(result.exitCode).toBe(0)
      expect(clean(result)).toEqual([[0, 4800, 0, 0]])
      expect(result.deaths.map((d) => [d.rank, d.detector])).toEqual([[1, "supervisor"]])
      expect(result.deaths[0]!.cause).toMatch(/^crashed: out of memory: \d+ MiB in use, over the rank memory limit of 64 MiB$/)
      // 64 MiB is reached in about 16 of rank 1's 200 batches: it dies mid-epoch and its remainder moves.
      expect(result.deaths[0]!.redistributed).toBe(true)
      expect(Date.now() - started).toBeLessThan(60_000)
    })
  }
  it("the docs' line trainer, which prints in save(), completes as child processes with no death; its lines reach onRankOutput and ranks/rank<N>.log", async () => {
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
    expect(clean(result)).toEqual([
      [0, 262_144, 0, 0],
      [1, 262_144, 0, 0]
    ])
    expect(result.exitCode).toBe(0)
    // The checkpoint holder saves after each epoch: one line per version, from whichever rank held the role.
    const checkpoints = join(Files.absolutePath(result.runDir), "checkpoints")
    expect(printed.map(([, line]) => line.replace(/: slope .*$/, ""))).toEqual([`save to ${checkpoints}/v0`, `save to ${checkpoints}/v1`])
    for (const rank of [0, 1, 2]) {
      const lines = printed
        .filter(([r]) => r === rank)
        .map(([, line]) => `${line}\n`)
        .join("")
      const log = join(result.runDir, "ranks", `rank${rank}.log`)
      expect(existsSync(log) ? readFileSync(log, "utf8") : "").toBe(lines)
    }
  }, 120_000)

  it("refuses bad options and bad trainers with a LaunchError naming the option", async () => {
    const bad = (options: RunOptions) =>
      Launcher.run(options).then(
        () => "resolved",
        (e: Launcher.LaunchError) => `${e._tag} ${e.option}: ${e.reason}`
      )
    expect(await bad({ trainer: steady, worldSize: 4, kills: [{ rank: 9, atSeconds: 1 }] })).toBe(
      "LaunchError kills/hangs: rank 9 is out of range [0, 4)"
    )
    expect(await bad({ trainer: steady, worldSize: 0 })).toBe("LaunchError worldSize: must be an integer >= 1, got 0")
    expect(await bad({ trainer: steady, transport: "carrier-pigeon" as "worker" })).toBe(
      `LaunchError transport: must be "worker", "process" or "websocket", got "carrier-pigeon"`
    )
    expect(await bad({ trainer: steady, averageEverySteps: 0 })).toBe("LaunchError averageEverySteps: must be an integer > 0, got 0")
    expect(await bad({ trainer: steady, tickMs: -5 })).toBe("LaunchError tickMs: must be a number > 0, got -5")
    expect(await bad({ trainer: steady, heartbeatTimeoutMs: 2000, blockingSilenceMs: 900 })).toBe(
      "LaunchError blockingSilenceMs: must be 0 (off) or at least twice the ranks' heartbeat interval (500 ms), got 900"
    )
    expect(await bad({ trainer: steady, rankNice: 20 })).toBe("LaunchError rankNice: must be an integer from 0 to 19, got 20")
    expect(await bad({ trainer: steady, rankNice: 2.5 })).toBe("LaunchError rankNice: must be an integer from 0 to 19, got 2.5")
    expect(await bad({ trainer: steady, rankMemoryMb: 8 })).toBe(
      "LaunchError rankMemoryMb: must be 0 (no limit) or an integer >= 16, got 8"
    )
    expect(await bad({ trainer: "no/such/trainer.ts" })).toBe("LaunchError trainer: no such file: no/such/trainer.ts")
    const noFactory = fileURLToPath(new URL("../fixtures/trainers/no-factory.ts", import.meta.url))
    expect(await bad({ trainer: noFactory })).toBe(`LaunchError trainer: ${noFactory}: the trainer module does not export createTrainer`)
  })

  it("refuses a serve's heapGrowthPercent that is not an integer in [0, 1000] with a LaunchError naming it", async () => {
    const bad = (heapGrowthPercent: number) =>
      Promise.resolve()
        .then(() => Launcher.serve({ trainer: steady, worldSize: 1, heapGrowthPercent }))
        .then(
          () => "resolved",
          (e: Launcher.LaunchError) => `${e._tag} ${e.option}: ${e.reason}`
        )
    expect(await bad(1001)).toBe("LaunchError heapGrowthPercent: must be an integer in [0, 1000], got 1001")
    expect(await bad(-1)).toBe("LaunchError heapGrowthPercent: must be an integer in [0, 1000], got -1")
    expect(await bad(2.5)).toBe("LaunchError heapGrowthPercent: must be an integer in [0, 1000], got 2.5")
  })
})

describe("where child-process ranks listen for their ring links", () => {
  it("a Unix socket in the run's socket folder while its path fits (100 bytes), else none (a loopback port then)", () => {
    expect(Launcher.ringSocketPath("/tmp/cohort-a/", 3)).toBe("/tmp/cohort-a/ring-3.sock")
    expect(Launcher.ringSocketPath(`/${"d".repeat(80)}`, 12)).toBe(`/${"d".repeat(80)}/ring-12.sock`)
    expect(Launcher.ringSocketPath(`/${"d".repeat(90)}`, 12)).toBeUndefined()
    expect(Launcher.ringSocketPath("C:\\runs\\a", 0)).toBeUndefined()
  })
})
