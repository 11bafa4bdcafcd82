/**
 * The outer optimizer (docs/edge-averaging.md "Outer optimizer"): with infrequent averaging
 * (many local steps between rounds), the round's averaged change from the last committed model is
 * treated as a gradient and applied with SGD and Nesterov momentum, DiLoCo-style. Pure arithmetic
 * over float32 vectors; the coordinator keeps the momentum between rounds.
 *
 * @since 0.1.0
 */

/**
 * `lr`: the outer learning rate (> 0); `momentum`: Nesterov momentum in [0, 1). `lr` 1 with
 * `momentum` 0 is plain averaging.
 *
 * @since 0.1.0
 * @category model
 */
export interface Settings {
  readonly lr: number
  readonly momentum: number
}

/**
 * One outer step. `delta = averaged - base` (the round's mean change); the momentum becomes
 * `m' = momentum × m + delta`, and the model `base + lr × (delta + momentum × m')` (Nesterov).
 * `m` `undefined` (or of another length) counts as zeros. Returns fresh arrays, computed in
 * float64 per value and rounded once to float32. O(length). `base` and `averaged` have the
 * same length.
 *
 * @since 0.1.0
 * @category averaging
 */
export const step = (
  base: Float32Array,
  averaged: Float32Array,
  settings: Settings,
  m: Float32Array | undefined
): { readonly params: Float32Array; readonly momentum: Float32Array } => {
  const length = base.length
  const previous = m !== undefined && m.length === length ? m : undefined
  const params = new Float32Array(length)
  const momentum = new Float32Array(length)
  const { lr, momentum: mu } = settings
  for (let j = 0; j < length; j++) {
    const delta = averaged[j]! - base[j]!
    const next = mu * (previous === undefined ? 0 : previous[j]!) + delta
    momentum[j] = next
    params[j] = base[j]! + lr * (delta + mu * next)
  }
  return { params, momentum }
}

/**
 * Whether `settings` change anything: plain averaging (`lr` 1, `momentum` 0) skips the outer step.
 *
 * @since 0.1.0
 * @category averaging
 */
export const isOn = (settings: Settings | undefined): settings is Settings =>
  settings !== undefined && !(settings.lr === 1 && settings.momentum === 0)
