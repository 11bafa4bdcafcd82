/**
 * The dead-rank ledger and the membership around it: which ranks are alive, dead or exited,
 * `activeCount`, the failure count, and ascending iteration over the survivors that skips dead
 * and exited ranks in near-constant amortized time (docs/design.md §1, §3.1, §3.6).
 *
 * Written only by the coordinator core, so that every death goes through its chain (in floDl 0.7,
 * where these rules started, another component could mark a rank dead behind the coordinator's
 * back and skip it). A death is permanent.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"

/** @since 0.1.0 @category status */
export const ALIVE = 0
/** @since 0.1.0 @category status */
export const DEAD = 1
/** @since 0.1.0 @category status */
export const EXITED = 2
/** An index below the capacity that no rank has taken yet. @since 0.1.0 @category status */
export const VACANT = 3

/**
 * Membership of a run whose rank indices are `[0, worldSize)`; `worldSize` here is the capacity
 * (`Config.maxRanks`), which equals the initial world size unless the run may grow.
 *
 * - `status[r]`: `ALIVE`, `DEAD`, `EXITED` or `VACANT` (not joined yet; one byte per rank).
 * - `joined`: ranks that ever joined (alive, dead or exited): the failure limit's base.
 * - `skip`: `worldSize + 1` entries; `skip[r] === r` for a survivor, otherwise a pointer towards
 *   the next survivor (path-compressed), and `skip[worldSize] === worldSize` as the sentinel.
 *
 * @since 0.1.0
 * @category model
 */
export interface Membership {
  readonly worldSize: number
  readonly status: Uint8Array
  readonly skip: Int32Array
  activeCount: number
  failures: number
  exits: number
  joined: number
}

/**
 * A membership of capacity `worldSize` where ranks `[0, initial)` are alive and the rest vacant
 * (`initial` defaults to `worldSize`). O(worldSize).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (worldSize: number, initial: number = worldSize): Membership => {
  const skip = new Int32Array(worldSize + 1)
  const status = new Uint8Array(worldSize)
  for (let r = 0; r <= worldSize; r++) skip[r] = r < initial || r === worldSize ? r : r + 1
  for (let r = initial; r < worldSize; r++) status[r] = VACANT
  return { worldSize, status, skip, activeCount: initial, failures: 0, exits: 0, joined: initial }
}

/** True when no rank has taken index `rank` yet. O(1). @since 0.1.0 @category queries */
export const isVacant = (m: Membership, rank: number): boolean => inRange(m, rank) && m.status[rank] === VACANT

/**
 * Takes a survivor of the formation out again before the run starts: its index becomes vacant (it
 * was named absent at formation), `activeCount - 1`, `joined - 1`. Returns false for a
 * rank that is not alive. O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const vacate = (m: Membership, rank: Rank): boolean => {
  if (!isLive(m, rank)) return false
  m.status[rank] = VACANT
  m.joined -= 1
  unlink(m, rank)
  return true
}

/**
 * A vacant index becomes a survivor (a rank joined): `activeCount + 1`, `joined + 1`,
 * and the skip pointers of the non-survivors just below it that may jump over it are pointed at
 * it. Returns false and changes nothing for an index that is not vacant. O(non-survivors between
 * the previous survivor and `rank`).
 *
 * @since 0.1.0
 * @category mutations
 */
export const admit = (m: Membership, rank: Rank): boolean => {
  if (!isVacant(m, rank)) return false
  m.status[rank] = ALIVE
  m.skip[rank] = rank
  // A pointer below `rank` never jumps past a survivor that was live when it was set, so only the
  // run of non-survivors right below `rank` can point beyond it.
  for (let r = rank - 1; r >= 0 && m.status[r] !== ALIVE; r--) m.skip[r] = rank
  m.activeCount += 1
  m.joined += 1
  return true
}

/** True when `rank` is an integer in `[0, worldSize)`. O(1). @since 0.1.0 @category queries */
export const inRange = (m: Membership, rank: number): boolean => Number.isInteger(rank) && rank >= 0 && rank < m.worldSize

/** True when `rank` is in the ledger; false when out of range. O(1). @since 0.1.0 @category queries */
export const isDead = (m: Membership, rank: Rank): boolean => inRange(m, rank) && m.status[rank] === DEAD

/** True when `rank` announced a clean exit. O(1). @since 0.1.0 @category queries */
export const isExited = (m: Membership, rank: Rank): boolean => inRange(m, rank) && m.status[rank] === EXITED

/** True when `rank` is a survivor: in range, neither dead nor exited. O(1). @since 0.1.0 @category queries */
export const isLive = (m: Membership, rank: Rank): boolean => inRange(m, rank) && m.status[rank] === ALIVE

function unlink(m: Membership, rank: Rank): void {
  m.skip[rank] = rank + 1
  m.activeCount -= 1
}

/**
 * Adds a survivor to the ledger: `activeCount - 1`, `failures + 1`. Returns false and changes
 * nothing for a rank that is out of range, already dead or exited. O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const declareDead = (m: Membership, rank: Rank): boolean => {
  if (!isLive(m, rank)) return false
  m.status[rank] = DEAD
  m.failures += 1
  unlink(m, rank)
  return true
}

/**
 * Marks a survivor as cleanly exited: `activeCount - 1`, never a failure. Returns false and
 * changes nothing for a dead or already exited rank (an `Exiting` after a death must not count the
 * rank out twice). O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const markExited = (m: Membership, rank: Rank): boolean => {
  if (!isLive(m, rank)) return false
  m.status[rank] = EXITED
  m.exits += 1
  unlink(m, rank)
  return true
}

/**
 * The lowest survivor `>= from`, or `worldSize` when there is none. Amortized near O(1): every
 * dead or exited rank is stepped over at most a logarithmic number of times thanks to path
 * compression.
 *
 * @since 0.1.0
 * @category queries
 */
export const nextLive = (m: Membership, from: number): number => {
  if (from >= m.worldSize) return m.worldSize
  const skip = m.skip
  const start = Math.max(0, from)
  let root = start
  while (skip[root] !== root) root = skip[root]!
  for (let node = start; node !== root; ) {
    const following = skip[node]!
    skip[node] = root
    node = following
  }
  return root
}

/** The lowest survivor, or `undefined` when none is left. @since 0.1.0 @category queries */
export const lowestLive = (m: Membership): Rank | undefined => {
  const r = nextLive(m, 0)
  return r < m.worldSize ? r : undefined
}

/**
 * Calls `f` for each survivor in ascending rank order. O(survivors + skipped).
 *
 * @since 0.1.0
 * @category queries
 */
export const forEachSurvivor = (m: Membership, f: (rank: Rank) => void): void => {
  for (let r = nextLive(m, 0); r < m.worldSize; r = nextLive(m, r + 1)) f(r)
}

/** The survivors in ascending order, as an array. O(worldSize) at worst. @since 0.1.0 @category queries */
export const survivors = (m: Membership): Array<Rank> => {
  const out: Array<Rank> = []
  forEachSurvivor(m, (r) => out.push(r))
  return out
}

/** Ranks in the ledger, ascending. O(worldSize). @since 0.1.0 @category queries */
export const deadRanks = (m: Membership): Array<Rank> => {
  const out: Array<Rank> = []
  for (let r = 0; r < m.worldSize; r++) if (m.status[r] === DEAD) out.push(r)
  return out
}
