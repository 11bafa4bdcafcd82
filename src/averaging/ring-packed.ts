/**
 * A packed ring step (`--compress fp16|int8` with the ring backend, docs/edge-averaging.md
 * "Compressed ring steps"): one step's values in fewer bytes, as one `Uint8Array` that links and
 * the relay carry as they are (a direct link's `Packed` frame, a `RingData`'s `data` as CBOR tag
 * 64, structures version 7).
 *
 * Layout, little-endian: `u32` the contribution count folded into the values (reduce-scatter; the
 * segment's count at its owner for all-gather), `u32` the round of the model the values are
 * changes to (`baseNone` when they are whole values), then a packed vector (`Packed`) of the
 * segment's values: partial sums (reduce-scatter) or the finished mean (all-gather).
 *
 * @since 0.1.0
 */
import * as Packed from "../wire/packed.ts"

/** Bytes before the packed vector. @since 0.1.0 @category model */
export const headBytes = 8

/** The base round of a step whose values are whole, not changes. @since 0.1.0 @category model */
export const baseNone = 0xffff_ffff

/**
 * One packed step read back: its `count`, its `base` round (`baseNone`: whole values), and its
 * values unpacked to float32.
 *
 * @since 0.1.0
 * @category model
 */
export interface Step {
  readonly count: number
  readonly base: number
  readonly values: Float32Array
}

/**
 * Packs a step: `values` as `compression` (int8 blocks of `block`), behind its head. Returns the
 * bytes and the values a reader gets back (`unpack` of them), so the sender can keep what packing
 * dropped without unpacking twice. O(values).
 *
 * @since 0.1.0
 * @category packing
 */
export const pack = (
  count: number,
  base: number,
  values: Float32Array,
  compression: "fp16" | "int8",
  block = Packed.blockDefault
): { readonly bytes: Uint8Array; readonly sent: Float32Array } => {
  const vector = Packed.pack(values, compression, block)
  const bytes = new Uint8Array(headBytes + vector.length)
  const view = new DataView(bytes.buffer)
  view.setUint32(0, count, true)
  view.setUint32(4, base, true)
  bytes.set(vector, headBytes)
  return { bytes, sent: Packed.unpack(vector) as Float32Array }
}

/**
 * Reads a packed step back, or says what is wrong with it (too short, a bad packed vector, not
 * `length` values). Never throws; reads nothing outside `bytes`. O(values).
 *
 * @since 0.1.0
 * @category packing
 */
export const unpack = (bytes: Uint8Array, length: number): Step | string => {
  if (bytes.length < headBytes) return `a packed ring step of ${bytes.length} bytes, shorter than its ${headBytes}-byte head`
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const values = Packed.unpack(bytes.subarray(headBytes), length)
  if (Packed.isError(values)) return Packed.words(values)
  if (values.length !== length) return `a packed ring step of ${values.length} values, expected ${length}`
  return { count: view.getUint32(0, true), base: view.getUint32(4, true), values }
}
