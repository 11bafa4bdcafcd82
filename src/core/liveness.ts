/**
 * Liveness: each rank's `lastSeenMs`, kept in a doubly linked list ordered by last sighting, so
 * that a tick looks only at the front of the list (DESIGN.md §3.1).
 *
 * All ranks share one timeout, and time never runs backwards inside the core, so moving a rank to
 * the back on each sighting keeps the list sorted by `lastSeenMs`. The staleness scan then costs
 * O(expired ranks + 1), not O(worldSize) as in floDl's full scan.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"

const NONE = -1
const UNLINKED = -2

/**
 * - `lastSeenMs[r]`: integer or fractional monotonic milliseconds of the last frame from `r`.
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
  /** Count of list entries examined by scans: lets tests count work instead of timing it. */
  examined: number
}

/**
 * Every rank seen at `nowMs` (the coordinator's start), listed in rank order. O(worldSize).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (worldSize: number, nowMs: number): Liveness => {
  const prev = new Int32Array(worldSize)
  const next = new Int32Array(worldSize)
  for (let r = 0; r < worldSize; r++) {
    prev[r] = r - 1
    next[r] = r + 1 < worldSize ? r + 1 : NONE
  }
  return {
    lastSeenMs: new Float64Array(worldSize).fill(nowMs),
    prev,
    next,
    head: worldSize > 0 ? 0 : NONE,
    tail: worldSize > 0 ? worldSize - 1 : NONE,
    examined: 0
  }
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
  l.lastSeenMs[rank] = nowMs
  if (l.tail === rank) return
  detach(l, rank)
  l.prev[rank] = l.tail
  l.next[rank] = NONE
  if (l.tail === NONE) l.head = rank
  else l.next[l.tail] = rank
  l.tail = rank
}

/** Stops watching a rank (it died or exited). O(1). @since 0.1.0 @category mutations */
export const unwatch = (l: Liveness, rank: Rank): void => {
  if (!isWatched(l, rank)) return
  detach(l, rank)
  l.prev[rank] = UNLINKED
  l.next[rank] = UNLINKED
}

/**
 * The watched ranks that are stale at `nowMs` (`nowMs - lastSeenMs > timeoutMs`, strictly), least
 * recently seen first, ties to the lower rank. Does not unwatch them. O(expired + 1), plus a sort
 * of the expired ones.
 *
 * @since 0.1.0
 * @category queries
 */
export const expired = (l: Liveness, nowMs: number, timeoutMs: number): Array<Rank> => {
  const out: Array<Rank> = []
  for (let r = l.head; r !== NONE; r = l.next[r]!) {
    l.examined += 1
    if (!(nowMs - l.lastSeenMs[r]! > timeoutMs)) break
    out.push(r)
  }
  if (out.length > 1) out.sort((a, b) => l.lastSeenMs[a]! - l.lastSeenMs[b]! || a - b)
  return out
}
