/**
 * Static-mode assignments of one epoch: each rank's ordered list of ranges (its partition, then
 * each extension in the order sent), how much of it is still uncommitted, and the remainder that a
 * death hands to the survivors (docs/design.md §3.3).
 *
 * Extensions are part of the list (floDl 0.7, where these rules started, left them out and lost
 * them), so a survivor that received slices and then dies hands them on too, and the remainder is
 * one range per list entry.
 *
 * Memory: 16 bytes per rank. The partition is derived from the rank's index in the epoch's plan
 * (equal split) or read from per-rank arrays (ratio plans only); extensions live in one growable
 * typed table shared by all ranks (20 bytes per extension), linked newest first per rank.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"
import * as Split from "./split.ts"

const NONE = -1

/**
 * - `planIndex[r]`: `r`'s position among the epoch's planned ranks, or `-1` (no partition).
 * - `uncommitted[r]`: samples of `r`'s list not yet committed.
 * - `extHead[r]`: newest extension of `r` in the extension table, or `-1`.
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
  readonly uncommitted: Float64Array
  readonly extHead: Int32Array
  extOffset: Float64Array
  extSize: Float64Array
  extNext: Int32Array
  extCount: number
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
  const planIndex = new Int32Array(worldSize).fill(NONE)
  const uncommitted = new Float64Array(worldSize)
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
  const a: Assignments = {
    epoch,
    epochSamples,
    planCount: planned.length,
    planIndex,
    ratioOffsets,
    ratioSizes,
    uncommitted,
    extHead: new Int32Array(worldSize).fill(NONE),
    extOffset: new Float64Array(64),
    extSize: new Float64Array(64),
    extNext: new Int32Array(64),
    extCount: 0,
    committedTotal: 0
  }
  planned.forEach((rank, i) => {
    planIndex[rank] = i
    uncommitted[rank] = partition(a, rank)[1]
  })
  return a
}

/** `rank`'s partition `[offset, size]` (size 0 when it has none). O(1). @since 0.1.0 @category queries */
export const partition = (a: Assignments, rank: Rank): readonly [offset: number, size: number] => {
  const index = a.planIndex[rank]!
  if (index < 0) return [0, 0]
  if (a.ratioOffsets !== undefined) return [a.ratioOffsets[rank]!, a.ratioSizes![rank]!]
  return Split.equalPart(a.epochSamples, a.planCount, index)
}

/** True when `rank` has assigned samples not yet committed. O(1). @since 0.1.0 @category queries */
export const hasUncommitted = (a: Assignments, rank: Rank): boolean => a.uncommitted[rank]! > 0

/**
 * Calls `f(offset, size)` for each entry of `rank`'s list in order, partition first.
 * O(entries).
 *
 * @since 0.1.0
 * @category queries
 */
export const forEachEntry = (a: Assignments, rank: Rank, f: (offset: number, size: number) => void): void => {
  const [offset, size] = partition(a, rank)
  if (size > 0) f(offset, size)
  const newestFirst: Array<number> = []
  for (let e = a.extHead[rank]!; e !== NONE; e = a.extNext[e]!) newestFirst.push(e)
  for (let i = newestFirst.length - 1; i >= 0; i--) f(a.extOffset[newestFirst[i]!]!, a.extSize[newestFirst[i]!]!)
}

/** Samples in `rank`'s whole list. O(entries). @since 0.1.0 @category queries */
export const assignedLength = (a: Assignments, rank: Rank): number => {
  let total = partition(a, rank)[1]
  for (let e = a.extHead[rank]!; e !== NONE; e = a.extNext[e]!) total += a.extSize[e]!
  return total
}

/** Samples of `rank`'s list committed so far. O(entries). @since 0.1.0 @category queries */
export const committed = (a: Assignments, rank: Rank): number => assignedLength(a, rank) - a.uncommitted[rank]!

const grow = (a: Assignments): void => {
  const capacity = a.extOffset.length * 2
  const offsets = new Float64Array(capacity)
  offsets.set(a.extOffset)
  const sizes = new Float64Array(capacity)
  sizes.set(a.extSize)
  const next = new Int32Array(capacity)
  next.set(a.extNext)
  a.extOffset = offsets
  a.extSize = sizes
  a.extNext = next
}

/** Appends `[offset, offset + size)` to `rank`'s list. O(1) amortized. @since 0.1.0 @category mutations */
export const extend = (a: Assignments, rank: Rank, offset: number, size: number): void => {
  if (a.extCount === a.extOffset.length) grow(a)
  const e = a.extCount++
  a.extOffset[e] = offset
  a.extSize[e] = size
  a.extNext[e] = a.extHead[rank]!
  a.extHead[rank] = e
  a.uncommitted[rank]! += size
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
  })
}

/**
 * The outcome of a commit: the committed position before and after, and whether the reported
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
  const before = length - a.uncommitted[rank]!
  const target = Math.min(samplesDone, length)
  if (target > before) {
    rangesBetween(a, rank, before, target, onRange)
    a.uncommitted[rank] = length - target
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
  const length = assignedLength(a, rank)
  rangesBetween(a, rank, length - a.uncommitted[rank]!, length, (offset, size) => out.push([offset, size]))
  return out
}
