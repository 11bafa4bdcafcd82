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

  it("finishes a mean from contributions summed as they came with the same bits as the mean of them all", () => {
    // Per value: +B and -B (B up to 1e19) in the first two contributions, small values and signed
    // zeros after them. A small value added before -B is lost to rounding, so the order shows.
    let seed = 7
    const next = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    const value = (k: number, j: number): number =>
      next() < 0.05 ? -0 : k > 1 ? (next() - 0.5) * 10 ** -Math.floor(next() * 10) : (k === 0 ? 1 : -1) * 10 ** (10 + (j % 10))
    const contributions = Array.from({ length: 11 }, (_, k) => Float32Array.from({ length: 64 }, (_, j) => value(k, j)))
    const bits = (result: Float32Array | Cpu.MeanError): Uint32Array => new Uint32Array((result as Float32Array).buffer)
    const [first, second, third, ...rest] = contributions
    expect(bits(Cpu.mean([first!, third!, second!, ...rest]))).not.toEqual(bits(Cpu.mean(contributions)))
    for (let n = 1; n <= contributions.length; n++) {
      const round = contributions.slice(0, n)
      const expected = bits(Cpu.mean(round))
      for (let folded = 0; folded <= n; folded++) {
        const running = Cpu.running()
        for (const p of round.slice(0, folded)) Cpu.fold(running, p)
        expect(bits(Cpu.meanOf(running, round))).toEqual(expected)
        expect(running.folded).toEqual([])
      }
    }
  })

  it("takes the mean from scratch when what was summed is not the start of the round's contributions", () => {
    const a = new Float32Array([1e8, 1, -0])
    const b = new Float32Array([1, 1e-8, -0])
    const c = new Float32Array([-1e8, 3, -0])
    const running = Cpu.running()
    // A rank's second contribution goes beside its first, not at the end: the order changed.
    Cpu.fold(running, a)
    Cpu.fold(running, c)
    expect(Cpu.meanOf(running, [a, b, c])).toEqual(Cpu.mean([a, b, c]))
    Cpu.fold(running, a)
    expect(Cpu.meanOf(running, [a])).toEqual(new Float32Array([1e8, 1, -0]))
    Cpu.fold(running, new Float32Array(2))
    expect(Cpu.meanOf(running, [a, b])).toEqual(Cpu.mean([a, b]))
    expect(Cpu.meanOf(running, [])).toEqual({ _tag: "NoContributions" })
  })
})
