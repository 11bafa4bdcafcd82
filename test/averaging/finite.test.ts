/**
 * The finite check every ring rank runs over its model each round: the SIMD path (a vector from
 * `Finite.alloc`) and the JavaScript path agree with `Number.isFinite` on every value, whatever
 * the length (the SIMD loop reads four values at a time) and wherever the bad value sits.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Finite from "../../src/averaging/finite.ts"
import * as Ring from "../../src/averaging/ring.ts"

const SEED = 20261203

describe("Finite.allFinite", () => {
  it("agrees with Number.isFinite on every value, for a vector from alloc and for a plain one, at any length", () => {
    fc.assert(
      fc.property(fc.array(fc.float({ noDefaultInfinity: false, noNaN: false }), { maxLength: 70 }), (values) => {
        const expected = values.every((value) => Number.isFinite(Math.fround(value)))
        const simd = Finite.alloc(values.length)
        simd.set(values)
        expect(Finite.allFinite(simd)).toBe(expected)
        expect(Finite.allFinite(Float32Array.from(values))).toBe(expected)
        expect(Ring.isContribution(simd)).toBe(expected)
      }),
      { seed: SEED, numRuns: 300 }
    )
  })

  it("finds one NaN or infinity anywhere in a model-sized vector, the last value included; -0 and the largest float32 are finite", () => {
    const length = 407_050
    const vector = Finite.alloc(length)
    expect(vector.length).toBe(length)
    expect(Finite.allFinite(vector)).toBe(true)
    vector.fill(-0)
    vector[0] = 3.4028234663852886e38
    vector[length - 1] = -3.4028234663852886e38
    expect(Finite.allFinite(vector)).toBe(true)
    for (const at of [0, 1, 2, 3, 4, 204_525, length - 2, length - 1]) {
      for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
        const before = vector[at]!
        vector[at] = bad
        expect(Finite.allFinite(vector)).toBe(false)
        vector[at] = before
      }
    }
    // A part of a vector from alloc is checked over its own values only.
    vector[length - 1] = Number.NaN
    expect(Finite.allFinite(vector.subarray(0, length - 1))).toBe(true)
    expect(Finite.allFinite(new Float32Array(0))).toBe(true)
    expect(Finite.alloc(0).length).toBe(0)
  })

  it.each(["a shared memory (sharedMemory, share)", "a vector from alloc"])(
    "checks any view in %s over its own values only, whatever its offset and length; the neighbours past either end do not count",
    (where) => {
      let all: Float32Array
      if (where.startsWith("a shared")) {
        const memory = Finite.sharedMemory(4 * 1000)
        // Node, Bun and Deno all run WebAssembly SIMD over shared memory: the SIMD path is what is tested.
        expect(memory).toBeDefined()
        const buffer = Finite.share(memory!)!
        expect(buffer).toBe(memory!.buffer)
        all = new Float32Array(buffer, 0, 1000)
      } else all = Finite.alloc(1000)
      expect(Finite.isFast(all)).toBe(true)
      const buffer = all.buffer
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 900 }),
          fc.integer({ min: 0, max: 90 }),
          fc.integer({ min: -1, max: 89 }),
          (offset, length, badAt) => {
            all.fill(1)
            // Not finite just outside the view, on both sides.
            all[offset - 1] = Number.NaN
            all[offset + length] = Number.POSITIVE_INFINITY
            if (badAt >= 0 && badAt < length) all[offset + badAt] = Number.NEGATIVE_INFINITY
            const view = new Float32Array(buffer, 4 * offset, length)
            expect(Finite.allFinite(view)).toBe(!(badAt >= 0 && badAt < length))
          }
        ),
        { seed: SEED, numRuns: 300 }
      )
    }
  )
})
