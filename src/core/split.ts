/**
 * Splitting sample ranges over ranks: epoch partitions (equal or by ratios) and the redistribution
 * of a dead rank's remainder (equal or by throughput) (DESIGN.md §3.4; issue 3 item 3).
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"

/**
 * The `index`-th of `count` equal parts of `total` samples: each gets `floor(total / count)` and
 * the first `total mod count` get one more (100 over 7 gives 15,15,14,14,14,14,14). O(1).
 *
 * @returns `[offset, size]` relative to the start of the split range
 * @since 0.1.0
 * @category partitions
 */
export const equalPart = (total: number, count: number, index: number): readonly [offset: number, size: number] => {
  const quotient = Math.floor(total / count)
  const extra = total % count
  return [index * quotient + Math.min(index, extra), quotient + (index < extra ? 1 : 0)]
}

/**
 * Sizes proportional to `weights` (non-negative, finite, not all zero) that sum to `total`:
 * floors first, then the leftover samples one each to the largest fractional parts, ties to the
 * lower index ("largest remainder"). Ratios [1, 3] over 12 give [3, 9]. O(n log n).
 *
 * @since 0.1.0
 * @category partitions
 */
export const proportionalSizes = (total: number, weights: ReadonlyArray<number>): Array<number> => {
  const sum = weights.reduce((a, b) => a + b, 0)
  const sizes = weights.map((w) => Math.floor((total * w) / sum))
  let leftover = total - sizes.reduce((a, b) => a + b, 0)
  if (leftover > 0) {
    const order = weights
      .map((w, i) => ({ i, fraction: (total * w) / sum - sizes[i]! }))
      .sort((a, b) => b.fraction - a.fraction || a.i - b.i)
    for (let k = 0; leftover > 0; k = (k + 1) % order.length, leftover--) sizes[order[k]!.i]! += 1
  }
  return sizes
}

/**
 * One slice of a split remainder range: `size` samples at `offset` for `rank`.
 *
 * @since 0.1.0
 * @category redistribution
 */
export interface Slice {
  readonly rank: Rank
  readonly offset: number
  readonly size: number
}

/**
 * Splits `[offset, offset + size)` equally over survivors in ascending order, visiting only the
 * first `min(size, survivorCount)` of them (slices of 0 are not produced). `nextSurvivor(from)`
 * returns the lowest survivor `>= from` (or a value `>= worldSize`). O(min(R, S) + skipped).
 *
 * @since 0.1.0
 * @category redistribution
 */
export const splitEqual = (
  offset: number,
  size: number,
  survivorCount: number,
  worldSize: number,
  nextSurvivor: (from: number) => number
): Array<Slice> => {
  const slices: Array<Slice> = []
  if (size <= 0 || survivorCount <= 0) return slices
  const visit = Math.min(size, survivorCount)
  let cursor = offset
  let rank = nextSurvivor(0)
  for (let i = 0; i < visit && rank < worldSize; i++) {
    const [, part] = equalPart(size, survivorCount, i)
    slices.push({ rank, offset: cursor, size: part })
    cursor += part
    rank = nextSurvivor(rank + 1)
  }
  return slices
}

/**
 * Splits `[offset, offset + size)` over `ranks` (ascending) in proportion to `throughputs`
 * (batches per millisecond, positive), contiguous in rank order, largest-remainder rounding with
 * ties to the lower rank; zero-size slices are dropped. O(S log S).
 *
 * @since 0.1.0
 * @category redistribution
 */
export const splitProportional = (
  offset: number,
  size: number,
  ranks: ReadonlyArray<Rank>,
  throughputs: ReadonlyArray<number>
): Array<Slice> => {
  const sizes = proportionalSizes(size, throughputs)
  const slices: Array<Slice> = []
  let cursor = offset
  ranks.forEach((rank, i) => {
    const part = sizes[i]!
    if (part > 0) slices.push({ rank, offset: cursor, size: part })
    cursor += part
  })
  return slices
}
