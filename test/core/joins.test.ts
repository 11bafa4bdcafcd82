import { describe, expect, it } from "vitest"
import * as Config from "../../src/core/config.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import { frame, heartbeat, make, params, ranges, report, tags, tick } from "./harness.ts"

const join = (s: Coordinator.State, rank: number | undefined, nowMs: number) => Coordinator.step(s, { _tag: "Join", rank, nowMs })

const roundDone = (
  s: Coordinator.State,
  rank: number,
  nowMs: number,
  samplesDone: number,
  generation = s.ring!.generation,
  round = s.round
) => frame(s, rank, nowMs, { _tag: "RoundDone", epoch: s.epoch, round, generation, samplesDone })

describe("capacity options (docs/growing.md)", () => {
  it("maxRanks and minRanks default to worldSize, and bad values are refused with the option named", () => {
    const ok = Config.make({ worldSize: 3, epochSamples: 10, epochs: 1 })
    expect("_tag" in ok ? ok : [ok.maxRanks, ok.minRanks]).toEqual([3, 3])
    expect(Config.make({ worldSize: 3, epochSamples: 10, epochs: 1, maxRanks: 2 })).toEqual({
      _tag: "Invalid",
      option: "maxRanks",
      reason: "must be an integer >= worldSize (3), got 2"
    })
    expect(Config.make({ worldSize: 3, epochSamples: 10, epochs: 1, maxRanks: 4.5 })).toEqual({
      _tag: "Invalid",
      option: "maxRanks",
      reason: "must be an integer >= worldSize (3), got 4.5"
    })
    expect(Config.make({ worldSize: 3, epochSamples: 10, epochs: 1, minRanks: 4 })).toEqual({
      _tag: "Invalid",
      option: "minRanks",
      reason: "must be an integer in [1, worldSize (3)], got 4"
    })
    expect(Config.make({ worldSize: 3, epochSamples: 10, epochs: 1, minRanks: 0 })).toEqual({
      _tag: "Invalid",
      option: "minRanks",
      reason: "must be an integer in [1, worldSize (3)], got 0"
    })
    expect(Config.make({ worldSize: 3, epochSamples: 10, epochs: 1, backend: "ring", minRanks: 1 })).toEqual({
      _tag: "Invalid",
      option: "minRanks",
      reason: "must be an integer in [2, worldSize (3)], got 1"
    })
    expect(Config.make({ worldSize: 2, epochSamples: 10, epochs: 1, maxRanks: 4, partitionRatios: [1, 1, 1] })).toEqual({
      _tag: "Invalid",
      option: "partitionRatios",
      reason: "needs 2 or 4 entries, got 3"
    })
    const ratios = Config.make({ worldSize: 2, epochSamples: 10, epochs: 1, maxRanks: 4, partitionRatios: [1, 3] })
    expect("_tag" in ratios ? ratios : ratios.partitionRatios).toEqual([1, 3, 2, 2])
  })

  it("a fraction failure limit counts the ranks that ever joined: 0.5 of 2 is 1 before a join, 0.5 of 3 is 2 after it", () => {
    const s = make({ worldSize: 2, maxRanks: 3, epochSamples: 30, epochs: 1, failureLimit: { fraction: 0.5 } })
    Coordinator.start(s)
    join(s, undefined, 1)
    report(s, 0, 2)
    expect(tags(tick(s, 3))).not.toContain("Broadcast:ShutdownWithSave")
    report(s, 1, 4)
    const cmds = tick(s, 5)
    expect(tags(cmds)).toContain("Broadcast:ShutdownWithSave")
    expect(s.outcome?.detail).toBe("2 failures reached the failure limit of 2")
    // The joiner still counts: activeCount is the live ranks, whoever they are.
    expect(Coordinator.activeCount(s)).toBe(1)
  })
  it("joiners that die before they enter the rounds are counted apart: 41 of them leave a 2-rank run's fraction limit untouched; a joiner that entered counts as a member and a failure", () => {
    const s = make({ worldSize: 2, maxRanks: 44, epochSamples: 30, epochs: 1, failureLimit: { fraction: 0.5 } })
    Coordinator.start(s)
    for (let rank = 2; rank < 43; rank++) join(s, rank, 1)
    // All 41 die at once: one batch.
    for (let rank = 2; rank < 43; rank++) report(s, rank, 2)
    const batch = tick(s, 2)
    expect(tags(batch).filter((t) => t === "Alert:RankLost")).toHaveLength(41)
    expect(tags(batch)).not.toContain("Broadcast:ShutdownWithSave")
    expect([s.counters.joinersLost, Coordinator.activeCount(s), s.outcome]).toEqual([41, 2, undefined])
    expect(Coordinator.failures(s)).toHaveLength(41) // in the ledger all the same
    // Rank 43 joins and enters the rounds when round 0 closes: members are 0, 1 and 43, the limit 2.
    join(s, 43, 3)
    params(s, 0, 4, 5)
    expect(params(s, 1, 5, 5).map((c) => c._tag)).toContain("AverageRound")
    expect(Coordinator.isJoining(s, 43)).toBe(false)
    report(s, 43, 6)
    expect(tags(tick(s, 6))).toEqual(["Alert:RankLost"]) // its partition of epoch 0 was empty: nothing to hand on
    expect(s.counters.joinersLost).toBe(41)
    report(s, 1, 7)
    expect(tags(tick(s, 7))).toContain("Broadcast:ShutdownWithSave")
    expect(s.outcome?.detail).toBe(
      "2 failures reached the failure limit of 2 (besides 41 joiners lost before entering the rounds, not counted)"
    )
  })

  it("an absolute failure limit counts members only too: a joiner lost before entering the rounds does not trip {absolute: 1}", () => {
    const s = make({ worldSize: 2, maxRanks: 3, epochSamples: 30, epochs: 1, failureLimit: { absolute: 1 } })
    Coordinator.start(s)
    join(s, 2, 1)
    report(s, 2, 2)
    expect(tags(tick(s, 2))).toEqual(["Alert:RankLost"])
    expect([s.counters.joinersLost, s.outcome]).toEqual([1, undefined])
    report(s, 0, 3)
    expect(tags(tick(s, 3))).toContain("Broadcast:ShutdownWithSave")
    expect(s.outcome?.detail).toBe(
      "1 failure reached the failure limit of 1 (besides 1 joiner lost before entering the rounds, not counted)"
    )
  })
})

describe("joins refused (docs/growing.md)", () => {
  it("each refusal has its own reason, is counted, and changes nothing else", () => {
    const s = make({ worldSize: 2, maxRanks: 4, epochSamples: 40, epochs: 1 })
    expect(join(s, undefined, 0)).toEqual([
      { _tag: "JoinRefused", rank: undefined, reason: "NotStarted", detail: "the run has not formed yet: join through the formation" }
    ])
    Coordinator.start(s)
    expect(join(s, 4, 1)).toEqual([{ _tag: "JoinRefused", rank: 4, reason: "Full", detail: "rank index 4 is beyond maxRanks 4" }])
    expect(join(s, -1, 1)).toEqual([{ _tag: "JoinRefused", rank: -1, reason: "BadIndex", detail: "rank index -1 is not an integer >= 0" }])
    expect(join(s, 1, 1)).toEqual([{ _tag: "JoinRefused", rank: 1, reason: "LiveIndex", detail: "rank 1 is live" }])
    report(s, 1, 2)
    tick(s, 3)
    expect(join(s, 1, 4)).toEqual([
      { _tag: "JoinRefused", rank: 1, reason: "DeadIndex", detail: "rank 1 died: a dead rank's index is never reused" }
    ])
    expect(join(s, 3, 5).map((c) => c._tag)).toEqual(["Welcome", "SendRanges"])
    expect(frame(s, 3, 6, { _tag: "Exiting" })).toEqual([]) // its partition was empty: nothing to hand on
    expect(Coordinator.isLive(s, 3)).toBe(false)
    expect(join(s, 3, 7)).toEqual([
      { _tag: "JoinRefused", rank: 3, reason: "ExitedIndex", detail: "rank 3 exited: its index is never reused" }
    ])
    expect(join(s, undefined, 8).map((c) => c._tag)).toEqual(["Welcome", "SendRanges"]) // takes index 2
    expect(join(s, undefined, 9)).toEqual([
      { _tag: "JoinRefused", rank: undefined, reason: "Full", detail: "all 4 rank indices (maxRanks) are taken" }
    ])
    expect([s.counters.joins, s.counters.joinsRefused]).toEqual([2, 7])
    expect(Coordinator.survivors(s)).toEqual([0, 2])
    Coordinator.step(s, { _tag: "ShutdownRequested", nowMs: 10, detail: "SIGTERM" })
    expect(join(s, undefined, 11)).toEqual([
      { _tag: "JoinRefused", rank: undefined, reason: "ShuttingDown", detail: "the run is saving and stopping" }
    ])
  })

  it("the auto-join cursor moves past every join, an explicit index's too (a served join always names the index the server gave it): an auto join does not rescan the ranks that joined before it", () => {
    const s = make({ worldSize: 1, maxRanks: 6, epochSamples: 40, epochs: 1 })
    Coordinator.start(s)
    for (const [rank, nowMs] of [
      [1, 1],
      [2, 2],
      [3, 3]
    ] as const)
      join(s, rank, nowMs)
    expect(s.vacantFrom).toBe(4)
    join(s, 5, 4) // a hole at 4: the cursor stays there
    expect([s.vacantFrom, Coordinator.joinVerdict(s, undefined)]).toEqual([4, 4])
  })

  it("a join after the run completed is refused as RunOver", () => {
    const s = make({ worldSize: 1, maxRanks: 2, epochSamples: 4, epochs: 1 })
    Coordinator.start(s)
    params(s, 0, 1, 4)
    expect(s.outcome?.status).toBe("completed")
    expect(join(s, undefined, 2)).toEqual([{ _tag: "JoinRefused", rank: undefined, reason: "RunOver", detail: "the run completed" }])
  })

  it("frames from an index no rank joined yet are counted as out of range and decide nothing", () => {
    const s = make({ worldSize: 2, maxRanks: 4, epochSamples: 40, epochs: 1, heartbeatTimeoutMs: 100 })
    Coordinator.start(s)
    expect(params(s, 3, 1, 10)).toEqual([])
    expect(s.counters.framesOutOfRange).toBe(1)
    heartbeat(s, 90, [0, 1])
    expect(tick(s, 150)).toEqual([]) // a vacant index is never stale
  })
})

describe("progressive joins, cpu backend (docs/growing.md)", () => {
  it("the joiner is welcomed, its span is the tail half of the largest span, it gets its chunks at once, and the open round closes without it", () => {
    const s = make({ worldSize: 2, maxRanks: 3, epochSamples: 40, epochs: 1, mode: "progressive", chunkSamples: 4, chunksInflightMax: 1 })
    expect(ranges(s, Coordinator.start(s), "AssignChunk")).toEqual([
      [0, 0, 4],
      [1, 20, 4]
    ])
    const cmds = join(s, undefined, 5)
    expect(cmds[0]).toEqual({
      _tag: "Welcome",
      rank: 2,
      epoch: 0,
      firstRound: 1,
      roles: { checkpoint: 0, eval: 0, epochFn: 0 },
      model: "coordinator",
      reason: "rank 2 joins at epoch 0, round 1 onwards (root/rank2): its span and first chunks of epoch 0 now"
    })
    // Rank 0's residue [4, 20) is the largest (ties to the lower rank): the joiner's span is [12, 20).
    expect(ranges(s, cmds, "AssignChunk")).toEqual([[2, 12, 4]])
    expect(s.joins).toEqual([{ rank: 2, atMs: 5, epoch: 0, firstRound: 1, samples: 4 }])
    expect(Coordinator.isJoining(s, 2)).toBe(true)
    frame(s, 0, 6, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 4 })
    frame(s, 1, 6, { _tag: "ChunkDone", epoch: 0, offset: 20, size: 4 })
    frame(s, 2, 6, { _tag: "ChunkDone", epoch: 0, offset: 12, size: 4 })
    expect(params(s, 0, 7, 0).map((c) => c._tag)).toEqual([])
    // Ranks 0 and 1 hold uncommitted work and contributed: round 0 closes, the joiner is not waited on.
    const closed = params(s, 1, 8, 0).filter((c) => c._tag === "AverageRound")
    expect(closed.map((c) => c._tag === "AverageRound" && [c.round, c.contributors])).toEqual([[0, [0, 1]]])
    expect(Coordinator.isJoining(s, 2)).toBe(false)
    // Round 1 waits on the joiner: it holds a done chunk.
    expect(params(s, 0, 9, 0).filter((c) => c._tag === "AverageRound")).toEqual([])
    expect(params(s, 1, 9, 0).filter((c) => c._tag === "AverageRound")).toEqual([])
    const round1 = params(s, 2, 10, 0).filter((c) => c._tag === "AverageRound")
    expect(round1.map((c) => c._tag === "AverageRound" && [c.round, c.contributors])).toEqual([[1, [0, 1, 2]]])
  })

  it("a joiner's contribution to the round it joined in is committed and averaged, but the round did not wait for it", () => {
    const s = make({ worldSize: 1, maxRanks: 2, epochSamples: 16, epochs: 1, mode: "progressive", chunkSamples: 4, chunksInflightMax: 1 })
    Coordinator.start(s)
    // Rank 0's residue is [4, 16): the joiner's span is its tail half, [10, 16).
    expect(ranges(s, join(s, 1, 1), "AssignChunk")).toEqual([[1, 10, 4]])
    frame(s, 1, 2, { _tag: "ChunkDone", epoch: 0, offset: 10, size: 4 })
    // Rank 0 holds an outstanding chunk, so it is required; the joiner's contribution alone closes nothing.
    expect(params(s, 1, 3, 0).filter((c) => c._tag === "AverageRound")).toEqual([])
    frame(s, 0, 4, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 4 })
    const closed = params(s, 0, 5, 0).filter((c) => c._tag === "AverageRound")
    expect(closed.map((c) => c._tag === "AverageRound" && [c.round, c.contributors, c.params.length])).toEqual([[0, [1, 0], 2]])
    expect(s.log.ranks).toEqual([1, 0])
  })
})

describe("static joins (docs/growing.md)", () => {
  it("the joiner gets an empty partition of the current epoch, no remainder in the round it joined, and its partition at the next epoch start", () => {
    const s = make({ worldSize: 2, maxRanks: 3, epochSamples: 30, epochs: 2 })
    Coordinator.start(s)
    const cmds = join(s, undefined, 1)
    expect(tags(cmds)).toEqual(["Welcome", "Send:StartEpoch"])
    expect(ranges(s, cmds, "StartEpoch")).toEqual([[2, 0, 0]])
    expect((cmds[0] as { reason: string }).reason).toBe(
      "rank 2 joins at epoch 0, round 1 onwards (root/rank2): an empty partition of epoch 0; its first partition at epoch 1"
    )
    // Rank 1 dies in the round rank 2 joined in: its remainder goes to rank 0 alone.
    report(s, 1, 2)
    expect(ranges(s, tick(s, 3), "ExtendPartition")).toEqual([[0, 15, 15]])
    const end = params(s, 0, 4, 30)
    expect(tags(end)).toEqual([
      "AverageRound",
      "EpochEnded",
      "EpochModel",
      "Send:Eval",
      "Send:Checkpoint",
      "Send:StartEpoch",
      "Send:StartEpoch"
    ])
    expect(ranges(s, end, "StartEpoch")).toEqual([
      [0, 0, 15],
      [2, 15, 15]
    ])
  })

  it("from the round after its welcome, a static joiner takes part in redistribution", () => {
    const s = make({ worldSize: 2, maxRanks: 3, epochSamples: 30, epochs: 1 })
    Coordinator.start(s)
    join(s, undefined, 1)
    params(s, 0, 2, 5)
    expect(params(s, 1, 3, 5).map((c) => c._tag)).toEqual(["AverageRound"])
    report(s, 1, 4)
    expect(ranges(s, tick(s, 5), "ExtendPartition")).toEqual([
      [0, 20, 5],
      [2, 25, 5]
    ])
  })
})

describe("ring joins (docs/growing.md)", () => {
  it("the ring re-forms with the joiner at the next round close, after the model of that round from the lowest member; until then the joiner's reports are stale", () => {
    const s = make({ worldSize: 2, maxRanks: 3, epochSamples: 30, epochs: 1, backend: "ring" })
    Coordinator.start(s)
    const cmds = join(s, undefined, 1)
    expect(cmds[0]).toMatchObject({ _tag: "Welcome", rank: 2, firstRound: 1, model: "peer" })
    expect(tags(cmds)).toEqual(["Welcome", "Send:StartEpoch"])
    expect(Coordinator.ringMembers(s)).toEqual([0, 1])
    expect(roundDone(s, 2, 2, 0)).toEqual([])
    expect(s.counters.staleRoundDone).toBe(1)
    roundDone(s, 0, 3, 5)
    const closed = roundDone(s, 1, 4, 5)
    expect(tags(closed)).toEqual(["AverageRound", "SendModel", "Send:FormRing", "Send:FormRing", "Send:FormRing"])
    expect(closed[1]).toEqual({
      _tag: "SendModel",
      to: 2,
      from: 0,
      round: 0,
      generation: 1,
      reason: "rank 2 enters ring generation 1: the model of round 0 from rank 0"
    })
    expect(closed.slice(2).map((c) => c._tag === "Send" && [c.to, c.message])).toEqual([
      [0, { _tag: "FormRing", generation: 1, ringRank: 0, ringSize: 3, peers: [0, 1, 2] }],
      [1, { _tag: "FormRing", generation: 1, ringRank: 1, ringSize: 3, peers: [0, 1, 2] }],
      [2, { _tag: "FormRing", generation: 1, ringRank: 2, ringSize: 3, peers: [0, 1, 2] }]
    ])
    expect(Coordinator.ringMembers(s)).toEqual([0, 1, 2])
    // Round 1 waits on all three.
    roundDone(s, 0, 5, 10)
    expect(roundDone(s, 1, 5, 10).map((c) => c._tag)).toEqual([])
  })

  it("a death before the joiner enters re-forms the ring without it; with one member left the run stops with SingleSurvivor", () => {
    const s = make({ worldSize: 3, maxRanks: 4, epochSamples: 30, epochs: 1, backend: "ring" })
    Coordinator.start(s)
    join(s, undefined, 1)
    report(s, 2, 2)
    const reform = tick(s, 3)
    expect(reform.flatMap((c) => (c._tag === "Send" && c.message._tag === "FormRing" ? [[c.to, c.message.peers]] : []))).toEqual([
      [0, [0, 1]],
      [1, [0, 1]]
    ])
    report(s, 1, 4)
    tick(s, 5)
    expect(s.outcome?.reason).toBe("SingleSurvivor")
    expect(s.outcome?.detail).toBe("the ring backend needs 2 survivors in the ring, 1 left")
  })

  it("progressive + ring: the joiner gets its span and chunks when it enters the ring, not before", () => {
    const s = make({
      worldSize: 2,
      maxRanks: 3,
      epochSamples: 40,
      epochs: 1,
      backend: "ring",
      mode: "progressive",
      chunkSamples: 4,
      chunksInflightMax: 1
    })
    Coordinator.start(s)
    expect(tags(join(s, undefined, 1))).toEqual(["Welcome"])
    frame(s, 0, 2, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 4 })
    frame(s, 1, 2, { _tag: "ChunkDone", epoch: 0, offset: 20, size: 4 })
    roundDone(s, 0, 3, 0)
    const closed = roundDone(s, 1, 4, 0)
    expect(tags(closed).slice(-2)).toEqual(["Send:FormRing", "Send:AssignChunk"])
    // Ranks 0 and 1 refilled after ChunkDone: [4, 8) and [24, 28); the largest residue is rank 0's [8, 20).
    expect(ranges(s, closed, "AssignChunk")).toEqual([[2, 14, 4]])
  })
})

describe("ring model hand-over (docs/growing.md)", () => {
  const model = (s: Coordinator.State, rank: number, nowMs: number, round: number, values: Float32Array) =>
    frame(s, rank, nowMs, { _tag: "Params", epoch: 0, round, samplesDone: 0, params: values })

  /** Ranks 0..worldSize-1 with 2 parameters each, rank `worldSize` joined and entering at the close of round 0. */
  const entered = (worldSize: number) => {
    const s = make({ worldSize, maxRanks: worldSize + 1, epochSamples: 30, epochs: 1, backend: "ring" })
    Coordinator.start(s, 0, { paramsLength: 2 })
    join(s, undefined, 1)
    for (let r = 0; r < worldSize - 1; r++) roundDone(s, r, 2, 0)
    const closed = roundDone(s, worldSize - 1, 3, 0)
    return { s, closed }
  }

  it("the asked member's Params of the closed round goes to the joiner as its Update; until then the joiner's RingReady and RoundDone are stale", () => {
    const { s, closed } = entered(2)
    expect(closed[1]).toMatchObject({ _tag: "SendModel", to: 2, from: 0, round: 0, generation: 1 })
    expect(Coordinator.isOwedModel(s, 2)).toBe(true)
    expect(frame(s, 2, 4, { _tag: "RingReady", generation: 1 })).toEqual([])
    expect(roundDone(s, 2, 4, 0)).toEqual([])
    expect([s.counters.staleRingReady, s.counters.staleRoundDone]).toEqual([1, 1])
    const handed = model(s, 0, 5, 0, Float32Array.of(0.25, -1))
    expect(handed).toEqual([
      {
        _tag: "Send",
        to: 2,
        message: { _tag: "Update", round: 0, params: Float32Array.of(0.25, -1) },
        reason: "rank 2's model: round 0 from rank 0"
      }
    ])
    expect(Coordinator.isOwedModel(s, 2)).toBe(false)
    // Now a member like any other: its RingReady counts, and the round waits on its RoundDone.
    frame(s, 0, 6, { _tag: "RingReady", generation: 1 })
    frame(s, 1, 6, { _tag: "RingReady", generation: 1 })
    frame(s, 2, 6, { _tag: "RingReady", generation: 1 })
    expect(s.ring!.pending).toBe(false)
    roundDone(s, 0, 7, 15)
    expect(roundDone(s, 1, 7, 15)).toEqual([])
    expect(tags(roundDone(s, 2, 7, 0)).slice(0, 2)).toEqual(["AverageRound", "EpochEnded"])
    // A second copy of the model is asked of no one: ignored and counted as before.
    expect(model(s, 0, 8, 0, Float32Array.of(0.25, -1))).toEqual([])
  })

  it("a Params from a member not asked is ignored and counted; one of another round, another length or with non-finite values is refused and the model asked of the next member; with none left the run stops with ReduceStall", () => {
    const { s } = entered(3)
    expect(model(s, 1, 4, 0, Float32Array.of(1, 2))).toEqual([])
    expect([s.counters.staleRoundDone, s.counters.modelsRefused]).toEqual([1, 0])
    const wrongRound = model(s, 0, 5, 1, Float32Array.of(1, 2))
    expect(tags(wrongRound)).toEqual(["Alert:BadParams", "SendModel"])
    expect(wrongRound[1]).toEqual({
      _tag: "SendModel",
      to: 3,
      from: 1,
      round: 0,
      generation: 1,
      reason: "rank 0's model was refused: rank 3 gets the model of round 0 from rank 1 instead"
    })
    expect(wrongRound[0]?._tag === "Alert" && wrongRound[0].alert.detail).toBe(
      "rank 0's model for joiner 3 refused: the model of round 1 instead of 0"
    )
    // Rank 0 was asked once; its later answer is nobody's now.
    expect(model(s, 0, 6, 0, Float32Array.of(1, 2))).toEqual([])
    const wrongLength = model(s, 1, 7, 0, Float32Array.of(1, 2, 3))
    expect(tags(wrongLength)).toEqual(["Alert:BadParams", "SendModel"])
    expect(wrongLength[1]).toMatchObject({ from: 2 })
    const nonFinite = model(s, 2, 8, 0, Float32Array.of(1, Number.NaN))
    expect(tags(nonFinite)).toEqual(["Alert:BadParams", "Broadcast:ShutdownWithSave", "RunEnded"])
    expect(s.counters.modelsRefused).toBe(3)
    expect([s.outcome?.reason, s.outcome?.detail]).toEqual(["ReduceStall", "no ring member left to hand joiner 3 the model of round 0"])
  })

  it("the asked member dies before it sends: in the same batch, before the ring re-forms, the model is asked of the lowest member left; its model then reaches the joiner", () => {
    const { s } = entered(3)
    report(s, 0, 4)
    const cmds = tick(s, 5)
    // The joiner is a member now: it takes its share of the remainder like any survivor (the shell
    // holds it back with the rest until its model is out).
    expect(tags(cmds)).toEqual([
      "Alert:RankLost",
      "Broadcast:SetRoles",
      "Broadcast:DeclareDead",
      "Send:ExtendPartition",
      "Send:ExtendPartition",
      "Send:ExtendPartition",
      "SendModel",
      "Send:FormRing",
      "Send:FormRing",
      "Send:FormRing"
    ])
    expect(cmds.find((c) => c._tag === "SendModel")).toEqual({
      _tag: "SendModel",
      to: 3,
      from: 1,
      round: 0,
      generation: 2,
      reason: "rank 0 left before it sent the model: rank 3 gets the model of round 0 from rank 1 instead"
    })
    expect(
      cmds.flatMap((c) => (c._tag === "Send" && c.message._tag === "FormRing" ? [[c.to, c.message.generation, c.message.peers]] : []))
    ).toEqual([
      [1, 2, [1, 2, 3]],
      [2, 2, [1, 2, 3]],
      [3, 2, [1, 2, 3]]
    ])
    expect(model(s, 1, 6, 0, Float32Array.of(3, 4))).toEqual([
      {
        _tag: "Send",
        to: 3,
        message: { _tag: "Update", round: 0, params: Float32Array.of(3, 4) },
        reason: "rank 3's model: round 0 from rank 1"
      }
    ])
  })

  it("the asked member never answers: at the rendezvous retry the model is asked of the next member, whose model reaches the joiner; the first one's late answer is nobody's", () => {
    const { s } = entered(3)
    for (const r of [0, 1, 2]) frame(s, r, 4, { _tag: "RingReady", generation: 1 })
    expect(s.ring!.pending).toBe(true) // the joiner gets its FormRing only with its model
    const retry = tick(s, 5_100)
    expect(tags(retry)).toEqual(["SendModel", "Send:FormRing", "Send:FormRing", "Send:FormRing", "Send:FormRing"])
    expect(retry[0]).toEqual({
      _tag: "SendModel",
      to: 3,
      from: 1,
      round: 0,
      generation: 2,
      reason:
        "rank 0 did not hand the model over before the ring rendezvous timed out: rank 3 gets the model of round 0 from rank 1 instead"
    })
    expect(model(s, 1, 5_200, 0, Float32Array.of(5, 6))).toEqual([
      {
        _tag: "Send",
        to: 3,
        message: { _tag: "Update", round: 0, params: Float32Array.of(5, 6) },
        reason: "rank 3's model: round 0 from rank 1"
      }
    ])
    expect(model(s, 0, 5_300, 0, Float32Array.of(7, 8))).toEqual([])
    for (const r of [0, 1, 2, 3]) frame(s, r, 5_400, { _tag: "RingReady", generation: 2 })
    expect(s.ring!.pending).toBe(false)
  })

  it("the only members holding the model leave before it is sent: the run stops with ReduceStall at once; a joiner that leaves is owed nothing", () => {
    // Two joiners enter together; both ranks that held the model die in one batch: the ring would
    // still have two members, but neither can be handed the model.
    const s = make({ worldSize: 2, maxRanks: 4, epochSamples: 30, epochs: 1, backend: "ring" })
    Coordinator.start(s, 0, { paramsLength: 2 })
    join(s, undefined, 1)
    join(s, undefined, 1)
    roundDone(s, 0, 2, 0)
    expect(tags(roundDone(s, 1, 3, 0)).filter((t) => t === "SendModel")).toEqual(["SendModel", "SendModel"])
    report(s, 0, 4)
    report(s, 1, 4)
    const cmds = tick(s, 5)
    expect(tags(cmds).slice(-2)).toEqual(["Broadcast:ShutdownWithSave", "RunEnded"])
    expect(tags(cmds)).not.toContain("Send:FormRing")
    expect([s.outcome?.reason, s.outcome?.detail]).toEqual([
      "ReduceStall",
      "no ring member left to hand joiner 2 the model of round 0: every rank that held it is gone"
    ])
    const t = entered(3).s
    report(t, 3, 4)
    tick(t, 5)
    expect(Coordinator.isOwedModel(t, 3)).toBe(false)
    expect(model(t, 0, 6, 0, Float32Array.of(1, 2))).toEqual([])
    expect(t.counters.staleRoundDone).toBe(1)
  })
})

describe("roles and joiners (docs/growing.md)", () => {
  it("pinned: the checkpoint role never fails over to a joiner, even the lowest live rank", () => {
    const s = make({ worldSize: 2, maxRanks: 3, epochSamples: 30, epochs: 1, rolePolicy: { rank: 1 } })
    Coordinator.start(s)
    join(s, undefined, 1)
    report(s, 1, 2)
    tick(s, 3)
    expect(s.roles).toEqual({ checkpoint: 0, eval: 1, epochFn: 1 })
    report(s, 0, 4)
    tick(s, 5)
    expect(s.roles.checkpoint).toBe(0) // no original rank left: it stays where it was
  })

  it("fastest: roles move to a joiner once every survivor is calibrated and it is the fastest, never while it is uncalibrated", () => {
    const s = make({ worldSize: 2, maxRanks: 3, epochSamples: 300, epochs: 1, mode: "progressive", chunkSamples: 4 })
    Coordinator.start(s)
    join(s, undefined, 1)
    frame(s, 0, 2, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 9 })
    expect(tags(frame(s, 1, 2, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 5 }))).toEqual([])
    // Rank 0 dies while the joiner is uncalibrated: the roles go to rank 1, not to the joiner.
    report(s, 0, 3)
    tick(s, 4)
    expect(s.roles).toEqual({ checkpoint: 1, eval: 1, epochFn: 1 })
    const resolved = frame(s, 2, 5, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 2 })
    expect(resolved).toEqual([
      {
        _tag: "Broadcast",
        message: { _tag: "SetRoles", checkpoint: 2, eval: 2, epochFn: 2 },
        reason: "every live rank calibrated: roles go to the fastest, rank 2"
      }
    ])
  })

  it("fastest: when the only survivor is an uncalibrated joiner, a dead rank's roles go to it, not stay on the dead rank (every later eval would be skipped)", () => {
    const s = make({ worldSize: 1, maxRanks: 2, epochSamples: 300, epochs: 2, mode: "progressive", chunkSamples: 4 })
    Coordinator.start(s)
    frame(s, 0, 1, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 9 }) // every live rank calibrated: resolved
    join(s, undefined, 2)
    report(s, 0, 3)
    const cmds = tick(s, 4)
    expect(s.roles).toEqual({ checkpoint: 1, eval: 1, epochFn: 1 })
    expect(
      cmds.filter((c) => c._tag === "Broadcast" && c.message._tag === "SetRoles").map((c) => c._tag === "Broadcast" && c.message)
    ).toEqual([{ _tag: "SetRoles", checkpoint: 1, eval: 1, epochFn: 1 }])
  })
})

describe("formation with minRanks (docs/growing.md)", () => {
  it("absent formation ranks are vacant: they are not watched, not planned, and may join later by index", () => {
    const s = make({ worldSize: 3, minRanks: 2, epochSamples: 30, epochs: 2, heartbeatTimeoutMs: 100 })
    const started = Coordinator.start(s, 0, { absent: [2] })
    expect(ranges(s, started, "StartEpoch")).toEqual([
      [0, 0, 15],
      [1, 15, 15]
    ])
    heartbeat(s, 90, [0, 1])
    expect(tick(s, 150)).toEqual([])
    expect(join(s, 2, 151).map((c) => c._tag)).toEqual(["Welcome", "SendRanges"])
    expect(Coordinator.survivors(s)).toEqual([0, 1, 2])
  })

  it("an absent list that would leave fewer than minRanks is ignored with a BadStart alert", () => {
    const s = make({ worldSize: 3, minRanks: 2, epochSamples: 30, epochs: 1 })
    const started = Coordinator.start(s, 0, { absent: [1, 2] })
    expect(tags(started)[0]).toBe("Alert:BadStart")
    expect(Coordinator.survivors(s)).toEqual([0, 1, 2])
  })
})
