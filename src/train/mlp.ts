/**
 * A small multi-layer perceptron on `Float32Array`, trained with plain minibatch SGD: inputs →
 * `hidden` ReLU units → `classes` logits → softmax, with the mean cross-entropy loss.
 *
 * **Parameters** are one `Float32Array` of `paramCount(shape)` floats, in this order:
 * `W1[p * hidden + h]` (input `p` to hidden unit `h`), `b1[h]`, `W2[h * classes + c]` (hidden
 * unit `h` to class `c`), `b2[c]`. That layout is what travels between ranks and what `save`
 * writes.
 *
 * **Inputs** are quantized (`Samples`): one byte code per input and a table of 256 values, code 0
 * meaning 0. Zero inputs are skipped, which makes a step on MNIST (about 19% non-zero pixels)
 * about 5× cheaper than a dense one.
 *
 * **Determinism.** Sums run in a fixed order in doubles, the softmax and loss use the
 * engine-independent `exp`/`log` of `internal/exact-math.ts`, and parameters are rounded to
 * float32 after each step: the same inputs give bit-identical parameters and losses on Node, Bun
 * and Deno.
 *
 * @since 0.1.0
 */
import { uniformInt } from "pure-rand/distribution/uniformInt"
import { xoroshiro128plus } from "pure-rand/generator/xoroshiro128plus"
import * as ExactMath from "./internal/exact-math.ts"

/**
 * Layer sizes: positive integers.
 *
 * @since 0.1.0
 * @category model
 */
export interface Shape {
  readonly inputs: number
  readonly hidden: number
  readonly classes: number
}

/**
 * A quantized sample set: input `p` of sample `i` is `values[codes[i * inputs + p]]`, its label
 * `labels[i]` (in `[0, classes)`). `values[0]` must be 0. `samples` is `labels.length`.
 *
 * @since 0.1.0
 * @category model
 */
export interface Samples {
  readonly codes: Uint8Array
  readonly values: Float64Array
  readonly labels: Uint8Array
}

/**
 * A model: its shape, its parameters (layout in the module doc) and scratch buffers reused by
 * every step. `params` is owned by the model: replace its contents with `.set(...)`.
 *
 * @since 0.1.0
 * @category model
 */
export interface Model {
  readonly shape: Shape
  readonly params: Float32Array
  /** @internal scratch: gradient, activations, non-zero input list. */
  readonly grad: Float64Array
  /** @internal */
  readonly hiddenOut: Float64Array
  /** @internal */
  readonly logits: Float64Array
  /** @internal */
  readonly delta: Float64Array
  /** @internal */
  readonly hiddenDelta: Float64Array
  /** @internal */
  readonly nonZero: Int32Array
}

/**
 * Number of parameters: `inputs * hidden + hidden + hidden * classes + classes`
 * (784, 64, 10 gives 50,890).
 *
 * @since 0.1.0
 * @category model
 */
export const paramCount = (shape: Shape): number =>
  shape.inputs * shape.hidden + shape.hidden + shape.hidden * shape.classes + shape.classes

/**
 * A model with the given parameters (copied; length must be `paramCount(shape)`).
 *
 * Throws `RangeError` on a wrong length.
 *
 * @since 0.1.0
 * @category model
 */
export const make = (shape: Shape, params: Float32Array): Model => {
  const count = paramCount(shape)
  if (params.length !== count) {
    throw new RangeError(`expected ${count} parameters, got ${params.length}`)
  }
  return {
    shape,
    params: Float32Array.from(params),
    grad: new Float64Array(count),
    hiddenOut: new Float64Array(shape.hidden),
    logits: new Float64Array(shape.classes),
    delta: new Float64Array(shape.classes),
    hiddenDelta: new Float64Array(shape.hidden),
    nonZero: new Int32Array(shape.inputs)
  }
}

/**
 * Seeded initial parameters: `W1` uniform in `±sqrt(6 / inputs)` (He), `W2` uniform in
 * `±sqrt(6 / (hidden + classes))` (Glorot), biases 0. The uniform draws come from pure-rand's
 * `xoroshiro128+` seeded with `seed | 0` (a 32-bit integer; 24-bit resolution), so they are the
 * same on every runtime.
 *
 * @since 0.1.0
 * @category model
 */
export const initialParams = (shape: Shape, seed: number): Float32Array => {
  const params = new Float32Array(paramCount(shape))
  const rng = xoroshiro128plus(seed | 0)
  const uniform = (limit: number): number => ((uniformInt(rng, 0, 0xffffff) + 0.5) / 0x800000 - 1) * limit
  const w1 = shape.inputs * shape.hidden
  const w2 = w1 + shape.hidden
  const limit1 = Math.sqrt(6 / shape.inputs)
  const limit2 = Math.sqrt(6 / (shape.hidden + shape.classes))
  for (let i = 0; i < w1; i++) params[i] = uniform(limit1)
  for (let i = 0; i < shape.hidden * shape.classes; i++) params[w2 + i] = uniform(limit2)
  return params
}

// Forward pass of one sample into model.logits (and hiddenOut, nonZero); returns the non-zero count.
const forward = (model: Model, data: Samples, sample: number): number => {
  const { inputs, hidden, classes } = model.shape
  const { params, hiddenOut, logits, nonZero } = model
  const { codes, values } = data
  const base = sample * inputs
  const b1 = inputs * hidden
  const w2 = b1 + hidden
  const b2 = w2 + hidden * classes
  let count = 0
  for (let p = 0; p < inputs; p++) if (codes[base + p] !== 0) nonZero[count++] = p
  for (let h = 0; h < hidden; h++) hiddenOut[h] = params[b1 + h]!
  for (let q = 0; q < count; q++) {
    const p = nonZero[q]!
    const x = values[codes[base + p]!]!
    const row = p * hidden
    for (let h = 0; h < hidden; h++) hiddenOut[h] = hiddenOut[h]! + params[row + h]! * x
  }
  for (let h = 0; h < hidden; h++) if (hiddenOut[h]! < 0) hiddenOut[h] = 0
  for (let c = 0; c < classes; c++) logits[c] = params[b2 + c]!
  for (let h = 0; h < hidden; h++) {
    const a = hiddenOut[h]!
    if (a === 0) continue
    const row = w2 + h * classes
    for (let c = 0; c < classes; c++) logits[c] = logits[c]! + params[row + c]! * a
  }
  return count
}

// Softmax of model.logits into model.delta; returns the cross-entropy loss for `label`.
const softmax = (model: Model, label: number): number => {
  const { logits, delta } = model
  const classes = logits.length
  let max = -Infinity
  for (let c = 0; c < classes; c++) if (logits[c]! > max) max = logits[c]!
  let sum = 0
  for (let c = 0; c < classes; c++) {
    delta[c] = ExactMath.exp(logits[c]! - max)
    sum += delta[c]!
  }
  for (let c = 0; c < classes; c++) delta[c] = delta[c]! / sum
  return ExactMath.log(sum) + (max - logits[label]!)
}

const checkIndex = (data: Samples, index: number): void => {
  if (index >= data.labels.length) {
    throw new RangeError(`sample index ${index} is out of range [0, ${data.labels.length})`)
  }
}

/**
 * One SGD step on the samples `indices` of `data`: computes the mean cross-entropy gradient over
 * the batch at the current parameters, then `params -= learningRate * gradient` (rounded to
 * float32). Returns the batch's mean loss (nats) before the step. An empty batch changes nothing
 * and returns 0.
 *
 * Throws `RangeError` for an index outside `data` (checked before any change).
 *
 * @since 0.1.0
 * @category training
 */
export const trainStep = (model: Model, data: Samples, indices: Uint32Array, learningRate: number): number => {
  if (indices.length === 0) return 0
  for (const index of indices) checkIndex(data, index)
  const { inputs, hidden, classes } = model.shape
  const { params, grad, hiddenOut, delta, hiddenDelta, nonZero } = model
  const { codes, values, labels } = data
  const b1 = inputs * hidden
  const w2 = b1 + hidden
  const b2 = w2 + hidden * classes
  grad.fill(0)
  let lossSum = 0
  for (const sample of indices) {
    const count = forward(model, data, sample)
    const label = labels[sample]!
    lossSum += softmax(model, label)
    delta[label] = delta[label]! - 1
    for (let c = 0; c < classes; c++) grad[b2 + c] = grad[b2 + c]! + delta[c]!
    for (let h = 0; h < hidden; h++) {
      const a = hiddenOut[h]!
      const row = w2 + h * classes
      let back = 0
      for (let c = 0; c < classes; c++) {
        back += params[row + c]! * delta[c]!
        grad[row + c] = grad[row + c]! + a * delta[c]!
      }
      hiddenDelta[h] = a > 0 ? back : 0
      grad[b1 + h] = grad[b1 + h]! + hiddenDelta[h]!
    }
    const base = sample * inputs
    for (let q = 0; q < count; q++) {
      const p = nonZero[q]!
      const x = values[codes[base + p]!]!
      const row = p * hidden
      for (let h = 0; h < hidden; h++) grad[row + h] = grad[row + h]! + x * hiddenDelta[h]!
    }
  }
  const scale = learningRate / indices.length
  for (let i = 0; i < params.length; i++) params[i] = params[i]! - scale * grad[i]!
  return lossSum / indices.length
}

/**
 * Accuracy (fraction of samples whose largest logit, ties to the lower class, is the label) and
 * mean cross-entropy loss (nats) over every sample of `data`; `{accuracy: 0, loss: 0}` when
 * `data` is empty.
 *
 * @since 0.1.0
 * @category training
 */
export const evaluate = (model: Model, data: Samples): { accuracy: number; loss: number } => {
  const samples = data.labels.length
  if (samples === 0) return { accuracy: 0, loss: 0 }
  let correct = 0
  let lossSum = 0
  for (let sample = 0; sample < samples; sample++) {
    forward(model, data, sample)
    const label = data.labels[sample]!
    const { logits } = model
    let best = 0
    for (let c = 1; c < logits.length; c++) if (logits[c]! > logits[best]!) best = c
    if (best === label) correct++
    lossSum += softmax(model, label)
  }
  return { accuracy: correct / samples, loss: lossSum / samples }
}
