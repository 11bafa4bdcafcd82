import { describe, expect, it } from "vitest"
import type * as Config from "../../src/core/config.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import { frame, heartbeat, make, params, ranges, tick } from "./harness.ts"

const averageRounds = (cmds: ReadonlyArray<Coordinator.Command>) => cmds.filter((c) => c._tag === "AverageRound")

describe("roundSilenceMs (cpu): the open round does not wait on a rank silent past the bound, and never declares it", () => {
  const threeRanks = (options: Partial<Config.Options> = {}) => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 10_000, roundSilenceMs: 300, ...options })
    Coordinator.start(s, 0)
    return s
  }

  it("refuses a negative or non-finite bound, and the ring backend", () => {
    for (const roundSilenceMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const made = Coordinator.make({ worldSize: 2, epochSamples: 2, epochs: 1, roundSilenceMs }, 0)
      expect("_tag" in made && [made.option, made.reason]).toEqual([
        "roundSilenceMs",
        `must be a number of ms >= 0 (0: off), got ${roundSilenceMs}`
      ])
    }
    const ring = Coordinator.make({ worldSize: 2, epochSamples: 2, epochs: 1, backend: "ring", roundSilenceMs: 100 }, 0)
    expect("_tag" in ring && ring.option).toBe("roundSilenceMs")
  })

  it("static mode: the round closes once the rank that owes it is silent past the bound; the rank stays live, and its late contribution commits in the next round", () => {
    const s = threeRanks()
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    // Rank 2 sent nothing since the start: 300 ms is not more than the bound.
    expect(averageRounds(tick(s, 300))).toEqual([])
    const closed = averageRounds(tick(s, 301))
    expect(closed.map((c) => c._tag === "AverageRound" && [c.round, c.contributors, c.reason])).toEqual([
      [
        0,
        [0, 1],
        "round 0 closed without 1 rank silent for more than 300 ms (roundSilenceMs 300, or twice the usual round): it folds into the next round"
      ]
    ])
    expect(s.counters.roundsClosedWithoutSilent).toBe(1)
    expect(Coordinator.isLive(s, 2)).toBe(true)
    expect(s.leaves).toEqual([])
    // It comes back: its contribution commits in round 1, which closes with it (the others hold nothing).
    const late = frame(s, 2, 500, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: Float32Array.of(2) })
    expect(averageRounds(late).map((c) => c._tag === "AverageRound" && [c.round, c.contributors])).toEqual([[1, [2]]])
    expect(s.summaries.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[30, 0, 0]])
  })

  it("a rank waiting for the last round's Update is not silent by its own doing: its silence counts from that round's close, and the bound grows to twice the usual round", () => {
    const s = threeRanks({ epochSamples: 60 })
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    heartbeat(s, 250, [2])
    // Rank 2 contributes at 280: round 0 closes then; ranks 0 and 1, quiet since 100, wait for its Update.
    expect(averageRounds(params(s, 2, 280, 10)).length).toBe(1)
    params(s, 2, 300, 20) // round 1 opens
    expect(averageRounds(tick(s, 500))).toEqual([])
    heartbeat(s, 550, [2])
    // The usual round is 280 ms (start to close): a rank is left out once silent for twice that,
    // 560 ms after the close, not 300 ms.
    expect(averageRounds(tick(s, 580))).toEqual([])
    expect(averageRounds(tick(s, 840))).toEqual([])
    expect(averageRounds(tick(s, 841)).map((c) => c._tag === "AverageRound" && [c.round, c.contributors])).toEqual([[1, [2]]])
  })

  it("a rank still sending frames is waited for, however long", () => {
    const s = threeRanks()
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    for (let t = 200; t <= 5000; t += 200) {
      heartbeat(s, t, [2])
      expect(averageRounds(tick(s, t))).toEqual([])
    }
  })

  it("off by default: the round waits for the silent rank until its heartbeat timeout", () => {
    const s = threeRanks({ roundSilenceMs: 0 })
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    expect(averageRounds(tick(s, 5000))).toEqual([])
    expect(averageRounds(tick(s, 10_001)).length).toBe(1)
    expect(s.leaves.map((l) => [l.rank, l.kind])).toEqual([[2, "silent"]])
  })

  it("with blockingSilenceMs: a rank the round leaves out is not declared while others can work; holding the epoch's last chunks it is", () => {
    const s = make({
      worldSize: 3,
      epochSamples: 60,
      epochs: 1,
      mode: "progressive",
      chunkSamples: 5,
      chunksInflightMax: 1,
      heartbeatTimeoutMs: 10_000,
      roundSilenceMs: 200,
      blockingSilenceMs: 500
    })
    const held = new Map<number, Array<readonly [number, number]>>()
    const take = (cmds: ReadonlyArray<Coordinator.Command>) => {
      for (const [to, offset, size] of ranges(s, cmds, "AssignChunk")) held.set(to, [...(held.get(to) ?? []), [offset, size]])
      return cmds
    }
    take(Coordinator.start(s, 0))
    // Rank 2 trained once (it reported work), then went silent holding its chunk.
    frame(s, 2, 10, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 5 })
    const work = (rank: number, nowMs: number) => {
      const [offset, size] = held.get(rank)!.shift()!
      take(frame(s, rank, nowMs, { _tag: "ChunkDone", epoch: 0, offset, size }))
      take(frame(s, rank, nowMs, { _tag: "Params", epoch: 0, round: s.round, samplesDone: 0, params: Float32Array.of(rank) }))
    }
    let t = 100
    // Rounds close without rank 2 once it is silent past 200 ms; nobody is declared while chunks are left.
    while (s.pool !== undefined && (held.get(0)?.length ?? 0) + (held.get(1)?.length ?? 0) > 0 && t < 5000) {
      t += 100
      for (const rank of [0, 1]) if ((held.get(rank)?.length ?? 0) > 0) work(rank, t)
      take(tick(s, t))
      if (t < 500) expect(s.leaves).toEqual([])
    }
    expect(s.counters.roundsClosedWithoutSilent).toBeGreaterThan(0)
    // Only rank 2's chunk is left: it is declared once silent past blockingSilenceMs, as a silent leave.
    for (; s.leaves.length === 0 && t < 5000; t += 100) take(tick(s, t))
    expect(s.leaves.map((l) => [l.rank, l.kind])).toEqual([[2, "silent"]])
    expect(t).toBeLessThan(1000)
  })
})
