import { describe, expect, it } from "vitest"
import type * as Config from "../../src/core/config.ts"
import * as ChunkPool from "../../src/core/chunk-pool.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import { frame, make, ranges, report, tick } from "./harness.ts"

type Held = Map<number, Array<readonly [number, number]>>

/**
 * Three ranks, progressive cpu, one chunk in flight each, `roundSilenceMs` 200; `take` records
 * every chunk handed out, `work` has a rank train its first chunk and contribute.
 */
const cohort = (options: Partial<Config.Options> = {}) => {
  const s = make({
    worldSize: 3,
    epochSamples: 60,
    epochs: 2,
    mode: "progressive",
    chunkSamples: 5,
    chunksInflightMax: 1,
    heartbeatTimeoutMs: 10_000,
    roundSilenceMs: 200,
    ...options
  })
  const held: Held = new Map()
  const take = (cmds: ReadonlyArray<Coordinator.Command>) => {
    for (const [to, offset, size] of ranges(s, cmds, "AssignChunk")) held.set(to, [...(held.get(to) ?? []), [offset, size]])
    return cmds
  }
  const work = (rank: number, nowMs: number, epoch = s.epoch) => {
    const [offset, size] = held.get(rank)!.shift()!
    take(frame(s, rank, nowMs, { _tag: "ChunkDone", epoch, offset, size }))
    return take(frame(s, rank, nowMs, { _tag: "Params", epoch, round: s.round, samplesDone: 0, params: Float32Array.of(rank) }))
  }
  take(Coordinator.start(s, 0))
  return { s, held, take, work }
}

/** Ranks 0 and 1 train every chunk they hold, every 100 ms from `fromMs`, ticking, until `until` holds. */
const trainUntil = (c: ReturnType<typeof cohort>, fromMs: number, until: () => boolean): number => {
  let t = fromMs
  while (!until() && t < 10_000) {
    t += 100
    for (const rank of [0, 1]) if ((c.held.get(rank)?.length ?? 0) > 0) c.work(rank, t)
    c.take(tick(c.s, t))
  }
  return t
}

describe("taking a silent rank's chunks back at an epoch's end (roundSilenceMs, progressive cpu)", () => {
  it("hands the chunk of a rank silent past the bound to an idle rank once nothing else is left; nobody is declared and the audit is exact", () => {
    const c = cohort()
    // Rank 2 trained once, then fell silent holding its chunk.
    frame(c.s, 2, 10, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 5 })
    const rank2 = c.held.get(2)![0]!
    const t = trainUntil(c, 0, () => c.s.epoch > 0)
    expect(c.s.summaries.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([[0, 60, 0, 0]])
    expect(c.s.leaves).toEqual([])
    expect(Coordinator.isLive(c.s, 2)).toBe(true)
    expect(c.s.counters.takeBacks).toBe(1)
    // Its one chunk, taken back only once the pool ran dry.
    expect(c.s.counters.samplesTakenBack).toBe(rank2[1])
    expect(c.s.counters.samplesRedoneAfterTakeBack).toBe(0)
    expect(t).toBeLessThan(2000)
    // The rounds that waited on rank 2's silence are not the usual round: its bound does not grow.
    expect(c.s.roundLengthMs).toBeLessThanOrEqual(100)
  })

  it("a rank taken back gets no chunk until its Params after its last owed ChunkDone, which is dropped; then it takes chunks again", () => {
    const c = cohort()
    frame(c.s, 2, 10, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 5 })
    const [offset, size] = c.held.get(2)!.shift()!
    trainUntil(c, 0, () => c.s.counters.takeBacks > 0)
    expect(c.s.epoch).toBe(0)
    // The rank given the chunks taken back leaves with them: they go to the other one, not to rank 2.
    const holder = [0, 1].find((rank) => (c.held.get(rank)?.length ?? 0) > 0)!
    c.held.set(holder, [])
    c.take(report(c.s, holder, c.s.clockMs + 1))
    const death = c.take(tick(c.s, c.s.clockMs + 1))
    expect(c.s.leaves.map((l) => l.rank)).toEqual([holder])
    expect(ranges(c.s, death, "AssignChunk").map(([to]) => to)).not.toContain(2)
    expect(ChunkPool.remaining(c.s.pool!) + ChunkPool.inflight(c.s.pool!, 1 - holder)).toBeGreaterThan(0)
    // Rank 2 was alive after all: it finishes the chunk it held and contributes. Nothing of it counts.
    const round = c.s.round
    const done = frame(c.s, 2, 1500, { _tag: "ChunkDone", epoch: 0, offset, size })
    expect([done, c.s.counters.chunkDoneUnmatched]).toEqual([[], 0])
    const late = c.take(frame(c.s, 2, 1500, { _tag: "Params", epoch: 0, round, samplesDone: 0, params: Float32Array.of(9) }))
    expect(late.filter((cmd) => cmd._tag === "AverageRound")).toEqual([])
    expect(c.s.counters.paramsTakenBack).toBe(1)
    // Its training of them ends there: it waits for the open round's Update, and takes chunks after it.
    expect(c.s.takenBack.get(2)?.settled).toBe(true)
    // It was alive: later take-backs wait for more than twice the silence it was taken back at.
    expect(c.s.takeBackMistakeMs).toBeGreaterThan(200)
    for (let t = 1600; c.s.epoch === 0 && t < 10_000; t += 100) {
      for (const rank of [1 - holder, 2]) if ((c.held.get(rank)?.length ?? 0) > 0) c.work(rank, t)
    }
    expect(c.s.summaries.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([[0, 60, 0, 0]])
    expect(c.s.counters.paramsTakenBack).toBe(1)
  })

  it("a Params of a rank taken back that still owes a ChunkDone is dropped and leaves it out of the chunks", () => {
    const c = cohort({ chunksInflightMax: 2 })
    frame(c.s, 2, 10, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 5 })
    const [first, second] = c.held.get(2)!.splice(0)
    trainUntil(c, 0, () => c.s.counters.takeBacks > 0)
    const round = c.s.round
    frame(c.s, 2, 1500, { _tag: "ChunkDone", epoch: 0, offset: first![0], size: first![1] })
    const early = frame(c.s, 2, 1500, { _tag: "Params", epoch: 0, round, samplesDone: 0, params: Float32Array.of(9) })
    expect([ranges(c.s, early, "AssignChunk"), c.s.counters.paramsTakenBack, c.s.takenBack.has(2)]).toEqual([[], 1, true])
    frame(c.s, 2, 1600, { _tag: "ChunkDone", epoch: 0, offset: second![0], size: second![1] })
    frame(c.s, 2, 1600, { _tag: "Params", epoch: 0, round, samplesDone: 0, params: Float32Array.of(9) })
    expect([c.s.counters.paramsTakenBack, c.s.takenBack.get(2)?.settled]).toEqual([2, true])
  })

  it("a rank taken back whose last Params was dropped takes chunks only after the open round's Update: a chunk before it held that round up", () => {
    const c = cohort()
    const assigned: Array<{ readonly rank: number; readonly afterUpdate: boolean }> = []
    const step = (cmds: ReadonlyArray<Coordinator.Command>) => {
      const closedAt = cmds.findIndex((cmd) => cmd._tag === "AverageRound")
      cmds.forEach((cmd, i) => {
        if (cmd._tag === "SendRanges" && cmd.ranks.includes(2)) assigned.push({ rank: 2, afterUpdate: closedAt >= 0 && closedAt < i })
      })
      return c.take(cmds)
    }
    // Rank 2 reports its first chunk done and falls silent before its Params, holding the next.
    const [offset, size] = c.held.get(2)!.shift()!
    step(frame(c.s, 2, 10, { _tag: "ChunkDone", epoch: 0, offset, size }))
    const [owedOffset, owedSize] = c.held.get(2)!.shift()!
    // Rank 0 runs out of work while rank 1 holds a chunk: rank 0 takes one of rank 2's two chunks, one stays in the pool.
    let t = 10
    while (c.s.counters.takeBacks === 0 && t < 5000) {
      t += 100
      if ((c.held.get(0)?.length ?? 0) > 0) step(c.work(0, t))
      if ((c.held.get(1)?.length ?? 0) > 0 && ChunkPool.remaining(c.s.pool!) > 0) step(c.work(1, t))
      step(tick(c.s, t))
    }
    expect([c.s.counters.takeBacks, ChunkPool.remaining(c.s.pool!)]).toEqual([1, 5])
    // It was alive: it finishes the chunk it held and contributes (dropped), then waits for an Update,
    // beating (the rank actor trains nothing while it waits). Handed the chunk left in the pool at
    // once, it held up the open round, which waited on it until roundStallMs.
    step(frame(c.s, 2, t + 10, { _tag: "ChunkDone", epoch: 0, offset: owedOffset, size: owedSize }))
    step(frame(c.s, 2, t + 10, { _tag: "Params", epoch: 0, round: c.s.round, samplesDone: 0, params: Float32Array.of(9) }))
    const waitedRound = c.s.round
    for (let u = t + 100; c.s.epoch === 0 && u < t + 10_000; u += 100) {
      const updated = c.s.round > waitedRound
      for (const rank of [0, 1, ...(updated ? [2] : [])]) if ((c.held.get(rank)?.length ?? 0) > 0) step(c.work(rank, u))
      step(frame(c.s, 2, u, { _tag: "Heartbeat" }))
      step(tick(c.s, u))
    }
    expect(c.s.summaries.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([[0, 60, 0, 0]])
    expect(assigned.every((a) => a.afterUpdate)).toBe(true)
    expect(c.s.leaves).toEqual([])
  })

  it("takes nothing back while the pool has chunks to hand out, without an idle rank to take them, or with the option off", () => {
    // Chunks left: rank 2 is silent but the others still draw from the pool.
    const busy = cohort({ epochSamples: 600 })
    frame(busy.s, 2, 10, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 5 })
    trainUntil(busy, 0, () => busy.s.clockMs >= 1000)
    expect(busy.s.counters.takeBacks).toBe(0)
    // Every rank holds chunks: no idle rank could take the work.
    const quiet = cohort()
    for (const t of [300, 600, 900]) quiet.take(tick(quiet.s, t))
    expect(quiet.s.counters.takeBacks).toBe(0)
    // Off.
    const off = cohort({ roundSilenceMs: 0 })
    frame(off.s, 2, 10, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 5 })
    trainUntil(off, 0, () => off.s.clockMs >= 3000)
    expect([off.s.counters.takeBacks, off.s.epoch]).toEqual([0, 0])
  })

  it("counts the chunks the rank had reported done as redone, and a round it contributed to before stays committed", () => {
    const c = cohort({ chunksInflightMax: 2 })
    // Rank 2 trains its first chunk and says so, then falls silent before its contribution.
    const [offset, size] = c.held.get(2)!.shift()!
    c.take(frame(c.s, 2, 10, { _tag: "ChunkDone", epoch: 0, offset, size }))
    trainUntil(c, 0, () => c.s.epoch > 0)
    expect(c.s.summaries.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([[0, 60, 0, 0]])
    expect(c.s.counters.samplesRedoneAfterTakeBack).toBe(size)
    expect(c.s.leaves).toEqual([])
  })

  it("after a rank taken back turned out alive, a rank is taken back only once silent for more than twice that rank's silence", () => {
    const c = cohort({ epochSamples: 60 })
    c.s.takeBackMistakeMs = 1000
    frame(c.s, 2, 10, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 5 })
    trainUntil(c, 0, () => c.s.clockMs >= 1900)
    expect(c.s.counters.takeBacks).toBe(0)
    trainUntil(c, c.s.clockMs, () => c.s.counters.takeBacks > 0)
    expect(c.s.clockMs).toBeGreaterThan(2000)
  })
})
