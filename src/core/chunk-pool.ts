/**
 * The progressive-mode chunk pool of one epoch (docs/design.md §3.7).
 *
 * Each rank owns a reservation span `[cursor, end)` that it consumes front to back; thieves take
 * from the tail of the largest remaining span, so owner and thieves can meet but never overlap.
 * Forfeited and rolled-back chunks go to the `reclaimed` queue, which is served first.
 *
 * Kept from floDl's `chunk_pool.rs`: reclaimed first, own span, tail steal, rollback to the front,
 * forfeit to the back in dispatch order. Fixed: a completion is credited only when it matches a
 * chunk the sender holds exactly (floDl credited counts); a chunk is committed only by the holder's
 * next averaging contribution, and `forfeit` returns done-but-uncommitted chunks too; the largest
 * span is found through a tournament tree in O(log worldSize) instead of an O(worldSize) scan, and
 * idle ranks (nothing in flight) are found through a two-level bitset instead of a scan of every
 * rank, so that waking them after a death costs O(woken + worldSize / 1024) at worst.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"

const FREE = 0
const OUTSTANDING = 1
const DONE = 2
const NONE = -1

/**
 * A contiguous range of the epoch's permutation, in samples.
 *
 * @since 0.1.0
 * @category model
 */
export interface Range {
  readonly offset: number
  readonly size: number
}

/**
 * The pool's state. Per rank: span `cursor`/`end`; two lists into the chunk table, outstanding
 * chunks (`head`/`tail`, at most `chunksInflightMax` long) and done-but-uncommitted ones
 * (`doneHead`/`doneTail`), so that crediting a completion never scans the done ones; every chunk's
 * dispatch sequence number (`chunkSeq`) restores dispatch order when both lists are forfeited.
 *
 * @since 0.1.0
 * @category model
 */
export interface Pool {
  readonly epoch: number
  readonly total: number
  readonly worldSize: number
  readonly cursor: Float64Array
  readonly end: Float64Array
  readonly tree: Int32Array
  readonly leaves: number
  readonly head: Int32Array
  readonly tail: Int32Array
  readonly doneHead: Int32Array
  readonly doneTail: Int32Array
  readonly inflight: Int32Array
  /** Ranks that left the epoch (dead, exited, or not planned): never idle, never refilled. */
  readonly retired: Uint8Array
  /** Bit `r` set when rank `r` is not retired and holds no outstanding chunk. */
  readonly idleWords: Uint32Array
  /** Bit `w` set when `idleWords[w]` is not zero. */
  readonly idleSummary: Uint32Array
  readonly chunkOffset: Array<number>
  readonly chunkSize: Array<number>
  readonly chunkState: Array<number>
  readonly chunkNext: Array<number>
  readonly chunkSeq: Array<number>
  readonly freeChunks: Array<number>
  readonly reclaimed: Array<Range>
  reclaimedHead: number
  nextSeq: number
  residueTotal: number
  reclaimedTotal: number
  outstandingTotal: number
  doneTotal: number
}

/** Samples left in `rank`'s own span. O(1). @since 0.1.0 @category queries */
export const residue = (pool: Pool, rank: Rank): number => pool.end[rank]! - pool.cursor[rank]!

const better = (pool: Pool, a: number, b: number): number => {
  if (a === NONE) return b
  if (b === NONE) return a
  const ra = residue(pool, a)
  const rb = residue(pool, b)
  return rb > ra || (rb === ra && b < a) ? b : a
}

const updateTree = (pool: Pool, rank: Rank): void => {
  let node = (pool.leaves + rank) >> 1
  while (node >= 1) {
    pool.tree[node] = better(pool, pool.tree[2 * node]!, pool.tree[2 * node + 1]!)
    node >>= 1
  }
}

const setIdle = (pool: Pool, rank: Rank): void => {
  if (pool.retired[rank] === 1) return
  const word = rank >>> 5
  pool.idleWords[word]! |= 1 << (rank & 31)
  pool.idleSummary[word >>> 5]! |= 1 << (word & 31)
}

const clearIdle = (pool: Pool, rank: Rank): void => {
  const word = rank >>> 5
  pool.idleWords[word]! &= ~(1 << (rank & 31))
  if (pool.idleWords[word] === 0) pool.idleSummary[word >>> 5]! &= ~(1 << (word & 31))
}

const lowestBit = (bits: number): number => 31 - Math.clz32(bits & -bits)

/**
 * The lowest idle rank `>= from` (not retired, nothing outstanding), or `worldSize` when there is
 * none. O(1 + worldSize / 1024) at worst.
 *
 * @since 0.1.0
 * @category queries
 */
export const nextIdle = (pool: Pool, from: number): number => {
  const w = pool.worldSize
  if (from >= w) return w
  let word = from >>> 5
  const bits = pool.idleWords[word]! & (-1 << (from & 31))
  if (bits !== 0) return (word << 5) + lowestBit(bits)
  word += 1
  for (let block = word >>> 5; block < pool.idleSummary.length; block++) {
    const summary = block === word >>> 5 ? pool.idleSummary[block]! & (-1 << (word & 31)) : pool.idleSummary[block]!
    if (summary !== 0) {
      const found = (block << 5) + lowestBit(summary)
      return Math.min(w, (found << 5) + lowestBit(pool.idleWords[found]!))
    }
  }
  return w
}

/**
 * Takes `rank` out of the epoch (it died or exited): it is never idle again. Call after
 * `forfeit`. O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const retire = (pool: Pool, rank: Rank): void => {
  pool.retired[rank] = 1
  clearIdle(pool, rank)
}

/**
 * A pool for `epoch` whose spans have the given sizes, laid out contiguously in rank order from
 * offset 0 (`spanSizes.length` is the world size); the ranks in `retired` (dead or exited before
 * the epoch, span 0) are never idle. O(worldSize).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (epoch: number, spanSizes: ReadonlyArray<number>, retired: ReadonlyArray<Rank> = []): Pool => {
  const worldSize = spanSizes.length
  let leaves = 1
  while (leaves < worldSize) leaves <<= 1
  const pool: Pool = {
    epoch,
    total: 0,
    worldSize,
    cursor: new Float64Array(worldSize),
    end: new Float64Array(worldSize),
    tree: new Int32Array(2 * leaves).fill(NONE),
    leaves,
    head: new Int32Array(worldSize).fill(NONE),
    tail: new Int32Array(worldSize).fill(NONE),
    doneHead: new Int32Array(worldSize).fill(NONE),
    doneTail: new Int32Array(worldSize).fill(NONE),
    inflight: new Int32Array(worldSize),
    retired: new Uint8Array(worldSize),
    idleWords: new Uint32Array(Math.ceil(worldSize / 32)),
    idleSummary: new Uint32Array(Math.ceil(worldSize / 1024)),
    chunkOffset: [],
    chunkSize: [],
    chunkState: [],
    chunkNext: [],
    chunkSeq: [],
    freeChunks: [],
    reclaimed: [],
    reclaimedHead: 0,
    nextSeq: 0,
    residueTotal: 0,
    reclaimedTotal: 0,
    outstandingTotal: 0,
    doneTotal: 0
  }
  let offset = 0
  for (let r = 0; r < worldSize; r++) {
    pool.cursor[r] = offset
    offset += spanSizes[r]!
    pool.end[r] = offset
    pool.tree[leaves + r] = r
  }
  for (const rank of retired) pool.retired[rank] = 1
  for (let r = 0; r < worldSize; r++) setIdle(pool, r)
  for (let node = leaves - 1; node >= 1; node--) pool.tree[node] = better(pool, pool.tree[2 * node]!, pool.tree[2 * node + 1]!)
  ;(pool as { total: number }).total = offset
  pool.residueTotal = offset
  return pool
}

/**
 * Brings a retired rank with nothing held into the epoch (a joiner): it becomes idle and
 * its span grows from empty to the tail half (rounded down) of the largest remaining span, which
 * that span's owner gives up: owner and joiner then consume their halves front to back, and
 * thieves take from either tail as from any span, so no sample gets two holders. Returns the
 * samples moved into the joiner's span (0 when every span is empty; it still takes reclaimed
 * chunks and steals like any rank). No-op returning 0 for a rank that is not retired or still
 * holds chunks. O(log worldSize).
 *
 * @since 0.1.0
 * @category mutations
 */
export const admit = (pool: Pool, rank: Rank): number => {
  if (pool.retired[rank] !== 1 || holdsUncommitted(pool, rank) || residue(pool, rank) > 0) return 0
  pool.retired[rank] = 0
  setIdle(pool, rank)
  const donor = pool.tree[1]!
  const give = donor === NONE ? 0 : Math.floor(residue(pool, donor) / 2)
  if (give <= 0) return 0
  const start = pool.end[donor]! - give
  pool.end[donor] = start
  pool.cursor[rank] = start
  pool.end[rank] = start + give
  updateTree(pool, donor)
  updateTree(pool, rank)
  return give
}

const reclaimedFront = (pool: Pool): Range | undefined =>
  pool.reclaimedHead < pool.reclaimed.length ? pool.reclaimed[pool.reclaimedHead] : undefined

const pushReclaimedFront = (pool: Pool, range: Range): void => {
  if (pool.reclaimedHead > 0) pool.reclaimed[--pool.reclaimedHead] = range
  else pool.reclaimed.unshift(range)
  pool.reclaimedTotal += range.size
}

const pushReclaimedBack = (pool: Pool, range: Range): void => {
  pool.reclaimed.push(range)
  pool.reclaimedTotal += range.size
}

const popReclaimedFront = (pool: Pool): Range | undefined => {
  const front = reclaimedFront(pool)
  if (front === undefined) return undefined
  pool.reclaimedHead += 1
  pool.reclaimedTotal -= front.size
  if (pool.reclaimedHead > 1024 && pool.reclaimedHead * 2 > pool.reclaimed.length) {
    pool.reclaimed.splice(0, pool.reclaimedHead)
    pool.reclaimedHead = 0
  }
  return front
}

/**
 * Adds free ranges to the back of the reclaimed queue, in the order given, so that they are served
 * before any span: how a resumed epoch's uncommitted ranges enter a pool whose spans are empty.
 * Empty ranges are skipped. O(ranges).
 *
 * @since 0.1.0
 * @category mutations
 */
export const reclaim = (pool: Pool, ranges: ReadonlyArray<readonly [offset: number, size: number]>): void => {
  for (const [offset, size] of ranges) if (size > 0) pushReclaimedBack(pool, { offset, size })
}

/** The reclaimed queue, front first. @since 0.1.0 @category queries */
export const reclaimed = (pool: Pool): ReadonlyArray<Range> => pool.reclaimed.slice(pool.reclaimedHead)

const hold = (pool: Pool, rank: Rank, offset: number, size: number): Range => {
  const id = pool.freeChunks.pop() ?? pool.chunkOffset.length
  pool.chunkOffset[id] = offset
  pool.chunkSize[id] = size
  pool.chunkState[id] = OUTSTANDING
  pool.chunkSeq[id] = pool.nextSeq++
  append(pool, pool.head, pool.tail, rank, id)
  if (pool.inflight[rank] === 0) clearIdle(pool, rank)
  pool.inflight[rank]! += 1
  pool.outstandingTotal += size
  return { offset, size }
}

/**
 * Takes the next chunk of at most `size` samples for `rank`: the front of the reclaimed queue
 * (splitting it, the rest staying at the front), else the front of the rank's own span, else the
 * tail of the largest remaining span (ties to the lower rank). `undefined` when nothing is left.
 * The chunk is recorded as outstanding on `rank`. O(log worldSize).
 *
 * @since 0.1.0
 * @category mutations
 */
export const take = (pool: Pool, rank: Rank, size: number): Range | undefined => {
  if (size <= 0) return undefined
  const front = popReclaimedFront(pool)
  if (front !== undefined) {
    const actual = Math.min(size, front.size)
    if (actual < front.size) pushReclaimedFront(pool, { offset: front.offset + actual, size: front.size - actual })
    return hold(pool, rank, front.offset, actual)
  }
  const own = residue(pool, rank)
  if (own > 0) {
    const actual = Math.min(size, own)
    const offset = pool.cursor[rank]!
    pool.cursor[rank] = offset + actual
    pool.residueTotal -= actual
    updateTree(pool, rank)
    return hold(pool, rank, offset, actual)
  }
  const donor = pool.tree[1]!
  if (donor === NONE) return undefined
  const donorResidue = residue(pool, donor)
  if (donorResidue <= 0) return undefined
  const actual = Math.min(size, donorResidue)
  const offset = pool.end[donor]! - actual
  pool.end[donor] = offset
  pool.residueTotal -= actual
  updateTree(pool, donor)
  return hold(pool, rank, offset, actual)
}

const append = (pool: Pool, head: Int32Array, tail: Int32Array, rank: Rank, id: number): void => {
  pool.chunkNext[id] = NONE
  if (tail[rank] === NONE) head[rank] = id
  else pool.chunkNext[tail[rank]!] = id
  tail[rank] = id
}

/** Removes chunk `id` (after `prev`) from one of `rank`'s lists; does not free it. */
const unlink = (pool: Pool, head: Int32Array, tail: Int32Array, rank: Rank, id: number, prev: number): void => {
  const next = pool.chunkNext[id]!
  if (prev === NONE) head[rank] = next
  else pool.chunkNext[prev] = next
  if (tail[rank] === id) tail[rank] = prev
}

const free = (pool: Pool, id: number): void => {
  pool.chunkState[id] = FREE
  pool.freeChunks.push(id)
}

/**
 * Undoes a take whose `AssignChunk` could not be sent: the newest outstanding chunk of `rank`
 * equal to `[offset, offset + size)` is dropped; its samples go back to the rank's span when they
 * were its last take from it, otherwise to the front of the reclaimed queue. Returns false (and
 * changes nothing) when `rank` holds no such outstanding chunk. O(chunks held by rank).
 *
 * @since 0.1.0
 * @category mutations
 */
export const rollback = (pool: Pool, rank: Rank, offset: number, size: number): boolean => {
  let found = NONE
  let foundPrev = NONE
  for (let id = pool.head[rank]!, prev = NONE; id !== NONE; prev = id, id = pool.chunkNext[id]!) {
    if (pool.chunkState[id] === OUTSTANDING && pool.chunkOffset[id] === offset && pool.chunkSize[id] === size) {
      found = id
      foundPrev = prev
    }
  }
  if (found === NONE) return false
  unlink(pool, pool.head, pool.tail, rank, found, foundPrev)
  free(pool, found)
  pool.inflight[rank]! -= 1
  if (pool.inflight[rank] === 0) setIdle(pool, rank)
  pool.outstandingTotal -= size
  if (pool.cursor[rank] === offset + size) {
    pool.cursor[rank] = offset
    pool.residueTotal += size
    updateTree(pool, rank)
  } else {
    pushReclaimedFront(pool, { offset, size })
  }
  return true
}

/**
 * Credits a `ChunkDone`: marks `rank`'s outstanding chunk `[offset, offset + size)` as done (not
 * yet committed). Returns false when `rank` holds no such outstanding chunk; nothing changes then.
 * O(chunks held by rank).
 *
 * @since 0.1.0
 * @category mutations
 */
export const complete = (pool: Pool, rank: Rank, offset: number, size: number): boolean => {
  for (let id = pool.head[rank]!, prev = NONE; id !== NONE; prev = id, id = pool.chunkNext[id]!) {
    if (pool.chunkOffset[id] === offset && pool.chunkSize[id] === size) {
      unlink(pool, pool.head, pool.tail, rank, id, prev)
      pool.chunkState[id] = DONE
      append(pool, pool.doneHead, pool.doneTail, rank, id)
      pool.inflight[rank]! -= 1
      if (pool.inflight[rank] === 0) setIdle(pool, rank)
      pool.outstandingTotal -= size
      pool.doneTotal += size
      return true
    }
  }
  return false
}

/**
 * The number of done-but-uncommitted chunks `rank` holds: what a contribution sent now would
 * commit (`commit`'s `chunksMax`). O(chunks held).
 *
 * @since 0.1.0
 * @category queries
 */
export const doneChunks = (pool: Pool, rank: Rank): number => {
  let count = 0
  for (let id = pool.doneHead[rank]!; id !== NONE; id = pool.chunkNext[id]!) count += 1
  return count
}

/** Samples of the chunks `rank` reported done that are not committed yet. O(done chunks). @since 0.1.0 @category queries */
export const doneSamples = (pool: Pool, rank: Rank): number => {
  let samples = 0
  for (let id = pool.doneHead[rank]!; id !== NONE; id = pool.chunkNext[id]!) samples += pool.chunkSize[id]!
  return samples
}

/**
 * Commits the first `chunksMax` done chunks of `rank` in the order their `ChunkDone`s were
 * credited (every done chunk by default: its averaging contribution arrived), calling `onCommit`
 * for each; outstanding chunks and later done ones stay. A ring round passes the count its
 * member had done when it reported (`doneChunks` then), so a chunk credited after the member's
 * contribution waits for a later one (docs/design.md §3.3). Returns the samples committed. O(chunks held).
 *
 * @since 0.1.0
 * @category mutations
 */
export const commit = (pool: Pool, rank: Rank, onCommit: (range: Range) => void, chunksMax = Number.POSITIVE_INFINITY): number => {
  let committed = 0
  let count = 0
  let id = pool.doneHead[rank]!
  for (; id !== NONE && count < chunksMax; count++) {
    const next = pool.chunkNext[id]!
    const range = { offset: pool.chunkOffset[id]!, size: pool.chunkSize[id]! }
    free(pool, id)
    pool.doneTotal -= range.size
    committed += range.size
    onCommit(range)
    id = next
  }
  pool.doneHead[rank] = id
  if (id === NONE) pool.doneTail[rank] = NONE
  return committed
}

/** `rank`'s chunk ids, outstanding and done, in dispatch order. O(chunks held). */
const heldIds = (pool: Pool, rank: Rank): Array<number> => {
  const ids: Array<number> = []
  for (let id = pool.head[rank]!; id !== NONE; id = pool.chunkNext[id]!) ids.push(id)
  for (let id = pool.doneHead[rank]!; id !== NONE; id = pool.chunkNext[id]!) ids.push(id)
  return ids.sort((a, b) => pool.chunkSeq[a]! - pool.chunkSeq[b]!)
}

/**
 * Moves every uncommitted chunk of `rank` (outstanding, or done but not committed), in dispatch
 * order, to the back of the reclaimed queue and returns them. The rank's own span residue stays
 * for thieves. Idempotent. O(chunks held).
 *
 * @since 0.1.0
 * @category mutations
 */
export const forfeit = (pool: Pool, rank: Rank): Array<Range> => {
  const moved: Array<Range> = []
  for (const id of heldIds(pool, rank)) {
    const range = { offset: pool.chunkOffset[id]!, size: pool.chunkSize[id]! }
    if (pool.chunkState[id] === DONE) pool.doneTotal -= range.size
    else pool.outstandingTotal -= range.size
    free(pool, id)
    pushReclaimedBack(pool, range)
    moved.push(range)
  }
  pool.head[rank] = NONE
  pool.tail[rank] = NONE
  pool.doneHead[rank] = NONE
  pool.doneTail[rank] = NONE
  pool.inflight[rank] = 0
  setIdle(pool, rank)
  return moved
}

/** Chunks `rank` holds that are not done yet. O(1). @since 0.1.0 @category queries */
export const inflight = (pool: Pool, rank: Rank): number => pool.inflight[rank]!

/** True when `rank` holds any chunk not yet committed. O(1). @since 0.1.0 @category queries */
export const holdsUncommitted = (pool: Pool, rank: Rank): boolean => pool.head[rank] !== NONE || pool.doneHead[rank] !== NONE

/** Samples not yet handed out: span residues plus reclaimed ranges. O(1). @since 0.1.0 @category queries */
export const remaining = (pool: Pool): number => pool.residueTotal + pool.reclaimedTotal

/**
 * True when nothing is left in spans or the reclaimed queue, nothing is outstanding and every done
 * chunk is committed (docs/design.md §3.7). O(1).
 *
 * @since 0.1.0
 * @category queries
 */
export const isDone = (pool: Pool): boolean =>
  pool.residueTotal === 0 && pool.reclaimedTotal === 0 && pool.outstandingTotal === 0 && pool.doneTotal === 0

/**
 * The chunks `rank` holds, in dispatch order, with whether each is done. O(chunks held).
 *
 * @since 0.1.0
 * @category queries
 */
export const held = (pool: Pool, rank: Rank): Array<Range & { readonly done: boolean }> =>
  heldIds(pool, rank).map((id) => ({ offset: pool.chunkOffset[id]!, size: pool.chunkSize[id]!, done: pool.chunkState[id] === DONE }))
