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

/**
 * One round's contributions summed as they arrive (`fold`), each while its values are still in
 * the cache, instead of all at the round's close. `meanOf` then gives exactly what `mean` gives.
 *
 * @since 0.1.0
 * @category model
 */
export interface Running {
  /** The arrays folded, in order. */
  readonly folded: Array<Float32Array>
  /** Their float64 sum, value by value, added in that order; `undefined` before the first. */
  sum: Float64Array | undefined
}

/** An empty `Running`. @since 0.1.0 @category constructors */
export const running = (): Running => ({ folded: [], sum: undefined })

/** Empties `running` (a round closed). @since 0.1.0 @category averaging */
export const clear = (running: Running): void => {
  running.folded.length = 0
  running.sum = undefined
}

/**
 * Adds `params` to the running sum, after what it holds. An array of another length than those
 * folded empties it first (a sum of one length only). O(length).
 *
 * @since 0.1.0
 * @category averaging
 */
export const fold = (running: Running, params: Float32Array): void => {
  if (running.sum !== undefined && running.sum.length !== params.length) clear(running)
  const sum = (running.sum ??= new Float64Array(params.length))
  for (let j = 0; j < params.length; j++) sum[j]! += params[j]!
  running.folded.push(params)
}

/**
 * `mean(params)`, bit for bit, from what `running` folded when that is a prefix of `params` (the
 * same arrays, in the same order): only the rest is added then. The sum adds the same values in
 * the same order, one rounding at a time, as `mean`'s four-a-pass loop does, and is rounded once.
 * Anything else (an array folded that is not at its place in `params`) takes `mean` from scratch.
 * Empties `running` either way. Errors as `mean`.
 *
 * @since 0.1.0
 * @category averaging
 */
export const meanOf = (running: Running, params: ReadonlyArray<Float32Array>): Float32Array | MeanError => {
  const { folded, sum } = running
  const prefix =
    sum !== undefined &&
    params.length > 1 &&
    folded.length <= params.length &&
    folded.every((p, i) => p === params[i]) &&
    params.every((p) => p.length === sum.length)
  if (!prefix) {
    clear(running)
    return mean(params)
  }
  for (let i = folded.length; i < params.length; i++) {
    const p = params[i]!
    for (let j = 0; j < p.length; j++) sum[j]! += p[j]!
  }
  clear(running)
  const out = new Float32Array(sum.length)
  for (let j = 0; j < sum.length; j++) out[j] = sum[j]! / params.length
  return out
}

/** True when `mean` returned an error. @since 0.1.0 @category averaging */
export const isError = (result: Float32Array | MeanError): result is MeanError => !(result instanceof Float32Array)
