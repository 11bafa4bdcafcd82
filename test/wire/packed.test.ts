import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Packed from "../../src/wire/packed.ts"

const floats = (min: number, max: number, maxLength = 300, minLength = 0) =>
  fc
    .array(fc.float({ min: Math.fround(min), max: Math.fround(max), noNaN: true }), { minLength, maxLength })
    .map((values) => new Float32Array(values))

const unpacked = (bytes: Uint8Array): Float32Array => {
  const out = Packed.unpack(bytes)
  if (Packed.isError(out)) throw new Error(Packed.words(out))
  return out
}

describe("packed parameter vectors", () => {
  it("every half float survives a round trip through its value, and float32 values round to the nearest half (ties to even)", () => {
    const wrong: Array<number> = []
    for (let h = 0; h < 65536; h++) {
      const value = Packed.fromHalf(h)
      if (Number.isNaN(value) ? !Number.isNaN(Packed.fromHalf(Packed.toHalf(value))) : Packed.toHalf(value) !== h) wrong.push(h)
    }
    expect(wrong).toEqual([])
    expect(Packed.fromHalf(Packed.toHalf(1 + 2 ** -11))).toBe(1) // a tie, to the even mantissa
    expect(Packed.fromHalf(Packed.toHalf(1 + 3 * 2 ** -11))).toBe(1 + 2 ** -9)
    expect(Packed.fromHalf(Packed.toHalf(65520))).toBe(Number.POSITIVE_INFINITY) // past the largest half's rounding range
    expect(Packed.fromHalf(Packed.toHalf(65519))).toBe(65504)
    expect(Packed.fromHalf(Packed.toHalf(2 ** -25))).toBe(0) // half the smallest subnormal, a tie to 0
    expect(Packed.fromHalf(Packed.toHalf(-(2 ** -24)))).toBe(-(2 ** -24))
  })

  it("property: fp16 keeps every value within half a unit in its last place (relative 2^-11 in the normal range)", () => {
    fc.assert(
      fc.property(floats(-60000, 60000), (values) => {
        const bytes = Packed.pack(values, "fp16")
        expect(bytes.length).toBe(Packed.packedBytes(values.length, "fp16"))
        const back = unpacked(bytes)
        values.forEach((v, i) => expect(Math.abs(back[i]! - v)).toBeLessThanOrEqual(Math.max(Math.abs(v) * 2 ** -11, 2 ** -25)))
      })
    )
  })

  it("property: int8 keeps every value within half its block's scale (max |v| / 254), and the size is header + a scale per block + a byte per value", () => {
    fc.assert(
      fc.property(floats(-1e6, 1e6), fc.integer({ min: Packed.blockMin, max: 200 }), (values, block) => {
        const bytes = Packed.pack(values, "int8", block)
        expect(bytes.length).toBe(8 + 4 * Math.ceil(values.length / block) + values.length)
        const back = unpacked(bytes)
        for (let from = 0; from < values.length; from += block) {
          const slice = values.subarray(from, from + block)
          const max = Math.max(...slice.map(Math.abs))
          slice.forEach((v, i) => expect(Math.abs(back[from + i]! - v)).toBeLessThanOrEqual((max / 254) * (1 + 1e-6) + 1e-30))
        }
      })
    )
  })

  it("a block with a non-finite value reads back all NaN (the vector stays unusable); fp16 keeps infinities", () => {
    const back = unpacked(Packed.pack(new Float32Array([1, Number.NaN, 2, ...new Array(8).fill(1)]), "int8", 8))
    expect([...back.subarray(0, 8)].every(Number.isNaN)).toBe(true)
    expect([...back.subarray(8)]).toEqual([1, 1, 1])
    expect([...unpacked(Packed.pack(new Float32Array([Number.POSITIVE_INFINITY]), "int8", 8))].every(Number.isNaN)).toBe(true)
    expect([...unpacked(Packed.pack(new Float32Array([Number.NEGATIVE_INFINITY, 1]), "fp16"))]).toEqual([Number.NEGATIVE_INFINITY, 1])
  })

  it("property: unpack never throws on arbitrary bytes, and accepts only the exact size its header implies", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const out = Packed.unpack(bytes)
        if (!Packed.isError(out)) expect(bytes.length).toBeGreaterThanOrEqual(8)
      })
    )
    const bytes = Packed.pack(new Float32Array(20), "int8", 8)
    expect(Packed.unpack(bytes.subarray(0, bytes.length - 1))).toEqual({ _tag: "Size", bytes: bytes.length - 1, expected: bytes.length })
    // A header claiming 2^32 - 1 values with a handful of bytes allocates nothing.
    const liar = new Uint8Array([1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0])
    expect(Packed.unpack(liar)).toMatchObject({ _tag: "Size", bytes: 10 })
    expect(Packed.unpack(Packed.pack(new Float32Array(5), "fp16"), 4)).toEqual({ _tag: "TooLong", length: 5, lengthMax: 4 })
    expect(Packed.unpack(new Uint8Array([2, 0, 4, 0, 0, 0, 0, 0]))).toEqual({ _tag: "Header", detail: "block 4 below 8" })
  })

  it("property: with error feedback nothing is lost over rounds: the sum of what was sent is the sum of the values, less the last residual", () => {
    fc.assert(
      fc.property(
        fc.array(floats(-10, 10, 40, 40), { minLength: 1, maxLength: 12 }),
        fc.constantFrom("fp16" as const, "int8" as const),
        (rounds, compression) => {
          let residual: Float32Array | undefined
          const sentSum = new Float64Array(40)
          const valueSum = new Float64Array(40)
          for (const values of rounds) {
            const packed = Packed.withFeedback(values, residual, compression, 8)
            residual = packed.residual
            unpacked(packed.bytes).forEach((v, i) => (sentSum[i]! += v))
            values.forEach((v, i) => (valueSum[i]! += v))
          }
          // Each round's float32 sum of value and residual rounds once: a few ulps of 10 per round.
          const slack = rounds.length * 40 * 2 ** -20
          sentSum.forEach((s, i) => expect(Math.abs(s + residual![i]! - valueSum[i]!)).toBeLessThanOrEqual(slack))
          // And the residual itself stays within one step of the quantizer.
          residual!.forEach((r) => expect(Math.abs(r)).toBeLessThanOrEqual(compression === "int8" ? 20 / 254 + 1e-6 : 20 * 2 ** -11))
        }
      )
    )
  })
  it("fp16 packs every half's bits little-endian after the header, and reads the same from bytes at any offset", () => {
    const values = new Float32Array(65536)
    for (let h = 0; h < 65536; h++) values[h] = Packed.fromHalf(h)
    const bytes = Packed.pack(values, "fp16")
    const view = new DataView(bytes.buffer)
    const wrongBits: Array<number> = []
    for (let h = 0; h < 65536; h++) {
      const bits = view.getUint16(8 + 2 * h, true)
      if (Number.isNaN(values[h]!) ? (bits & 0x7c00) !== 0x7c00 || (bits & 0x3ff) === 0 : bits !== h) wrongBits.push(h)
    }
    expect(wrongBits).toEqual([])
    const even = unpacked(bytes)
    // The same bytes one byte into a buffer: a typed view of halves cannot start there.
    const shifted = new Uint8Array(bytes.length + 1)
    shifted.set(bytes, 1)
    const odd = unpacked(shifted.subarray(1))
    expect(Array.from(odd, (v) => (Number.isNaN(v) ? "NaN" : v))).toEqual(Array.from(even, (v) => (Number.isNaN(v) ? "NaN" : v)))
    const wrongValues = Array.from(values.keys()).filter((h) => !Number.isNaN(values[h]!) && !Object.is(even[h], values[h]))
    expect(wrongValues).toEqual([])
  })
})
