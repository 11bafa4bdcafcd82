import { describe, expect, it } from "vitest"
import * as ChunkPool from "../../src/core/chunk-pool.ts"
import * as Config from "../../src/core/config.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import * as Roles from "../../src/core/roles.ts"
import { deliveries, frame, heartbeat, make, params, ranges, report, tags, tick } from "./harness.ts"

describe("static redistribution (equal split)", () => {
  it("worldSize 3: stale rank 2 with nothing committed gives (20,5) to rank 0 and (25,5) to rank 1", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 1000 })
    const started = Coordinator.start(s)
    expect(ranges(s, started, "StartEpoch")).toEqual([
      [0, 0, 10],
      [1, 10, 10],
      [2, 20, 10]
    ])
    heartbeat(s, 900, [0, 1])
    expect(tick(s, 1000)).toEqual([]) // exactly the timeout is not stale
    const cmds = tick(s, 1001)
    expect(ranges(s, cmds, "ExtendPartition")).toEqual([
      [0, 20, 5],
      [1, 25, 5]
    ])
    expect(tags(cmds)).toEqual(["Alert:RankLost", "Send:ExtendPartition", "Send:ExtendPartition"]) // roles stay on rank 0
    expect(Coordinator.failures(s)).toEqual([2])
    expect(Coordinator.activeCount(s)).toBe(2)
  })

  it("worldSize 4: rank 2 committed 96 of 250, its remainder (596,154) splits 52, 51, 51", () => {
    const s = make({ worldSize: 4, epochSamples: 1000, epochs: 1, heartbeatTimeoutMs: 1000 })
    Coordinator.start(s)
    expect(params(s, 2, 10, 96).filter((c) => c._tag === "AverageRound")).toEqual([])
    heartbeat(s, 500, [0, 1, 3])
    const cmds = tick(s, 1011)
    expect(ranges(s, cmds, "ExtendPartition")).toEqual([
      [0, 596, 52],
      [1, 648, 51],
      [3, 699, 51]
    ])
    expect(Coordinator.assignment(s, 0)).toEqual([
      [0, 250],
      [596, 52]
    ])
  })

  const fiveRanks = (order: ReadonlyArray<number>) => {
    const s = make({ worldSize: 5, epochSamples: 1000, epochs: 1, heartbeatTimeoutMs: 10_000 })
    Coordinator.start(s)
    params(s, 1, 5, 60)
    params(s, 3, 6, 140)
    for (const r of order) report(s, r, 7)
    const cmds = tick(s, 8)
    return { s, cmds }
  }

  it("worldSize 5: ranks 3 and 1 reported in one tick; only ranks 0, 2, 4 receive their remainders", () => {
    const { s, cmds } = fiveRanks([3, 1])
    expect(ranges(s, cmds, "ExtendPartition")).toEqual([
      [0, 740, 20],
      [2, 760, 20],
      [4, 780, 20],
      [0, 260, 47],
      [2, 307, 47],
      [4, 354, 46]
    ])
    expect(s.deaths.map((d) => [d.rank, d.detector, d.remainderSamples, d.extensions])).toEqual([
      [3, "supervisor", 60, 3],
      [1, "supervisor", 140, 3]
    ])
  })

  it("worldSize 5: reversing the report order gives the same messages, in the reversed batch order", () => {
    const { s, cmds } = fiveRanks([1, 3])
    expect(ranges(s, cmds, "ExtendPartition")).toEqual([
      [0, 260, 47],
      [2, 307, 47],
      [4, 354, 46],
      [0, 740, 20],
      [2, 760, 20],
      [4, 780, 20]
    ])
  })

  it("a rank reported dead twice and then stale is declared once, and {absolute: 2} does not shut down", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 100, failureLimit: { absolute: 2 } })
    Coordinator.start(s)
    report(s, 1, 50)
    report(s, 1, 60)
    heartbeat(s, 150, [0, 2])
    const cmds = tick(s, 200) // rank 1 is also stale by now
    expect(tags(cmds).filter((t) => t === "Alert:RankLost")).toHaveLength(1)
    expect(tags(cmds)).not.toContain("Broadcast:ShutdownWithSave")
    expect(s.counters.reportsDropped).toBe(1)
    expect(report(s, 1, 210)).toEqual([])
    expect(tick(s, 220)).toEqual([])
    expect(s.counters.reportsDropped).toBe(2)
    expect(Coordinator.failures(s)).toEqual([1])
  })

  it("an extension a survivor received is part of its remainder when it dies too", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1 })
    Coordinator.start(s)
    report(s, 2, 1)
    tick(s, 1) // rank 0 gets (20,5), rank 1 gets (25,5)
    params(s, 1, 2, 12) // rank 1 committed its 10 and 2 of its extension
    report(s, 1, 3)
    const cmds = tick(s, 3)
    expect(ranges(s, cmds, "ExtendPartition")).toEqual([[0, 27, 3]])
    expect(Coordinator.assignment(s, 0)).toEqual([
      [0, 10],
      [20, 5],
      [27, 3]
    ])
  })

  it("a remainder of several ranges is laid end to end and split as one, in one SendRanges per dead rank, its slices in range order", () => {
    const s = make({ worldSize: 4, epochSamples: 40, epochs: 1 })
    Coordinator.start(s)
    report(s, 3, 1)
    tick(s, 1) // rank 3's (30,10) over 0, 1, 2: (30,4), (34,3), (37,3)
    report(s, 0, 2)
    const cmds = tick(s, 2) // rank 0 holds (0,10) and (30,4), nothing committed
    const sends = cmds.filter((c) => c._tag === "SendRanges")
    expect(sends).toHaveLength(1)
    expect(sends[0]!._tag === "SendRanges" && sends[0]!.reason).toBe("remainder of rank 0 in 2 ranges (equal split over 2 survivors)")
    // 14 samples in two ranges over two survivors: 7 each, rank 2's share spanning both ranges.
    expect(ranges(s, cmds, "ExtendPartition")).toEqual([
      [1, 0, 7],
      [2, 7, 3],
      [2, 30, 4]
    ])
    expect(s.deaths.map((d) => d.extensions)).toEqual([3, 3])
  })

  it("under deaths chained on deaths, the survivors' lists stay short: at most ranges + survivors slices per remainder", () => {
    // 64 ranks, nothing committed, 48 die one after the other: every remainder holds the dead
    // rank's partition and the extensions it got. Split range by range, the lists would splinter
    // (each death giving every survivor a slice of every range); laid end to end they grow by
    // at most survivors - 1 entries in all per death.
    const s = make({ worldSize: 64, epochSamples: 64 * 1000, epochs: 1 })
    Coordinator.start(s)
    let at = 1
    for (let r = 63; r >= 16; r--) {
      const held = Coordinator.assignment(s, r).length
      report(s, r, at)
      const cmds = tick(s, at)
      const slices = ranges(s, cmds, "ExtendPartition")
      expect(slices.length).toBeLessThanOrEqual(held + Coordinator.survivors(s).length)
      at += 1
    }
    // Each death adds at most survivors - 1 entries in all (its own ranges move, a share's edges split them).
    const entries = Coordinator.survivors(s).reduce((sum, r) => sum + Coordinator.assignment(s, r).length, 0)
    expect(entries).toBeLessThanOrEqual(64 + 48 * 63)
    // Every sample still has exactly one holder.
    const held = Coordinator.survivors(s).flatMap((r) => Coordinator.assignment(s, r))
    expect(held.reduce((sum, [, size]) => sum + size, 0)).toBe(64 * 1000)
  })
})

describe("failure limit and backend limits", () => {
  it("computes the limit from absolute and fraction forms", () => {
    expect(Config.failureLimitCount({ fraction: 0.2 }, 10)).toBe(2)
    expect(Config.failureLimitCount({ fraction: 0.2 }, 11)).toBe(3)
    expect(Config.failureLimitCount({ fraction: 0.2 }, 5)).toBe(1)
    expect(Config.failureLimitCount({ fraction: 0.07 }, 100)).toBe(7)
    expect(Config.failureLimitCount({ fraction: 0 }, 10)).toBe(0)
    expect(Config.failureLimitCount({ fraction: 2.5 }, 7)).toBe(7)
    expect(Config.failureLimitCount({ fraction: -1 }, 7)).toBe(0)
    expect(Config.failureLimitCount({ absolute: 5 }, 3)).toBe(5)
    expect(Config.failureLimitCount(undefined, 3)).toBeUndefined()
  })

  it("{fraction: 0} trips on the first death", () => {
    const s = make({ worldSize: 4, epochSamples: 40, epochs: 1, failureLimit: { fraction: 0 } })
    Coordinator.start(s)
    report(s, 3, 1)
    const cmds = tick(s, 1)
    expect(deliveries(s, cmds).filter(([, m]) => m._tag === "ShutdownWithSave")).toEqual([
      [0, { _tag: "ShutdownWithSave", reason: "FailureLimitReached" }],
      [1, { _tag: "ShutdownWithSave", reason: "FailureLimitReached" }],
      [2, { _tag: "ShutdownWithSave", reason: "FailureLimitReached" }]
    ])
  })

  it("{fraction: 2.5} clamps to worldSize: only losing every rank trips it, before the backend check", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, failureLimit: { fraction: 2.5 } })
    Coordinator.start(s)
    report(s, 0, 1)
    report(s, 1, 1)
    expect(tags(tick(s, 1))).not.toContain("RunEnded")
    report(s, 2, 2)
    tick(s, 2)
    expect(s.outcome?.reason).toBe("FailureLimitReached")
  })

  it("{absolute: 5} at worldSize 3 never trips; losing everyone ends the cpu run as AllRanksLost", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, failureLimit: { absolute: 5 } })
    Coordinator.start(s)
    for (const r of [0, 1, 2]) report(s, r, 1)
    const cmds = tick(s, 1)
    expect(s.outcome?.reason).toBe("AllRanksLost")
    expect(deliveries(s, cmds)).toEqual([])
  })

  it("worldSize 4, cpu, {absolute: 2}: ranks 0 and 1 stale in one tick shut down ranks 2 and 3 once, with no extension; the open round closes first", () => {
    const s = make({ worldSize: 4, epochSamples: 100, epochs: 2, heartbeatTimeoutMs: 100, failureLimit: { absolute: 2 } })
    Coordinator.start(s)
    params(s, 2, 10, 5)
    heartbeat(s, 90, [2, 3])
    const cmds = tick(s, 101)
    // Rank 2's committed samples are in the survivors' last Update before they save (docs/resume.md).
    expect(tags(cmds)).toEqual(["Alert:RankLost", "Alert:RankLost", "AverageRound", "Broadcast:ShutdownWithSave", "RunEnded"])
    expect(cmds.find((c) => c._tag === "AverageRound")).toMatchObject({ round: 0, contributors: [2] })
    expect(deliveries(s, cmds)).toEqual([
      [2, { _tag: "ShutdownWithSave", reason: "FailureLimitReached" }],
      [3, { _tag: "ShutdownWithSave", reason: "FailureLimitReached" }]
    ])
    expect(s.outcome?.status).toBe("unrecoverable")
    expect(s.outcome?.failures).toEqual([0, 1])
    expect(s.outcome?.uncommitted).toEqual({
      epoch: 0,
      ranges: [
        [0, 50],
        [55, 45]
      ]
    })
    report(s, 2, 120)
    const later = tick(s, 120)
    expect(tags(later)).toEqual(["Alert:RankLost"])
    expect(Coordinator.failures(s)).toEqual([0, 1, 2])
  })

  it("ring, worldSize 3: two deaths give SingleSurvivor, after DeclareDead for each", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, backend: "ring" })
    const started = Coordinator.start(s)
    expect(deliveries(s, started).filter(([, m]) => m._tag === "FormRing")).toEqual([
      [0, { _tag: "FormRing", generation: 0, ringRank: 0, ringSize: 3, peers: [0, 1, 2] }],
      [1, { _tag: "FormRing", generation: 0, ringRank: 1, ringSize: 3, peers: [0, 1, 2] }],
      [2, { _tag: "FormRing", generation: 0, ringRank: 2, ringSize: 3, peers: [0, 1, 2] }]
    ])
    report(s, 0, 1)
    report(s, 2, 1)
    const cmds = tick(s, 1)
    expect(tags(cmds)).toEqual([
      "Alert:RankLost",
      "Alert:RankLost",
      "Broadcast:DeclareDead",
      "Broadcast:DeclareDead",
      "Broadcast:ShutdownWithSave",
      "RunEnded"
    ])
    expect(deliveries(s, cmds).map(([to, m]) => [to, m._tag])).toEqual([
      [1, "DeclareDead"],
      [1, "DeclareDead"],
      [1, "ShutdownWithSave"]
    ])
    expect(s.outcome?.reason).toBe("SingleSurvivor")
  })

  it("ring: a recoverable death re-forms the ring at the next generation among the survivors", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, backend: "ring" })
    Coordinator.start(s)
    report(s, 1, 1)
    const cmds = tick(s, 1)
    expect(tags(cmds)).toEqual([
      "Alert:RankLost",
      "Broadcast:DeclareDead",
      "Send:ExtendPartition",
      "Send:ExtendPartition",
      "Send:FormRing",
      "Send:FormRing"
    ])
    expect(deliveries(s, cmds).filter(([, m]) => m._tag === "FormRing")).toEqual([
      [0, { _tag: "FormRing", generation: 1, ringRank: 0, ringSize: 2, peers: [0, 2] }],
      [2, { _tag: "FormRing", generation: 1, ringRank: 1, ringSize: 2, peers: [0, 2] }]
    ])
  })

  const roundDone = (
    s: Coordinator.State,
    rank: number,
    nowMs: number,
    samplesDone: number,
    generation = s.ring!.generation,
    round = s.round
  ) => frame(s, rank, nowMs, { _tag: "RoundDone", epoch: s.epoch, round, generation, samplesDone })

  it("ring: a round closes only when every ring member reported RoundDone, and commits every report then, in one go", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 2, backend: "ring" })
    Coordinator.start(s)
    expect(roundDone(s, 0, 1, 10)).toEqual([])
    expect(roundDone(s, 2, 1, 4)).toEqual([])
    expect(Coordinator.committedSamples(s, 0)).toBe(0) // nothing counts before the round completes
    const closed = roundDone(s, 1, 2, 10)
    expect(closed[0]).toEqual({
      _tag: "AverageRound",
      epoch: 0,
      round: 0,
      openedAtMs: 1, // rank 0's report
      contributors: [0, 2, 1],
      // Ring ranks' partitions: [0, 10), [10, 20), [20, 30); each commits what it reported.
      committed: [
        [0, 10],
        [20, 4],
        [10, 10]
      ],
      params: [],
      paramRanks: [],
      generation: 0,
      reason: "round 0 closed: every member of ring generation 0 reported RoundDone"
    })
    expect([0, 1, 2].map((r) => Coordinator.committedSamples(s, r))).toEqual([10, 10, 4])
    expect(s.round).toBe(1)
    // Rank 2 finishes; the others report again with what they already committed (idempotent).
    roundDone(s, 0, 3, 10)
    roundDone(s, 1, 3, 10)
    const last = roundDone(s, 2, 3, 10)
    expect(tags(last).slice(0, 2)).toEqual(["AverageRound", "EpochEnded"])
    const summary = last.find((c) => c._tag === "EpochEnded")
    expect(
      summary?._tag === "EpochEnded" ? [summary.summary.samplesCommitted, summary.summary.lost, summary.summary.duplicated] : undefined
    ).toEqual([30, 0, 0])
  })

  it("ring: a death before the close discards the round's reports; the new generation redoes the round, and old-generation, wrong-round, repeated and Params contributions are ignored and counted", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, backend: "ring" })
    Coordinator.start(s)
    roundDone(s, 0, 1, 10)
    roundDone(s, 2, 1, 10)
    report(s, 1, 2)
    const cmds = tick(s, 2)
    expect(tags(cmds)).toEqual([
      "Alert:RankLost",
      "Broadcast:DeclareDead",
      "Send:ExtendPartition",
      "Send:ExtendPartition",
      "Send:FormRing",
      "Send:FormRing"
    ])
    expect([Coordinator.committedSamples(s, 0), Coordinator.committedSamples(s, 2)]).toEqual([0, 0])
    expect(s.round).toBe(0)
    expect(roundDone(s, 0, 3, 10, 0)).toEqual([]) // generation 0 is over
    expect(roundDone(s, 0, 3, 10, 1, 5)).toEqual([]) // not the open round
    expect(roundDone(s, 0, 3, 10, 1)).toEqual([])
    expect(roundDone(s, 0, 3, 10, 1)).toEqual([]) // a repeat
    expect(params(s, 2, 3, 10)).toEqual([]) // the cpu backend's contribution
    expect(s.counters.staleRoundDone).toBe(4)
    const closed = roundDone(s, 2, 4, 10)
    expect(closed[0]).toMatchObject({ _tag: "AverageRound", round: 0, generation: 1, contributors: [0, 2] })
    expect([Coordinator.committedSamples(s, 0), Coordinator.committedSamples(s, 2)]).toEqual([10, 10])
  })

  it("ring: two deaths in one tick mid-round: a DeclareDead for each, one re-rendezvous at generation 1, and the survivors' redo closes the round", () => {
    const s = make({ worldSize: 4, epochSamples: 40, epochs: 1, backend: "ring" })
    Coordinator.start(s)
    roundDone(s, 0, 1, 10)
    roundDone(s, 3, 1, 10)
    report(s, 1, 2)
    report(s, 2, 2)
    const cmds = tick(s, 2)
    expect(tags(cmds).filter((t) => t.includes("DeclareDead") || t.includes("FormRing"))).toEqual([
      "Broadcast:DeclareDead",
      "Broadcast:DeclareDead",
      "Send:FormRing",
      "Send:FormRing"
    ])
    expect(deliveries(s, cmds).filter(([, m]) => m._tag === "FormRing")).toEqual([
      [0, { _tag: "FormRing", generation: 1, ringRank: 0, ringSize: 2, peers: [0, 3] }],
      [3, { _tag: "FormRing", generation: 1, ringRank: 1, ringSize: 2, peers: [0, 3] }]
    ])
    expect(roundDone(s, 0, 3, 10)).toEqual([])
    expect(roundDone(s, 3, 3, 10)[0]).toMatchObject({ _tag: "AverageRound", round: 0, generation: 1, contributors: [0, 3] })
    expect([0, 3].map((r) => Coordinator.committedSamples(s, r))).toEqual([10, 10])
  })

  it("ring: a relayed step of the open round opens it for roundStallMs, so a member that sends heartbeats but never its own steps (nobody completes, nobody reports RoundDone) stops the run with ReduceStall", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, backend: "ring", heartbeatTimeoutMs: 100_000, roundStallMs: 5000 })
    Coordinator.start(s)
    const step = (rank: number, nowMs: number, generation: number, round: number) =>
      frame(s, rank, nowMs, { _tag: "RingData", generation, round, step: 0, data: new Float64Array(11) })
    for (const rank of [0, 1, 2]) frame(s, rank, 1, { _tag: "RingReady", generation: 0 })
    step(0, 1000, 1, 0) // a generation that never formed
    step(0, 1000, 0, 3) // another round
    expect(tick(s, 7000)).toEqual([])
    step(0, 8000, 0, 0)
    step(1, 9000, 0, 0)
    heartbeat(s, 12_000, [0, 1, 2])
    expect(tick(s, 13_000)).toEqual([]) // 5000 ms after the first step: not over yet
    const stalled = tick(s, 13_001)
    expect(s.outcome?.reason).toBe("ReduceStall")
    expect(tags(stalled)).toEqual(["Broadcast:ShutdownWithSave", "RunEnded"])
    expect(s.outcome?.detail).toBe("round 0 open for more than 5000 ms")
  })

  it("ring: a run stopping mid-round commits nothing of the incomplete round (its samples are in the outcome's uncommitted ranges)", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, backend: "ring" })
    Coordinator.start(s)
    roundDone(s, 1, 1, 10)
    report(s, 0, 2)
    report(s, 2, 2)
    const cmds = tick(s, 2)
    expect(tags(cmds)).not.toContain("AverageRound")
    expect(s.outcome?.reason).toBe("SingleSurvivor")
    expect(s.outcome?.uncommitted).toEqual({ epoch: 0, ranges: [[0, 30]] })
  })

  it("ring, progressive: a member that never got a chunk (so knows no epoch) still completes the round; static mode refuses another epoch's report", () => {
    const s = make({ worldSize: 3, epochSamples: 2, epochs: 1, mode: "progressive", chunkSamples: 1, backend: "ring" })
    Coordinator.start(s)
    // Rank 0 holds both one-sample chunks (chunksInflightMax 2); ranks 1 and 2 get none.
    frame(s, 0, 1, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 1 })
    frame(s, 0, 1, { _tag: "ChunkDone", epoch: 0, offset: 1, size: 1 })
    roundDone(s, 0, 2, 0)
    expect(frame(s, 1, 2, { _tag: "RoundDone", epoch: 0, round: 0, generation: 0, samplesDone: 0 })).toEqual([])
    const closed = frame(s, 2, 2, { _tag: "RoundDone", epoch: 7, round: 0, generation: 0, samplesDone: 0 })
    expect(tags(closed).slice(0, 2)).toEqual(["AverageRound", "EpochEnded"])
    const fixed = make({ worldSize: 2, epochSamples: 20, epochs: 1, backend: "ring" })
    Coordinator.start(fixed)
    expect(frame(fixed, 0, 1, { _tag: "RoundDone", epoch: 1, round: 0, generation: 0, samplesDone: 10 })).toEqual([])
    expect(fixed.counters.framesWrongEpoch).toBe(1)
  })

  it("ring, progressive: a round commits exactly the chunks whose ChunkDone preceded each member's RoundDone; one done after it waits for a later round, and a death leaves it uncommitted", () => {
    const run = () => {
      const s = make({
        worldSize: 2,
        epochSamples: 4,
        epochs: 1,
        mode: "progressive",
        chunkSamples: 1,
        chunksInflightMax: 2,
        backend: "ring"
      })
      expect(ranges(s, Coordinator.start(s), "AssignChunk")).toEqual([
        [0, 0, 1],
        [0, 1, 1],
        [1, 2, 1],
        [1, 3, 1]
      ])
      frame(s, 0, 1, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 1 })
      expect(roundDone(s, 0, 2, 0)).toEqual([])
      frame(s, 0, 3, { _tag: "ChunkDone", epoch: 0, offset: 1, size: 1 }) // after rank 0's contribution
      frame(s, 1, 3, { _tag: "ChunkDone", epoch: 0, offset: 2, size: 1 })
      frame(s, 1, 3, { _tag: "ChunkDone", epoch: 0, offset: 3, size: 1 })
      const closed = roundDone(s, 1, 4, 0)
      expect(tags(closed)).toEqual(["AverageRound"]) // the epoch is not over: sample 1 is in no round yet
      // Rank 0 still holds chunk (1,1), done and uncommitted; rank 1 holds nothing.
      expect([ChunkPool.held(s.pool!, 0), ChunkPool.held(s.pool!, 1)]).toEqual([[{ offset: 1, size: 1, done: true }], []])
      return s
    }
    const later = run()
    expect(roundDone(later, 0, 5, 0)).toEqual([])
    const ended = roundDone(later, 1, 5, 0)
    expect(tags(ended).slice(0, 2)).toEqual(["AverageRound", "EpochEnded"])
    const summary = ended.find((c) => c._tag === "EpochEnded")
    expect(
      summary?._tag === "EpochEnded" ? [summary.summary.samplesCommitted, summary.summary.lost, summary.summary.duplicated] : undefined
    ).toEqual([4, 0, 0])

    const dies = run()
    report(dies, 0, 6)
    tick(dies, 6)
    expect(dies.outcome?.reason).toBe("SingleSurvivor")
    expect(dies.outcome?.uncommitted).toEqual({ epoch: 0, ranges: [[1, 1]] })
  })

  it("ring, static: a member still in the older epoch (idle, it joined the new epoch's first round before its StartEpoch came) completes the round with 0 samples of this epoch; the epoch's audit stays clean", () => {
    const s = make({ worldSize: 2, epochSamples: 20, epochs: 2, backend: "ring" })
    Coordinator.start(s)
    roundDone(s, 0, 1, 10)
    const ended = roundDone(s, 1, 1, 10)
    expect(tags(ended).slice(0, 2)).toEqual(["AverageRound", "EpochEnded"])
    expect(s.epoch).toBe(1)
    // Rank 0 trained 4 samples of epoch 1; rank 1, idle, still says epoch 0 and its 10 samples.
    roundDone(s, 0, 2, 4)
    const waiting = frame(s, 1, 2, { _tag: "RoundDone", epoch: 0, round: 1, generation: 0, samplesDone: 10 })
    // No round closes before epoch 0's model reached the coordinator (rank 0 was asked for it).
    expect(tags(waiting)).toEqual([])
    const closed = frame(s, 0, 2, { _tag: "Params", epoch: 1, round: 0, samplesDone: 0, params: Float32Array.of(1, 2) })
    expect(tags(closed).slice(0, 2)).toEqual(["EpochModel", "AverageRound"])
    expect([Coordinator.committedSamples(s, 0), Coordinator.committedSamples(s, 1)]).toEqual([4, 0])
    expect(s.counters.framesWrongEpoch).toBe(0)
    roundDone(s, 0, 3, 10)
    const last = roundDone(s, 1, 3, 10)
    const summary = last.find((c) => c._tag === "EpochEnded")
    expect(
      summary?._tag === "EpochEnded"
        ? [summary.summary.epoch, summary.summary.samplesCommitted, summary.summary.lost, summary.summary.duplicated]
        : undefined
    ).toEqual([1, 20, 0, 0])
  })

  it("cpu: a RoundDone is ignored and counted", () => {
    const s = make({ worldSize: 2, epochSamples: 20, epochs: 1 })
    Coordinator.start(s)
    expect(frame(s, 0, 1, { _tag: "RoundDone", epoch: 0, round: 0, generation: 0, samplesDone: 10 })).toEqual([])
    expect(s.counters.staleRoundDone).toBe(1)
  })

  it("refuses a ring with fewer than 2 ranks", () => {
    expect(Coordinator.make({ worldSize: 1, epochSamples: 10, epochs: 1, backend: "ring" }, 0)).toEqual({
      _tag: "Invalid",
      option: "backend",
      reason: "the ring backend needs worldSize >= 2, got 1"
    })
  })
})

describe("repeated crashes: a trainer bug stops the run (TrainerFault)", () => {
  const stackAt = (frame: string) => `Error: trainBatch always fails\n    at ${frame}\n    at run (rank.ts:1:1)`
  const top = "Object.trainBatch (file:///t.ts:9:13)"
  const crash = (s: Coordinator.State, rank: number, nowMs: number, frame = top) =>
    Coordinator.step(s, {
      _tag: "DeathReport",
      rank,
      nowMs,
      cause: {
        _tag: "Crashed",
        error: "trainBatch always fails",
        stack: stackAt(frame),
        fingerprint: `trainBatch always fails\nat ${frame}`
      }
    })

  it("worldSize 4: rank 1 crashes and its remainder moves; rank 0 crashing the same way saves and stops the run", () => {
    const s = make({ worldSize: 4, epochSamples: 100, epochs: 2 })
    Coordinator.start(s)
    crash(s, 1, 5)
    expect(tags(tick(s, 5))).toEqual(["Alert:RankLost", "Send:ExtendPartition", "Send:ExtendPartition", "Send:ExtendPartition"])
    crash(s, 0, 9)
    const cmds = tick(s, 9)
    expect(tags(cmds)).toEqual(["Alert:RankLost", "Broadcast:ShutdownWithSave", "RunEnded"])
    expect(deliveries(s, cmds)).toEqual([
      [2, { _tag: "ShutdownWithSave", reason: "TrainerFault" }],
      [3, { _tag: "ShutdownWithSave", reason: "TrainerFault" }]
    ])
    expect(s.outcome?.reason).toBe("TrainerFault")
    expect(s.outcome?.detail).toBe("the trainer failed the same way on ranks 1 and 0: trainBatch always fails")
    expect(s.outcome?.repeatedCrash).toEqual({ ranks: [1, 0], error: "trainBatch always fails", stack: stackAt(top) })
    expect(s.deaths.map((d) => [d.rank, d.cause, d.stack])).toEqual([
      [1, "crashed: trainBatch always fails", stackAt(top)],
      [0, "crashed: trainBatch always fails", stackAt(top)]
    ])
  })

  it("the same message from another top frame is another error: the run goes on", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1 })
    Coordinator.start(s)
    crash(s, 2, 1)
    tick(s, 1)
    crash(s, 0, 2, "Object.evaluate (file:///t.ts:20:5)")
    expect(tags(tick(s, 2))).toEqual(["Alert:RankLost", "Broadcast:SetRoles", "Send:ExtendPartition", "Send:ExtendPartition"])
    expect(s.phase).toBe("running")
    expect(s.repeatedCrash).toBe(undefined)
  })

  it("two ranks crashing the same way in one tick name a TrainerFault before the failure limit they also reach", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, failureLimit: { absolute: 2 } })
    Coordinator.start(s)
    crash(s, 2, 1)
    crash(s, 1, 1)
    tick(s, 1)
    expect([s.outcome?.reason, s.outcome?.detail]).toEqual([
      "TrainerFault",
      "the trainer failed the same way on ranks 2 and 1: trainBatch always fails"
    ])
  })

  it("with onRepeatedCrash continue the crashes are deaths like any other, and the outcome still names the repeat", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, onRepeatedCrash: "continue" })
    Coordinator.start(s)
    crash(s, 1, 1)
    tick(s, 1)
    crash(s, 0, 2)
    // Rank 0's remainder: its partition and the extension it got from rank 1, both to rank 2.
    expect(tags(tick(s, 2))).toEqual(["Alert:RankLost", "Broadcast:SetRoles", "Send:ExtendPartition", "Send:ExtendPartition"])
    crash(s, 2, 3)
    tick(s, 3)
    expect([s.outcome?.reason, s.outcome?.detail]).toEqual(["AllRanksLost", "no survivor left"])
    expect(s.outcome?.repeatedCrash?.ranks).toEqual([1, 0])
  })

  it("crashes without a fingerprint, and crashes after the end, decide nothing", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1 })
    Coordinator.start(s)
    for (const rank of [0, 1]) Coordinator.step(s, { _tag: "DeathReport", rank, nowMs: 1, cause: { _tag: "Crashed", error: "boom" } })
    tick(s, 1)
    expect(s.phase).toBe("running")
    expect(Config.make({ worldSize: 1, epochSamples: 1, epochs: 1, onRepeatedCrash: "retry" as "stop" })).toEqual({
      _tag: "Invalid",
      option: "onRepeatedCrash",
      reason: "must be stop or continue, got retry"
    })
  })
})

describe("clean exits", () => {
  it.each(["stale", "reported"] as const)("a rank that sent Exiting and then is %s is not a failure; activeCount drops once", (how) => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 100 })
    Coordinator.start(s)
    params(s, 1, 10, 10)
    frame(s, 1, 20, { _tag: "Exiting" })
    expect(Coordinator.activeCount(s)).toBe(2)
    if (how === "reported") report(s, 1, 30)
    heartbeat(s, 90, [0, 2])
    expect(tags(tick(s, 130))).toEqual([])
    expect(Coordinator.activeCount(s)).toBe(2)
    expect(Coordinator.failures(s)).toEqual([])
  })

  it("a clean exit with uncommitted work hands its remainder on like a death, without a RankLost alert", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1 })
    Coordinator.start(s)
    params(s, 2, 1, 4)
    const cmds = frame(s, 2, 2, { _tag: "Exiting" })
    expect(tags(cmds)).toEqual(
      ["Broadcast:SetRoles", "Send:ExtendPartition", "Send:ExtendPartition"].filter((t) => t !== "Broadcast:SetRoles")
    )
    expect(ranges(s, cmds, "ExtendPartition")).toEqual([
      [0, 24, 3],
      [1, 27, 3]
    ])
    expect(s.exits).toEqual([2])
  })

  it("Exiting from a dead rank changes nothing", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1 })
    Coordinator.start(s)
    report(s, 2, 1)
    tick(s, 1)
    expect(frame(s, 2, 2, { _tag: "Exiting" })).toEqual([])
    expect(Coordinator.activeCount(s)).toBe(2)
    expect(s.counters.framesFromDead).toBe(1)
  })
})

describe("late frames from a dead rank", () => {
  it("are ignored and counted: no credit, no liveness, no dispatch", () => {
    const s = make({ worldSize: 2, epochSamples: 20, epochs: 1 })
    Coordinator.start(s)
    report(s, 1, 1)
    tick(s, 1)
    expect(params(s, 1, 2, 10)).toEqual([])
    expect(frame(s, 1, 3, { _tag: "Heartbeat" })).toEqual([])
    expect(Coordinator.committedSamples(s, 1)).toBe(0)
    expect(s.counters.framesFromDead).toBe(2)
  })
})

describe("epochs, rounds and the audit", () => {
  it("runs two epochs over the survivors, closing rounds and auditing each epoch exactly", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 2, evalEveryEpochs: 1, checkpointEveryEpochs: 1 })
    Coordinator.start(s)
    expect(params(s, 0, 1, 10).map((c) => c._tag)).toEqual([]) // waits for ranks 1 and 2
    params(s, 1, 2, 10)
    report(s, 2, 3)
    const death = tick(s, 3) // rank 2 died with nothing committed; the round can close without it
    expect(tags(death)).toEqual(["Alert:RankLost", "Send:ExtendPartition", "Send:ExtendPartition", "AverageRound"])
    params(s, 0, 4, 15)
    const end = params(s, 1, 5, 15)
    expect(tags(end)).toEqual([
      "AverageRound",
      "EpochEnded",
      "EpochModel",
      "Send:Eval",
      "Send:Checkpoint",
      "Send:StartEpoch",
      "Send:StartEpoch"
    ])
    const summary = end.find((c) => c._tag === "EpochEnded")!
    expect(summary._tag === "EpochEnded" && summary.summary).toMatchObject({
      epoch: 0,
      epochSamples: 30,
      samplesCommitted: 30,
      lost: 0,
      duplicated: 0,
      exits: []
    })
    expect(ranges(s, end, "StartEpoch")).toEqual([
      [0, 0, 15],
      [1, 15, 15]
    ])
    params(s, 0, 6, 15)
    const last = params(s, 1, 7, 15)
    expect(tags(last)).toEqual([
      "AverageRound",
      "EpochEnded",
      "EpochModel",
      "Send:Eval",
      "Send:Checkpoint",
      "Broadcast:Shutdown",
      "RunEnded"
    ])
    expect(s.outcome).toMatchObject({ status: "completed", epochsCompleted: 2, failures: [2], uncommitted: undefined })
    expect(s.outcome?.epochs.map((e) => [e.lost, e.duplicated, e.samplesCommitted])).toEqual([
      [0, 0, 30],
      [0, 0, 30]
    ])
  })

  it("ignores and counts Params for another epoch and clamps samplesDone above the list", () => {
    const s = make({ worldSize: 2, epochSamples: 20, epochs: 1 })
    Coordinator.start(s)
    expect(params(s, 0, 1, 5, 3)).toEqual([])
    expect(s.counters.framesWrongEpoch).toBe(1)
    const cmds = params(s, 0, 2, 99)
    expect(tags(cmds)).toEqual(["Alert:Overflow"])
    expect(Coordinator.committedSamples(s, 0)).toBe(10)
    expect(s.counters.samplesDoneClamped).toBe(1)
  })

  it("splits the epoch by explicit ratios: [1, 3] over 12 gives 3 and 9", () => {
    const s = make({ worldSize: 2, epochSamples: 12, epochs: 1, partitionRatios: [1, 3] })
    expect(ranges(s, Coordinator.start(s), "StartEpoch")).toEqual([
      [0, 0, 3],
      [1, 3, 9]
    ])
  })

  it("gives an empty partition to a survivor when there are more ranks than samples", () => {
    const s = make({ worldSize: 4, epochSamples: 2, epochs: 1 })
    expect(ranges(s, Coordinator.start(s), "StartEpoch")).toEqual([
      [0, 0, 1],
      [1, 1, 1],
      [2, 2, 0],
      [3, 2, 0]
    ])
  })
})

describe("callback roles", () => {
  const calibrate = (s: Coordinator.State, ms: ReadonlyArray<number>) =>
    ms.flatMap((v, r) => frame(s, r, 1, { _tag: "Progress", epoch: 0, samplesDone: 1, msPerBatch: v }))

  it("fastest with smoothed [10, 5, 20]: rank 1 holds the roles; when it dies they move to rank 0", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1 })
    const started = Coordinator.start(s)
    expect(deliveries(s, started)[0]).toEqual([0, { _tag: "SetRoles", checkpoint: 0, eval: 0, epochFn: 0 }])
    const cmds = calibrate(s, [10, 5, 20])
    expect(deliveries(s, cmds)).toEqual([0, 1, 2].map((r) => [r, { _tag: "SetRoles", checkpoint: 1, eval: 1, epochFn: 1 }]))
    expect(calibrate(s, [1, 50, 1])).toEqual([]) // roles stay put once resolved
    report(s, 1, 2)
    const death = tick(s, 2)
    expect(deliveries(s, death).filter(([, m]) => m._tag === "SetRoles")).toEqual(
      [0, 2].map((r) => [r, { _tag: "SetRoles", checkpoint: 0, eval: 0, epochFn: 0 }])
    )
  })

  it("fastest smooths over the last 5 reports", () => {
    const s = make({ worldSize: 2, epochSamples: 20, epochs: 1 })
    Coordinator.start(s)
    for (const v of [100, 100, 100, 1, 1, 1, 1, 1]) frame(s, 0, 1, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: v })
    expect(Roles.smoothedMsPerBatch(s.calibration, 0)).toBe(1) // the mean of all 8 would be 38.125
    const cmds = frame(s, 1, 1, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 2 })
    expect(cmds).toEqual([]) // every rank calibrated: rank 0 (1 ms) is fastest and already holds the roles
    expect(s.roles).toEqual({ checkpoint: 0, eval: 0, epochFn: 0 })
  })

  it("pinned {rank: 2}: checkpoint moves to the lowest live rank; eval stays and is skipped with a warning", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 2, rolePolicy: { rank: 2 }, alertCollapseMs: 0 })
    Coordinator.start(s)
    report(s, 2, 1)
    const death = tick(s, 1)
    expect(deliveries(s, death).filter(([, m]) => m._tag === "SetRoles")).toEqual(
      [0, 1].map((r) => [r, { _tag: "SetRoles", checkpoint: 0, eval: 2, epochFn: 2 }])
    )
    params(s, 0, 2, 15)
    const end = params(s, 1, 3, 15)
    expect(tags(end)).toEqual([
      "AverageRound",
      "EpochEnded",
      "EpochModel",
      "Alert:CallbackSkipped",
      "Send:Checkpoint",
      "Alert:CallbackSkipped",
      "Send:StartEpoch",
      "Send:StartEpoch"
    ])
  })

  it("clamps a pinned rank to worldSize - 1", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, rolePolicy: { rank: 9 } })
    expect(s.roles).toEqual({ checkpoint: 2, eval: 2, epochFn: 2 })
  })

  it("a failed checkpoint fails over to the lowest live rank not yet tried, and the role moves with it", () => {
    const s = make({ worldSize: 3, epochSamples: 3, epochs: 2, rolePolicy: { rank: 1 } })
    Coordinator.start(s)
    for (const r of [0, 1, 2]) params(s, r, 1, 1)
    const failed = frame(s, 1, 2, { _tag: "CheckpointResult", version: 0, ok: false, detail: "disk full" })
    expect(deliveries(s, failed)).toEqual([
      [0, { _tag: "SetRoles", checkpoint: 0, eval: 1, epochFn: 1 }],
      [1, { _tag: "SetRoles", checkpoint: 0, eval: 1, epochFn: 1 }],
      [2, { _tag: "SetRoles", checkpoint: 0, eval: 1, epochFn: 1 }],
      [0, { _tag: "Checkpoint", version: 0 }]
    ])
    report(s, 0, 3)
    const death = tick(s, 3)
    expect(deliveries(s, death).filter(([, m]) => m._tag === "Checkpoint")).toEqual([[2, { _tag: "Checkpoint", version: 0 }]])
    expect(
      frame(s, 2, 4, { _tag: "CheckpointResult", version: 0, ok: false, detail: "disk full" }).map(
        (c) => c._tag === "Alert" && c.alert.class
      )
    ).toEqual(["CheckpointFailed"])
    expect(frame(s, 2, 5, { _tag: "CheckpointResult", version: 0, ok: true, detail: "" })).toEqual([])
    expect(s.counters.staleCallbackResults).toBe(1)
  })
})

describe("eval results (breaker finding: a rank could write the run's accuracy unasked)", () => {
  it("records only the asked rank's EvalResult for the asked epoch, once, during the run and after its end; every other is a stale callback result", () => {
    const s = make({ worldSize: 2, epochSamples: 2, epochs: 2, rolePolicy: { rank: 0 } })
    Coordinator.start(s)
    // Before any eval was asked, and for an epoch never asked: stale.
    frame(s, 1, 5, { _tag: "EvalResult", epoch: 0, accuracy: 0.01, loss: 77 })
    frame(s, 0, 6, { _tag: "EvalResult", epoch: 77, accuracy: 1, loss: 0 })
    params(s, 0, 10, 1)
    const end0 = params(s, 1, 10, 1)
    expect(deliveries(s, end0).filter(([, m]) => m._tag === "Eval")).toEqual([[0, { _tag: "Eval", epoch: 0 }]])
    frame(s, 1, 11, { _tag: "EvalResult", epoch: 0, accuracy: 0.0123, loss: 77 }) // not the rank asked
    frame(s, 0, 12, { _tag: "EvalResult", epoch: 0, accuracy: 0.9, loss: 0.1 })
    frame(s, 0, 13, { _tag: "EvalResult", epoch: 0, accuracy: 0.5, loss: 0.5 }) // a second answer
    params(s, 0, 20, 1)
    params(s, 1, 20, 1)
    expect(s.phase).toBe("completed")
    frame(s, 1, 21, { _tag: "EvalResult", epoch: 1, accuracy: 0.0123, loss: 77 }) // after the end, not asked
    frame(s, 0, 22, { _tag: "EvalResult", epoch: 1, accuracy: 0.95, loss: 0.05 })
    expect(s.evals).toEqual([
      { epoch: 0, rank: 0, accuracy: 0.9, loss: 0.1 },
      { epoch: 1, rank: 0, accuracy: 0.95, loss: 0.05 }
    ])
    expect(s.counters.staleCallbackResults).toBe(5)
  })
})

describe("the last checkpoint after the run ended (breaker finding: a checkpoint that never finished was missing without a word)", () => {
  it("a failed result says CheckpointFailed; a holder that dies with it pending says it too; a stale one is counted", () => {
    for (const ending of ["failed", "died"] as const) {
      const s = make({ worldSize: 2, epochSamples: 2, epochs: 1, rolePolicy: { rank: 0 } })
      Coordinator.start(s)
      params(s, 0, 10, 1)
      const end = params(s, 1, 10, 1)
      expect(deliveries(s, end).filter(([, m]) => m._tag === "Checkpoint")).toEqual([[0, { _tag: "Checkpoint", version: 0 }]])
      expect(s.phase).toBe("completed")
      expect(frame(s, 1, 11, { _tag: "CheckpointResult", version: 0, ok: true, detail: "" })).toEqual([]) // not its holder
      const cmds =
        ending === "failed"
          ? frame(s, 0, 12, { _tag: "CheckpointResult", version: 0, ok: false, detail: "disk full" })
          : (report(s, 0, 12), tick(s, 12))
      const alerts = cmds.flatMap((c) => (c._tag === "Alert" && c.alert.class === "CheckpointFailed" ? [c.alert.detail] : []))
      expect(alerts).toEqual([
        ending === "failed"
          ? "checkpoint 0 not saved: rank 0 failed after the run ended: disk full"
          : "checkpoint 0 not saved: rank 0 died with it pending after the run ended"
      ])
      expect([s.checkpoint, s.counters.staleCallbackResults]).toEqual([undefined, 1])
    }
  })
})

describe("fastest roles with a checkpoint pending (docs/design.md §3.5)", () => {
  it("every role moves to the fastest rank; the pending checkpoint 0 finishes on rank 0 and checkpoint 1 goes to rank 1", () => {
    const s = make({ worldSize: 2, epochSamples: 4, epochs: 2 })
    Coordinator.start(s)
    expect(params(s, 0, 100, 2)).toEqual([]) // the round waits for rank 1
    const end0 = params(s, 1, 100, 2)
    expect(tags(end0)).toEqual([
      "AverageRound",
      "EpochEnded",
      "EpochModel",
      "Send:Eval",
      "Send:Checkpoint",
      "Send:StartEpoch",
      "Send:StartEpoch"
    ])
    expect(deliveries(s, end0).filter(([, m]) => m._tag === "Checkpoint")).toEqual([[0, { _tag: "Checkpoint", version: 0 }]])
    expect(frame(s, 0, 200, { _tag: "Progress", epoch: 1, samplesDone: 1, msPerBatch: 50 })).toEqual([])
    const resolved = frame(s, 1, 200, { _tag: "Progress", epoch: 1, samplesDone: 1, msPerBatch: 10 })
    expect(deliveries(s, resolved)).toEqual([0, 1].map((r) => [r, { _tag: "SetRoles", checkpoint: 1, eval: 1, epochFn: 1 }]))
    expect(s.roles).toEqual({ checkpoint: 1, eval: 1, epochFn: 1 })
    // Checkpoint 0 is still rank 0's to finish: its result is accepted, not counted as stale.
    expect(frame(s, 0, 250, { _tag: "CheckpointResult", version: 0, ok: true, detail: "" })).toEqual([])
    expect(s.counters.staleCallbackResults).toBe(0)
    expect(s.checkpoint).toBeUndefined()
    params(s, 0, 300, 2)
    const end1 = params(s, 1, 300, 2)
    expect(deliveries(s, end1).filter(([, m]) => m._tag === "Checkpoint" || m._tag === "Eval")).toEqual([
      [1, { _tag: "Eval", epoch: 1 }],
      [1, { _tag: "Checkpoint", version: 1 }]
    ])
  })
})

describe("deaths after the end (docs/design.md §3.6, §3.8)", () => {
  it("a death reported after the run completed changes no emitted summary and is recorded with afterEnd", () => {
    const s = make({ worldSize: 2, epochSamples: 4, epochs: 1 })
    Coordinator.start(s)
    params(s, 0, 100, 2)
    const end = params(s, 1, 100, 2)
    const epochEnded = end.find((c) => c._tag === "EpochEnded")
    const runEnded = end.find((c) => c._tag === "RunEnded")
    if (epochEnded?._tag !== "EpochEnded" || runEnded?._tag !== "RunEnded") throw new Error("the run did not end")
    expect(runEnded.outcome.status).toBe("completed")
    report(s, 1, 200)
    const late = tick(s, 200)
    expect(tags(late)).toEqual(["Alert:RankLost"])
    expect(epochEnded.summary.deaths).toEqual([])
    expect(runEnded.outcome.epochs[0]!.deaths).toEqual([])
    expect(runEnded.outcome.deaths).toEqual([])
    expect(Coordinator.failures(s)).toEqual([1])
    expect(s.deaths).toEqual([
      {
        rank: 1,
        epoch: 0,
        detector: "supervisor",
        cause: "killed by SIGKILL",
        reportedAtMs: 200,
        declaredAtMs: 200,
        remainderSamples: 0,
        extensions: 0,
        afterEnd: true
      }
    ])
  })

  it("a death in a run keeps afterEnd false and is in its epoch's summary and the outcome", () => {
    const s = make({ worldSize: 2, epochSamples: 4, epochs: 1 })
    Coordinator.start(s)
    report(s, 1, 50)
    tick(s, 50)
    const end = params(s, 0, 100, 4)
    const runEnded = end.find((c) => c._tag === "RunEnded")
    if (runEnded?._tag !== "RunEnded") throw new Error("the run did not end")
    expect(runEnded.outcome.epochs[0]!.deaths.map((d) => [d.rank, d.afterEnd])).toEqual([[1, false]])
    expect(runEnded.outcome.deaths.map((d) => [d.rank, d.afterEnd, d.remainderSamples])).toEqual([[1, false, 2]])
  })
})

describe("progressive mode", () => {
  it("fills every survivor at the start, refills after ChunkDone, and reclaims a dead rank's chunks", () => {
    const s = make({ worldSize: 2, epochSamples: 40, epochs: 1, mode: "progressive", chunkSamples: 5, chunksInflightMax: 2 })
    const started = Coordinator.start(s)
    expect(ranges(s, started, "AssignChunk")).toEqual([
      [0, 0, 5],
      [0, 5, 5],
      [1, 20, 5],
      [1, 25, 5]
    ])
    const refill = frame(s, 1, 1, { _tag: "ChunkDone", epoch: 0, offset: 20, size: 5 })
    expect(ranges(s, refill, "AssignChunk")).toEqual([[1, 30, 5]])
    expect(frame(s, 0, 1, { _tag: "ChunkDone", epoch: 0, offset: 20, size: 5 })).toEqual([]) // not its chunk
    expect(s.counters.chunkDoneUnmatched).toBe(1)
    frame(s, 0, 2, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 5 })
    frame(s, 0, 2, { _tag: "ChunkDone", epoch: 0, offset: 5, size: 5 })
    report(s, 1, 3)
    const death = tick(s, 3)
    expect(s.deaths[0]?.remainderSamples).toBe(15) // (20,5) done but uncommitted, (25,5) and (30,5) outstanding
    expect(ranges(s, death, "AssignChunk")).toEqual([])
  })

  it("finishes the epoch only when every done chunk is committed, with a clean audit after a death", () => {
    const s = make({ worldSize: 2, epochSamples: 20, epochs: 1, mode: "progressive", chunkSamples: 5, chunksInflightMax: 1 })
    Coordinator.start(s) // rank 0 (0,5), rank 1 (10,5)
    frame(s, 1, 1, { _tag: "ChunkDone", epoch: 0, offset: 10, size: 5 }) // rank 1 gets (15,5)
    report(s, 1, 2)
    tick(s, 2) // (10,5) done but uncommitted and (15,5) go back to the pool
    const held: Array<readonly [number, number]> = [[0, 5]]
    const done: Array<readonly [number, number]> = []
    while (held.length > 0 && done.length < 10) {
      const [offset, size] = held.shift()!
      done.push([offset, size])
      const cmds = frame(s, 0, 3 + done.length, { _tag: "ChunkDone", epoch: 0, offset, size })
      for (const [, o, z] of ranges(s, cmds, "AssignChunk")) held.push([o, z])
    }
    expect(done).toEqual([
      [0, 5],
      [10, 5],
      [15, 5],
      [5, 5]
    ]) // reclaimed first, in dispatch order, then its own span
    const end = params(s, 0, 60, 0)
    const summary = end.find((c) => c._tag === "EpochEnded")
    expect(summary?._tag === "EpochEnded" && [summary.summary.samplesCommitted, summary.summary.lost, summary.summary.duplicated]).toEqual([
      20, 0, 0
    ])
  })

  it("rolls back a chunk whose send failed and offers it to another idle survivor", () => {
    const s = make({ worldSize: 2, epochSamples: 10, epochs: 1, mode: "progressive", chunkSamples: 5, chunksInflightMax: 1 })
    Coordinator.start(s) // rank 0 (0,5), rank 1 (5,5)
    frame(s, 0, 1, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 5 }) // rank 0: nothing left of its own; steals nothing (rank 1's span is empty)
    const cmds = Coordinator.step(s, {
      _tag: "SendFailed",
      rank: 1,
      nowMs: 2,
      message: { _tag: "AssignChunk", epoch: 0, offset: 5, size: 5 },
      reason: "worker gone"
    })
    expect(tags(cmds)).toEqual(["Alert:ControlDrop", "Send:AssignChunk"])
    expect(ranges(s, cmds, "AssignChunk")).toEqual([[0, 5, 5]])
  })
})

describe("liveness", () => {
  it("declares stale ranks least recently seen first, ties to the lower rank", () => {
    const s = make({ worldSize: 4, epochSamples: 40, epochs: 1, heartbeatTimeoutMs: 100 })
    Coordinator.start(s)
    heartbeat(s, 20, [3])
    heartbeat(s, 10, [2])
    heartbeat(s, 30, [1]) // order of sighting: 3@20, 2@20 (clock never runs back), 1@30; rank 0 never
    const cmds = tick(s, 200)
    expect(s.deaths.map((d) => d.rank)).toEqual([0, 2, 3, 1])
    expect(tags(cmds)).toEqual(["Alert:RankLost", "Alert:RankLost", "Alert:RankLost", "Alert:RankLost", "RunEnded"])
  })

  it("a bad frame still shows the rank is alive, and is counted", () => {
    const s = make({ worldSize: 2, epochSamples: 20, epochs: 1, heartbeatTimeoutMs: 100 })
    Coordinator.start(s)
    expect(Coordinator.step(s, { _tag: "BadFrame", rank: 1, nowMs: 90, reason: "MalformedCbor" })).toEqual([])
    heartbeat(s, 90, [0])
    expect(tick(s, 150)).toEqual([])
    expect(s.counters.badFrames).toBe(1)
  })

  it("drops death reports for ranks out of range", () => {
    const s = make({ worldSize: 2, epochSamples: 20, epochs: 1 })
    Coordinator.start(s)
    expect(report(s, 7, 1)).toEqual([])
    expect(report(s, -1, 1)).toEqual([])
    expect(frame(s, 9, 1, { _tag: "Heartbeat" })).toEqual([])
    expect(s.counters.reportsDropped).toBe(2)
    expect(s.counters.framesOutOfRange).toBe(1)
  })

  it("a tick in which nothing expires examines one list entry at worldSize 10 and 1,000,000", () => {
    const work = (worldSize: number) => {
      const s = make({ worldSize, epochSamples: worldSize, epochs: 1, heartbeatTimeoutMs: 1000 })
      const before = Coordinator.scanWork(s)
      for (let t = 1; t <= 5; t++) tick(s, t * 100)
      return Coordinator.scanWork(s) - before
    }
    expect(work(10)).toBe(5)
    expect(work(1_000_000)).toBe(5)
  })
})

describe("hostile inputs through the library API", () => {
  it("extreme msPerBatch reports keep the throughput split whole", () => {
    const s = make({ worldSize: 3, epochSamples: 90, epochs: 1, redistribution: "throughput" })
    Coordinator.start(s)
    for (const [r, ms] of [
      [0, 1e-46],
      [1, 2],
      [2, 1e39]
    ] as const) {
      frame(s, r, 1, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: ms })
    }
    report(s, 2, 2)
    const slices = ranges(s, tick(s, 2), "ExtendPartition")
    expect(slices.reduce((sum, [, , size]) => sum + size, 0)).toBe(30)
    expect(slices.map(([rank]) => rank)).toEqual([0]) // 1 µs per batch against 2 ms: rank 0 takes everything
  })

  it("rounds a fractional samplesDone down, so the audit stays exact", () => {
    const s = make({ worldSize: 2, epochSamples: 10, epochs: 1 })
    Coordinator.start(s)
    params(s, 0, 1, 2.5)
    expect(Coordinator.committedSamples(s, 0)).toBe(2)
    params(s, 1, 1, 5)
    report(s, 0, 2)
    tick(s, 2)
    const end = params(s, 1, 3, 8)
    const summary = end.find((c) => c._tag === "EpochEnded")
    expect(summary?._tag === "EpochEnded" && [summary.summary.samplesCommitted, summary.summary.lost, summary.summary.duplicated]).toEqual([
      10, 0, 0
    ])
  })

  it("leaves parameters of the wrong length or with NaN out of the average, with an alert, and still commits", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, alertCollapseMs: 0 })
    Coordinator.start(s)
    frame(s, 0, 1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: new Float32Array([1, 2]) })
    const short = frame(s, 1, 1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: new Float32Array([1]) })
    expect(tags(short)).toEqual(["Alert:BadParams"])
    const close = frame(s, 2, 1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: new Float32Array([Number.NaN, 0]) })
    const round = close.find((c) => c._tag === "AverageRound")
    expect(round?._tag === "AverageRound" && [round.contributors, round.params]).toEqual([[0, 1, 2], [new Float32Array([1, 2])]])
    expect(s.counters.paramsRejected).toBe(2)
    expect(close.some((c) => c._tag === "EpochEnded")).toBe(true)
  })

  it("finds a non-finite value at every position of the check's four-wide loop and its tail", () => {
    const s = make({ worldSize: 12, epochSamples: 120, epochs: 1, alertCollapseMs: 0 })
    Coordinator.start(s)
    for (let rank = 0; rank < 11; rank++) {
      const params = Float32Array.from({ length: 11 }, (_, i) => i - 5.5)
      params[rank] = rank % 2 === 0 ? Number.NaN : Number.NEGATIVE_INFINITY
      expect(tags(frame(s, rank, 1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params }))).toEqual(["Alert:BadParams"])
    }
    const close = frame(s, 11, 1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: new Float32Array(11).fill(-0) })
    const round = close.find((c) => c._tag === "AverageRound")
    expect(round?._tag === "AverageRound" && round.params.length).toBe(1)
    expect(s.counters.paramsRejected).toBe(11)
  })

  it("leaves parameters with an infinity out of the average, and keeps finite ones of either sign, zeros included", () => {
    const s = make({ worldSize: 4, epochSamples: 40, epochs: 1, alertCollapseMs: 0 })
    Coordinator.start(s)
    frame(s, 0, 1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: new Float32Array([-0, -3e38]) })
    expect(
      tags(frame(s, 1, 1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: new Float32Array([1, Number.POSITIVE_INFINITY]) }))
    ).toEqual(["Alert:BadParams"])
    expect(
      tags(frame(s, 2, 1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: new Float32Array([Number.NEGATIVE_INFINITY, 1]) }))
    ).toEqual(["Alert:BadParams"])
    const close = frame(s, 3, 1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: new Float32Array([2, 3e38]) })
    const round = close.find((c) => c._tag === "AverageRound")
    expect(round?._tag === "AverageRound" && round.params.length).toBe(2)
    expect(s.counters.paramsRejected).toBe(2)
  })

  it("refuses a start time that is not a finite number, and ignores such times later", () => {
    expect(Coordinator.make({ worldSize: 1, epochSamples: 1, epochs: 1 }, Number.NaN)).toEqual({
      _tag: "Invalid",
      option: "nowMs",
      reason: "must be a finite number of ms, got NaN"
    })
    const s = make({ worldSize: 2, epochSamples: 2, epochs: 1, heartbeatTimeoutMs: 100 })
    Coordinator.start(s)
    tick(s, Number.NaN)
    expect(s.clockMs).toBe(0)
    expect(tags(tick(s, 101))).toEqual(["Alert:RankLost", "Alert:RankLost", "RunEnded"])
  })

  it("refuses ratios whose sum is not finite", () => {
    expect(Coordinator.make({ worldSize: 2, epochSamples: 2, epochs: 1, partitionRatios: [1e308, 1e308] }, 0)).toEqual({
      _tag: "Invalid",
      option: "partitionRatios",
      reason: "must be finite, non-negative, not all zero, with a finite sum"
    })
  })
})

describe("an external shutdown request (ShutdownRequested, docs/design.md §1 GracefulShutdown)", () => {
  it("mid-epoch: ShutdownWithSave{GracefulShutdown} to every survivor once, the run ends interrupted with exactly the uncommitted ranges", () => {
    const s = make({ worldSize: 4, epochSamples: 1000, epochs: 2, heartbeatTimeoutMs: 10_000 })
    Coordinator.start(s)
    params(s, 2, 10, 96)
    const cmds = Coordinator.step(s, { _tag: "ShutdownRequested", nowMs: 20, detail: "interrupted by SIGINT" })
    expect(tags(cmds)).toEqual(["AverageRound", "Broadcast:ShutdownWithSave", "RunEnded"])
    expect(cmds[0]).toMatchObject({ _tag: "AverageRound", epoch: 0, round: 0, contributors: [2] })
    expect(deliveries(s, cmds).filter(([, m]) => m._tag === "ShutdownWithSave")).toEqual([
      [0, { _tag: "ShutdownWithSave", reason: "GracefulShutdown" }],
      [1, { _tag: "ShutdownWithSave", reason: "GracefulShutdown" }],
      [2, { _tag: "ShutdownWithSave", reason: "GracefulShutdown" }],
      [3, { _tag: "ShutdownWithSave", reason: "GracefulShutdown" }]
    ])
    const ended = cmds.find((c) => c._tag === "RunEnded")
    expect(ended?._tag === "RunEnded" && ended.outcome).toMatchObject({
      status: "interrupted",
      reason: "GracefulShutdown",
      detail: "interrupted by SIGINT",
      epochsCompleted: 0,
      failures: [],
      uncommitted: {
        epoch: 0,
        ranges: [
          [0, 500],
          [596, 404]
        ]
      }
    })
    // Asked again, or after the end: nothing more is sent.
    expect(Coordinator.step(s, { _tag: "ShutdownRequested", nowMs: 30, detail: "interrupted by SIGINT" })).toEqual([])
  })

  it("before the run started: it ends interrupted with nothing sent and no uncommitted ranges", () => {
    const s = make({ worldSize: 2, epochSamples: 100, epochs: 1, heartbeatTimeoutMs: 10_000 })
    const cmds = Coordinator.step(s, { _tag: "ShutdownRequested", nowMs: 5, detail: "aborted" })
    expect(tags(cmds)).toEqual(["RunEnded"])
    expect(s.phase).toBe("interrupted")
    expect(s.outcome?.uncommitted).toBeUndefined()
  })

  it("a run already over ignores it", () => {
    const s = make({ worldSize: 1, epochSamples: 10, epochs: 1, heartbeatTimeoutMs: 10_000 })
    Coordinator.start(s)
    params(s, 0, 1, 10)
    expect(s.phase).toBe("completed")
    expect(Coordinator.step(s, { _tag: "ShutdownRequested", nowMs: 5, detail: "aborted" })).toEqual([])
  })
})
