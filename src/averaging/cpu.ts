/**
 * The `cpu` averaging backend: the coordinator-mediated mean of the contributions to one round
 * (docs/design.md §1 "averaging backend"). The core decides who contributed to a round and when it
 * closes (`AverageRound`); this module only does the arithmetic.
 *
 * @since 0.1.0
 */

/**
 * Why a round cannot be averaged.
 *
 * @since 0.1.0
 * @category errors
 */
export type MeanError =
  | { readonly _tag: "NoContributions" }
  | { readonly _tag: "LengthMismatch"; readonly index: number; readonly length: number; readonly expected: number }

/**
 * The element-wise mean of `params` (equal weights), accumulated in float64 and rounded once to
 * float32. Every array must have the same length; an empty list or a mismatch is an error, never a
 * throw. O(contributions × length).
 *
 * @since 0.1.0
 * @category averaging
 */
export const mean = (params: ReadonlyArray<Float32Array>): Float32Array | MeanError => {
  const first = params[0]
  if (first === undefined) return { _tag: "NoContributions" }
  const length = first.length
  for (let i = 1; i < params.length; i++) {
    if (params[i]!.length !== length) return { _tag: "LengthMismatch", index: i, length: params[i]!.length, expected: length }
  }
  if (params.length === 1) return Float32Array.from(first)
  const sum = new Float64Array(length)
  // Four contributions a pass: a quarter of the loads and stores of `sum`. Each value is still
  // added in the contributions' order, one rounding at a time, so the result is the same.
  let i = 0
  for (; i + 4 <= params.length; i += 4) {
    const a = params[i]!
    const b = params[i + 1]!
    const c = params[i + 2]!
    const d = params[i + 3]!
    for (let j = 0; j < length; j++) sum[j] = sum[j]! + a[j]! + b[j]! + c[j]! + d[j]!
  }
  for (; i < params.length; i++) {
    const p = params[i]!
    for (let j = 0; j < length; j++) sum[j]! += p[j]!
  }
  const out = new Float32Array(length)
  for (let j = 0; j < length; j++) out[j] = sum[j]! / params.length
  return out
}

/** True when `mean` returned an error. @since 0.1.0 @category averaging */
export const isError = (result: Float32Array | MeanError): result is MeanError => !(result instanceof Float32Array)
