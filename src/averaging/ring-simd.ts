/**
 * WebAssembly SIMD for the ring collective's per-value loops (`Ring.allReduce`): adding this rank's
 * float32 values into a received float64 partial sum with a finite check, checking a received
 * float32 segment, dividing the finished sums into the float32 mean, and widening this rank's
 * segment for the first step; and for the shared all-reduce's reduction of a segment
 * (`meanOfRows`). WebAssembly code reads only its own memory, so each call copies its operands
 * into one scratch memory (a copy of the bytes, which the engine runs far faster than a loop of
 * float loads and stores), runs the SIMD loop there (two float64 or four float32 values an
 * instruction) and copies the result back. A step received on a direct link lies in a memory of its
 * own instead (`stepBuffer`, which the link's buffer pool allocates): the loops then run on it where
 * it is, and only this rank's values are copied in, a chunk at a time (the `InPlace` calls). The arithmetic is the JavaScript loops': each sum is
 * one float64 add of the float32 value widened exactly, each mean one float64 division rounded
 * once to float32 (to nearest, ties to even, as a `Float32Array` store), so both give the same
 * bits.
 *
 * The module (hand-assembled below, as `Finite`'s) imports its memory and exports:
 * - `add(sumsAt, ownAt, sumsEnd) -> i32`: for each float64 at byte `sumsAt + 8 i` below
 *   `sumsEnd`, adds the float32 at `ownAt + 4 i` (widened) and stores the sum in place; 1 when some
 *   sum is NaN or an infinity (exponent all ones), else 0. Two values a turn: the caller pads an
 *   odd count with a zero sum and a zero value.
 * - `check(at, end) -> i32`: 1 when some float32 in bytes `[at, end)` is NaN or an infinity. Four
 *   values a turn: the caller pads to a multiple of four with zeros.
 * - `divide(sumsAt, outAt, sumsEnd, count)`: the float32 at `outAt + 4 i` is the float64 at
 *   `sumsAt + 8 i` divided by `count` and rounded. Two values a turn.
 * - `widen(ownAt, sumsAt, sumsEnd)`: the float64 at `sumsAt + 8 i` is the float32 at `ownAt + 4 i`.
 *   Two values a turn.
 *
 * `available` is false where WebAssembly or its SIMD is missing; then `RingLoops` keeps its JavaScript
 * loops.
 *
 * @since 0.1.0
 */

import { section, u32 } from "./wasm-bytes.ts"

/** `v128.const` of four copies of the little-endian i32 `value`. */
const i32x4 = (value: number): Array<number> => {
  const lane = [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, (value >>> 24) & 0xff]
  return [0xfd, 0x0c, ...lane, ...lane, ...lane, ...lane]
}

/** `v128.const` of two copies of 0x7ff0000000000000, a float64's exponent bits. */
const exponent64 = [0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f]

const localGet = (index: number): Array<number> => [0x20, index]
const localSet = (index: number): Array<number> => [0x21, index]
const i32Add = (index: number, bytes: number): Array<number> => [...localGet(index), 0x41, bytes, 0x6a, ...localSet(index)]

/** `add`: locals 0 = sumsAt, 1 = ownAt, 2 = sumsEnd (params), 3 = seen (v128), 4 = sum (v128). */
const addBody = [
  ...[0x01, 0x02, 0x7b], // locals: two v128
  ...[0x02, 0x40, 0x03, 0x40], // block, loop
  ...[...localGet(0), ...localGet(2), 0x4f, 0x0d, 0x01], // if sumsAt >= sumsEnd: leave the block
  ...localGet(0), // the address the store takes
  ...[...localGet(0), 0xfd, 0x00, 0x03, 0x00], // v128.load sumsAt (align 8)
  ...[...localGet(1), 0xfd, 0x5d, 0x02, 0x00, 0xfd, 0x5f], // v128.load64_zero ownAt, f64x2.promote_low_f32x4
  ...[0xfd, 0xf0, 0x01, 0x22, 0x04], // f64x2.add, local.tee sum
  ...[0xfd, 0x0b, 0x03, 0x00], // v128.store sumsAt
  ...[...localGet(3), ...localGet(4), ...exponent64, 0xfd, 0x4e], // seen, sum & exponent
  ...[...exponent64, 0xfd, 0xd6, 0x01, 0xfd, 0x50, ...localSet(3)], // i64x2.eq exponent: all ones where not finite; seen |= that
  ...i32Add(0, 16),
  ...i32Add(1, 8),
  ...[0x0c, 0x00, 0x0b, 0x0b], // again; end loop, end block
  ...[...localGet(3), 0xfd, 0x53], // v128.any_true seen
  0x0b
]

/** `check`: locals 0 = at, 1 = end (params), 2 = seen (v128). */
const checkBody = [
  ...[0x01, 0x01, 0x7b], // locals: one v128
  ...[0x02, 0x40, 0x03, 0x40], // block, loop
  ...[...localGet(0), ...localGet(1), 0x4f, 0x0d, 0x01], // if at >= end: leave the block
  ...localGet(2),
  ...[...localGet(0), 0xfd, 0x00, 0x02, 0x00], // v128.load at (align 4)
  ...[...i32x4(0x7f800000), 0xfd, 0x4e], // and the exponent bits
  ...[...i32x4(0x7f800000), 0xfd, 0x37, 0xfd, 0x50, ...localSet(2)], // i32x4.eq: all ones where not finite; seen |= that
  ...i32Add(0, 16),
  ...[0x0c, 0x00, 0x0b, 0x0b],
  ...[...localGet(2), 0xfd, 0x53],
  0x0b
]

/** `divide`: locals 0 = sumsAt, 1 = outAt, 2 = sumsEnd, 3 = count (f64) (params). */
const divideBody = [
  0x00, // no locals
  ...[0x02, 0x40, 0x03, 0x40], // block, loop
  ...[...localGet(0), ...localGet(2), 0x4f, 0x0d, 0x01], // if sumsAt >= sumsEnd: leave the block
  ...localGet(1), // the address the store takes
  ...[...localGet(0), 0xfd, 0x00, 0x03, 0x00], // v128.load sumsAt (align 8)
  ...[...localGet(3), 0xfd, 0x14, 0xfd, 0xf3, 0x01], // f64x2.splat count, f64x2.div
  ...[0xfd, 0x5e], // f32x4.demote_f64x2_zero: rounded to float32 as a Float32Array store rounds
  ...[0xfd, 0x5b, 0x02, 0x00, 0x00], // v128.store64_lane outAt (align 4), lane 0: the two float32
  ...i32Add(0, 16),
  ...i32Add(1, 8),
  ...[0x0c, 0x00, 0x0b, 0x0b],
  0x0b
]

/** `widen`: locals 0 = ownAt, 1 = sumsAt, 2 = sumsEnd (params). */
const widenBody = [
  0x00, // no locals
  ...[0x02, 0x40, 0x03, 0x40], // block, loop
  ...[...localGet(1), ...localGet(2), 0x4f, 0x0d, 0x01], // if sumsAt >= sumsEnd: leave the block
  ...localGet(1),
  ...[...localGet(0), 0xfd, 0x5d, 0x02, 0x00, 0xfd, 0x5f], // v128.load64_zero ownAt, f64x2.promote_low_f32x4
  ...[0xfd, 0x0b, 0x03, 0x00], // v128.store sumsAt
  ...i32Add(0, 8),
  ...i32Add(1, 16),
  ...[0x0c, 0x00, 0x0b, 0x0b],
  0x0b
]

const name = (text: string): Array<number> => [text.length, ...Array.from(text, (c) => c.charCodeAt(0))]

const moduleBytes = (): Uint8Array =>
  Uint8Array.from([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    // types: 0 (i32, i32, i32) -> i32; 1 (i32, i32) -> i32; 2 (i32, i32, i32, f64) -> (); 3 (i32, i32, i32) -> ()
    ...section(1, [
      ...[0x04, 0x60, 0x03, 0x7f, 0x7f, 0x7f, 0x01, 0x7f, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f],
      ...[0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7c, 0x00, 0x60, 0x03, 0x7f, 0x7f, 0x7f, 0x00]
    ]),
    ...section(2, [0x01, ...name("m"), ...name("mem"), 0x02, 0x00, 0x01]), // import "m" "mem": memory, at least 1 page
    ...section(3, [0x04, 0x00, 0x01, 0x02, 0x03]), // add, check, divide, widen
    ...section(7, [
      ...[0x04, ...name("add"), 0x00, 0x00, ...name("check"), 0x00, 0x01],
      ...[...name("divide"), 0x00, 0x02, ...name("widen"), 0x00, 0x03]
    ]),
    ...section(10, [0x04, ...[addBody, checkBody, divideBody, widenBody].flatMap((body) => [...u32(body.length), ...body])])
  ])

interface Memory {
  readonly buffer: ArrayBuffer
  readonly grow: (pages: number) => number
}

interface Wasm {
  readonly Module: new (bytes: Uint8Array) => object
  readonly Instance: new (module: object, imports: object) => { readonly exports: Record<string, unknown> }
  readonly Memory: new (descriptor: { readonly initial: number }) => Memory
}

const pageBytes = 65_536

interface Kernel {
  readonly memory: Memory
  readonly add: (sumsAt: number, ownAt: number, sumsEnd: number) => number
  readonly check: (at: number, end: number) => number
  readonly divide: (sumsAt: number, outAt: number, sumsEnd: number, count: number) => void
  readonly widen: (ownAt: number, sumsAt: number, sumsEnd: number) => void
}

/** The compiled module, or undefined where WebAssembly or its SIMD is missing. */
const compiled: { readonly wasm: Wasm; readonly module: object } | undefined = (() => {
  const wasm = (globalThis as { readonly WebAssembly?: Wasm }).WebAssembly
  if (wasm === undefined) return undefined
  try {
    return { wasm, module: new wasm.Module(moduleBytes()) }
  } catch {
    return undefined
  }
})()

/** An instance of the module over a new memory of `pages` pages. */
const instantiate = (c: NonNullable<typeof compiled>, pages: number): Kernel => {
  const memory = new c.wasm.Memory({ initial: pages })
  const instance = new c.wasm.Instance(c.module, { m: { mem: memory } })
  const add = instance.exports["add"] as Kernel["add"]
  const check = instance.exports["check"] as Kernel["check"]
  const divide = instance.exports["divide"] as Kernel["divide"]
  const widen = instance.exports["widen"] as Kernel["widen"]
  return { memory, add, check, divide, widen }
}

/** The scratch instance and its memory, or undefined where WebAssembly or its SIMD is missing. */
const kernel: Kernel | undefined = (() => {
  try {
    return compiled === undefined ? undefined : instantiate(compiled, 1)
  } catch {
    return undefined
  }
})()

/**
 * Whether the SIMD loops run here (WebAssembly with SIMD). Tests may turn them off with
 * `setEnabled` to compare both paths.
 *
 * @since 0.1.0
 * @category simd
 */
export const available = kernel !== undefined

let enabled = available

/**
 * Turns the SIMD loops on or off (off: `RingLoops` uses its JavaScript loops); on only where
 * `available`. Returns whether they are on. For tests and benchmarks.
 *
 * @since 0.1.0
 * @category simd
 */
export const setEnabled = (on: boolean): boolean => {
  enabled = on && available
  return enabled
}

/** Whether `RingLoops` should call this module now. @since 0.1.0 @category simd */
export const isEnabled = (): boolean => enabled

/** The scratch memory's bytes, grown to at least `bytes`. */
const bytesOf = (k: Kernel, bytes: number): ArrayBuffer => {
  const have = k.memory.buffer.byteLength
  if (have < bytes) k.memory.grow(Math.ceil((bytes - have) / pageBytes))
  return k.memory.buffer
}

/**
 * Values a call copies into the scratch memory at once: the copies and the loop then stay in the
 * processor's cache (16 KiB of sums and 8 KiB of values). One copy of a whole segment of a large
 * model made the add slower than the JavaScript loop.
 */
export const chunkValues = 2048

/**
 * `data[i] += params[start + i]` for `i` in `[0, end - start)` (float64 sums, the float32 values
 * widened), and whether every resulting sum is finite. `RingLoops.addOwnFinite` with
 * `contributes`, the same bits. Call only when `isEnabled()`.
 *
 * @since 0.1.0
 * @category simd
 */
export const addOwnFinite = (data: Float64Array, params: Float32Array, start: number, end: number): boolean => {
  const k = kernel!
  const ownAt = chunkValues * 8
  const buffer = bytesOf(k, ownAt + chunkValues * 4)
  const sums = new Float64Array(buffer, 0, chunkValues)
  const own = new Float32Array(buffer, ownAt, chunkValues)
  const count = end - start
  let notFinite = 0
  for (let from = 0; from < count; from += chunkValues) {
    const size = Math.min(chunkValues, count - from)
    sums.set(data.subarray(from, from + size))
    own.set(params.subarray(start + from, start + from + size))
    if (size % 2 === 1) {
      sums[size] = 0
      own[size] = 0
    }
    notFinite |= k.add(0, ownAt, 8 * (size + (size % 2)))
    data.set(size === chunkValues ? sums : sums.subarray(0, size), from)
  }
  return notFinite === 0
}

/**
 * `out[start + i] = data[i]`, and whether every value is finite (checked on the copy in the
 * scratch memory, which is then what is stored). `RingLoops.storeFinite`. Call only when
 * `isEnabled()`.
 *
 * @since 0.1.0
 * @category simd
 */
export const storeFinite = (out: Float32Array, start: number, data: Float32Array): boolean => {
  const k = kernel!
  const copy = new Float32Array(bytesOf(k, chunkValues * 4), 0, chunkValues)
  let notFinite = 0
  for (let from = 0; from < data.length; from += chunkValues) {
    const size = Math.min(chunkValues, data.length - from)
    copy.set(data.subarray(from, from + size))
    const padded = Math.ceil(size / 4) * 4
    if (padded > size) copy.fill(0, size, padded)
    notFinite |= k.check(0, 4 * padded)
    out.set(size === chunkValues ? copy : copy.subarray(0, size), start + from)
  }
  return notFinite === 0
}

/**
 * `out[start + i] = Math.fround(sum[i] / count)` for `i` in `[0, end - start)`:
 * `RingLoops.divideInto`, the same bits (a float64 division, then one rounding to float32). Call only when
 * `isEnabled()`.
 *
 * @since 0.1.0
 * @category simd
 */
export const divideInto = (out: Float32Array, sum: Float64Array, start: number, end: number, count: number): void => {
  const k = kernel!
  const outAt = chunkValues * 8
  const buffer = bytesOf(k, outAt + chunkValues * 4)
  const sums = new Float64Array(buffer, 0, chunkValues)
  const means = new Float32Array(buffer, outAt, chunkValues)
  const length = end - start
  for (let from = 0; from < length; from += chunkValues) {
    const size = Math.min(chunkValues, length - from)
    sums.set(sum.subarray(from, from + size))
    if (size % 2 === 1) sums[size] = 0
    k.divide(0, outAt, 8 * (size + (size % 2)), count)
    out.set(size === chunkValues ? means : means.subarray(0, size), start + from)
  }
}

/**
 * `into[i] = params[start + i]` for `i` in `[0, end - start)`, widened to float64 (exact):
 * `RingLoops.widen`. Call only when `isEnabled()`.
 *
 * @since 0.1.0
 * @category simd
 */
export const widen = (into: Float64Array, params: Float32Array, start: number, end: number): void => {
  const k = kernel!
  const ownAt = chunkValues * 8
  const buffer = bytesOf(k, ownAt + chunkValues * 4)
  const sums = new Float64Array(buffer, 0, chunkValues)
  const own = new Float32Array(buffer, ownAt, chunkValues)
  const length = end - start
  for (let from = 0; from < length; from += chunkValues) {
    const size = Math.min(chunkValues, length - from)
    own.set(params.subarray(start + from, start + from + size))
    if (size % 2 === 1) own[size] = 0
    k.widen(ownAt, 0, 8 * (size + (size % 2)))
    into.set(size === chunkValues ? sums : sums.subarray(0, size), from)
  }
}

/**
 * `result[i] = Math.fround(sum / rows.length)` for `i` in `[from, to)`, where `sum` is `0 +
 * rows[0][i] + rows[1][i] + ...` in float64, left to right: the shared all-reduce's reduction of a
 * segment (`SharedAllReduce` module doc, step 2), the same bits as its JavaScript loop. Gives -1,
 * or the first `i` whose sum is NaN or an infinity (then `result` holds the means before that
 * chunk only). Each row's chunk is copied into the scratch memory (one memcpy, which also spares
 * Bun its slow reads of shared memory in a loop). Call only when `isEnabled()`, with `rows` not empty.
 *
 * @since 0.1.0
 * @category simd
 */
export const meanOfRows = (rows: ReadonlyArray<Float32Array>, from: number, to: number, result: Float32Array): number => {
  const k = kernel!
  const ownAt = chunkValues * 8
  const outAt = ownAt + chunkValues * 4
  const buffer = bytesOf(k, outAt + chunkValues * 4)
  const sums = new Float64Array(buffer, 0, chunkValues)
  const own = new Float32Array(buffer, ownAt, chunkValues)
  const means = new Float32Array(buffer, outAt, chunkValues)
  for (let at = from; at < to; at += chunkValues) {
    const size = Math.min(chunkValues, to - at)
    const end = 8 * (size + (size % 2))
    // +0, as the JavaScript loop's sums start: -0 values then sum to +0 there too.
    sums.fill(0, 0, size + 1)
    let notFinite = 0
    for (const row of rows) {
      own.set(row.subarray(at, at + size))
      if (size % 2 === 1) own[size] = 0
      notFinite |= k.add(0, ownAt, end)
    }
    if (notFinite !== 0) {
      for (let i = 0; i < size; i++) if (!Number.isFinite(sums[i]!)) return at + i
    }
    k.divide(0, outAt, end, rows.length)
    result.set(size === chunkValues ? means : means.subarray(0, size), at)
  }
  return -1
}

/**
 * Values `meanOfReads` reads of a row at once: 64 KiB a read, so that a segment of a large model
 * takes tens of reads a row, not hundreds (each a system call), with the sums (128 KiB) still in a
 * core's second-level cache.
 */
const readChunkValues = 16_384

/**
 * `meanOfRows` over `count` rows that are not in this process's memory (another process's file,
 * `FileAllReduce`): `read(row, into, at)` fills `into` (a view of the scratch memory) with values
 * `[at, at + into.length)` of row `row`, so each value is copied once, by the read, and summed
 * where it landed. `result[i]` for `i` in `[0, length)`; the same bits as `meanOfRows`. Gives -1,
 * or the first `i` whose sum is NaN or an infinity (`result` then holds the means before that
 * chunk only). Call only when `isEnabled()`, with `count` at least 1.
 *
 * @since 0.1.0
 * @category simd
 */
export const meanOfReads = (
  count: number,
  length: number,
  read: (row: number, into: Float32Array, at: number) => void,
  result: Float32Array
): number => {
  const k = kernel!
  const ownAt = readChunkValues * 8
  const outAt = ownAt + readChunkValues * 4
  const buffer = bytesOf(k, outAt + readChunkValues * 4)
  const sums = new Float64Array(buffer, 0, readChunkValues)
  const own = new Float32Array(buffer, ownAt, readChunkValues)
  const means = new Float32Array(buffer, outAt, readChunkValues)
  for (let at = 0; at < length; at += readChunkValues) {
    const size = Math.min(readChunkValues, length - at)
    const end = 8 * (size + (size % 2))
    // +0, as the JavaScript loop's sums start (`meanOfRows`).
    sums.fill(0, 0, size + 1)
    let notFinite = 0
    for (let row = 0; row < count; row++) {
      read(row, own.subarray(0, size), at)
      if (size % 2 === 1) own[size] = 0
      notFinite |= k.add(0, ownAt, end)
    }
    if (notFinite !== 0) {
      for (let i = 0; i < size; i++) if (!Number.isFinite(sums[i]!)) return at + i
    }
    k.divide(0, outAt, end, count)
    result.set(size === readChunkValues ? means : means.subarray(0, size), at)
  }
  return -1
}

/** Bytes past a step buffer's capacity where a call copies a chunk of this rank's float32 values. */
const ownScratchBytes = chunkValues * 4

/** The instance over each memory `stepBuffer` made, and where its scratch starts. */
const steps = new WeakMap<ArrayBufferLike, { readonly kernel: Kernel; readonly ownAt: number }>()

/**
 * A buffer of at least `capacityBytes` for the ring steps a rank receives on its direct links
 * (`LinkFrames.BufferPool`'s `allocate`): the memory of an instance of the module of its own, with
 * room past `capacityBytes` for one chunk of this rank's values, so that the `InPlace` calls below
 * add into a received step, check it or read it where it is, without copying it into the scratch
 * memory and back. A plain `ArrayBuffer` where the SIMD loops are not available.
 *
 * @since 0.1.0
 * @category simd
 */
export const stepBuffer = (capacityBytes: number): ArrayBuffer => {
  if (compiled === undefined || !available) return new ArrayBuffer(capacityBytes)
  try {
    const k = instantiate(compiled, Math.ceil((capacityBytes + ownScratchBytes) / pageBytes))
    const buffer = k.memory.buffer
    steps.set(buffer, { kernel: k, ownAt: buffer.byteLength - ownScratchBytes })
    return buffer
  } catch {
    return new ArrayBuffer(capacityBytes)
  }
}

/** The instance of the `stepBuffer` that `view` lies in, clear of its scratch; else `undefined`. */
const stepOf = (view: ArrayBufferView): { readonly kernel: Kernel; readonly ownAt: number } | undefined => {
  const step = steps.get(view.buffer)
  return step !== undefined && view.byteOffset + view.byteLength <= step.ownAt ? step : undefined
}

/**
 * `addOwnFinite` on a step that lies in a `stepBuffer`, where it is; `undefined`, having done
 * nothing, when it does not. Pairs of values in SIMD, an odd last one in JavaScript (the same
 * float64 add): the same bits. Call only when `isEnabled()`.
 *
 * @since 0.1.0
 * @category simd
 */
export const addOwnInPlace = (data: Float64Array, params: Float32Array, start: number, end: number): boolean | undefined => {
  const step = stepOf(data)
  if (step === undefined) return undefined
  const { kernel: k, ownAt } = step
  const own = new Float32Array(data.buffer, ownAt, chunkValues)
  const count = end - start
  const pairs = count - (count % 2)
  let notFinite = 0
  for (let from = 0; from < pairs; from += chunkValues) {
    const size = Math.min(chunkValues, pairs - from)
    own.set(params.subarray(start + from, start + from + size))
    const at = data.byteOffset + 8 * from
    notFinite |= k.add(at, ownAt, at + 8 * size)
  }
  if (pairs < count) {
    const sum = data[pairs]! + params[start + pairs]!
    data[pairs] = sum
    if (!Number.isFinite(sum)) notFinite = 1
  }
  return notFinite === 0
}

/**
 * `storeFinite` of a segment that lies in a `stepBuffer`: checked where it is (four values an
 * instruction, the last few in JavaScript), then copied into `out`; `undefined`, having done
 * nothing, when it does not lie in one. Call only when `isEnabled()`.
 *
 * @since 0.1.0
 * @category simd
 */
export const storeInPlace = (out: Float32Array, start: number, data: Float32Array): boolean | undefined => {
  const step = stepOf(data)
  if (step === undefined) return undefined
  const quads = data.length - (data.length % 4)
  let notFinite = step.kernel.check(data.byteOffset, data.byteOffset + 4 * quads)
  for (let i = quads; i < data.length; i++) if (!Number.isFinite(data[i]!)) notFinite = 1
  out.set(data, start)
  return notFinite === 0
}

/**
 * `divideInto` from sums that lie in a `stepBuffer`, read where they are (the means go through the
 * buffer's scratch a chunk at a time, an odd last one in JavaScript: the same bits); `undefined`,
 * having done nothing, when they do not. Call only when `isEnabled()`.
 *
 * @since 0.1.0
 * @category simd
 */
export const divideInPlace = (out: Float32Array, sum: Float64Array, start: number, end: number, count: number): boolean | undefined => {
  const step = stepOf(sum)
  if (step === undefined) return undefined
  const { kernel: k, ownAt } = step
  const means = new Float32Array(sum.buffer, ownAt, chunkValues)
  const length = end - start
  const pairs = length - (length % 2)
  for (let from = 0; from < pairs; from += chunkValues) {
    const size = Math.min(chunkValues, pairs - from)
    const at = sum.byteOffset + 8 * from
    k.divide(at, ownAt, at + 8 * size, count)
    out.set(size === chunkValues ? means : means.subarray(0, size), start + from)
  }
  if (pairs < length) out[start + pairs] = sum[pairs]! / count
  return true
}

/**
 * `widen` into a step that lies in a `stepBuffer`, written where it is (this rank's values go
 * through the buffer's scratch a chunk at a time, an odd last one in JavaScript); `undefined`,
 * having done nothing, when it does not lie in one. Call only when `isEnabled()`.
 *
 * @since 0.1.0
 * @category simd
 */
export const widenInPlace = (into: Float64Array, params: Float32Array, start: number, end: number): boolean | undefined => {
  const step = stepOf(into)
  if (step === undefined) return undefined
  const { kernel: k, ownAt } = step
  const own = new Float32Array(into.buffer, ownAt, chunkValues)
  const length = end - start
  const pairs = length - (length % 2)
  for (let from = 0; from < pairs; from += chunkValues) {
    const size = Math.min(chunkValues, pairs - from)
    own.set(params.subarray(start + from, start + from + size))
    const at = into.byteOffset + 8 * from
    k.widen(ownAt, at, at + 8 * size)
  }
  if (pairs < length) into[pairs] = params[start + pairs]!
  return true
}
