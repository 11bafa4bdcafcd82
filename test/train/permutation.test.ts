import { describe, expect, it } from "vitest"
import * as Permutation from "../../src/train/permutation.ts"

describe("seeded epoch permutation", () => {
  it("is a permutation, fixed by (seed, epoch), and differs between epochs", () => {
    const a = Permutation.permutation(7, 0, 1000)
    expect([...a].sort((x, y) => x - y)).toEqual([...Array(1000).keys()])
    expect(Permutation.permutation(7, 0, 1000)).toEqual(a)
    expect(Permutation.permutation(7, 1, 1000)).not.toEqual(a)
    expect(Permutation.permutation(8, 0, 1000)).not.toEqual(a)
  })

  it("gives the same order on every runtime (golden values)", () => {
    expect([...Permutation.permutation(42, 3, 12)]).toEqual(GOLDEN)
    expect(Permutation.epochSeed(42, 3)).toBe(GOLDEN_SEED)
  })

  it("handles the empty and single-sample epochs", () => {
    expect(Permutation.permutation(1, 0, 0)).toEqual(new Uint32Array(0))
    expect(Permutation.permutation(1, 0, 1)).toEqual(new Uint32Array([0]))
  })

  it("shares one array per (seed, epoch, samples) while it is held, equal to the permutation", () => {
    const a = Permutation.sharedPermutation(7, 0, 1000)
    expect(a).toEqual(Permutation.permutation(7, 0, 1000))
    expect(Permutation.sharedPermutation(7, 0, 1000)).toBe(a)
    expect(Permutation.sharedPermutation(7, 1, 1000)).toEqual(Permutation.permutation(7, 1, 1000))
    expect(Permutation.sharedPermutation(7, 0, 999)).not.toBe(a)
    // Past the few remembered, an older one is computed again, the same values.
    for (let epoch = 2; epoch < 8; epoch++) Permutation.sharedPermutation(7, epoch, 1000)
    const again = Permutation.sharedPermutation(7, 0, 1000)
    expect(again).not.toBe(a)
    expect(again).toEqual(a)
  })
})

const GOLDEN: ReadonlyArray<number> = [11, 0, 8, 7, 6, 9, 5, 4, 2, 3, 10, 1]
const GOLDEN_SEED = -1099567350
