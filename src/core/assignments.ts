/**
 * Static-mode assignments of one epoch: each rank's ordered list of ranges (its partition, then
 * each extension in the order sent), its committed position in that list, and the remainder that
 * a death hands to the survivors (DESIGN.md §3.3).
 *
 * Fixes floDl gap 7.2.7: extensions are part of the list, so a survivor that received slices and
 * then dies hands them on too, and the remainder is one range per list entry.
 *
 * Memory: the partition is derived from the rank's index in the epoch's plan (equal split) or
 * read from per-rank arrays (ratio plans); only extensions are stored sparsely.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"
import * as Split from "./split.ts"

/**
 * - `planIndex[r]`: `r`'s position among the epoch's planned ranks, or `-1` (no partition).
 * - `committed[r]`: samples of `r`'s list committed so far.
 * - `extensions`: flat `[offset, size, offset, size, ...]` per rank that received any, with their total.
 *
 * @since 0.1.0
 * @category model
 */
export interface Assignments {
  readonly epoch: number
  readonly epochSamples: number
  readonly planCount: number
  readonly planIndex: Int32Array
  readonly ratioOffsets: Float64Array | undefined
  readonly ratioSizes: Float64Array | undefined
  readonly committed: Float64Array
  readonly extensions: Map<Rank, { readonly ranges: Array<number>; total: number }>
  committedTotal: number
}

/**
 * Plans `epoch`: the `planned` ranks (ascending) split `[0, epochSamples)` equally, or in
 * proportion to `ratios[rank]` when given. O(worldSize).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  epoch: number,
  epochSamples: number,
  worldSize: number,
  planned: ReadonlyArray<Rank>,
  ratios: ReadonlyArray<number> | undefined
): Assignments => {
  const planIndex = new Int32Array(worldSize).fill(-1)
  planned.forEach((rank, i) => {
    planIndex[rank] = i
  })
  let ratioOffsets: Float64Array | undefined
  let ratioSizes: Float64Array | undefined
  const weights = ratios === undefined ? undefined : planned.map((r) => ratios[r]!)
  if (weights !== undefined && weights.some((w) => w > 0)) {
    ratioOffsets = new Float64Array(worldSize)
    ratioSizes = new Float64Array(worldSize)
    const sizes = Split.proportionalSizes(epochSamples, weights)
    let offset = 0
    planned.forEach((rank, i) => {
      ratioOffsets![rank] = offset
      ratioSizes![rank] = sizes[i]!
      offset += sizes[i]!
    })
  }
  return {
    epoch,
    epochSamples,
    planCount: planned.length,
    planIndex,
    ratioOffsets,
    ratioSizes,
    committed: new Float64Array(worldSize),
    extensions: new Map(),
    committedTotal: 0
  }
}

/** `rank`'s partition `[offset, size]` (size 0 when it has none). O(1). @since 0.1.0 @category queries */
export const partition = (a: Assignments, rank: Rank): readonly [offset: number, size: number] => {
  const index = a.planIndex[rank]!
  if (index < 0) return [0, 0]
  if (a.ratioOffsets !== undefined) return [a.ratioOffsets[rank]!, a.ratioSizes![rank]!]
  return Split.equalPart(a.epochSamples, a.planCount, index)
}

/** Samples in `rank`'s whole list. O(1). @since 0.1.0 @category queries */
export const assignedLength = (a: Assignments, rank: Rank): number =>
  partition(a, rank)[1] + (a.extensions.get(rank)?.total ?? 0)

/** True when `rank` has assigned samples not yet committed. O(1). @since 0.1.0 @category queries */
export const hasUncommitted = (a: Assignments, rank: Rank): boolean => a.committed[rank]! < assignedLength(a, rank)

/**
 * Calls `f(offset, size)` for each entry of `rank`'s list, partition first, in order; stops when
 * `f` returns false. O(entries).
 *
 * @since 0.1.0
 * @category queries
 */
export const forEachEntry = (a: Assignments, rank: Rank, f: (offset: number, size: number) => boolean | void): void => {
  const [offset, size] = partition(a, rank)
  if (size > 0 && f(offset, size) === false) return
  const ext = a.extensions.get(rank)
  if (ext === undefined) return
  for (let i = 0; i < ext.ranges.length; i += 2) if (f(ext.ranges[i]!, ext.ranges[i + 1]!) === false) return
}

/** Appends `[offset, offset + size)` to `rank`'s list. O(1). @since 0.1.0 @category mutations */
export const extend = (a: Assignments, rank: Rank, offset: number, size: number): void => {
  let ext = a.extensions.get(rank)
  if (ext === undefined) {
    ext = { ranges: [], total: 0 }
    a.extensions.set(rank, ext)
  }
  ext.ranges.push(offset, size)
  ext.total += size
}

/**
 * Maps the list positions `[from, to)` of `rank` to ranges of the permutation, one per entry
 * touched, calling `f(offset, size)`. O(entries).
 *
 * @since 0.1.0
 * @category queries
 */
export const rangesBetween = (a: Assignments, rank: Rank, from: number, to: number, f: (offset: number, size: number) => void): void => {
  let position = 0
  forEachEntry(a, rank, (offset, size) => {
    const start = Math.max(from, position)
    const end = Math.min(to, position + size)
    if (end > start) f(offset + (start - position), end - start)
    position += size
    return position < to
  })
}

/**
 * The outcome of a commit: how far the rank's committed position moved, and whether the reported
 * `samplesDone` exceeded the list and was clamped.
 *
 * @since 0.1.0
 * @category model
 */
export interface Commit {
  readonly committedBefore: number
  readonly committedAfter: number
  readonly clamped: boolean
}

/**
 * Commits `rank`'s list up to `samplesDone` (clamped to the list's length; a lower value never
 * moves the position back), calling `onRange(offset, size)` for each newly committed range.
 * O(entries).
 *
 * @since 0.1.0
 * @category mutations
 */
export const commit = (a: Assignments, rank: Rank, samplesDone: number, onRange: (offset: number, size: number) => void): Commit => {
  const length = assignedLength(a, rank)
  const target = Math.min(samplesDone, length)
  const before = a.committed[rank]!
  if (target > before) {
    rangesBetween(a, rank, before, target, onRange)
    a.committed[rank] = target
    a.committedTotal += target - before
  }
  return { committedBefore: before, committedAfter: Math.max(before, target), clamped: samplesDone > length }
}

/**
 * `rank`'s remainder: every assigned sample after its committed position, one range per list
 * entry (adjacent entries are not merged). O(entries).
 *
 * @since 0.1.0
 * @category queries
 */
export const remainder = (a: Assignments, rank: Rank): Array<readonly [offset: number, size: number]> => {
  const out: Array<readonly [number, number]> = []
  rangesBetween(a, rank, a.committed[rank]!, Number.POSITIVE_INFINITY, (offset, size) => out.push([offset, size]))
  return out
}
