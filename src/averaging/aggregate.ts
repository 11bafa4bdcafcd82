/**
 * Robust aggregation for the `cpu` backend (docs/edge-averaging.md "Robust aggregation"): what the
 * coordinator makes of one round's contributions when some rank cannot be trusted. A plain mean
 * lets one finite but huge (or sign-flipped) contribution into every rank's model; a coordinate-wise
 * trimmed mean or median bounds what a minority can move, and clipping bounds each contribution's
 * change from the last committed model. Pure arithmetic: which rank contributed and when a round
 * closes stay the core's (`AverageRound`).
 *
 * @since 0.1.0
 */
import type * as Config from "../core/config.ts"
import * as Cpu from "./cpu.ts"

/**
 * How a round is combined (the core's `Config.Aggregation`, every default filled in):
 * `aggregate` the rule, `trimFraction` the share cut from each end per coordinate by
 * `trimmed-mean` (in [0, 0.5)), `clipNorm` the largest L2 norm of a contribution's change from the
 * reference (0: off), `outlierFactor` how many times the median distance from the coordinate-wise
 * median makes a contribution an outlier (0: never).
 *
 * @since 0.1.0
 * @category model
 */
export type Rule = Config.Aggregation

/**
 * A contribution far outside the others: its index in the round's list, its L2 distance from the
 * coordinate-wise median and the median of every contribution's distance.
 *
 * @since 0.1.0
 * @category model
 */
export interface Outlier {
  readonly index: number
  readonly distance: number
  readonly medianDistance: number
}

/**
 * One round's result: the combined parameters, the outliers (ascending index) and the indices of
 * the contributions whose change was clipped.
 *
 * @since 0.1.0
 * @category model
 */
export interface Combined {
  readonly params: Float32Array
  readonly outliers: ReadonlyArray<Outlier>
  readonly clipped: ReadonlyArray<number>
}

/** Sorts `values[0, n)` ascending in place: insertion for the few ranks of a round, the typed sort past that. */
const sortFew = (values: Float64Array, n: number): void => {
  if (n > 16) {
    values.subarray(0, n).sort()
    return
  }
  for (let i = 1; i < n; i++) {
    const v = values[i]!
    let j = i - 1
    while (j >= 0 && values[j]! > v) {
      values[j + 1] = values[j]!
      j--
    }
    values[j + 1] = v
  }
}

/**
 * The coordinate-wise mean after cutting the `cut` smallest and `cut` largest values of each
 * coordinate (`cut = 0` is the plain mean, `cut = floor((n - 1) / 2)` the median for odd n). Every
 * array has the same length (the caller checked). O(length × n log n).
 */
const trimmed = (params: ReadonlyArray<Float32Array>, cut: number): Float32Array => {
  const n = params.length
  const length = params[0]!.length
  const out = new Float32Array(length)
  const column = new Float64Array(n)
  const kept = n - 2 * cut
  for (let j = 0; j < length; j++) {
    for (let i = 0; i < n; i++) column[i] = params[i]![j]!
    sortFew(column, n)
    let sum = 0
    for (let i = cut; i < n - cut; i++) sum += column[i]!
    out[j] = sum / kept
  }
  return out
}

/**
 * The coordinate-wise median (the mean of the two middle values for an even count), computed in
 * float64 and rounded once to float32. Errors as `Cpu.mean`: `NoContributions`, `LengthMismatch`.
 *
 * @since 0.1.0
 * @category averaging
 */
export const median = (params: ReadonlyArray<Float32Array>): Float32Array | Cpu.MeanError => {
  const checked = check(params)
  if (checked !== undefined) return checked
  return trimmed(params, Math.floor((params.length - 1) / 2))
}

/**
 * The coordinate-wise trimmed mean: per coordinate, `floor(fraction × n)` values cut from each end
 * (at most `floor((n - 1) / 2)`, so at least one value is kept), the rest averaged. `fraction` in
 * [0, 0.5); 0 is the plain mean. Errors as `Cpu.mean`.
 *
 * @since 0.1.0
 * @category averaging
 */
export const trimmedMean = (params: ReadonlyArray<Float32Array>, fraction: number): Float32Array | Cpu.MeanError => {
  const checked = check(params)
  if (checked !== undefined) return checked
  const n = params.length
  const cut = Math.min(Math.floor(Math.round(fraction * n * 1e9) / 1e9), Math.floor((n - 1) / 2))
  return cut === 0 ? (Cpu.mean(params) as Float32Array) : trimmed(params, cut)
}

const check = (params: ReadonlyArray<Float32Array>): Cpu.MeanError | undefined => {
  const first = params[0]
  if (first === undefined) return { _tag: "NoContributions" }
  for (let i = 1; i < params.length; i++) {
    if (params[i]!.length !== first.length) return { _tag: "LengthMismatch", index: i, length: params[i]!.length, expected: first.length }
  }
  return undefined
}

/** The L2 distance between `a` and `b` (same length), in float64. */
const distance = (a: Float32Array, b: Float32Array): number => {
  let sum = 0
  for (let j = 0; j < a.length; j++) {
    const d = a[j]! - b[j]!
    sum += d * d
  }
  return Math.sqrt(sum)
}

/**
 * Each contribution with its change from `reference` scaled down to L2 norm `norm` when it is
 * longer (`reference + (p - reference) × norm / |p - reference|`); the others as given (the same
 * arrays). `clipped`: the indices scaled. `norm > 0`; every array has `reference`'s length.
 *
 * @since 0.1.0
 * @category averaging
 */
export const clip = (
  params: ReadonlyArray<Float32Array>,
  reference: Float32Array,
  norm: number
): { readonly params: ReadonlyArray<Float32Array>; readonly clipped: ReadonlyArray<number> } => {
  const clipped: Array<number> = []
  const out = params.map((p, index) => {
    const d = distance(p, reference)
    if (!(d > norm)) return p
    clipped.push(index)
    const scale = norm / d
    const scaled = new Float32Array(p.length)
    for (let j = 0; j < p.length; j++) scaled[j] = reference[j]! + (p[j]! - reference[j]!) * scale
    return scaled
  })
  return { params: out, clipped }
}

/**
 * The contributions far outside the others: those whose L2 distance from the coordinate-wise
 * median `center` is more than `factor` times the median of all the distances (and more than a
 * float32 rounding of `center`'s norm, so that identical contributions flag nothing). Needs at
 * least 3 contributions (with 2 neither is "the others"); fewer give none.
 *
 * @since 0.1.0
 * @category averaging
 */
export const outliers = (params: ReadonlyArray<Float32Array>, center: Float32Array, factor: number): ReadonlyArray<Outlier> => {
  if (params.length < 3 || !(factor > 0)) return []
  const distances = Float64Array.from(params, (p) => distance(p, center))
  const sorted = Float64Array.from(distances)
  sortFew(sorted, sorted.length)
  const mid = sorted.length >> 1
  const medianDistance = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  let centerNorm = 0
  for (let j = 0; j < center.length; j++) centerNorm += center[j]! * center[j]!
  const floor = Math.max(factor * medianDistance, 1e-6 * (1 + Math.sqrt(centerNorm)))
  const found: Array<Outlier> = []
  distances.forEach((d, index) => {
    if (d > floor) found.push({ index, distance: d, medianDistance })
  })
  return found
}

/**
 * Combines one round's contributions by `rule` (docs/edge-averaging.md): outliers are found on
 * the contributions as sent; with `clipNorm` each change from `reference` (the last committed
 * model; the coordinate-wise median of the round when there is none) is clipped first; then the
 * mean, trimmed mean or median. With the default rule (plain mean, no clipping, no outlier factor)
 * this is exactly `Cpu.mean`. Errors as `Cpu.mean`: `NoContributions`, `LengthMismatch`; a
 * `reference` of another length is not used (the round's median stands in).
 *
 * @since 0.1.0
 * @category averaging
 */
export const combine = (params: ReadonlyArray<Float32Array>, rule: Rule, reference?: Float32Array): Combined | Cpu.MeanError => {
  const checked = check(params)
  if (checked !== undefined) return checked
  const needsCenter = rule.outlierFactor > 0 && params.length >= 3
  const center = needsCenter || rule.clipNorm > 0 ? (median(params) as Float32Array) : undefined
  const found = needsCenter ? outliers(params, center!, rule.outlierFactor) : []
  let inputs = params
  let clipped: ReadonlyArray<number> = []
  if (rule.clipNorm > 0) {
    const base = reference !== undefined && reference.length === params[0]!.length ? reference : center!
    ;({ params: inputs, clipped } = clip(params, base, rule.clipNorm))
  }
  const combined =
    rule.aggregate === "median"
      ? median(inputs)
      : rule.aggregate === "trimmed-mean"
        ? trimmedMean(inputs, rule.trimFraction)
        : Cpu.mean(inputs)
  if (Cpu.isError(combined)) return combined
  return { params: combined, outliers: found, clipped }
}
