import { describe, expect, it } from "vitest"
import * as ExactMath from "../../src/train/internal/exact-math.ts"

const ulp = (value: number): number => 2 ** (Math.floor(Math.log2(Math.abs(value))) - 52)

describe("engine-independent exp and log", () => {
  it("give exact values at the special points", () => {
    expect(ExactMath.exp(0)).toBe(1)
    expect(ExactMath.exp(1)).toBe(2.7182818284590455)
    expect(ExactMath.exp(-1)).toBe(0.36787944117144233)
    expect(ExactMath.exp(710)).toBe(Infinity)
    expect(ExactMath.exp(-746)).toBe(0)
    expect(ExactMath.exp(-745)).toBe(5e-324)
    expect(ExactMath.exp(Number.NaN)).toBeNaN()
    expect(ExactMath.log(1)).toBe(0)
    expect(ExactMath.log(4)).toBe(2 * Math.LN2)
    expect(ExactMath.log(10)).toBe(2.3025850929940455)
    expect(ExactMath.log(5e-324)).toBe(-744.4400719213812)
    expect(ExactMath.log(0)).toBe(-Infinity)
    expect(ExactMath.log(Infinity)).toBe(Infinity)
    expect(ExactMath.log(-1)).toBeNaN()
    expect(ExactMath.log(Number.NaN)).toBeNaN()
  })

  it("stay within 1 ulp (exp) and 2 ulp (log) of this engine's Math functions", () => {
    let expUlps = 0
    for (let i = 0; i <= 140_000; i++) {
      const x = i / 100 - 700
      expUlps = Math.max(expUlps, Math.abs(ExactMath.exp(x) - Math.exp(x)) / ulp(Math.exp(x)))
    }
    let logUlps = 0
    for (let i = 1; i <= 100_000; i++) {
      const x = (i / 997) * 1.0001 ** (i % 5000)
      if (Math.log(x) !== 0) logUlps = Math.max(logUlps, Math.abs(ExactMath.log(x) - Math.log(x)) / ulp(Math.log(x)))
    }
    expect(expUlps).toBeLessThanOrEqual(1)
    expect(logUlps).toBeLessThanOrEqual(2)
  })

  it("return the same bits on every runtime (golden hash)", () => {
    const bits = new Float64Array(1)
    const words = new Uint32Array(bits.buffer)
    let hash = 0
    for (let i = 0; i < 100_000; i++) {
      bits[0] = ExactMath.exp(i / 100 - 745)
      hash = (Math.imul(hash, 31) + words[0]! + words[1]!) >>> 0
      bits[0] = ExactMath.log(i / 37 + 1e-300)
      hash = (Math.imul(hash, 31) + words[0]! + words[1]!) >>> 0
    }
    expect(hash).toBe(3187282101)
  })
})
