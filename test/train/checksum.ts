/** FNV-1a over the bytes of the 32-bit words of `values` (each value taken as an unsigned 32-bit integer). */
export const fnv = (values: ArrayLike<number>): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < values.length; i++) {
    const word = values[i]! >>> 0
    for (let shift = 0; shift < 32; shift += 8) hash = Math.imul(hash ^ ((word >>> shift) & 0xff), 16777619) >>> 0
  }
  return hash
}

/** FNV-1a over the bit patterns of float32 values. */
export const fnvFloat32 = (values: Float32Array): number => fnv(new Uint32Array(values.buffer, values.byteOffset, values.length))
