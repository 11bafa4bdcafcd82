/**
 * Splitting sample ranges over ranks: epoch partitions (equal or by ratios) and the redistribution
 * of a dead rank's remainder (equal or by throughput) (docs/design.md §3.4).
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
 * Sizes proportional to `weights` that sum to `total` (an equal split when the weights are not all
 * finite and non-negative with a finite, positive sum):
 * floors first, then the leftover samples one each to the largest fractional parts, ties to the
 * lower index ("largest remainder"). Ratios [1, 3] over 12 give [3, 9]. O(n log n).
 *
 * @since 0.1.0
 * @category partitions
 */
export const proportionalSizes = (total: number, weights: ReadonlyArray<number>): Array<number> => {
  const sum = weights.reduce((a, b) => a + b, 0)
  if (!(sum > 0 && Number.isFinite(sum)) || !weights.every((w) => w >= 0 && Number.isFinite(w))) {
    // Unusable weights (a zero or infinite sum): an equal split keeps every sample somewhere.
    return weights.map((_, i) => equalPart(total, weights.length, i)[1])
  }
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
 * The slices of one split range, as parallel typed arrays: slice `i` gives `sizes[i]` samples at
 * `offsets[i]` to `ranks[i]`. Zero-size slices are never produced.
 *
 * @since 0.1.0
 * @category redistribution
 */
export interface Slices {
  readonly ranks: Int32Array
  readonly offsets: Float64Array
  readonly sizes: Float64Array
}

/**
 * Splits `[offset, offset + size)` equally over survivors in ascending order (the first
 * `size mod survivorCount` get one more), visiting only the first `min(size, survivorCount)` of
 * them. `nextSurvivor(from)` returns the lowest survivor `>= from` (or a value `>= worldSize`).
 * O(min(R, S) + skipped), with no allocation per slice.
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
): Slices => {
  const count = size <= 0 || survivorCount <= 0 ? 0 : Math.min(size, survivorCount)
  const ranks = new Int32Array(count)
  const offsets = new Float64Array(count)
  const sizes = new Float64Array(count)
  const quotient = Math.floor(size / survivorCount)
  const extra = size % survivorCount
  let cursor = offset
  let rank = nextSurvivor(0)
  for (let i = 0; i < count && rank < worldSize; i++) {
    const part = quotient + (i < extra ? 1 : 0)
    ranks[i] = rank
    offsets[i] = cursor
    sizes[i] = part
    cursor += part
    rank = nextSurvivor(rank + 1)
  }
  return { ranks, offsets, sizes }
}

/**
 * Splits `[offset, offset + size)` over `ranks` (ascending) in proportion to `throughputs`
 * (batches per millisecond, positive), contiguous in rank order, largest-remainder rounding with
 * ties to the lower rank; zero-size slices are dropped. O(S log S).
 *
 * @since 0.1.0
 * @category redistribution
 */
export const splitProportional = (offset: number, size: number, ranks: ReadonlyArray<Rank>, throughputs: ReadonlyArray<number>): Slices => {
  const parts = proportionalSizes(size, throughputs)
  const count = parts.filter((p) => p > 0).length
  const out = { ranks: new Int32Array(count), offsets: new Float64Array(count), sizes: new Float64Array(count) }
  let cursor = offset
  let i = 0
  ranks.forEach((rank, k) => {
    const part = parts[k]!
    if (part > 0) {
      out.ranks[i] = rank
      out.offsets[i] = cursor
      out.sizes[i] = part
      i += 1
    }
    cursor += part
  })
  return out
}

/**
 * Lays `ranges` end to end and hands them out in order: `takers` gives each rank (in the order
 * given) and how many samples it takes; a rank's share may span several ranges (one slice per
 * range it touches). Shares must sum to at most the ranges' total. O(ranges + takers).
 */
const lay = (
  ranges: ReadonlyArray<readonly [offset: number, size: number]>,
  takers: ReadonlyArray<readonly [rank: Rank, size: number]>
): Slices => {
  const ranks: Array<number> = []
  const offsets: Array<number> = []
  const sizes: Array<number> = []
  let range = 0
  let used = 0 // of ranges[range]
  for (const [rank, share] of takers) {
    let left = share
    while (left > 0 && range < ranges.length) {
      const [offset, size] = ranges[range]!
      const take = Math.min(left, size - used)
      if (take > 0) {
        ranks.push(rank)
        offsets.push(offset + used)
        sizes.push(take)
      }
      left -= take
      used += take
      if (used >= size) {
        range += 1
        used = 0
      }
    }
  }
  return { ranks: Int32Array.from(ranks), offsets: Float64Array.from(offsets), sizes: Float64Array.from(sizes) }
}

/**
 * A remainder of several ranges split equally over survivors in ascending order: the ranges laid
 * end to end, survivor `i` takes the `i`-th equal part of their total (`equalPart`), which may span
 * ranges. So a remainder of k ranges becomes at most k + S - 1 slices, not one per range and
 * survivor: under constant churn the ranks' lists stay short instead of splintering into
 * one-sample ranges. One range gives what `splitEqual` gives. O(ranges + min(total, S) + skipped).
 *
 * @since 0.1.0
 * @category redistribution
 */
export const spreadEqual = (
  ranges: ReadonlyArray<readonly [offset: number, size: number]>,
  survivorCount: number,
  worldSize: number,
  nextSurvivor: (from: number) => number
): Slices => {
  let total = 0
  for (const [, size] of ranges) total += Math.max(0, size)
  const count = total <= 0 || survivorCount <= 0 ? 0 : Math.min(total, survivorCount)
  const takers: Array<readonly [Rank, number]> = []
  let rank = nextSurvivor(0)
  for (let i = 0; i < count && rank < worldSize; i++) {
    takers.push([rank, equalPart(total, survivorCount, i)[1]])
    rank = nextSurvivor(rank + 1)
  }
  return lay(ranges, takers)
}

/**
 * As `spreadEqual`, in proportion to `throughputs` over `ranks` (ascending; `proportionalSizes`
 * of the ranges' total). One range gives what `splitProportional` gives. O(ranges + S log S).
 *
 * @since 0.1.0
 * @category redistribution
 */
export const spreadProportional = (
  ranges: ReadonlyArray<readonly [offset: number, size: number]>,
  ranks: ReadonlyArray<Rank>,
  throughputs: ReadonlyArray<number>
): Slices => {
  let total = 0
  for (const [, size] of ranges) total += Math.max(0, size)
  const parts = proportionalSizes(total, throughputs)
  return lay(
    ranges,
    ranks.map((rank, k) => [rank, parts[k]!] as const)
  )
}

/**
 * The slices of `parts` one after the other, in order: `parts[0]` itself when it is the only one,
 * else one copy of each array. O(total slices), three allocations.
 *
 * @since 0.1.0
 * @category redistribution
 */
export const concat = (parts: ReadonlyArray<Slices>): Slices => {
  if (parts.length === 1) return parts[0]!
  let total = 0
  for (const part of parts) total += part.ranks.length
  const out = { ranks: new Int32Array(total), offsets: new Float64Array(total), sizes: new Float64Array(total) }
  let at = 0
  for (const part of parts) {
    out.ranks.set(part.ranks, at)
    out.offsets.set(part.offsets, at)
    out.sizes.set(part.sizes, at)
    at += part.ranks.length
  }
  return out
}

/** The slices as `{rank, offset, size}` records, for tests and logs. O(slices). @since 0.1.0 @category redistribution */
export const toArray = (slices: Slices): Array<{ readonly rank: Rank; readonly offset: number; readonly size: number }> =>
  Array.from(slices.ranks, (rank, i) => ({ rank, offset: slices.offsets[i]!, size: slices.sizes[i]! }))

/**
 * Collects slices one at a time into growable typed arrays, for senders that do not know the
 * count ahead (chunk fills). `build()` returns views of the filled part. O(1) amortized per push.
 *
 * @since 0.1.0
 * @category redistribution
 */
export class SliceBuilder {
  private ranks = new Int32Array(16)
  private offsets = new Float64Array(16)
  private sizes = new Float64Array(16)
  /** Slices pushed so far. */
  count = 0

  /** Adds one slice. */
  push(rank: Rank, offset: number, size: number): void {
    if (this.count === this.ranks.length) {
      const ranks = new Int32Array(this.count * 2)
      ranks.set(this.ranks)
      const offsets = new Float64Array(this.count * 2)
      offsets.set(this.offsets)
      const sizes = new Float64Array(this.count * 2)
      sizes.set(this.sizes)
      this.ranks = ranks
      this.offsets = offsets
      this.sizes = sizes
    }
    this.ranks[this.count] = rank
    this.offsets[this.count] = offset
    this.sizes[this.count] = size
    this.count += 1
  }

  /** The slices pushed so far. */
  build(): Slices {
    return {
      ranks: this.ranks.subarray(0, this.count),
      offsets: this.offsets.subarray(0, this.count),
      sizes: this.sizes.subarray(0, this.count)
    }
  }
}
