import { describe, expect, it } from "vitest"
import type * as Config from "../../src/core/config.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import * as Liveness from "../../src/core/liveness.ts"
import { frame, heartbeat, make, params, ranges, tick } from "./harness.ts"

const declared = (s: Coordinator.State) => s.leaves.map((l) => [l.rank, l.kind] as const)

/** A `Progress` frame: the rank reported trained work (only such a rank is declared early). */
const progress = (s: Coordinator.State, rank: number, nowMs: number, samplesDone = 0) =>
  frame(s, rank, nowMs, { _tag: "Progress", epoch: 0, samplesDone, msPerBatch: 5 })

describe("blockingSilenceMs: a silent rank the run waits on is declared before the heartbeat timeout", () => {
  const cpu = (options: Partial<Config.Options> = {}) => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 10_000, blockingSilenceMs: 500, ...options })
    Coordinator.start(s, 0)
    return s
  }

  it("refuses a negative or non-finite bound", () => {
    for (const blockingSilenceMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const made = Coordinator.make({ worldSize: 2, epochSamples: 2, epochs: 1, blockingSilenceMs }, 0)
      expect("_tag" in made && made.option).toBe("blockingSilenceMs")
    }
  })

  it("static mode: the open round waits on a silent rank; it is declared once silent past the bound, as a silent leave, and the round closes", () => {
    const s = cpu()
    progress(s, 2, 0)
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    // Rank 2 sent nothing since its Progress: silent 500 ms is not more than the bound.
    expect(tick(s, 500)).toEqual([])
    expect(s.leaves).toEqual([])
    const cmds = tick(s, 501)
    expect(declared(s)).toEqual([[2, "silent"]])
    expect(s.leaves[0]?.cause).toBe("no frame for 501 ms while the run waited on it (blockingSilenceMs 500)")
    expect(cmds.some((c) => c._tag === "AverageRound")).toBe(true)
  })

  it("off by default: the same round waits for the heartbeat timeout", () => {
    const s = cpu({ blockingSilenceMs: 0 })
    progress(s, 2, 0)
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    tick(s, 5000)
    expect(s.leaves).toEqual([])
    tick(s, 10_001)
    expect(declared(s)).toEqual([[2, "silent"]])
  })

  it("a rank that never reported trained work (a joiner waiting for its model) keeps the heartbeat timeout", () => {
    const s = cpu()
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    tick(s, 5000)
    expect(s.leaves).toEqual([])
  })

  it("a round not open yet waits on nobody: a silent rank keeps the heartbeat timeout", () => {
    const s = cpu()
    progress(s, 2, 0)
    heartbeat(s, 100, [0, 1])
    tick(s, 2000)
    expect(s.leaves).toEqual([])
  })

  it("a rank that contributed and waits for the Update, or holds no work, is never declared early", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 10_000, blockingSilenceMs: 500 })
    Coordinator.start(s, 0)
    params(s, 0, 10, 5) // contributed: the round does not wait on it
    params(s, 1, 2000, 5)
    heartbeat(s, 2000, [2])
    tick(s, 2001)
    expect(s.leaves).toEqual([])
  })

  it("a rank running a save it was asked for is not declared early", () => {
    const s = cpu()
    progress(s, 2, 0)
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    Liveness.hold(s.liveness, 2, "save", 1, 0, 60_000)
    frame(s, 2, 1, { _tag: "Heartbeat" })
    tick(s, 5000)
    expect(s.leaves).toEqual([])
  })

  it("progressive mode: the epoch's last chunks held by a silent rank are taken back once it is silent past the bound, and the audit stays exact", () => {
    const s = make({
      worldSize: 2,
      epochSamples: 20,
      epochs: 1,
      mode: "progressive",
      chunkSamples: 5,
      chunksInflightMax: 2,
      heartbeatTimeoutMs: 10_000,
      blockingSilenceMs: 500
    })
    Coordinator.start(s, 0) // rank 0 (0,5) (5,5), rank 1 (10,5) (15,5)
    progress(s, 1, 0)
    frame(s, 0, 10, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 5 })
    frame(s, 0, 20, { _tag: "ChunkDone", epoch: 0, offset: 5, size: 5 })
    // Nothing left in the pool: rank 0 contributes; the round and the epoch wait on rank 1's chunks.
    params(s, 0, 30, 10)
    tick(s, 400)
    expect(s.leaves).toEqual([])
    const cmds = tick(s, 501)
    expect(declared(s)).toEqual([[1, "silent"]])
    expect(s.leaves[0]?.redoneSamples).toBe(0)
    const held = ranges(s, cmds, "AssignChunk").map(([, offset, size]) => [offset, size] as const)
    expect(held).toEqual([
      [10, 5],
      [15, 5]
    ])
    while (held.length > 0) {
      const [offset, size] = held.shift()!
      for (const [, o, z] of ranges(s, frame(s, 0, 600, { _tag: "ChunkDone", epoch: 0, offset, size }), "AssignChunk")) held.push([o, z])
    }
    const end = params(s, 0, 700, 20)
    const summary = end.find((c) => c._tag === "EpochEnded")
    expect(summary?._tag === "EpochEnded" && [summary.summary.samplesCommitted, summary.summary.lost, summary.summary.duplicated]).toEqual([
      20, 0, 0
    ])
  })

  it("ring: a member silent past the bound holds up the rendezvous, then the open round: each time it is declared, and the ring re-forms without it", () => {
    const s = make({ worldSize: 4, epochSamples: 40, epochs: 1, backend: "ring", heartbeatTimeoutMs: 10_000, blockingSilenceMs: 500 })
    Coordinator.start(s, 0)
    for (const rank of [2, 3]) progress(s, rank, 0)
    for (const rank of [0, 1, 2]) frame(s, rank, 100, { _tag: "RingReady", generation: 0 })
    expect(tick(s, 500)).toEqual([])
    const reformed = tick(s, 501)
    expect(declared(s)).toEqual([[3, "silent"]])
    expect(reformed.some((c) => c._tag === "Send" && c.message._tag === "FormRing" && c.message.generation === 1)).toBe(true)
    for (const rank of [0, 1, 2]) frame(s, rank, 600, { _tag: "RingReady", generation: 1 })
    for (const rank of [0, 1]) frame(s, rank, 700, { _tag: "RoundDone", epoch: 0, round: 0, generation: 1, samplesDone: 10 })
    // Rank 2 went quiet after its RingReady: the open round waits on it.
    expect(tick(s, 1100)).toEqual([])
    tick(s, 1101)
    expect(declared(s)).toEqual([
      [3, "silent"],
      [2, "silent"]
    ])
  })

  it("blockingSilenceQuietMax: with more of the live ranks silent past the bound at once, nobody is declared early; with fewer, the silent one is", () => {
    for (const blockingSilenceQuietMax of [0, 1.5, Number.NaN]) {
      const made = Coordinator.make({ worldSize: 2, epochSamples: 2, epochs: 1, blockingSilenceMs: 500, blockingSilenceQuietMax }, 0)
      expect("_tag" in made && made.option).toBe("blockingSilenceQuietMax")
    }
    const s = make({
      worldSize: 4,
      epochSamples: 40,
      epochs: 1,
      heartbeatTimeoutMs: 10_000,
      blockingSilenceMs: 500,
      blockingSilenceQuietMax: 0.25
    })
    Coordinator.start(s, 0)
    for (const rank of [2, 3]) progress(s, rank, 0)
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    // Ranks 2 and 3 (half the run) went quiet together: a stalled host, not two leaves.
    heartbeat(s, 1900, [0, 1])
    tick(s, 2000)
    expect(s.leaves).toEqual([])
    // Rank 3 is heard from again; rank 2 alone is silent (a quarter of the run): declared.
    progress(s, 3, 2100)
    heartbeat(s, 2100, [0, 1])
    tick(s, 2101)
    expect(declared(s)).toEqual([[2, "silent"]])
  })

  it("blockingSilenceQuietMax counts ranks that fell silent together: ranks that fell silent apart are each declared", () => {
    const s = make({
      worldSize: 4,
      epochSamples: 40,
      epochs: 1,
      heartbeatTimeoutMs: 10_000,
      blockingSilenceMs: 500,
      blockingSilenceQuietMax: 0.25
    })
    Coordinator.start(s, 0)
    progress(s, 2, 0)
    progress(s, 3, 1000)
    params(s, 0, 1100, 10)
    params(s, 1, 1100, 10)
    heartbeat(s, 1500, [0, 1])
    // Rank 2 silent since 0, rank 3 since 1000: a second apart, each alone in its window.
    tick(s, 1501)
    expect(declared(s)).toEqual([
      [2, "silent"],
      [3, "silent"]
    ])
  })

  it("progressive: a joiner that never trained but holds the epoch's last chunks is declared once silent past the bound (the run waits for its chunks; a live joiner beats)", () => {
    const s = make({
      worldSize: 2,
      maxRanks: 3,
      epochSamples: 40,
      epochs: 1,
      mode: "progressive",
      chunkSamples: 5,
      chunksInflightMax: 1,
      heartbeatTimeoutMs: 10_000,
      blockingSilenceMs: 500
    })
    const held = new Map<number, Array<readonly [number, number]>>()
    const take = (cmds: ReadonlyArray<Coordinator.Command>) => {
      for (const [to, offset, size] of ranges(s, cmds, "AssignChunk")) held.set(to, [...(held.get(to) ?? []), [offset, size]])
    }
    take(Coordinator.start(s, 0))
    take(Coordinator.step(s, { _tag: "Join", rank: 2, nowMs: 10 }))
    expect(held.get(2)?.length).toBe(1)
    let t = 10
    while ((held.get(0)?.length ?? 0) + (held.get(1)?.length ?? 0) > 0) {
      t += 20
      for (const rank of [0, 1]) {
        const chunk = held.get(rank)?.shift()
        if (chunk === undefined) continue
        take(frame(s, rank, t, { _tag: "ChunkDone", epoch: 0, offset: chunk[0], size: chunk[1] }))
        take(params(s, rank, t, 0))
      }
    }
    expect(s.leaves).toEqual([])
    heartbeat(s, 500, [0, 1])
    tick(s, 505)
    expect(s.leaves).toEqual([])
    heartbeat(s, 511, [0, 1])
    tick(s, 511)
    expect(declared(s)).toEqual([[2, "silent"]])
  })
})
