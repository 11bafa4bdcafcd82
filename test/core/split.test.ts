import { describe, expect, it } from "vitest"
import * as Membership from "../../src/core/membership.ts"
import * as Split from "../../src/core/split.ts"

describe("splits (docs/design.md §3.4)", () => {
  it("100 samples over 7 ranks gives 15,15,14,14,14,14,14", () => {
    expect([0, 1, 2, 3, 4, 5, 6].map((i) => Split.equalPart(100, 7, i))).toEqual([
      [0, 15],
      [15, 15],
      [30, 14],
      [44, 14],
      [58, 14],
      [72, 14],
      [86, 14]
    ])
  })

  it("ratios [1, 3] over 12 give 3 and 9; leftovers go to the largest fractions, ties to the lower index", () => {
    expect(Split.proportionalSizes(12, [1, 3])).toEqual([3, 9])
    expect(Split.proportionalSizes(10, [1, 1, 1])).toEqual([4, 3, 3])
    expect(Split.proportionalSizes(7, [0, 2, 1])).toEqual([0, 5, 2])
  })

  it("an equal split of a small range visits only the first R survivors, skipping dead ones", () => {
    const m = Membership.make(10)
    Membership.declareDead(m, 0)
    Membership.declareDead(m, 2)
    const slices = Split.toArray(Split.splitEqual(100, 3, m.activeCount, 10, (from) => Membership.nextLive(m, from)))
    expect(slices).toEqual([
      { rank: 1, offset: 100, size: 1 },
      { rank: 3, offset: 101, size: 1 },
      { rank: 4, offset: 102, size: 1 }
    ])
  })

  it("an equal split of a large range gives every survivor a slice, the first ones one more", () => {
    const m = Membership.make(4)
    Membership.declareDead(m, 2)
    expect(Split.toArray(Split.splitEqual(596, 154, 3, 4, (from) => Membership.nextLive(m, from)))).toEqual([
      { rank: 0, offset: 596, size: 52 },
      { rank: 1, offset: 648, size: 51 },
      { rank: 3, offset: 699, size: 51 }
    ])
  })

  it("a remainder's ranges laid end to end: each survivor's equal part may span ranges; one range splits as splitEqual does", () => {
    const m = Membership.make(5)
    Membership.declareDead(m, 1)
    const next = (from: number) => Membership.nextLive(m, from)
    expect(
      Split.toArray(
        Split.spreadEqual(
          [
            [0, 5],
            [40, 2],
            [90, 3]
          ],
          4,
          5,
          next
        )
      )
    ).toEqual([
      // 10 samples over 4 survivors: 3, 3, 2, 2.
      { rank: 0, offset: 0, size: 3 },
      { rank: 2, offset: 3, size: 2 },
      { rank: 2, offset: 40, size: 1 },
      { rank: 3, offset: 41, size: 1 },
      { rank: 3, offset: 90, size: 1 },
      { rank: 4, offset: 91, size: 2 }
    ])
    for (const [offset, size] of [
      [100, 3],
      [596, 154],
      [7, 0]
    ] as const) {
      expect(Split.toArray(Split.spreadEqual([[offset, size]], 4, 5, next))).toEqual(
        Split.toArray(Split.splitEqual(offset, size, 4, 5, next))
      )
    }
  })

  it("a throughput split is proportional and contiguous in rank order", () => {
    expect(Split.toArray(Split.splitProportional(50, 10, [1, 4, 6], [1, 3, 1]))).toEqual([
      { rank: 1, offset: 50, size: 2 },
      { rank: 4, offset: 52, size: 6 },
      { rank: 6, offset: 58, size: 2 }
    ])
  })

  it("concat keeps the slices of several ranges in order, and returns a lone part as it is", () => {
    const a = Split.splitEqual(0, 5, 2, 2, (from) => from)
    const b = Split.splitEqual(40, 1, 2, 2, (from) => from)
    expect(Split.toArray(Split.concat([a, b]))).toEqual([
      { rank: 0, offset: 0, size: 3 },
      { rank: 1, offset: 3, size: 2 },
      { rank: 0, offset: 40, size: 1 }
    ])
    expect(Split.concat([a])).toBe(a)
  })
})

describe("membership", () => {
  it("skips dead and exited ranks in ascending order and keeps counts", () => {
    const m = Membership.make(6)
    expect(Membership.declareDead(m, 1)).toBe(true)
    expect(Membership.declareDead(m, 1)).toBe(false)
    expect(Membership.markExited(m, 2)).toBe(true)
    expect(Membership.markExited(m, 1)).toBe(false)
    expect(Membership.declareDead(m, 9)).toBe(false)
    expect(Membership.survivors(m)).toEqual([0, 3, 4, 5])
    expect(Membership.nextLive(m, 1)).toBe(3)
    expect([m.activeCount, m.failures, m.exits]).toEqual([4, 1, 1])
    expect(Membership.deadRanks(m)).toEqual([1])
    for (const r of [0, 3, 4, 5]) Membership.declareDead(m, r)
    expect(Membership.lowestLive(m)).toBeUndefined()
  })
})
