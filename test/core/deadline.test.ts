import { describe, expect, it } from "vitest"
import type * as Config from "../../src/core/config.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import { frame, heartbeat, make, params, tags, tick } from "./harness.ts"

const averageRounds = (cmds: ReadonlyArray<Coordinator.Command>) => cmds.filter((c) => c._tag === "AverageRound")

describe("round deadline (cpu backend): a slow rank does not set the pace, and its samples commit when its contribution is folded", () => {
  const threeRanks = (options: Partial<Config.Options> = {}) => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 100_000, roundDeadlineMs: 1000, ...options })
    Coordinator.start(s, 0)
    return s
  }

  it("off by default: a round waits for every survivor holding uncommitted work, however long", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 100_000 })
    Coordinator.start(s, 0)
    params(s, 0, 10, 5)
    params(s, 1, 20, 5)
    expect(averageRounds(tick(s, 50_000))).toEqual([])
    expect([s.round, s.counters.roundsClosedAtDeadline]).toEqual([0, 0])
  })

  it("closes the round at its deadline, from its first contribution, once the quorum contributed; the late rank's contribution folds into the next round and commits there; a rank contributing twice to one round has both folded", () => {
    const s = threeRanks()
    params(s, 0, 10, 5)
    // Quorum: half of 3 survivors, rounded up: 2. One contribution at the deadline is not enough.
    expect(averageRounds(tick(s, 1010))).toEqual([])
    params(s, 1, 1500, 5)
    heartbeat(s, 1500, [2])
    const closed = tick(s, 1600)
    expect(averageRounds(closed)).toEqual([
      {
        _tag: "AverageRound",
        epoch: 0,
        round: 0,
        openedAtMs: 10,
        contributors: [0, 1],
        committed: [
          [0, 5],
          [10, 5]
        ],
        params: [new Float32Array([0]), new Float32Array([1])],
        paramRanks: [0, 1],
        reason:
          "round 0 closed at its deadline (1000 ms): 2 of 3 survivors contributed (quorum 2); the 1 it did not wait for fold into the next round"
      }
    ])
    expect([s.round, s.counters.roundsClosedAtDeadline]).toEqual([1, 1])
    expect([0, 1, 2].map((r) => Coordinator.committedSamples(s, r))).toEqual([5, 5, 0])
    // Rank 2's contribution for round 0 comes late: it commits now, in round 1.
    expect(
      averageRounds(frame(s, 2, 1700, { _tag: "Params", epoch: 0, round: 0, samplesDone: 10, params: new Float32Array([20]) }))
    ).toEqual([])
    expect(Coordinator.committedSamples(s, 2)).toBe(10)
    // Rank 2 got round 0's Update meanwhile and contributes again to round 1: both are folded in.
    expect(
      averageRounds(frame(s, 2, 1800, { _tag: "Params", epoch: 0, round: 1, samplesDone: 10, params: new Float32Array([21]) }))
    ).toEqual([])
    params(s, 0, 1900, 10)
    const ended = params(s, 1, 1950, 10)
    expect(averageRounds(ended)).toMatchObject([
      {
        round: 1,
        contributors: [2, 0, 1],
        params: [new Float32Array([20]), new Float32Array([21]), new Float32Array([0]), new Float32Array([1])],
        paramRanks: [2, 2, 0, 1],
        reason: "round 1 closed: every survivor holding uncommitted work contributed"
      }
    ])
    const summary = ended.find((c) => c._tag === "EpochEnded")
    expect(
      summary?._tag === "EpochEnded" ? [summary.summary.samplesCommitted, summary.summary.lost, summary.summary.duplicated] : undefined
    ).toEqual([30, 0, 0])
    expect(s.counters.roundsClosedAtDeadline).toBe(1)
  })

  it("roundQuorum 1 never closes a round before every survivor contributed; 0.3 of 3 closes it with one", () => {
    const all = threeRanks({ roundQuorum: 1 })
    params(all, 0, 10, 5)
    params(all, 1, 20, 5)
    heartbeat(all, 5000, [2])
    expect(averageRounds(tick(all, 5000))).toEqual([])
    const one = threeRanks({ roundQuorum: 0.3 })
    params(one, 0, 10, 5)
    expect(tags(tick(one, 1010))).toEqual(["AverageRound"])
    expect(one.counters.roundsClosedAtDeadline).toBe(1)
  })

  it("a round with nothing left to wait for closes as before, not at its deadline; a round nobody contributed to has no deadline", () => {
    const s = threeRanks()
    expect(averageRounds(tick(s, 5000))).toEqual([])
    params(s, 0, 5000, 10)
    params(s, 1, 5001, 10)
    expect(averageRounds(params(s, 2, 5002, 10))[0]).toMatchObject({
      reason: "round 0 closed: every survivor holding uncommitted work contributed"
    })
    expect(s.counters.roundsClosedAtDeadline).toBe(0)
  })

  it("refuses a deadline with the ring backend, and a quorum outside (0, 1]", () => {
    expect(Coordinator.make({ worldSize: 2, epochSamples: 10, epochs: 1, backend: "ring", roundDeadlineMs: 100 }, 0)).toEqual({
      _tag: "Invalid",
      option: "roundDeadlineMs",
      reason: "needs the cpu backend: a ring round is one collective of every member"
    })
    expect(Coordinator.make({ worldSize: 2, epochSamples: 10, epochs: 1, roundDeadlineMs: -1 }, 0)).toMatchObject({
      option: "roundDeadlineMs",
      reason: "must be >= 0, got -1"
    })
    for (const roundQuorum of [0, 1.5, Number.NaN]) {
      expect(Coordinator.make({ worldSize: 2, epochSamples: 10, epochs: 1, roundDeadlineMs: 100, roundQuorum }, 0)).toMatchObject({
        option: "roundQuorum"
      })
    }
  })
})
