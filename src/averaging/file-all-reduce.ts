/**
 * The `ring` backend's collective for child-process ranks on one machine: an all-reduce through
 * one file per member in a memory-backed folder (`/dev/shm`: `AreaFile`), with one token pass
 * over the ranks' direct links a round instead of the ring's `2 (n - 1)` dependent steps of whole
 * segments. Processes cannot share memory under Node, Bun or Deno, but a positioned write or read
 * of a file in memory is one copy in the kernel, as Open MPI's shared-memory transport does it
 * between processes of one host. The arithmetic is `SharedAllReduce`'s (worker threads' area), so
 * that every backend and transport gives the same bits.
 *
 * Files: per ring generation each member owns one file (`open`, `areaPath`: `area-<generation>-
 * <ringRank>.f32` in the run's private folder), created (mode 0600) and filled with zeros when the
 * generation's first collective starts, so that a full file system shows up then (`ENOSPC`), not
 * in the middle of a round. It holds the member's row (its contribution, `length` float32 values),
 * then its result segment (`Ring.segmentOf(length, n, ringRank)`). Opening the next generation's
 * file removes the member's previous one; the launcher removes the folder with the run.
 *
 * A round, for ring rank `r` of `n` (`allReduce`):
 *
 * 1. The member writes its row into its file (when it contributes; all but its own segment, which
 *    only it reads, from memory), then passes its state around the ring (`n - 1` token steps,
 *    `tokenStep`; each member forwards what it received, so every member learns every member's
 *    state): its row is written and counts, is written and does not count, or it could not use its
 *    file (`ENOSPC`, `EIO`, no folder). The token is the round's only barrier: a member sends its
 *    own state only after its row is complete, so once it holds every state every row is complete.
 * 2. When any member could not use its file, the round falls back, for every member alike, to the
 *    socket ring (`Ring.allReduce`) over the same links. Otherwise the member reads segment `r` of
 *    each contributing row in ring-rank order (positioned reads straight into the SIMD scratch
 *    memory, `RingSimd.meanOfReads`; without SIMD into private copies; its own row from memory),
 *    sums each value in float64 left to right, divides by the number of contributions and rounds
 *    once to float32 (the same bits as `SharedAllReduce`'s reduction), into the caller's vector
 *    for the mean; with no contribution the segment is its own values. It writes the segment into
 *    its file and returns; the rank reports `RoundDone`.
 * 3. The coordinator's `RoundCommitted` means every member reported `RoundDone`, so every member
 *    wrote its result segment before it: the member then reads the other `n - 1` segments into the
 *    same vector (`readResult`).
 *
 * Why no second barrier: a member writes its result segment only after the round's token told it
 * every row is complete, and reports `RoundDone` only after its segment is written; the commit
 * follows every member's `RoundDone`, so it is the barrier before the results are read.
 *
 * Why one row and one result region per file suffice across consecutive rounds: a member rewrites
 * its row for round `k + 1` only after round `k` committed, when every member had read the rows
 * of round `k` (each reads them before its `RoundDone`). A member may start round `k + 1` while
 * another still reads round `k`'s results, but it rewrites its result segment only after round
 * `k + 1`'s token reached it from every member, and each member sends its token only after it
 * applied round `k`'s commit, which it does after reading round `k`'s results: so no result is
 * overwritten while a member still reads it.
 *
 * Aborts: a death mid-collective leaves the token or a `RoundDone` missing, so the round never
 * commits; the survivors are interrupted (`DeclareDead`, a newer `FormRing`) and redo the round
 * in the next generation's files from their pre-round parameters. The collective writes only into
 * the member's own file, never into what its caller holds. Reads and writes are synchronous and
 * short (one copy of a row or segment each); the waits are for link steps, which leave the event
 * loop free.
 *
 * A contribution with a value that is not finite (a rank writing past its own check): the reducer
 * that meets it gives `{ bad: j }` (the first contributing ring rank `j` whose row holds one) and
 * withholds its `RoundDone`, so the round never commits. When `j` is the reducer itself it fails;
 * else the rank sends a notice (`noticeStep`, the bad ring rank) on its link, which each member
 * forwards until it reaches `j`, which fails its collective (`RingLinkError`: it dies and is
 * declared dead). The others apply nothing and redo the round after the `DeclareDead`. A member
 * whose own file cannot be read after the token said it could fails its collective likewise.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as AreaFile from "../platform/area-file.ts"
import * as Finite from "./finite.ts"
import { allReduce as ringAllReduce, type Collective, RingLinkError, type RingInbox, segmentOf, tokenStepBase } from "./ring.ts"
import * as RingSimd from "./ring-simd.ts"

/**
 * The first step number of a round's tokens (step `tokenStep + s` for `s` in `[0, n - 1)`;
 * `Ring.tokenStepBase`, which the coordinator's relay checks).
 *
 * @since 0.1.0
 * @category model
 */
export const tokenStep = tokenStepBase

/**
 * The step number of a notice that a row was not finite (module doc): one value, the ring rank of
 * the bad row.
 *
 * @since 0.1.0
 * @category model
 */
export const noticeStep = 0x7fff_ffff

/** What a token says of its member: row written and counted, written and not counted, no file. */
const contributed = 1
const idle = 0
const noFile = 2

/**
 * Bytes of all `ringSize` files of a generation over `length` parameters: `4 length (ringSize + 1)`.
 *
 * @since 0.1.0
 * @category model
 */
export const areaBytes = (ringSize: number, length: number): number => 4 * length * (ringSize + 1)

/**
 * The file of ring rank `ringRank` in `generation` under `folder`.
 *
 * @since 0.1.0
 * @category model
 */
export const areaPath = (folder: string, generation: number, ringRank: number): string =>
  `${folder.replace(/\/+$/, "")}/area-${generation}-${ringRank}.f32`

/**
 * One member's files of one generation (`open`): its own (`fd`, undefined when it could not make
 * it: `problem` says why) and the other members' (opened when first read).
 *
 * @since 0.1.0
 * @category model
 */
export interface FileArea {
  readonly folder: string
  readonly generation: number
  readonly ringRank: number
  readonly ringSize: number
  readonly length: number
  readonly path: string
  fd: number | undefined
  problem: string | undefined
  readonly readers: Array<number | undefined>
  /** Private copies of each contributing row's segment (JavaScript's reduction; allocated once). */
  readonly rows: Array<Float32Array>
  /** The last round's mean of this member's segment: a view of the caller's vector, or `own`. */
  segment: Float32Array | undefined
  /** The segment's mean when the caller gave no vector to hold it (allocated once). */
  own: Float32Array | undefined
}

const describe = (error: unknown): string => (error instanceof Error ? ((error as { code?: string }).code ?? error.message) : String(error))

/**
 * Opens this member's file of `generation` (module doc, "Files") in `folder`: creates and fills it
 * (`AreaFile.createAreaFile`), after closing `previous` (this member's area of an older generation)
 * and removing its file. Never fails: a file that cannot be made leaves `fd` undefined and says why
 * in `problem` (every round of the generation then falls back to the socket ring).
 *
 * @since 0.1.0
 * @category constructors
 */
export const open = (
  folder: string,
  shape: { readonly generation: number; readonly ringRank: number; readonly ringSize: number; readonly length: number },
  previous?: FileArea
): FileArea => {
  if (previous !== undefined) close(previous)
  const { generation, ringRank, ringSize, length } = shape
  const path = areaPath(folder, generation, ringRank)
  const area: FileArea = {
    folder,
    generation,
    ringRank,
    ringSize,
    length,
    path,
    fd: undefined,
    problem: undefined,
    readers: [],
    rows: [],
    segment: undefined,
    own: undefined
  }
  const [start, end] = segmentOf(length, ringSize, ringRank)
  try {
    area.fd = AreaFile.createAreaFile(path, 4 * (length + end - start))
  } catch (error) {
    area.problem = describe(error)
  }
  return area
}

/**
 * Closes every file `area` opened and removes this member's own; never fails.
 *
 * @since 0.1.0
 * @category constructors
 */
export const close = (area: FileArea): void => {
  for (const fd of area.readers) if (fd !== undefined) AreaFile.closeFile(fd)
  area.readers.length = 0
  if (area.fd !== undefined) AreaFile.closeFile(area.fd)
  area.fd = undefined
  AreaFile.removeFile(area.path)
}

/** The descriptor of ring rank `j`'s file (this member's own, or opened now). Throws as `AreaFile`. */
const fileOf = (area: FileArea, j: number): number => {
  if (j === area.ringRank) return area.fd!
  const held = area.readers[j]
  if (held !== undefined) return held
  const fd = AreaFile.openAreaFile(areaPath(area.folder, area.generation, j))
  area.readers[j] = fd
  return fd
}

/**
 * Fault hooks for tests, as `SharedAllReduce.Faults`: `before(0)` runs after the row is written,
 * before the token; `before(1)` after the reduction, before the result is returned (so the rank
 * never reports `RoundDone`); `corrupt` writes NaN into the row instead of the parameters.
 *
 * @since 0.1.0
 * @category model
 */
export interface Faults {
  readonly before?: (phase: 0 | 1) => Effect.Effect<void>
  readonly corrupt?: boolean
}

/**
 * What one member's part of a round gave: `file` (its segment is written; the mean is read once
 * the round commits: `readResult`), `ring` (the round fell back to the socket ring: `mean`, the
 * caller's own), or `bad` (ring rank `rank`'s row held a value that is not finite; module doc).
 *
 * @since 0.1.0
 * @category model
 */
export type Outcome =
  | { readonly _tag: "file" }
  | { readonly _tag: "ring"; readonly mean: Float32Array; readonly problem: string | undefined }
  | { readonly _tag: "bad"; readonly rank: number }

/**
 * Writes this member's row `row` into its file (when it contributes), but for its own segment,
 * which only this member reduces, from `row` in memory; gives its token state.
 */
const writeRow = (area: FileArea, row: Float32Array, contributes: boolean): number => {
  if (area.fd === undefined) return noFile
  if (!contributes) return idle
  const [start, end] = segmentOf(row.length, area.ringSize, area.ringRank)
  try {
    if (start > 0) AreaFile.writeAt(area.fd, row.subarray(0, start), 0)
    if (end < row.length) AreaFile.writeAt(area.fd, row.subarray(end), 4 * end)
    return contributed
  } catch (error) {
    area.problem = describe(error)
    return noFile
  }
}

/** Passes the states around the ring (module doc, step 1): gives every member's, by ring rank. */
const passTokens = (inbox: RingInbox, collective: Collective, own: number): Effect.Effect<Array<number>, RingLinkError> =>
  Effect.gen(function* () {
    const { ringRank: r, ringSize: n, generation, round } = collective
    const states = new Array<number>(n).fill(-1)
    states[r] = own
    let outgoing = own
    for (let s = 0; s < n - 1; s++) {
      yield* inbox.link.send({ generation, round, step: tokenStep + s, data: Float64Array.of(outgoing) })
      const message = yield* inbox.take(generation, round, tokenStep + s)
      const value = message.data instanceof Float64Array && message.data.length === 1 ? message.data[0]! : Number.NaN
      if (value !== contributed && value !== idle && value !== noFile)
        return yield* Effect.fail(new RingLinkError(`token step ${s} of round ${round} was not a token`))
      states[(((r - 1 - s) % n) + n) % n] = value
      outgoing = value
    }
    return states
  })

/**
 * `segment[i]` = the float64 sum of `rows[k][i]` in order, divided by `rows.length`, rounded once to
 * float32 (`RingSimd.meanOfRows`'s bits, in JavaScript); gives -1 or the first index whose sum is
 * not finite.
 */
const meanOf = (rows: ReadonlyArray<Float32Array>, segment: Float32Array): number => {
  const count = rows.length
  for (let i = 0; i < segment.length; i++) {
    let sum = 0
    for (let k = 0; k < count; k++) sum = sum + rows[k]![i]!
    if (!Number.isFinite(sum)) return i
    segment[i] = sum / count
  }
  return -1
}

/**
 * Reduces this member's segment from the rows (module doc, step 2) into `mean`'s segment (when
 * `mean` has `length` values: the caller's vector, so the segment is never copied again; else an
 * array of the area's) and writes it into its file; this member's own row is `row`, in memory.
 * Gives -1, or the ring rank of the first contributing row holding a value that is not finite.
 * Throws as `AreaFile` when a file cannot be read or written.
 */
const reduce = (area: FileArea, row: Float32Array, states: ReadonlyArray<number>, mean: Float32Array | undefined): number => {
  const { ringRank: r, ringSize: n, length } = area
  const [start, end] = segmentOf(length, n, r)
  const size = end - start
  const segment = mean !== undefined && mean.length === length ? mean.subarray(start, end) : ownSegment(area, size)
  area.segment = segment
  const contributing: Array<number> = []
  for (let j = 0; j < n; j++) if (states[j] === contributed) contributing.push(j)
  if (contributing.length === 0) segment.set(row.subarray(start, end))
  else {
    const at = RingSimd.isEnabled()
      ? RingSimd.meanOfReads(
          contributing.length,
          size,
          (k, into, from) => readRow(area, row, contributing[k]!, into, start + from),
          segment
        )
      : meanOf(privateRows(area, row, contributing, start, size), segment)
    if (at >= 0) return badRow(area, row, contributing, start + at)
  }
  AreaFile.writeAt(area.fd!, segment, 4 * length)
  return -1
}

/** The area's own array for this member's segment (`size` values; allocated once). */
const ownSegment = (area: FileArea, size: number): Float32Array => {
  if (area.own === undefined || area.own.length !== size) area.own = new Float32Array(size)
  return area.own
}

/**
 * Fills `into` with ring rank `j`'s row from value `at` on: this member's own `row` from memory
 * (its file does not hold its own segment: `writeRow`), another member's from its file.
 */
const readRow = (area: FileArea, row: Float32Array, j: number, into: Float32Array, at: number): void => {
  if (j === area.ringRank) into.set(row.subarray(at, at + into.length))
  else AreaFile.readAt(fileOf(area, j), into, 4 * at)
}

/** Segment `[start, start + size)` of each contributing row, in private arrays (JavaScript's reduction). */
const privateRows = (
  area: FileArea,
  row: Float32Array,
  contributing: ReadonlyArray<number>,
  start: number,
  size: number
): Array<Float32Array> =>
  contributing.map((j, k) => {
    if (j === area.ringRank) return row.subarray(start, start + size)
    area.rows[k] ??= new Float32Array(size)
    AreaFile.readAt(fileOf(area, j), area.rows[k]!, 4 * start)
    return area.rows[k]!
  })

/** The first contributing ring rank whose row's value `index` is not finite (float32 values cannot overflow a float64 sum). */
const badRow = (area: FileArea, row: Float32Array, contributing: ReadonlyArray<number>, index: number): number => {
  const value = new Float32Array(1)
  for (const j of contributing) {
    readRow(area, row, j, value, index)
    if (!Number.isFinite(value[0]!)) return j
  }
  return contributing[0]!
}

/**
 * This member's part of one round through `area` (module doc, steps 1 and 2), with `inbox` over its
 * direct links for the token (and the socket ring when it falls back); `collective` must match the
 * area's generation, ring rank and size, and `params` its length. `into` as in `Ring.allReduce`
 * (the fallback's mean goes there); when it has `length` values this member's segment of the mean
 * is reduced straight into it (`readResult` into the same vector then reads only the others').
 * Fails with `RingLinkError` when a link fails, a neighbour breaks the protocol or a file the token
 * said was there cannot be read or written; interrupt it to abort (a death, a newer generation).
 *
 * @since 0.1.0
 * @category averaging
 */
export const allReduce = (
  area: FileArea,
  inbox: RingInbox,
  collective: Collective,
  params: Float32Array,
  contributes = true,
  faults: Faults = {},
  into?: Float32Array
): Effect.Effect<Outcome, RingLinkError> =>
  Effect.gen(function* () {
    const { ringRank: r, ringSize: n, generation } = collective
    if (area.ringRank !== r || area.ringSize !== n || area.generation !== generation || area.length !== params.length) {
      return yield* Effect.fail(
        new RingLinkError(
          `a file area for ring rank ${area.ringRank} of ${area.ringSize} x ${area.length} parameters in generation ${area.generation}, not ${r} of ${n} x ${params.length} in ${generation}`
        )
      )
    }
    const row = faults.corrupt === true ? new Float32Array(params.length).fill(Number.NaN) : params
    const own = writeRow(area, row, contributes)
    if (faults.before !== undefined) yield* faults.before(0)
    const states = yield* passTokens(inbox, collective, own)
    if (states.includes(noFile)) {
      const mean = yield* ringAllReduce(inbox, collective, params, contributes, into)
      return { _tag: "ring", mean, problem: area.problem } as const
    }
    const bad = yield* Effect.try({
      try: () => reduce(area, row, states, into),
      catch: (error) => new RingLinkError(`the file area failed: ${describe(error)}`)
    })
    if (bad >= 0) return { _tag: "bad", rank: bad } as const
    if (faults.before !== undefined) yield* faults.before(1)
    return { _tag: "file" } as const
  })

/**
 * Reads the committed round's mean (module doc, step 3) into `into` (`length` values): every
 * other member's result segment from its file, this member's own from memory (nothing to do when
 * `into` is the vector `allReduce` reduced it into). Throws as `AreaFile` when a file cannot be
 * read, and a `RangeError` naming the member and its file when a segment holds a value that is not
 * finite: a mean of finite rows is finite, so something else wrote into the file (another process
 * of this user's, a fault of the memory) and the rank must not apply it. The check is SIMD when
 * `into` comes from `Finite.alloc`.
 *
 * @since 0.1.0
 * @category averaging
 */
export const readResult = (area: FileArea, into: Float32Array): void => {
  const { ringSize: n, length } = area
  for (let j = 0; j < n; j++) {
    const [start, end] = segmentOf(length, n, j)
    if (j === area.ringRank && area.segment !== undefined) {
      const own = area.segment
      if (own.buffer !== into.buffer || own.byteOffset !== into.byteOffset + 4 * start) into.set(own, start)
    } else {
      const segment = into.subarray(start, end)
      AreaFile.readAt(fileOf(area, j), segment, 4 * length)
      if (!Finite.allFinite(segment))
        throw new RangeError(`ring rank ${j}'s result in ${areaPath(area.folder, area.generation, j)} holds a value that is not finite`)
    }
  }
}
