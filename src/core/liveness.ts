/**
 * Liveness: each rank's `lastSeenMs`, kept in a doubly linked list ordered by last sighting, so
 * that a tick looks only at the front of the list (docs/design.md §3.1).
 *
 * All ranks share one timeout, and time never runs backwards inside the core, so moving a rank to
 * the back on each sighting keeps the list sorted by `lastSeenMs`. The staleness scan then costs
 * O(expired ranks + 1), not O(worldSize) as in floDl's full scan.
 *
 * Silence is counted only while the coordinator was running: `pause(l, ms)` stops the liveness
 * clock for a stall of the coordinator itself (docs/design.md §3.10). It adds to `pausedMs`, which
 * shifts every sighting at once, so a pause is O(1) and the list order is unchanged.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"

const NONE = -1
const UNLINKED = -2

/**
 * - `lastSeenMs[r]`: the last frame from `r`, in monotonic milliseconds minus `pausedMs` at the
 *   time (the liveness clock); read it with `lastSeen`.
 * - `pausedMs`: total ms the liveness clock was paused for coordinator stalls.
 * - `prev`/`next`: list links (`-1` at the ends, `-2` once a rank left the list).
 *
 * @since 0.1.0
 * @category model
 */
export interface Liveness {
  readonly lastSeenMs: Float64Array
  readonly prev: Int32Array
  readonly next: Int32Array
  head: number
  tail: number
  pausedMs: number
  /** Count of list entries examined by scans: lets tests count work instead of timing it. */
  examined: number
}

/**
 * Ranks `[0, watched)` seen at `nowMs` (the coordinator's start), listed in rank order; ranks
 * `[watched, worldSize)` (vacant indices of a run that may grow) are not watched until
 * `watch`. `watched` defaults to `worldSize`. O(worldSize).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (worldSize: number, nowMs: number, watched: number = worldSize): Liveness => {
  const prev = new Int32Array(worldSize).fill(UNLINKED)
  const next = new Int32Array(worldSize).fill(UNLINKED)
  for (let r = 0; r < watched; r++) {
    prev[r] = r - 1
    next[r] = r + 1 < watched ? r + 1 : NONE
  }
  return {
    lastSeenMs: new Float64Array(worldSize).fill(nowMs),
    prev,
    next,
    head: watched > 0 ? 0 : NONE,
    tail: watched > 0 ? watched - 1 : NONE,
    pausedMs: 0,
    examined: 0
  }
}

/**
 * Starts watching a rank that is not watched (a joiner), seen at `nowMs` (not earlier
 * than any earlier sighting): it goes to the back of the list. No-op for a watched rank. O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const watch = (l: Liveness, rank: Rank, nowMs: number): void => {
  if (isWatched(l, rank)) return
  l.prev[rank] = NONE
  l.next[rank] = NONE
  if (l.tail === NONE) l.head = rank
  else {
    l.next[l.tail] = rank
    l.prev[rank] = l.tail
  }
  l.tail = rank
  l.lastSeenMs[rank] = nowMs - l.pausedMs
}

/** True while `rank` is watched (neither removed as dead nor as exited). @since 0.1.0 @category queries */
export const isWatched = (l: Liveness, rank: Rank): boolean => l.prev[rank] !== UNLINKED

const detach = (l: Liveness, rank: Rank): void => {
  const p = l.prev[rank]!
  const n = l.next[rank]!
  if (p === NONE) l.head = n
  else l.next[p] = n
  if (n === NONE) l.tail = p
  else l.prev[n] = p
}

/**
 * Records a sighting of a watched rank at `nowMs` (which must not be earlier than any earlier
 * sighting) and moves it to the back. O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const touch = (l: Liveness, rank: Rank, nowMs: number): void => {
  if (!isWatched(l, rank)) return
  l.lastSeenMs[rank] = nowMs - l.pausedMs
  if (l.tail === rank) return
  detach(l, rank)
  l.prev[rank] = l.tail
  l.next[rank] = NONE
  if (l.tail === NONE) l.head = rank
  else l.next[l.tail] = rank
  l.tail = rank
}

/**
 * Pauses the liveness clock for `ms` (a stall of the coordinator): every watched rank's silence
 * stops growing for that long. O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const pause = (l: Liveness, ms: number): void => {
  if (ms > 0 && Number.isFinite(ms)) l.pausedMs += ms
}

/**
 * How long `rank` has been silent at `nowMs`, in ms, not counting pauses.
 *
 * @since 0.1.0
 * @category queries
 */
export const silentMs = (l: Liveness, rank: Rank, nowMs: number): number => nowMs - l.pausedMs - l.lastSeenMs[rank]!

/** Stops watching a rank (it died or exited). O(1). @since 0.1.0 @category mutations */
export const unwatch = (l: Liveness, rank: Rank): void => {
  if (!isWatched(l, rank)) return
  detach(l, rank)
  l.prev[rank] = UNLINKED
  l.next[rank] = UNLINKED
}

/**
 * The watched ranks that are stale at `nowMs` (silent for more than `timeoutMs`, strictly), least
 * recently seen first, ties to the lower rank. Does not unwatch them. O(expired + 1), plus a sort
 * of the expired ones.
 *
 * @since 0.1.0
 * @category queries
 */
export const expired = (l: Liveness, nowMs: number, timeoutMs: number): Array<Rank> => {
  const out: Array<Rank> = []
  const clockMs = nowMs - l.pausedMs
  for (let r = l.head; r !== NONE; r = l.next[r]!) {
    l.examined += 1
    if (!(clockMs - l.lastSeenMs[r]! > timeoutMs)) break
    out.push(r)
  }
  if (out.length > 1) out.sort((a, b) => l.lastSeenMs[a]! - l.lastSeenMs[b]! || a - b)
  return out
}
