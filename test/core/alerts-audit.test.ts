import { describe, expect, it } from "vitest"
import * as Alerts from "../../src/core/alerts.ts"
import * as Audit from "../../src/core/audit.ts"

describe("alert lane (docs/design.md §3.9)", () => {
  it("folds repeats within the window and emits them with the next occurrence after it; counts stay exact", () => {
    const lane = Alerts.make(10_000)
    const emitted = [0, 1_000, 2_000, 9_999, 10_000, 15_000, 30_000]
      .map((t) => Alerts.raise(lane, t, "ControlDrop", "root/rank1", `at ${t}`))
      .map((a) => a && [a.ts, a.count])
    // 10000 is exactly one window after the emission at 0: emitted, carrying the 3 folded repeats.
    expect(emitted).toEqual([[0, 1], undefined, undefined, undefined, [10_000, 4], undefined, [30_000, 2]])
    expect(Alerts.raise(lane, 30_001, "ControlDrop", "root/rank2", "x")?.count).toBe(1) // another path
    Alerts.raise(lane, 30_002, "ControlDrop", "root/rank1", "y")
    expect(Alerts.flush(lane, 31_000).map((a) => [a.path, a.count, a.severity])).toEqual([["root/rank1", 1, "critical"]])
    expect(Alerts.flush(lane, 31_000)).toEqual([])
  })

  it("names paths root, root/rank{r}, or root/{host}/rank{r} across hosts", () => {
    expect(Alerts.rankPath(0, 1, undefined, false)).toBe("root")
    expect(Alerts.rankPath(3, 4, undefined, false)).toBe("root/rank3")
    expect(Alerts.rankPath(3, 4, ["a", "a", "b", "b"], true)).toBe("root/b/rank3")
  })
})

describe("epoch audit (docs/design.md §3.8)", () => {
  it("passes an exact tiling and merges contiguous commits of one rank", () => {
    const log = Audit.make(0, 30)
    Audit.record(log, 0, 0, 5)
    Audit.record(log, 0, 5, 5)
    Audit.record(log, 1, 20, 10)
    Audit.record(log, 2, 10, 10)
    expect(log.offsets).toEqual([0, 20, 10])
    expect(Audit.audit(log)).toEqual({ epoch: 0, epochSamples: 30, samplesCommitted: 30, lost: 0, duplicated: 0 })
    expect(Audit.uncommitted(log)).toEqual([])
  })

  it("reports lost and duplicated samples, including anything outside the epoch", () => {
    const log = Audit.make(1, 30)
    Audit.record(log, 0, 0, 10)
    Audit.record(log, 1, 5, 10) // 5 duplicated
    Audit.record(log, 2, 25, 10) // 5 outside the epoch
    expect(Audit.audit(log)).toEqual({ epoch: 1, epochSamples: 30, samplesCommitted: 30, lost: 10, duplicated: 10 })
    expect(Audit.uncommitted(log)).toEqual([[15, 10]])
  })
})
