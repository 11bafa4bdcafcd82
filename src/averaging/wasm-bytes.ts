/**
 * What the hand-assembled WebAssembly modules of `finite.ts` and `ring-simd.ts` are written with:
 * LEB128 integers and sections. Internal to `src/averaging`.
 *
 * @since 0.1.0
 */

/** `value` as an unsigned LEB128 integer (seven bits a byte, the low ones first). */
export const u32 = (value: number): Array<number> => {
  const out: Array<number> = []
  let rest = value >>> 0
  do {
    const byte = rest & 0x7f
    rest >>>= 7
    out.push(rest === 0 ? byte : byte | 0x80)
  } while (rest !== 0)
  return out
}

/** A module section: its id, its content's length and the content. */
export const section = (id: number, content: ReadonlyArray<number>): Array<number> => [id, ...u32(content.length), ...content]
