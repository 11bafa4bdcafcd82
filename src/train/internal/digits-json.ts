/**
 * A single-pass reader for the `mnist` package's digit files, `{"data": [v, v, ...]}`, that turns
 * each value straight into its grey level without building a JavaScript array: `JSON.parse` of
 * the 21 MB of numbers took 0.5–1.4 s per thread (Bun, Deno, Node), this takes a fraction.
 *
 * A value is accepted when it is a plain decimal `int[.frac]` equal to `g / 255` rounded to 3
 * decimals for some grey level `g` (extra fractional digits must be zeros). Such a value's JSON
 * double is `milli / 1000` correctly rounded, which is exactly `PIXEL_VALUES[g]`, so nothing is
 * lost against `JSON.parse`.
 *
 * @since 0.1.0
 */

const SPACE = 0x20
const TAB = 0x09
const LF = 0x0a
const CR = 0x0d
const COMMA = 0x2c
const DOT = 0x2e
const ZERO = 0x30
const NINE = 0x39
const OPEN = 0x5b
const CLOSE = 0x5d

// MILLI_TO_GREY[m] = g when round(g / 255 * 1000) === m, else -1 (the 256 values are distinct).
const MILLI_TO_GREY = ((): Int16Array => {
  const table = new Int16Array(1001).fill(-1)
  for (let g = 0; g < 256; g++) table[Math.round((g / 255) * 1000)] = g
  return table
})()

const isSpace = (byte: number): boolean => byte === SPACE || byte === TAB || byte === LF || byte === CR

/**
 * The grey levels of a digit file's `data` array, in order, or a one-line reason why the bytes
 * are not such a file (`"value 7 ..."` counts values from 0). Never throws.
 *
 * @since 0.1.0
 * @category dataset
 */
export const parseGreyLevels = (bytes: Uint8Array): Uint8Array | string => {
  const open = bytes.indexOf(OPEN)
  const close = bytes.lastIndexOf(CLOSE)
  if (open < 0 || close < open) return "no `data` array"
  const decoder = new TextDecoder()
  const head = decoder.decode(bytes.subarray(0, open))
  const tail = decoder.decode(bytes.subarray(close + 1))
  if (!/^\s*\{\s*"data"\s*:\s*$/.test(head) || !/^\s*\}\s*$/.test(tail)) {
    return 'not a file of the form {"data": [...]}'
  }
  // Each value takes at least 2 bytes ("0,"), so this bounds the count.
  const out = new Uint8Array(Math.ceil((close - open) / 2))
  let count = 0
  let at = open + 1
  while (at < close && isSpace(bytes[at]!)) at++
  if (at === close) return out.slice(0, 0)
  for (;;) {
    // Fast path for the commonest value by far, a bare "0" followed by a comma.
    if (bytes[at] === ZERO && bytes[at + 1] === COMMA) {
      out[count++] = 0
      at += 2
      while (at < close && isSpace(bytes[at]!)) at++
      continue
    }
    const start = at
    let whole = 0
    let digits = 0
    while (at < close && bytes[at]! >= ZERO && bytes[at]! <= NINE && digits < 5) {
      whole = whole * 10 + bytes[at]! - ZERO
      at++
      digits++
    }
    let milli = whole * 1000
    let valid = digits > 0 && !(digits > 1 && bytes[start] === ZERO)
    if (valid && bytes[at] === DOT) {
      at++
      let places = 0
      for (let scale = 100; at < close && bytes[at]! >= ZERO && bytes[at]! <= NINE; at++, places++) {
        const digit = bytes[at]! - ZERO
        if (scale >= 1) milli += digit * scale
        else if (digit !== 0) valid = false
        scale /= 10
      }
      if (places === 0) valid = false
    }
    while (at < close && isSpace(bytes[at]!)) at++
    const next = at === close ? CLOSE : bytes[at]
    const grey = valid && milli <= 1000 ? MILLI_TO_GREY[milli]! : -1
    if (grey < 0 || (next !== COMMA && next !== CLOSE)) {
      const text = decoder.decode(bytes.subarray(start, Math.min(at + 1, start + 24)))
      return `value ${count} (${JSON.stringify(text)}) is not a grey level / 255 rounded to 3 decimals`
    }
    out[count++] = grey
    if (next === CLOSE) return out.slice(0, count)
    at++
    while (at < close && isSpace(bytes[at]!)) at++
  }
}
