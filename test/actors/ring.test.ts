import { existsSync, readdirSync, readFileSync, readlinkSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import * as AreaFile from "../../src/platform/area-file.ts"
import * as SavedModel from "../../src/train/saved-model.ts"
import { childrenOf } from "../rank-processes.ts"
import { clean, fastRuns } from "./fast-runs.ts"

const drifting = fileURLToPath(new URL("../fixtures/trainers/drifting.ts", import.meta.url))

/**
 * The launcher's private folders in memory (`FreePorts.socketFolder`) in which a child process of
 * this test process holds an area file open now: this run's only, whatever other runs on the
 * machine (other test files, in parallel) keep there.
 */
const memoryRunFolders = (): Array<string> => {
  const root = AreaFile.memoryFolder()
  const found = new Set<string>()
  for (const pid of childrenOf(process.pid)) {
    for (const fd of readdirSafe(`/proc/${pid}/fd`)) {
      const target = readlinkSafe(`/proc/${pid}/fd/${fd}`)
      if (target?.startsWith(`${root}/cohort-`) === true && /\/area-\d+-\d+\.f32$/.test(target)) found.add(dirname(target))
    }
  }
  return [...found]
}
const readlinkSafe = (path: string): string | undefined => {
  try {
    return readlinkSync(path)
  } catch {
    return undefined
  }
}
const readdirSafe = (path: string): Array<string> => {
  try {
    return readdirSync(path)
  } catch {
    return []
  }
}
const filesUnder = (path: string): Array<string> => readdirSync(path, { recursive: true, encoding: "utf8" })
// Batches of 32: an epoch is 50 batches a rank of 3, not 200 (most of a run's time here), and
// still 12 rounds, past every round a fault below fires in.
const { fast } = fastRuns("ring", { backend: "ring", batchSize: 32 })

describe("the ring backend survives deaths inside a collective (faults fired between two steps, deterministically)", () => {
  // Two epochs: the survivors cross an epoch boundary in a re-formed ring (the plain run of a ring is
  // the demo's, test/actors/demo.test.ts).
  it("a rank that exits while a collective is in flight: the survivors abort, re-form generation 1, redo the round, and every audit of both epochs is clean", async () => {
    // Ring of 3: steps 0-1 reduce-scatter, 2-3 all-gather; rank 1 leaves before its step 1 of round 2.
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      worldSize: 3,
      epochs: 2,
      collectiveFaults: [{ rank: 1, round: 2, step: 1, fault: "exit" }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([
      [0, 4800, 0, 0],
      [1, 4800, 0, 0]
    ])
    expect(result.deaths.map((d) => [d.rank, d.detector, d.cause])).toEqual([[1, "supervisor", "exited with code 70 without Exiting"]])
    expect(result.backend).toBe("ring")
    expect(result.ring?.generations).toBe(2)
    // Worker threads' default: each generation's collectives run through one shared all-reduce area.
    expect(result.ring?.links).toBe("area")
    expect(result.ring?.relayed).toBe(0)
    // The members' RoundDones, written into the area, reach the journal with their training loss
    // (the trainer's loss is its batch's size, and every round here trains whole batches).
    const rounds = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; contributors?: number; loss?: number })
      .filter((e) => e.type === "round")
    expect(rounds.length).toBeGreaterThan(0)
    for (const round of rounds) {
      expect(round.contributors).toBeGreaterThan(0)
      expect(round.loss).toBeGreaterThan(0)
    }
  })

  it("over MessageChannel links only (ringSharedSlots 0 and ringAreaMemoryMb 0, as on a runtime without Atomics.waitAsync): a rank that exits mid-collective, the survivors redo the round with clean audits", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      worldSize: 3,
      epochs: 1,
      ringSharedSlots: 0,
      ringAreaMemoryMb: 0,
      collectiveFaults: [{ rank: 1, round: 2, step: 1, fault: "exit" }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector, d.cause])).toEqual([[1, "supervisor", "exited with code 70 without Exiting"]])
    expect(result.ring?.generations).toBe(2)
    expect(result.ring?.links).toBe("port")
    // The steps went thread to thread: each round's line carries what the ranks moved.
    const rounds = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; linkSentBytes?: number; linkReceivedBytes?: number })
      .filter((e) => e.type === "round")
    expect(rounds.length).toBeGreaterThan(0)
    for (const round of rounds) expect(round.linkSentBytes).toBeGreaterThan(0)
  })

  it("over shared-memory links with one slot (no all-reduce area: ringAreaMemoryMb 0; most steps find the slot taken and take the port, in order): a rank that exits in the all-gather, the survivors redo the round with clean audits", async () => {
    // Ring of 4: steps 0-2 reduce-scatter, 3-5 all-gather; rank 2 leaves before its step 4 of round 3.
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      worldSize: 4,
      epochs: 1,
      ringSharedSlots: 1,
      ringAreaMemoryMb: 0,
      collectiveFaults: [{ rank: 2, round: 3, step: 4, fault: "exit" }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector, d.cause])).toEqual([[2, "supervisor", "exited with code 70 without Exiting"]])
    expect(result.ring?.generations).toBe(2)
    expect(result.ring?.links).toBe("shared")
  })

  it("two ranks that exit at the same step of the same round: one re-rendezvous or two, the survivors finish with clean audits", async () => {
    // Ring of 4: rank 2 gets rank 1's step 0, then both leave before their step 1.
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      worldSize: 4,
      epochs: 1,
      collectiveFaults: [
        { rank: 1, round: 2, step: 1, fault: "exit" },
        { rank: 2, round: 2, step: 1, fault: "exit" }
      ]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector]).sort()).toEqual([
      [1, "supervisor"],
      [2, "supervisor"]
    ])
    // One generation per batch of deaths: 2 when both were declared in one tick, 3 otherwise.
    expect([2, 3]).toContain(result.ring?.generations)
  })

  it("a rank hung inside a collective (its worker alive) is declared by staleness; the survivors redo the round with clean audits", async () => {
    const result = await Launcher.run({
      ...fast,
      heartbeatTimeoutMs: 1500,
      trainer: drifting,
      worldSize: 3,
      epochs: 1,
      collectiveFaults: [{ rank: 2, round: 3, step: 2, fault: "hang" }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector])).toEqual([[2, "heartbeat"]])
    expect(result.ring?.generations).toBe(2)
  })

  it("a ring that falls to one survivor ends SingleSurvivor: the survivor saves the last committed average and the outcome lists the uncommitted rest", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      worldSize: 2,
      epochs: 1,
      collectiveFaults: [{ rank: 1, round: 2, step: 0, fault: "exit" }]
    })
    expect(result.exitCode).toBe(1)
    expect(result.outcome.reason).toBe("SingleSurvivor")
    expect(result.saves).toEqual({ saved: [0], notSaved: [] })
    // Rounds 0 and 1 closed: both ranks' first 2 × 4 batches of 32 samples are committed, nothing of round 2.
    const uncommitted = result.outcome.uncommitted!.ranges.reduce((sum, [, size]) => sum + size, 0)
    expect(uncommitted).toBe(4800 - 2 * 2 * 4 * 32)
    const saved = await SavedModel.read(join(result.runDir, "save", "rank0"))
    expect(saved._tag === "Model" ? saved.meta.round : saved.reason).toBe(1)
  })

  it("an interrupted ring saves the same model on every survivor, bit for bit (every rank applied the same commits)", async () => {
    const controller = new AbortController()
    const result = await Launcher.run({
      ...fast,
      // Batches of 8: the interrupt at 600 samples leaves 1,000 of each rank's 1,600 to go, time
      // for it to land before the epoch ends on a loaded machine.
      batchSize: 8,
      trainer: drifting,
      worldSize: 3,
      epochs: 1,
      signal: controller.signal,
      onEvent: (event) => {
        if (event.type === "progress" && event.samplesDone >= 600) controller.abort("SIGINT")
      }
    })
    expect(result.outcome.status).toBe("interrupted")
    expect(result.saves).toEqual({ saved: [0, 1, 2], notSaved: [] })
    const models = await Promise.all([0, 1, 2].map((r) => SavedModel.read(join(result.runDir, "save", `rank${r}`))))
    const views = models.map((m) => (m._tag === "Model" ? [m.meta.round, Array.from(m.params)] : m.reason))
    expect(views[1]).toEqual(views[0])
    expect(views[2]).toEqual(views[0])
    expect((views[0] as [number, Array<number>])[0]).toBeGreaterThanOrEqual(1)
  })

  it("refuses a ring of one rank (LaunchError on backend: the CLI exits 2)", async () => {
    await expect(Launcher.run({ ...fast, trainer: drifting, worldSize: 1, epochs: 1 })).rejects.toMatchObject({
      option: "backend",
      message: expect.stringContaining("the ring backend needs worldSize >= 2, got 1")
    })
  })

  it.each([
    ["before its row's token", 1],
    ["after its reduction, before its RoundDone", 3]
  ])(
    "child processes average through area files in memory, one token pass a round over their direct links: a rank that exits mid-collective (%s), the survivors re-form, redo the round in the next generation's files with clean audits; nothing of the run is left in the run folder or the memory folder",
    async (_, step) => {
      const areaFolders = new Set<string>()
      const watch = setInterval(() => {
        for (const folder of memoryRunFolders()) areaFolders.add(folder)
      }, 20)
      const result = await Launcher.run({
        ...fast,
        trainer: drifting,
        transport: "process",
        worldSize: 3,
        epochs: 1,
        collectiveFaults: [{ rank: 1, round: 2, step, fault: "exit" }]
      }).finally(() => clearInterval(watch))
      expect(result.exitCode).toBe(0)
      expect(clean(result)).toEqual([[0, 4800, 0, 0]])
      expect(result.deaths.map((d) => [d.rank, d.cause])).toEqual([[1, "exited with code 70 without Exiting"]])
      expect(result.ring?.links).toBe("file")
      expect(result.ring?.generations).toBe(2)
      // A token its neighbour sends the exiting rank after that rank's link closed goes by the relay:
      // at most the n - 1 = 2 tokens of one sender.
      expect(result.ring?.relayed).toBeLessThanOrEqual(2)
      expect(areaFolders.size).toBeGreaterThan(0)
      for (const folder of areaFolders) expect(existsSync(folder)).toBe(false)
      expect(filesUnder(result.runDir).filter((path) => /(area-\d+-\d+\.f32|\.sock)$/.test(path))).toEqual([])
    }
  )

  it("child processes send their ring steps rank to rank over direct links without an area (ringAreaMemoryMb 0; the coordinator relays none but steps to a rank that just left): a rank that exits mid-collective, the survivors re-form and redo the round with clean audits", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      transport: "process",
      worldSize: 3,
      epochs: 1,
      ringAreaMemoryMb: 0,
      collectiveFaults: [{ rank: 1, round: 2, step: 1, fault: "exit" }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.cause])).toEqual([[1, "exited with code 70 without Exiting"]])
    expect(result.ring?.links).toBe("direct")
    expect(result.ring?.generations).toBe(2)
    // A step its neighbour sends the exiting rank after that rank's link closed, and before the
    // coordinator declared it, goes by the relay (the fallback of a direct write that fails): at
    // most one sender's steps of the aborted collective, 2(N - 1) = 4. Every other step went
    // direct (seen: 0 at low load, 2 in one run of three beside two CPU burners).
    expect(result.ring?.relayed).toBeLessThanOrEqual(4)
  })

  it("a relayed rank (child processes, ringLinks relay) that sends a corrupt ring step (every value NaN) is closed with BadRingStep (4012) and declared dead; its neighbours never see the step, and the survivors finish with clean audits", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      transport: "process",
      ringLinks: "relay",
      worldSize: 3,
      epochs: 1,
      collectiveFaults: [{ rank: 1, round: 2, step: 1, fault: "corrupt" }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    // Only the sender dies: had the step gone on, rank 2's collective would have failed instead.
    expect(result.deaths.map((d) => [d.rank, d.cause])).toEqual([
      [1, "refused: a bad ring step (close code 4012): step 1 carried a contribution count of NaN, expected an integer in [0, 2]"]
    ])
    expect(result.ring?.generations).toBe(2)
    expect(result.ring?.links).toBe("relay")
    expect(result.ring?.relayed).toBeGreaterThan(0)
  })

  it("in child processes' area files a corrupt contribution (every value NaN) is found by the reducers, whose notice reaches its rank along the ring: it fails, says so in one line and is declared crashed; the others apply nothing and redo the round; clean audits", async () => {
    const lines: Array<string> = []
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      transport: "process",
      worldSize: 3,
      epochs: 1,
      collectiveFaults: [{ rank: 1, round: 2, step: 0, fault: "corrupt" }],
      onRankOutput: (rank, line) => lines.push(`[rank ${rank}] ${line}`)
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => d.rank)).toEqual([1])
    expect(lines.filter((line) => line.includes("ring collective failed"))).toEqual([
      "[rank 1] cohort rank 1: ring collective failed (shared file): this rank's contribution carried a value that is not finite"
    ])
    expect(result.ring?.generations).toBe(2)
    expect(result.ring?.links).toBe("file")
  })

  it("worker threads' direct links are not checked by the coordinator: a corrupt step (every value NaN) fails its neighbour's collective, which says so in one line of its own output and is declared crashed; the survivors finish with clean audits", async () => {
    const lines: Array<string> = []
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      // Ring of 4: step 5 is the last all-gather step, which the re-formed ring of 3 never reaches
      // (a fault fires at every (round, step) it matches, and rank 1 survives here).
      worldSize: 4,
      epochs: 1,
      ringAreaMemoryMb: 0,
      collectiveFaults: [{ rank: 1, round: 2, step: 5, fault: "corrupt" }],
      onRankOutput: (rank, line) => lines.push(`[rank ${rank}] ${line}`)
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.cause])).toEqual([
      [2, "crashed: rank 2: ring collective failed: step 5 carried a value that is not finite"]
    ])
    expect(lines.filter((line) => line.includes("ring collective failed"))).toEqual([
      "[rank 2] cohort rank 2: ring collective failed (direct link): step 5 carried a value that is not finite"
    ])
    expect(result.ring?.generations).toBe(2)
    expect(result.ring?.links).toBe("shared")
  })

  it("in a shared all-reduce area a corrupt contribution (every value NaN) fails its own rank, which says so in one line and is declared crashed; the others apply nothing and redo the round; clean audits", async () => {
    const lines: Array<string> = []
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      worldSize: 3,
      epochs: 1,
      collectiveFaults: [{ rank: 1, round: 2, step: 0, fault: "corrupt" }],
      onRankOutput: (rank, line) => lines.push(`[rank ${rank}] ${line}`)
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.cause])).toEqual([
      [1, "crashed: rank 1: ring collective failed: this rank's contribution carried a value that is not finite"]
    ])
    expect(lines.filter((line) => line.includes("ring collective failed"))).toEqual([
      "[rank 1] cohort rank 1: ring collective failed (shared all-reduce): this rank's contribution carried a value that is not finite"
    ])
    expect(result.ring?.generations).toBe(2)
    expect(result.ring?.links).toBe("area")
  })

  it("progressive mode: chunks commit at the ring round's close; a rank exiting mid-collective loses nothing", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      worldSize: 3,
      epochs: 1,
      mode: "progressive",
      collectiveFaults: [{ rank: 2, round: 3, step: 0, fault: "exit" }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => d.rank)).toEqual([2])
    expect(result.ring?.generations).toBe(2)
  })
})
