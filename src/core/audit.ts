/**
 * The epoch audit: the committed ranges of one epoch, and the proof at its end that their union is
 * exactly `[0, epochSamples)` with no overlap (docs/design.md §3.8).
 *
 * The log records what the commit path reports and checks it independently of how the ranges were
 * planned, so a planning bug shows up as `lost` or `duplicated`, not as a silent pass.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"

/**
 * The committed ranges of one epoch, in commit order: `offsets[i]`, `sizes[i]`, `ranks[i]`.
 *
 * @since 0.1.0
 * @category model
 */
export interface Log {
  readonly epoch: number
  readonly epochSamples: number
  readonly offsets: Array<number>
  readonly sizes: Array<number>
  readonly ranks: Array<Rank>
  committedSamples: number
}

/**
 * The audit's verdict. `samplesCommitted` counts every committed sample (with repeats);
 * `lost` is the number of samples of `[0, epochSamples)` no range covers; `duplicated` the number
 * of samples covered more than once (counting each extra cover), plus anything committed outside
 * the epoch.
 *
 * @since 0.1.0
 * @category model
 */
export interface Result {
  readonly epoch: number
  readonly epochSamples: number
  readonly samplesCommitted: number
  readonly lost: number
  readonly duplicated: number
}

/** An empty log for `epoch`. @since 0.1.0 @category constructors */
export const make = (epoch: number, epochSamples: number): Log => ({
  epoch,
  epochSamples,
  offsets: [],
  sizes: [],
  ranks: [],
  committedSamples: 0
})

/**
 * Records that `rank` committed `[offset, offset + size)`. A range that continues the previous
 * record of the same rank is merged into it. O(1). Zero sizes are ignored.
 *
 * @since 0.1.0
 * @category mutations
 */
export const record = (log: Log, rank: Rank, offset: number, size: number): void => {
  if (size <= 0) return
  log.committedSamples += size
  const last = log.offsets.length - 1
  if (last >= 0 && log.ranks[last] === rank && log.offsets[last]! + log.sizes[last]! === offset) {
    log.sizes[last]! += size
    return
  }
  log.offsets.push(offset)
  log.sizes.push(size)
  log.ranks.push(rank)
}

const sortedOrder = (log: Log): Array<number> => {
  const order = log.offsets.map((_, i) => i)
  order.sort((a, b) => log.offsets[a]! - log.offsets[b]! || log.sizes[a]! - log.sizes[b]!)
  return order
}

/**
 * Checks the log: O(n log n) in the number of recorded ranges.
 *
 * @since 0.1.0
 * @category audit
 */
export const audit = (log: Log): Result => {
  let lost = 0
  let duplicated = 0
  let covered = 0 // every sample below `covered` is covered at least once
  for (const i of sortedOrder(log)) {
    const start = log.offsets[i]!
    const end = start + log.sizes[i]!
    const clippedStart = Math.max(0, start)
    const clippedEnd = Math.min(log.epochSamples, end)
    duplicated += Math.max(0, end - start - Math.max(0, clippedEnd - clippedStart)) // outside the epoch
    if (clippedEnd <= clippedStart) continue
    if (clippedStart > covered) lost += clippedStart - covered
    duplicated += Math.max(0, Math.min(covered, clippedEnd) - clippedStart)
    covered = Math.max(covered, clippedEnd)
  }
  lost += Math.max(0, log.epochSamples - covered)
  return { epoch: log.epoch, epochSamples: log.epochSamples, samplesCommitted: log.committedSamples, lost, duplicated }
}

/**
 * The sub-ranges of `[0, epochSamples)` no committed range covers, ascending and merged:
 * `[offset, size]` pairs. O(n log n).
 *
 * @since 0.1.0
 * @category audit
 */
export const uncommitted = (log: Log): Array<readonly [offset: number, size: number]> => {
  const gaps: Array<readonly [number, number]> = []
  let covered = 0
  for (const i of sortedOrder(log)) {
    const start = Math.max(0, log.offsets[i]!)
    const end = Math.min(log.epochSamples, log.offsets[i]! + log.sizes[i]!)
    if (end <= start) continue
    if (start > covered) gaps.push([covered, start - covered])
    covered = Math.max(covered, end)
  }
  if (covered < log.epochSamples) gaps.push([covered, log.epochSamples - covered])
  return gaps
}

/**
 * The sub-ranges of `[0, epochSamples)` that none of `ranges` covers, ascending and merged
 * (`[offset, size]` pairs; `ranges` in any order, overlapping or reaching outside the epoch).
 * Twice applied, it sorts, clips and merges `ranges`. O(n log n).
 *
 * @since 0.1.0
 * @category audit
 */
export const complement = (
  ranges: ReadonlyArray<readonly [offset: number, size: number]>,
  epochSamples: number
): Array<readonly [offset: number, size: number]> => {
  const log = make(0, epochSamples)
  for (const [offset, size] of ranges) record(log, 0, offset, size)
  return uncommitted(log)
}
