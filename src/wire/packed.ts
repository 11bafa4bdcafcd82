/**
 * Packed parameter vectors (docs/edge-averaging.md "Compression"): a `Float32Array` in fewer
 * bytes, for contributions and updates on slow links. Pure functions, no state: the error
 * feedback a sender keeps (what quantization dropped, added to its next vector) is `withFeedback`.
 *
 * Layout (little-endian), one CBOR byte string on the wire (`Structures.uint8Tag`):
 *
 * - byte 0: the format, 1 `fp16` or 2 `int8`; byte 1: 0.
 * - bytes 2-3: the block length of `int8` (0 for `fp16`); bytes 4-7: the vector's length L.
 * - `fp16`: L IEEE half floats (round to nearest even; beyond ±65504 a value becomes infinite,
 *   and its vector is then left out of a round as any non-finite one is).
 * - `int8`: one float32 scale per block (`ceil(L / block)` of them), then L signed bytes; value i
 *   is `q[i] × scale[block of i]`, with `scale = max |v| / 127` over the block. A block holding a
 *   non-finite value gets scale NaN, so that the vector stays unusable after the round trip.
 *
 * @since 0.1.0
 */

/**
 * How a vector travels: `none` (float32 as always), `fp16` (2 bytes a value) or `int8` (1 byte a
 * value plus 4 bytes a block).
 *
 * @since 0.1.0
 * @category model
 */
export type Compression = "none" | "fp16" | "int8"

/**
 * The `int8` block length used when none is given: 64 values a scale (about 3.8× fewer bytes than float32).
 *
 * @since 0.1.0
 * @category defaults
 */
export const blockDefault = 64

/** The smallest and largest block lengths a packed vector may declare. @since 0.1.0 @category limits */
export const blockMin = 8
export const blockMax = 65_535

const headerBytes = 8
const formatFp16 = 1
const formatInt8 = 2

/**
 * Why bytes are not a packed vector: `Header` (too short, unknown format, a bad block length),
 * `Size` (the byte count is not the one the header implies), `TooLong` (more values than allowed).
 *
 * @since 0.1.0
 * @category errors
 */
export type UnpackError =
  | { readonly _tag: "Header"; readonly detail: string }
  | { readonly _tag: "Size"; readonly bytes: number; readonly expected: number }
  | { readonly _tag: "TooLong"; readonly length: number; readonly lengthMax: number }

/** Whether typed arrays are little-endian here, as the layout is: then they may read it directly. */
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1

const scratch = new Float32Array(1)
const scratchBits = new Uint32Array(scratch.buffer)

/** The IEEE half-float bits of `value` rounded to float32 first, then to half (nearest, ties to even). */
export const toHalf = (value: number): number => {
  scratch[0] = value
  const x = scratchBits[0]!
  const sign = (x >>> 16) & 0x8000
  const exp = (x >>> 23) & 0xff
  let mant = x & 0x7fffff
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0)
  const e = exp - 127 + 15
  if (e >= 0x1f) return sign | 0x7c00
  if (e <= 0) {
    if (e < -10) return sign
    mant |= 0x800000
    const shift = 14 - e
    let half = mant >>> shift
    const rest = mant & ((1 << shift) - 1)
    const halfway = 1 << (shift - 1)
    if (rest > halfway || (rest === halfway && (half & 1) === 1)) half += 1
    return sign | half
  }
  let half = (e << 10) | (mant >>> 13)
  const rest = mant & 0x1fff
  // A carry out of the mantissa moves into the exponent, up to infinity: still the nearest half.
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1)) half += 1
  return sign | half
}

let halves: Float32Array | undefined
/** Every half float's value, by its bits (built on first use: 256 KiB). */
const halfTable = (): Float32Array => {
  if (halves !== undefined) return halves
  halves = new Float32Array(65536)
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1
    const e = (h >> 10) & 0x1f
    const m = h & 0x3ff
    halves[h] =
      e === 0
        ? sign * m * 2 ** -24
        : e === 31
          ? m !== 0
            ? Number.NaN
            : sign * Number.POSITIVE_INFINITY
          : sign * (1 + m / 1024) * 2 ** (e - 15)
  }
  return halves
}

/** The value of the half float with bits `h`. */
export const fromHalf = (h: number): number => halfTable()[h & 0xffff]!

/**
 * The packed size in bytes of a vector of `length` values: 4 × length for `none`.
 *
 * @since 0.1.0
 * @category sizes
 */
export const packedBytes = (length: number, compression: Compression, block = blockDefault): number =>
  compression === "none"
    ? 4 * length
    : compression === "fp16"
      ? headerBytes + 2 * length
      : headerBytes + 4 * Math.ceil(length / block) + length

const header = (out: DataView, format: number, block: number, length: number): void => {
  out.setUint8(0, format)
  out.setUint8(1, 0)
  out.setUint16(2, block, true)
  out.setUint32(4, length, true)
}

/**
 * Packs `values` as `fp16` or `int8` (blocks of `block` values, `blockMin`..`blockMax`). A fresh
 * `Uint8Array` of `packedBytes(values.length, compression, block)` bytes. O(length).
 *
 * @since 0.1.0
 * @category packing
 */
export const pack = (values: Float32Array, compression: "fp16" | "int8", block = blockDefault): Uint8Array => {
  const length = values.length
  const out = new Uint8Array(packedBytes(length, compression, block))
  const view = new DataView(out.buffer)
  if (compression === "fp16") {
    header(view, formatFp16, 0, length)
    if (littleEndian) {
      const halfBits = new Uint16Array(out.buffer, headerBytes, length)
      for (let i = 0; i < length; i++) halfBits[i] = toHalf(values[i]!)
    } else for (let i = 0; i < length; i++) view.setUint16(headerBytes + 2 * i, toHalf(values[i]!), true)
    return out
  }
  if (!(Number.isInteger(block) && block >= blockMin && block <= blockMax))
    throw new RangeError(`block must be an integer in [${blockMin}, ${blockMax}], got ${block}`)
  header(view, formatInt8, block, length)
  const blocks = Math.ceil(length / block)
  const quantized = new Int8Array(out.buffer, headerBytes + 4 * blocks, length)
  for (let b = 0; b < blocks; b++) {
    const from = b * block
    const to = Math.min(from + block, length)
    let max = 0
    for (let i = from; i < to; i++) {
      const a = Math.abs(values[i]!)
      // NaN fails both comparisons: note it through `max` so the whole block reads back NaN.
      if (!(a <= max)) max = a > max ? a : Number.NaN
      if (Number.isNaN(max)) break
    }
    const scale = Math.fround(max / 127)
    view.setFloat32(headerBytes + 4 * b, Number.isFinite(scale) ? scale : Number.NaN, true)
    if (!(scale > 0 && Number.isFinite(scale))) continue
    for (let i = from; i < to; i++) {
      const q = Math.round(values[i]! / scale)
      quantized[i] = q > 127 ? 127 : q < -127 ? -127 : q
    }
  }
  return out
}

/**
 * Reads a packed vector back as a fresh `Float32Array`, checking the header and that the byte
 * count is exactly the one it implies (no value is read from outside `bytes`, and a short header
 * cannot make it allocate: the length must match the bytes given). `lengthMax`: the most values
 * accepted (`TooLong` past it). Never throws.
 *
 * @since 0.1.0
 * @category packing
 */
export const unpack = (bytes: Uint8Array, lengthMax = Number.POSITIVE_INFINITY): Float32Array | UnpackError => {
  if (bytes.length < headerBytes) return { _tag: "Header", detail: `${bytes.length} bytes, shorter than the ${headerBytes}-byte header` }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const format = view.getUint8(0)
  const block = view.getUint16(2, true)
  const length = view.getUint32(4, true)
  if (format !== formatFp16 && format !== formatInt8) return { _tag: "Header", detail: `unknown format ${format}` }
  if (view.getUint8(1) !== 0) return { _tag: "Header", detail: "byte 1 must be 0" }
  if (format === formatFp16 && block !== 0) return { _tag: "Header", detail: `fp16 has no blocks, got block ${block}` }
  if (format === formatInt8 && block < blockMin) return { _tag: "Header", detail: `block ${block} below ${blockMin}` }
  const expected = packedBytes(length, format === formatFp16 ? "fp16" : "int8", block)
  if (bytes.length !== expected) return { _tag: "Size", bytes: bytes.length, expected }
  if (length > lengthMax) return { _tag: "TooLong", length, lengthMax }
  const out = new Float32Array(length)
  if (format === formatFp16) {
    const table = halfTable()
    // A coordinator unpacks one vector per rank a round: read the halves through a typed view when
    // the bytes allow it (the same values as through the DataView, read faster).
    if (littleEndian && (bytes.byteOffset + headerBytes) % 2 === 0) {
      const halfBits = new Uint16Array(bytes.buffer, bytes.byteOffset + headerBytes, length)
      for (let i = 0; i < length; i++) out[i] = table[halfBits[i]!]!
    } else for (let i = 0; i < length; i++) out[i] = table[view.getUint16(headerBytes + 2 * i, true)]!
    return out
  }
  const blocks = Math.ceil(length / block)
  const quantized = new Int8Array(bytes.buffer, bytes.byteOffset + headerBytes + 4 * blocks, length)
  for (let b = 0; b < blocks; b++) {
    const scale = view.getFloat32(headerBytes + 4 * b, true)
    const to = Math.min((b + 1) * block, length)
    for (let i = b * block; i < to; i++) out[i] = quantized[i]! * scale
  }
  return out
}

/** True when `unpack` returned an error. @since 0.1.0 @category packing */
export const isError = (result: Float32Array | UnpackError): result is UnpackError => !(result instanceof Float32Array)

/** The error in words, for a wire error's message. @since 0.1.0 @category errors */
export const words = (error: UnpackError): string =>
  error._tag === "Header"
    ? `a packed vector's header is bad: ${error.detail}`
    : error._tag === "Size"
      ? `a packed vector of ${error.bytes} bytes, its header implies ${error.expected}`
      : `a packed vector of ${error.length} values, above its bound of ${error.lengthMax}`

/**
 * Error feedback (docs/edge-averaging.md): packs `values + residual` and returns the bytes with
 * the new residual, what quantization dropped this time (`values + residual - unpack(bytes)`), for
 * the sender to add to its next vector, so that nothing is lost over rounds. `residual`
 * `undefined` (or of another length) counts as zeros; a non-finite residual entry is reset to 0
 * (a vector with a non-finite value is left out of its round, and must not poison the next).
 *
 * @since 0.1.0
 * @category packing
 */
export const withFeedback = (
  values: Float32Array,
  residual: Float32Array | undefined,
  compression: "fp16" | "int8",
  block = blockDefault
): { readonly bytes: Uint8Array; readonly residual: Float32Array } => {
  const carried = residual !== undefined && residual.length === values.length ? residual : undefined
  const corrected = new Float32Array(values.length)
  for (let i = 0; i < values.length; i++) corrected[i] = values[i]! + (carried === undefined ? 0 : carried[i]!)
  const bytes = pack(corrected, compression, block)
  const sent = unpack(bytes) as Float32Array
  const next = carried ?? new Float32Array(values.length)
  for (let i = 0; i < values.length; i++) {
    const dropped = corrected[i]! - sent[i]!
    next[i] = Number.isFinite(dropped) ? dropped : 0
  }
  return { bytes, residual: next }
}
