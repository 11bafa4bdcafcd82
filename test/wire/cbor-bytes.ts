/**
 * A tiny hand CBOR writer for building bad frames byte by byte (independent of cbor-x).
 */

/** The head of a data item: major type 0..7 and its argument, in the shortest form. */
export const head = (major: number, value: number): Array<number> => {
  const m = major << 5
  if (value < 24) return [m | value]
  if (value < 0x100) return [m | 24, value]
  if (value < 0x10000) return [m | 25, value >> 8, value & 0xff]
  if (value < 0x100000000) return [m | 26, (value >>> 24) & 0xff, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff]
  const hi = Math.floor(value / 0x100000000)
  const lo = value >>> 0
  return [
    m | 27,
    ...[hi >>> 24, hi >>> 16, hi >>> 8, hi].map((b) => b & 0xff),
    ...[lo >>> 24, lo >>> 16, lo >>> 8, lo].map((b) => b & 0xff)
  ]
}

export const uint = (value: number): Array<number> => head(0, value)
export const nint = (value: number): Array<number> => head(1, -1 - value)
export const text = (value: string): Array<number> => {
  const utf8 = [...new TextEncoder().encode(value)]
  return [...head(3, utf8.length), ...utf8]
}
export const bytes = (value: ReadonlyArray<number>): Array<number> => [...head(2, value.length), ...value]
export const array = (...items: ReadonlyArray<ReadonlyArray<number>>): Array<number> => [...head(4, items.length), ...items.flat()]
export const tag = (value: number, item: ReadonlyArray<number>): Array<number> => [...head(6, value), ...item]
export const f64 = (value: number): Array<number> => {
  const view = new DataView(new ArrayBuffer(8))
  view.setFloat64(0, value)
  return [0xfb, ...new Uint8Array(view.buffer)]
}
export const bool = (value: boolean): Array<number> => [value ? 0xf5 : 0xf4]

/** A record of structure `structure` over the message id and field items. */
export const record = (structure: number, id: number, ...fields: ReadonlyArray<ReadonlyArray<number>>): Array<number> =>
  tag(0xe000 + structure, array(uint(id), ...fields))

/** A frame `[protocol, structures, from, message]`; versions default to 1 and the current structures version (8). */
export const frame = (
  from: ReadonlyArray<number>,
  message: ReadonlyArray<number>,
  versions: { readonly protocol?: number; readonly structures?: number } = {}
): Uint8Array => new Uint8Array(array(uint(versions.protocol ?? 1), uint(versions.structures ?? 8), from, message))
