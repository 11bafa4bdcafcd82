import { describe, expect, it } from "vitest"
import * as Audit from "../../src/core/audit.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import { frame, make, ranges, tags, tick } from "./harness.ts"

const contribution = (state: Coordinator.State, rank: number, nowMs: number, samplesDone: number, values: ReadonlyArray<number>) =>
  frame(state, rank, nowMs, { _tag: "Params", epoch: state.epoch, round: state.round, samplesDone, params: new Float32Array(values) })

describe("rank-claimed fields are checked against what the run agreed (issue: one rank never takes down the run)", () => {
  it("a parameter count agreed at start: a hostile first Params with 1 value is left out, the honest ones are averaged", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 2 })
    Coordinator.start(s, 0, { paramsLength: 2 })
    expect(tags(contribution(s, 0, 10, 10, [9]))).toEqual(["Alert:BadParams"])
    contribution(s, 1, 11, 10, [1, 2])
    const cmds = contribution(s, 2, 12, 10, [3, 4])
    const round = cmds.find((c) => c._tag === "AverageRound")
    expect(round?._tag === "AverageRound" ? round.params.map((p) => [...p]) : undefined).toEqual([
      [1, 2],
      [3, 4]
    ])
    expect(s.counters.paramsRejected).toBe(1)
    // The next round: the honest counts are still the run's.
    contribution(s, 0, 20, 10, [5, 6])
    expect(s.counters.paramsRejected).toBe(1)
  })

  it("samplesDone 2^40 commits no more than the rank's own partition, and says so", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1 })
    Coordinator.start(s, 0, { paramsLength: 1 })
    const cmds = contribution(s, 1, 10, 2 ** 40, [1])
    expect(tags(cmds)).toEqual(["Alert:Overflow"])
    expect(s.counters.samplesDoneClamped).toBe(1)
    // Rank 1's partition is [10, 20): exactly those 10 samples are committed, nobody else's.
    expect(Coordinator.assignment(s, 1)).toEqual([[10, 10]])
    expect(s.log.committedSamples).toBe(10)
    expect(Audit.uncommitted(s.log)).toEqual([
      [0, 10],
      [20, 10]
    ])
  })
})

describe("outlier contributions (docs/edge-averaging.md)", () => {
  it("the round names each contribution's rank; an Outlier alerts on the rank's path, and outlierRoundsMax declares it in the same step with its samples still committed", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 2, aggregate: "median", outlierRoundsMax: 2 })
    Coordinator.start(s, 0, { paramsLength: 1 })
    contribution(s, 2, 10, 5, [9e9])
    contribution(s, 0, 11, 5, [1])
    const round = contribution(s, 1, 12, 5, [2]).find((c) => c._tag === "AverageRound")
    expect(round?._tag === "AverageRound" ? round.paramRanks : undefined).toEqual([2, 0, 1])
    const first = Coordinator.step(s, { _tag: "Outlier", rank: 2, nowMs: 13, round: 0, detail: "far" })
    expect(first.map((c) => (c._tag === "Alert" ? [c.alert.class, c.alert.path, c.alert.detail] : c._tag))).toEqual([
      ["OutlierParams", "root/rank2", "rank 2's parameters for round 0 far outside the others': far"]
    ])
    expect(tags(tick(s, 14))).toEqual([])
    const declared = Coordinator.step(s, { _tag: "Outlier", rank: 2, nowMs: 20, round: 1, detail: "far" })
    expect(tags(declared)).toContain("Alert:RankLost")
    expect(tags(tick(s, 21))).toEqual([])
    expect(s.deaths.map((d) => [d.rank, d.cause])).toEqual([[2, "refused: its parameters were outliers in 2 rounds (outlierRoundsMax 2)"]])
    expect(s.counters.outlierContributions).toBe(2)
    // Its first 5 samples were committed by its contribution; the rest of its partition moved on.
    expect(s.log.committedSamples).toBe(15)
    expect(ranges(s, declared, "ExtendPartition")).toEqual([
      [0, 25, 3],
      [1, 28, 2]
    ])
    // A dead rank's later outliers change nothing.
    expect(Coordinator.step(s, { _tag: "Outlier", rank: 2, nowMs: 22, round: 1, detail: "far" })).toEqual([])
  })

  it("with no tick between the condemning round and the run's last one, the rank is still declared and every sample committed once", () => {
    // A run of short rounds can end before the next tick: the verdict must not wait for one.
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, aggregate: "median", outlierRoundsMax: 1 })
    Coordinator.start(s, 0, { paramsLength: 1 })
    contribution(s, 2, 1, 5, [9e9])
    contribution(s, 0, 2, 5, [1])
    contribution(s, 1, 3, 5, [2])
    const declared = Coordinator.step(s, { _tag: "Outlier", rank: 2, nowMs: 4, round: 0, detail: "far" })
    expect(tags(declared)).toContain("Alert:RankLost")
    expect(s.deaths.map((d) => [d.rank, d.cause, d.afterEnd])).toEqual([
      [2, "refused: its parameters were outliers in 1 rounds (outlierRoundsMax 1)", false]
    ])
    // Rank 2's remainder [25, 30) went to the survivors, who finish the epoch without a single tick.
    expect(ranges(s, declared, "ExtendPartition")).toEqual([
      [0, 25, 3],
      [1, 28, 2]
    ])
    contribution(s, 0, 5, 13, [1])
    const last = contribution(s, 1, 6, 12, [2])
    expect(last.some((c) => c._tag === "RunEnded")).toBe(true)
    expect(s.phase).toBe("completed")
    expect(Audit.audit(s.log)).toMatchObject({ samplesCommitted: 30, lost: 0, duplicated: 0 })
  })
})
