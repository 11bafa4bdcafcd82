/**
 * The ring collective's per-value loops (`Ring.allReduce`): adding this rank's values into a
 * received partial sum, storing a received segment, dividing the finished sums into the mean and
 * widening this rank's first segment, each with a finite check where the collective needs one.
 * Each runs in WebAssembly SIMD where the runtime has it (`RingSimd`) and otherwise in the
 * JavaScript loop beside it; both give the same bits.
 *
 * @since 0.1.0
 */
import * as RingSimd from "./ring-simd.ts"

// The per-value loops live in plain functions, outside the generator that runs the steps, so that
// the engine compiles them as hot loops (inside the generator they ran several times slower).

/**
 * Adds this rank's `params[start, end)` into the received partial sum `data` in place (only when
 * `contributes`) and says whether every resulting value is finite. The parameters of a
 * contributing rank are finite (`isContribution`), so a non-finite sum means the neighbour sent a
 * non-finite value. WebAssembly SIMD where the runtime has it (`RingSimd`, the same bits), else
 * the JavaScript loop.
 *
 * @since 0.1.0
 * @category averaging
 */
export const addOwnFinite = (data: Float64Array, params: Float32Array, start: number, end: number, contributes: boolean): boolean =>
  contributes && RingSimd.isEnabled()
    ? (RingSimd.addOwnInPlace(data, params, start, end) ?? RingSimd.addOwnFinite(data, params, start, end))
    : addOwnFiniteJs(data, params, start, end, contributes)

/**
 * `addOwnFinite` in JavaScript. One pass: the check costs no second read of the segment.
 */
const addOwnFiniteJs = (data: Float64Array, params: Float32Array, start: number, end: number, contributes: boolean): boolean => {
  // `v * 0` is a zero for a finite `v` and NaN otherwise, and a NaN stays in the sums: no branch a
  // value, and two sums so that each add waits on the one before it half as often.
  let even = 0
  let odd = 0
  const count = end - start
  const own = params.subarray(start, end)
  let i = 0
  if (contributes) {
    for (; i + 1 < count; i += 2) {
      const v = data[i]! + own[i]!
      const w = data[i + 1]! + own[i + 1]!
      data[i] = v
      data[i + 1] = w
      even += v * 0
      odd += w * 0
    }
    for (; i < count; i++) {
      const v = data[i]! + own[i]!
      data[i] = v
      even += v * 0
    }
  } else {
    for (; i < count; i++) even += data[i]! * 0
  }
  return even + odd === 0
}

/**
 * `out[start + i] = data[i]`, and whether every value is finite: WebAssembly SIMD where the
 * runtime has it (`RingSimd`), else the JavaScript loop.
 *
 * @since 0.1.0
 * @category averaging
 */
export const storeFinite = (out: Float32Array, start: number, data: Float32Array): boolean =>
  RingSimd.isEnabled()
    ? (RingSimd.storeInPlace(out, start, data) ?? RingSimd.storeFinite(out, start, data))
    : storeFiniteJs(out, start, data)

/**
 * `storeFinite` in JavaScript: a copy of the bytes, then a look at each value's exponent bits (all
 * ones: NaN or an infinity) as integers, which the engine runs several times faster than a loop of
 * float stores and checks.
 */
const storeFiniteJs = (out: Float32Array, start: number, data: Float32Array): boolean => {
  out.set(data, start)
  const bits = new Int32Array(out.buffer, out.byteOffset + start * 4, data.length)
  let notFinite = 0
  for (let i = 0; i < bits.length; i++) notFinite |= (bits[i]! & 0x7f800000) === 0x7f800000 ? 1 : 0
  return notFinite === 0
}

/**
 * `out[start + i] = sum[i] / count` for `i` in `[0, end - start)`, rounded once to float32: SIMD
 * where the runtime has it (`RingSimd`, the same bits), else `divideIntoJs`.
 *
 * @since 0.1.0
 * @category averaging
 */
export const divideInto = (out: Float32Array, sum: Float64Array, start: number, end: number, count: number): void =>
  RingSimd.isEnabled()
    ? void (RingSimd.divideInPlace(out, sum, start, end, count) ?? RingSimd.divideInto(out, sum, start, end, count))
    : divideIntoJs(out, sum, start, end, count)

const divideIntoJs = (out: Float32Array, sum: Float64Array, start: number, end: number, count: number): void => {
  for (let i = start; i < end; i++) out[i] = sum[i - start]! / count
}

/**
 * `into[i] = params[start + i]` for `i` in `[0, end - start)`, widened to float64: SIMD where the
 * runtime has it (`RingSimd`), else `widenJs`.
 *
 * @since 0.1.0
 * @category averaging
 */
export const widen = (into: Float64Array, params: Float32Array, start: number, end: number): void =>
  RingSimd.isEnabled()
    ? void (RingSimd.widenInPlace(into, params, start, end) ?? RingSimd.widen(into, params, start, end))
    : widenJs(into, params, start, end)

const widenJs = (into: Float64Array, params: Float32Array, start: number, end: number): void => {
  for (let i = start; i < end; i++) into[i - start] = params[i]!
}

/**
 * One small call of each per-value loop, through every branch, as the module loads. The first
 * real call of a loop over a segment moves into optimized code in the middle of the loop (on-stack
 * replacement) before the code after the loop ever ran, so that code has no type feedback yet;
 * Node 20's V8 keeps that optimized code and leaves it again at the same point on every later
 * call, finishing each call unoptimized (about 60% of the calls of a direct ring round did). With
 * the feedback already there, the optimized code runs to the end.
 */
const warmLoops = (): void => {
  // A function records feedback only once it has been called a few times (V8 allocates its
  // feedback lazily): enough calls that the last ones record it.
  const step = RingSimd.stepBuffer(64)
  for (let call = 0; call < 32; call++) {
    const length = 2 + (call % 2)
    const sums = new Float64Array(length)
    const values = new Float32Array(length)
    addOwnFinite(sums, values, 0, length, true)
    addOwnFiniteJs(sums, values, 0, length, true)
    addOwnFinite(sums, values, 0, length, false)
    storeFinite(values, 0, new Float32Array(length))
    storeFiniteJs(values, 0, new Float32Array(length))
    // And on a step where it lies, as received on a direct link (`RingSimd.stepBuffer`).
    const inStep = new Float64Array(step, 0, length)
    addOwnFinite(inStep, values, 0, length, true)
    storeFinite(values, 0, new Float32Array(step, 0, length))
    divideInto(values, inStep, 0, length, 2)
    widen(inStep, values, 0, length)
  }
}
warmLoops()
