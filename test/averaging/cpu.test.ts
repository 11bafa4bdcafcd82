import { describe, expect, it } from "vitest"
import * as Cpu from "../../src/averaging/cpu.ts"

describe("cpu averaging", () => {
  it("averages element-wise", () => {
    expect(Cpu.mean([new Float32Array([1, 2, 3]), new Float32Array([3, 4, 5])])).toEqual(new Float32Array([2, 3, 4]))
    expect(Cpu.mean([new Float32Array([0.1, 0.2]), new Float32Array([0.2, 0.4]), new Float32Array([0.3, 0.6])])).toEqual(
      new Float32Array([0.2, 0.4])
    )
  })

  it("copies a single contribution and reports bad input as values", () => {
    const only = new Float32Array([7])
    const result = Cpu.mean([only])
    expect(result).toEqual(new Float32Array([7]))
    expect(result).not.toBe(only)
    expect(Cpu.mean([])).toEqual({ _tag: "NoContributions" })
    expect(Cpu.mean([new Float32Array(2), new Float32Array(3)])).toEqual({ _tag: "LengthMismatch", index: 1, length: 3, expected: 2 })
  })

  it("adds four contributions a pass and the rest one at a time, each value in the contributions' order", () => {
    const contributions = Array.from({ length: 7 }, (_, k) => Float32Array.from({ length: 5 }, (_, j) => (k + 1) * 1e7 + j * 0.1 - k * 3.3))
    for (let n = 1; n <= contributions.length; n++) {
      const some = contributions.slice(0, n)
      const sum = new Float64Array(5)
      for (const p of some) for (let j = 0; j < 5; j++) sum[j]! += p[j]!
      expect(Cpu.mean(some)).toEqual(Float32Array.from(sum, (value) => value / n))
    }
  })
})
