import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Aggregate from "../../src/averaging/aggregate.ts"
import * as Cpu from "../../src/averaging/cpu.ts"
import * as Config from "../../src/core/config.ts"

const f32 = (values: ReadonlyArray<number>) => new Float32Array(values)
const rule = (over: Partial<Aggregate.Rule> = {}): Aggregate.Rule => ({
  aggregate: "mean",
  trimFraction: 0.25,
  clipNorm: 0,
  outlierFactor: 0,
  ...over
})
const combined = (result: Aggregate.Combined | Cpu.MeanError): Aggregate.Combined => {
  if ("_tag" in result) throw new Error(result._tag)
  return result
}
const norm = (a: Float32Array, b: Float32Array) => Math.sqrt(a.reduce((sum, v, j) => sum + (v - b[j]!) ** 2, 0))

/**
 * n honest contributions of `length` values: a shared model plus noise of about 0.01 per value from
 * a seeded generator (honest ranks never send exactly the same values; the detector's spread is theirs).
 */
const honest = (n: number, length: number) =>
  fc
    .tuple(
      fc.array(fc.float({ min: -10, max: 10, noNaN: true }), { minLength: length, maxLength: length }),
      fc.integer({ min: 1, max: 2 ** 31 - 1 })
    )
    .map(([model, seed]) => {
      let x = seed
      const next = () => {
        x = (x * 48271) % 2147483647
        return x / 2147483647
      }
      return Array.from({ length: n }, () => f32(model.map((m) => m + 0.01 * (0.5 + next()) * (next() < 0.5 ? -1 : 1))))
    })

describe("robust aggregation", () => {
  it("the median and trimmed mean per coordinate, odd and even counts", () => {
    const params = [f32([1, 10]), f32([2, -5]), f32([100, 0]), f32([3, 1])]
    expect(Aggregate.median(params)).toEqual(f32([2.5, 0.5]))
    expect(Aggregate.median(params.slice(0, 3))).toEqual(f32([2, 0]))
    // 4 contributions, 0.25: one cut from each end per coordinate, the middle two averaged.
    expect(Aggregate.trimmedMean(params, 0.25)).toEqual(f32([2.5, 0.5]))
    // 0 is the plain mean; a share that would cut everything keeps the middle value.
    expect(Aggregate.trimmedMean(params, 0)).toEqual(Cpu.mean(params))
    expect(Aggregate.trimmedMean(params.slice(0, 3), 0.49)).toEqual(f32([2, 0]))
    expect(Aggregate.median([])).toEqual({ _tag: "NoContributions" })
    expect(Aggregate.trimmedMean([f32([1]), f32([1, 2])], 0.25)).toEqual({ _tag: "LengthMismatch", index: 1, length: 2, expected: 1 })
  })

  it("the default rule is exactly the plain mean, and flags nothing", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }).chain((n) => honest(n, 5)),
        (params) => {
          const result = combined(Aggregate.combine(params, rule()))
          expect(result.params).toEqual(Cpu.mean(params))
          expect([result.outliers, result.clipped]).toEqual([[], []])
        }
      )
    )
  })

  it("property: with the median or trimmed mean, one contribution of any size or sign among 4 stays within the honest values per coordinate", () => {
    const attack = fc.oneof(fc.constant(1e6), fc.constant(-1), fc.constant(-1e6), fc.double({ min: -1e30, max: 1e30, noNaN: true }))
    fc.assert(
      fc.property(
        honest(3, 6),
        attack,
        fc.constantFrom("median" as const, "trimmed-mean" as const),
        fc.integer({ min: 0, max: 3 }),
        (good, scale, aggregate, at) => {
          const bad = f32([...good[0]!].map((v) => v * scale))
          const params = [...good.slice(0, at), bad, ...good.slice(at)]
          const result = combined(Aggregate.combine(params, rule({ aggregate })))
          for (let j = 0; j < 6; j++) {
            const column = good.map((p) => p[j]!)
            expect(result.params[j]!).toBeGreaterThanOrEqual(Math.fround(Math.min(...column)))
            expect(result.params[j]!).toBeLessThanOrEqual(Math.fround(Math.max(...column)))
          }
        }
      )
    )
  })

  it("property: clipping bounds every contribution's change from the reference, and leaves short ones untouched", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.float({ min: -1e6, max: 1e6, noNaN: true }), { minLength: 4, maxLength: 4 }), { minLength: 1, maxLength: 5 }),
        fc.float({ min: Math.fround(0.01), max: 100, noNaN: true }),
        (values, bound) => {
          const reference = f32([1, 2, 3, 4])
          const params = values.map(f32)
          const { params: clipped, clipped: which } = Aggregate.clip(params, reference, bound)
          clipped.forEach((p, i) => {
            if (which.includes(i)) expect(norm(p, reference)).toBeLessThanOrEqual(bound * (1 + 1e-5) + 1e-3)
            else expect(p).toBe(params[i])
          })
          // And so the mean of the clipped moves the reference by at most the bound.
          const result = combined(Aggregate.combine(params, rule({ clipNorm: bound }), reference))
          expect(norm(result.params, reference)).toBeLessThanOrEqual(bound * (1 + 1e-5) + 1e-3)
        }
      )
    )
  })

  it("property: a contribution scaled by 1e6 or sign-flipped among honest ones is the one outlier, named by its index; honest rounds flag nothing", () => {
    fc.assert(
      fc.property(honest(4, 8), fc.constantFrom(1e6, -1), fc.integer({ min: 0, max: 4 }), (good, scale, at) => {
        const center = Aggregate.median(good) as Float32Array
        // A model far from 0, so that a sign flip is a large change.
        const shifted = good.map((p) => p.map((v, j) => v + 50 + j))
        const bad = shifted[0]!.map((v) => v * scale)
        const params = [...shifted.slice(0, at), bad, ...shifted.slice(at)]
        const result = combined(Aggregate.combine(params, rule({ aggregate: "median", outlierFactor: 10 })))
        expect(result.outliers.map((o) => o.index)).toEqual([at])
        expect(Aggregate.outliers(good, center, 10)).toEqual([])
      })
    )
    const same = [f32([1, 2]), f32([1, 2]), f32([1, 2])]
    expect(Aggregate.outliers(same, f32([1, 2]), 10)).toEqual([])
    expect(Aggregate.outliers(same.slice(0, 2), f32([1, 2]), 10)).toEqual([])
  })

  it("the core's config refuses a bad rule, fills the outlier factor by rule, and refuses robust rules with the ring backend", () => {
    const base = { worldSize: 4, epochSamples: 40, epochs: 1 }
    const made = (o: Partial<Config.Options>) => Config.make({ ...base, ...o })
    const aggregation = (o: Partial<Config.Options>) => {
      const config = made(o)
      return "_tag" in config ? config : config.aggregation
    }
    expect(aggregation({})).toEqual({ aggregate: "mean", trimFraction: 0.25, clipNorm: 0, outlierFactor: 0 })
    expect(aggregation({ aggregate: "median" })).toEqual({ aggregate: "median", trimFraction: 0.25, clipNorm: 0, outlierFactor: 10 })
    expect(aggregation({ clipNorm: 3, outlierFactor: 4 })).toEqual({ aggregate: "mean", trimFraction: 0.25, clipNorm: 3, outlierFactor: 4 })
    expect(made({ aggregate: "mode" as "mean" })).toMatchObject({ _tag: "Invalid", option: "aggregate" })
    expect(made({ trimFraction: 0.5 })).toMatchObject({ _tag: "Invalid", option: "trimFraction" })
    expect(made({ clipNorm: -1 })).toMatchObject({ _tag: "Invalid", option: "clipNorm" })
    expect(made({ outlierRoundsMax: 1.5 })).toMatchObject({ _tag: "Invalid", option: "outlierRoundsMax" })
    expect(made({ backend: "ring", aggregate: "median" })).toMatchObject({ _tag: "Invalid", option: "aggregate" })
  })
})
