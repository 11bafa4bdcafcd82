/**
 * The `ring` backend's collective for worker threads of one process: an all-reduce
 * through one shared-memory area per ring generation, in one barrier wait a round instead of the
 * ring's `2 (n - 1)` dependent steps (`Ring.allReduce`). On a machine with fewer cores than ranks a
 * ring step waits for its neighbour to be scheduled, `2 (n - 1)` times in a row; here every rank
 * waits once a round, and the coordinator's commit is the round's only other hand-over.
 *
 * A round, for ring rank `r` of `n` (`allReduce`):
 *
 * 1. The rank writes its round number, whether it contributes, and (if it does) its parameters into
 *    its own row of the area, then waits at the first barrier until every member arrived. In an
 *    area that lies in a shared WebAssembly memory (`make`, `memoryOf`) the rank may have written
 *    its parameters into its row already (`Area.contributionRow`), and checked them there: the row
 *    is then its pre-round copy, and nothing is copied again.
 * 2. It reduces segment `r` (`Ring.segmentOf`): for each value, the float64 sum of the contributing
 *    rows in ring-rank order, divided by their number and rounded once to float32 into the area's
 *    result. With no contribution the segment is the rank's own values (every member then holds the
 *    last average, as in `Ring.allReduce`). It arrives at the second barrier, without waiting there,
 *    and returns: its part is done, and the rank reports `RoundDone`.
 * 3. The round is complete once every member did its part, which the coordinator learns from every
 *    member's `RoundDone`: it then commits the round in the area (`commit`; docs/design.md §3.3, a
 *    round closes when every member reported `RoundDone`) and wakes the members once, instead of
 *    sending each a `RoundCommitted` frame. Each member then reads the mean from the area's result
 *    row of the round's parity (`allReduce` returns that row itself: no copy, no allocation). Round
 *    `k + 2`'s reduction, the next to write that row, starts only after every member arrived at its
 *    first barrier, which each does only after it applied round `k + 1`'s commit: so a member may
 *    keep round `k`'s row as its last average (what it saves and hands to a joiner) until it
 *    applies the next commit, without copying it. (Copying the mean out, 1.6 MB per rank a round at
 *    407,050 parameters, and a second barrier wait were a measurable part of a round at 8 ranks on
 *    2 cores.)
 *
 * A member looks at the commit word (`Area.committed`) before it handles any later frame from the
 * coordinator, which writes it before it sends any, so a `DeclareDead` or `ShutdownWithSave` that
 * follows a commit always finds it applied.
 *
 * The result equals `Ring.allReduce`'s up to the order of each float64 sum (module doc there): the
 * float32 rounding of a float64 sum of the contributions, within one float32 unit in the last place
 * of the `cpu` backend's mean.
 *
 * Aborts: the wait is `Atomics.waitAsync` (never `Atomics.wait`): the rank's event loop stays free,
 * so heartbeats, `DeclareDead` and a newer `FormRing` still arrive, and abandoning the collective
 * (`run`'s stop, or interrupting `allReduce`) abandons the wait at once. A collective changes nothing its caller holds, and a round nobody
 * committed is never applied. A member that dies before its part leaves the round incomplete: no
 * `RoundDone` of its own, so no commit; the others apply nothing and redo the round in the next
 * generation's area from their pre-round parameters. A generation whose collective was aborted is
 * never used again (the caller blocks it, as with ring steps), so the barrier counts of an area only
 * have to hold while no member is interrupted. Nothing closes an area: a member may still be
 * waiting in it, correctly, when a neighbour already got the newer `FormRing`; an abandoned wait
 * ends by itself within `waitSliceMs`.
 *
 * A contribution with a value that is not finite (a rank writing past its own check): the reducer
 * that meets it marks the row's ring rank in the area (`Area.badRank`), wakes every member watching
 * for the commit, and withholds its own `RoundDone` (`allReduce` gives `undefined`), so the round
 * is never committed. The marked rank fails its collective when it sees the mark (`RingLinkError`,
 * so it dies and is declared dead); every other member waits, applying nothing, for the
 * `DeclareDead` that follows and the re-formed ring's redo.
 *
 * Layout of an area of `n` ranks and `length` parameters (`areaBytes`): four `Int32` words
 * (`arrived`: arrivals at barriers so far; `released`: barriers passed; `committed`: 1 + the
 * last committed round, wrapped to int32, or 0; `bad`: 1 + the ring rank of a non-finite row, or
 * 0), then per ring rank two float64 words (round, contributes), then `n` rows of `length` float32
 * values, then two results of `length` float32 values (even rounds, odd rounds).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Finite from "./finite.ts"
import { RingLinkError, segmentOf } from "./ring.ts"
import * as RingSimd from "./ring-simd.ts"
import type { Collective } from "./ring.ts"

const ARRIVED = 0
const RELEASED = 1
const COMMITTED = 2
const BAD = 3
const headerBytes = 16

/**
 * Bytes of an area for `ringSize` ranks and `length` parameters: `16 + 16 ringSize + 4 length
 * (ringSize + 2)`.
 *
 * @since 0.1.0
 * @category model
 */
export const areaBytes = (ringSize: number, length: number): number => headerBytes + 16 * ringSize + 4 * length * (ringSize + 2)

type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
  timeoutMs: number
) => { readonly async: false; readonly value: string } | { readonly async: true; readonly value: Promise<string> }

const waitAsync = (Atomics as unknown as { readonly waitAsync: WaitAsync }).waitAsync

/** How long one wait lasts before it looks again (a wait abandoned by an interrupt ends by then). */
const waitSliceMs = 1000

/**
 * One ring generation's shared area as one member sees it: the area's `buffer` (every member gets
 * the same), this member's `ringRank`, the `ringSize` and the parameter `length`. Made by the
 * coordinator's thread for each generation (`make`), read by each member (`attach`).
 *
 * @since 0.1.0
 * @category model
 */
export interface AreaHandle {
  readonly buffer: SharedArrayBuffer
  readonly ringRank: number
  readonly ringSize: number
  readonly length: number
  /**
   * The shared WebAssembly memory whose buffer `buffer` is, when `make` made the area in one
   * (`memoryOf`): a member then writes its contribution straight into its row and checks it there
   * (`Area.contributionRow`). Posted to each member beside `buffer`.
   */
  readonly memory?: Finite.SharedMemory | undefined
}

/**
 * A member's view of the area, with what it keeps between rounds: how many barriers it passed
 * and the float64 sums and private copies of a block of its segment (allocated once).
 *
 * @since 0.1.0
 * @category model
 */
export class Area {
  readonly header: Int32Array
  readonly meta: Float64Array
  readonly rows: ReadonlyArray<Float32Array>
  /** The mean of even rounds, then of odd rounds (module doc, step 3). */
  readonly results: readonly [Float32Array, Float32Array]
  /** Barriers this member passed in this area. */
  passed = 0
  private sums: Float64Array | undefined
  private scratch: Array<Float32Array> = []

  /**
   * This member's row, when the area lies in a shared WebAssembly memory where `Finite.allFinite`
   * checks it with SIMD: the rank may write its contribution there directly (`allReduce` then
   * copies nothing). Undefined otherwise.
   */
  readonly contributionRow: Float32Array | undefined

  constructor(readonly handle: AreaHandle) {
    const { ringSize: n, length } = handle
    const memory = handle.memory ?? memories.get(handle.buffer)
    // The memory's own buffer, the one its SIMD check knows (`Finite.share`), when it is this area's.
    const shared = memory !== undefined && memory.buffer.byteLength === handle.buffer.byteLength ? Finite.share(memory) : undefined
    const buffer = shared ?? handle.buffer
    if (buffer.byteLength < areaBytes(n, length))
      throw new RangeError(`a shared area of ${buffer.byteLength} bytes is too small for ${n} ranks x ${length} parameters`)
    this.header = new Int32Array(buffer, 0, 4)
    this.meta = new Float64Array(buffer, headerBytes, 2 * n)
    const rowsAt = headerBytes + 16 * n
    this.rows = Array.from({ length: n }, (_, j) => new Float32Array(buffer, rowsAt + 4 * length * j, length))
    const resultsAt = rowsAt + 4 * length * n
    this.results = [new Float32Array(buffer, resultsAt, length), new Float32Array(buffer, resultsAt + 4 * length, length)]
    this.contributionRow = shared === undefined ? undefined : this.rows[handle.ringRank]
  }

  /** The result row `round`'s reduction writes. */
  resultOf(round: number): Float32Array {
    return this.results[round & 1]!
  }

  /**
   * Whether another member arrived at a barrier of `round`'s collective that this member has not
   * reached yet: the collective started without it (an idle member then joins it).
   */
  neighboursAt(round: number): boolean {
    if (Atomics.load(this.header, ARRIVED) <= this.handle.ringSize * this.passed) return false
    for (let j = 0; j < this.handle.ringSize; j++) {
      if (j !== this.handle.ringRank && this.meta[2 * j] === round) return true
    }
    return false
  }

  /**
   * Resolves when the number of arrivals changes from what it is now, or after at most
   * `waitSliceMs`. Never rejects. An idle member watches with it for a collective to start.
   */
  arrivals(): Promise<void> {
    return this.change(ARRIVED)
  }

  /** The ring rank whose row a reducer found not finite (module doc), or -1. */
  badRank(): number {
    return Atomics.load(this.header, BAD) - 1
  }

  /** Whether the coordinator committed `round` in this area (`commit`), as its last commit. */
  committed(round: number): boolean {
    return Atomics.load(this.header, COMMITTED) === ((round + 1) | 0)
  }

  /**
   * Resolves when the area's committed round changes from what it is now, when a reducer marks a
   * row not finite (`badRank`), or after at most `waitSliceMs`. Never rejects. A member that did
   * its part of a round watches with it for the commit.
   */
  commits(): Promise<void> {
    return this.change(COMMITTED)
  }

  /** Resolves when header word `index` changes or is notified, or after at most `waitSliceMs`. */
  private change(index: number): Promise<void> {
    const waited = waitAsync(this.header, index, Atomics.load(this.header, index), waitSliceMs)
    return waited.async ? waited.value.then(() => {}) : Promise.resolve()
  }

  /** Private float32 array `index` (0 to 4) of `length` values (allocated once), for `reduceSegment`'s blocks. */
  scratchFor(length: number, index = 0): Float32Array {
    const held = this.scratch[index]
    if (held !== undefined && held.length === length) return held
    const made = new Float32Array(length)
    this.scratch[index] = made
    return made
  }

  /** Private float64 array of `length` values (allocated once), for `reduceSegment`'s blocks. */
  sumsFor(length: number): Float64Array {
    if (this.sums === undefined || this.sums.length !== length) this.sums = new Float64Array(length)
    return this.sums
  }
}

/** The shared WebAssembly memory of each area `make` made in one. */
const memories = new WeakMap<SharedArrayBuffer, Finite.SharedMemory>()

/**
 * The shared WebAssembly memory the area `buffer` lies in, when `make` made it in one (post it to
 * each member beside the buffer: `AreaHandle.memory`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const memoryOf = (buffer: SharedArrayBuffer): Finite.SharedMemory | undefined => memories.get(buffer)

/**
 * Allocates the area of one generation: `ringSize` members, `length` parameters (`areaBytes`),
 * in a shared WebAssembly memory where the runtime has one (`Finite.sharedMemory`; `memoryOf`),
 * else in a `SharedArrayBuffer`. The handle for ring rank `r` is `{ buffer, ringRank: r,
 * ringSize, length, memory: memoryOf(buffer) }`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (ringSize: number, length: number): SharedArrayBuffer => {
  const bytes = areaBytes(ringSize, length)
  const memory = Finite.sharedMemory(bytes)
  const buffer = memory?.buffer ?? new SharedArrayBuffer(bytes)
  if (memory !== undefined) memories.set(buffer, memory)
  // No member is at a round yet (`neighboursAt`).
  new Float64Array(buffer, headerBytes, 2 * ringSize).fill(-1)
  return buffer
}

/**
 * The coordinator's side of a commit (module doc): records in the area `buffer` (from `make`) that
 * `round` committed, then wakes every member waiting for it. Call it before sending any later frame
 * to the generation's members.
 *
 * @since 0.1.0
 * @category averaging
 */
export const commit = (buffer: SharedArrayBuffer, round: number): void => {
  const header = new Int32Array(buffer, 0, 4)
  Atomics.store(header, COMMITTED, (round + 1) | 0)
  Atomics.notify(header, COMMITTED)
}

/**
 * Arrives at this member's next barrier: gives the barrier's number, or 0 when this member was the
 * last to arrive (it released the barrier).
 */
const arrive = (area: Area): number => {
  const { header } = area
  const n = area.handle.ringSize
  const k = area.passed + 1
  area.passed = k
  const arrived = Atomics.add(header, ARRIVED, 1) + 1
  // The first arrival of a collective wakes members that are not in it yet (`arrivals`).
  if (arrived === n * (k - 1) + 1) Atomics.notify(header, ARRIVED)
  if (arrived < n * k) return k
  Atomics.store(header, RELEASED, k)
  Atomics.notify(header, RELEASED)
  return 0
}

/**
 * Arrives at this member's next barrier and calls `go` once every member arrived (at once when this
 * member was the last), unless `stopped()` says the collective was abandoned first: the wait then
 * ends without calling it (within `waitSliceMs`).
 */
const barrier = (area: Area, stopped: () => boolean, go: () => void): void => {
  const { header } = area
  const k = arrive(area)
  if (k === 0) return go()
  const look = (): void => {
    for (;;) {
      if (stopped()) return
      const released = Atomics.load(header, RELEASED)
      if (released >= k) return go()
      const waited = waitAsync(header, RELEASED, released, waitSliceMs)
      if (waited.async) return void waited.value.then(look)
    }
  }
  look()
}

/**
 * Values of a segment reduced together (`reduceSegment`): the block's float64 sums (32 KiB), its
 * private copies of four rows (4 x 16 KiB) and its float32 means (16 KiB) stay in a core's
 * second-level cache, so the reduction reads each row's segment from shared memory once and writes
 * the result once, instead of passing over segment-long copies and sums (at 8 x 4 M: 2 MB a row
 * copy, 4 MB of sums, out of cache).
 */
const blockValues = 4096

/**
 * Reduces this member's segment into the area's result (module doc, step 2): with WebAssembly SIMD
 * (`RingSimd.meanOfRows`, two float64 sums an instruction), else one block of `blockValues` at a
 * time in JavaScript; the same bits either way. Marks a row with a value that is not finite in the area's `bad` word
 * (then gives `"bad"`; the blocks before it may be written, in a result row no member reads until
 * a commit, which this round never gets).
 */
const reduceSegment = (area: Area, ringRank: number, params: Float32Array, round: number): RingLinkError | "bad" | undefined => {
  const { ringSize: n, length } = area.handle
  const [start, end] = segmentOf(length, n, ringRank)
  const contributing: Array<Float32Array> = []
  for (let j = 0; j < n; j++) {
    const at = area.meta[2 * j]!
    if (at !== round) return new RingLinkError(`ring rank ${j} is at round ${at}, this rank at ${round}`)
    if (area.meta[2 * j + 1] === 1) contributing.push(area.rows[j]!)
  }
  const result = area.resultOf(round)
  if (contributing.length === 0) {
    result.set(params.subarray(start, end), start)
    return undefined
  }
  if (RingSimd.isEnabled()) {
    const bad = RingSimd.meanOfRows(contributing, start, end, result)
    if (bad < 0) return undefined
    markBad(area, bad)
    return "bad"
  }
  const block: Block = {
    sums: area.sumsFor(blockValues),
    copies: [0, 1, 2, 3].map((k) => area.scratchFor(blockValues, k)),
    out: area.scratchFor(blockValues, 4)
  }
  for (let from = start; from < end; from += blockValues) {
    const bad = reduceBlock(block, contributing, result, from, Math.min(end, from + blockValues))
    if (bad >= 0) {
      markBad(area, bad)
      return "bad"
    }
  }
  return undefined
}

/** A member's private arrays of `blockValues` values for `reduceBlock` (`Area.sumsFor`, `Area.scratchFor`). */
interface Block {
  readonly sums: Float64Array
  readonly copies: ReadonlyArray<Float32Array>
  readonly out: Float32Array
}

/**
 * Values [from, to) of the result: the float64 sum of the `contributing` rows' values in ring-rank
 * order, divided by their number, rounded once to float32. Gives -1, or the first index whose sum
 * is not finite (then writes nothing of this block into `result`).
 */
const reduceBlock = (block: Block, contributing: ReadonlyArray<Float32Array>, result: Float32Array, from: number, to: number): number => {
  const { sums, copies, out } = block
  const count = contributing.length
  const m = to - from
  sums.fill(0, 0, m)
  // Up to four rows a pass, added in ring-rank order (the same float64 sum as one row a pass, with
  // a quarter of the passes over the sums). Each is summed from a private copy (one memcpy) rather
  // than read in place: Bun 1.4.5 ran this loop about 3 times slower over the shared memory itself
  // (8 x 407,050), Node and Deno about as fast either way.
  for (let first = 0; first < count; first += 4) {
    const rows = Math.min(4, count - first)
    for (let k = 0; k < rows; k++) copies[k]!.set(contributing[first + k]!.subarray(from, to))
    addRows(sums, copies, rows, m)
  }
  for (let i = 0; i < m; i++) {
    const sum = sums[i]!
    if (!Number.isFinite(sum)) return from + i
    out[i] = sum / count
  }
  result.set(m === out.length ? out : out.subarray(0, m), from)
  return -1
}

/**
 * Marks the first contributing row whose value `at` is not finite (float32 contributions cannot
 * overflow a float64 sum) in the area's `bad` word, and wakes the members watching for the commit
 * (`Area.commits`), who look at the mark.
 */
const markBad = (area: Area, at: number): void => {
  const n = area.handle.ringSize
  for (let j = 0; j < n; j++) {
    if (area.meta[2 * j + 1] === 1 && !Number.isFinite(area.rows[j]![at]!)) {
      Atomics.compareExchange(area.header, BAD, 0, j + 1)
      Atomics.notify(area.header, COMMITTED)
      return
    }
  }
}

/** `sums[i] += rows[0][i] + ... + rows[count - 1][i]` for i below `m`, left to right in float64, for 1 to 4 rows. */
const addRows = (sums: Float64Array, rows: ReadonlyArray<Float32Array>, count: number, m: number): void => {
  const [a, b, c, d] = rows as [Float32Array, Float32Array, Float32Array, Float32Array]
  if (count === 4) for (let i = 0; i < m; i++) sums[i] = sums[i]! + a[i]! + b[i]! + c[i]! + d[i]!
  else if (count === 3) for (let i = 0; i < m; i++) sums[i] = sums[i]! + a[i]! + b[i]! + c[i]!
  else if (count === 2) for (let i = 0; i < m; i++) sums[i] = sums[i]! + a[i]! + b[i]!
  else for (let i = 0; i < m; i++) sums[i] = sums[i]! + a[i]!
}

/**
 * Fault hooks for tests (`RankData.collectiveFault`): `before(phase)` runs before each barrier
 * (phase 0: the first, in place of the ring's reduce-scatter steps; 1: the arrival at the second,
 * after the reduction, in place of its all-gather steps) and gives true when the fault fired there
 * (the member left or hangs): the collective then goes no further and never ends; `corrupt` says
 * whether this member writes NaN into its row instead of its parameters.
 *
 * @since 0.1.0
 * @category model
 */
export interface Faults {
  readonly before?: (phase: 0 | 1) => boolean
  readonly corrupt?: boolean
}

/**
 * What a member's part of one collective ends with (`run`): the area's result row of the round's
 * parity, `undefined` when this member's segment met a row that is not finite, or the
 * `RingLinkError` it failed with.
 *
 * @since 0.1.0
 * @category model
 */
export type Outcome = Float32Array | undefined | RingLinkError

/**
 * This member's part of one collective through the shared `area` (module doc, steps 1 and 2),
 * driven by `Atomics.waitAsync` and callbacks, with no effect runtime: a rank runs it on its
 * round's critical path, where a fiber forked and scheduled a round cost more than the wait.
 * `collective.ringRank`/`ringSize` must be the area's; `contributes` as in `Ring.allReduce`;
 * `params` is only read (it may be `area.contributionRow` itself, written there by the caller).
 * Calls `done` once with the `Outcome` (`allReduce` says what each means), possibly before `run`
 * returns (this member was the last to arrive), unless the returned function was called first: it
 * abandons the collective (a death, a newer generation), and no later step runs. A fault that
 * fired (`Faults.before`) never calls `done`.
 *
 * @since 0.1.0
 * @category averaging
 */
export const run = (
  area: Area,
  collective: Collective,
  params: Float32Array,
  contributes: boolean,
  faults: Faults,
  done: (outcome: Outcome) => void
): (() => void) => {
  let abandoned = false
  const stopped = (): boolean => abandoned
  const { ringRank: r, ringSize: n, round } = collective
  const { handle } = area
  if (handle.ringRank !== r || handle.ringSize !== n || handle.length !== params.length) {
    done(
      new RingLinkError(
        `a shared area for ring rank ${handle.ringRank} of ${handle.ringSize} x ${handle.length} parameters, not ${r} of ${n} x ${params.length}`
      )
    )
    return () => {}
  }
  if (contributes) {
    const row = area.rows[r]!
    if (faults.corrupt === true) row.fill(Number.NaN)
    // A contribution written into the row already (`Area.contributionRow`) is not copied onto itself.
    else if (params.buffer !== row.buffer || params.byteOffset !== row.byteOffset) row.set(params)
  }
  area.meta[2 * r] = round
  area.meta[2 * r + 1] = contributes ? 1 : 0
  if (faults.before?.(0) === true) return () => {}
  barrier(area, stopped, () => {
    const reduced = reduceSegment(area, r, params, round)
    if (reduced instanceof RingLinkError) return done(reduced)
    if (faults.before?.(1) === true) return
    arrive(area)
    done(reduced === "bad" ? undefined : area.resultOf(round))
  })
  return () => {
    abandoned = true
  }
}

/**
 * `run` as an effect: this member's part of one collective through the shared `area`.
 * Gives the area's result row of the round's parity (module doc, step 3),
 * which holds the element-wise float32 mean of the contributing members' `params` once every member
 * did its part (the coordinator's `commit` says so) and until every member contributed to the round
 * after next: copy what must outlive that, and never write into it. Gives `undefined` when this member's segment met
 * a row that is not finite (marked: `Area.badRank`; the member then reports no `RoundDone`). Fails
 * with `RingLinkError` when members disagree on the round; interrupt it to abort (a death, a newer
 * generation).
 *
 * @since 0.1.0
 * @category averaging
 */
export const allReduce = (
  area: Area,
  collective: Collective,
  params: Float32Array,
  contributes = true,
  faults: Faults = {}
): Effect.Effect<Float32Array | undefined, RingLinkError> =>
  Effect.callback<Float32Array | undefined, RingLinkError>((resume) => {
    const stop = run(area, collective, params, contributes, faults, (outcome) =>
      resume(outcome instanceof RingLinkError ? Effect.fail(outcome) : Effect.succeed(outcome))
    )
    return Effect.sync(stop)
  })
