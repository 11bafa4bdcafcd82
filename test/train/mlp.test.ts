import { describe, expect, it } from "vitest"
import * as Mlp from "../../src/train/mlp.ts"
import { fnvFloat32 } from "./checksum.ts"

// 2 inputs, 2 hidden units, 4 classes. Layout: W1[p * 2 + h], b1[h], W2[h * 4 + c], b2[c].
const TINY: Mlp.Shape = { inputs: 2, hidden: 2, classes: 4 }
// Code 1 is the value 1, code 2 the value 0.5.
const VALUES = new Float64Array(256)
VALUES[1] = 1
VALUES[2] = 0.5
// One sample, x = [1, 0.5], label 0; a second one, x = [0, 1], label 3.
const DATA: Mlp.Samples = { codes: new Uint8Array([1, 2, 0, 1]), values: VALUES, labels: new Uint8Array([0, 3]) }

// prettier-ignore
const START = new Float32Array([
  1,
  1,
  0,
  2, // W1: input 0 -> [1, 1], input 1 -> [0, 2]
  0,
  0, //       b1
  1,
  0,
  0,
  0, // W2 from hidden 0
  0,
  1,
  0,
  0, // W2 from hidden 1
  1,
  0,
  2,
  2 //  b2
])

describe("the MLP and its SGD step", () => {
  it("counts 784 * 64 + 64 + 64 * 10 + 10 = 50,890 parameters for a 784-64-10 network", () => {
    expect(Mlp.paramCount({ inputs: 784, hidden: 64, classes: 10 })).toBe(50_890)
    expect(Mlp.paramCount(TINY)).toBe(18)
  })

  it("takes one step exactly as computed by hand", () => {
    // Forward: h = relu([1*1 + 0*0.5, 1*1 + 2*0.5]) = [1, 2]; logits = [1, 2, 0, 0] + b2 = [2, 2, 2, 2];
    // softmax = [1/4, 1/4, 1/4, 1/4]; loss = ln 4. delta = p - onehot(0) = [-3/4, 1/4, 1/4, 1/4].
    // grad b2 = delta; grad W2[h][c] = h_h * delta_c; back to hidden: [W2[0]·delta, W2[1]·delta] =
    // [-3/4, 1/4], both units active; grad b1 = [-3/4, 1/4]; grad W1[p][h] = x_p * that.
    // Step with learning rate 1/2 on a batch of one: params -= grad / 2.
    const model = Mlp.make(TINY, START)
    const loss = Mlp.trainStep(model, DATA, new Uint32Array([0]), 0.5)
    expect(loss).toBe(2 * Math.LN2)
    // prettier-ignore
    expect([...model.params]).toEqual([
      1.375, 0.875, 0.1875, 1.9375, 0.375, -0.125, 1.375, -0.125, -0.125, -0.125, 0.75, 0.75, -0.25, -0.25, 1.375, -0.125, 1.875, 1.875
    ])
  })

  it("averages the gradient over the batch", () => {
    // Sample 1: x = [0, 1], h = relu([0, 2]) = [0, 2]; logits = [0, 2, 0, 0] + b2 = [1, 2, 2, 2]: not
    // uniform, so compare with two single steps at half the rate from the same start.
    const batch = Mlp.make(TINY, START)
    Mlp.trainStep(batch, DATA, new Uint32Array([0, 1]), 0.5)
    const first = Mlp.make(TINY, START)
    const second = Mlp.make(TINY, START)
    Mlp.trainStep(first, DATA, new Uint32Array([0]), 0.25)
    Mlp.trainStep(second, DATA, new Uint32Array([1]), 0.25)
    // params - 0.5 * (g0 + g1) / 2 = first + second - start, exact here (all values are multiples of 2^-24).
    const combined = START.map((start, i) => first.params[i]! + second.params[i]! - start)
    expect([...batch.params]).toEqual([...combined])
  })

  it("skips an empty batch and refuses an index outside the data before changing anything", () => {
    const model = Mlp.make(TINY, START)
    expect(Mlp.trainStep(model, DATA, new Uint32Array(0), 0.5)).toBe(0)
    expect(() => Mlp.trainStep(model, DATA, new Uint32Array([0, 2]), 0.5)).toThrow(new RangeError("sample index 2 is out of range [0, 2)"))
    expect(model.params).toEqual(START)
    expect(() => Mlp.make(TINY, new Float32Array(17))).toThrow(new RangeError("expected 18 parameters, got 17"))
  })

  it("evaluates accuracy (ties to the lower class) and mean loss", () => {
    const model = Mlp.make(TINY, START)
    // Sample 0: logits all 2, predicted class 0 = label. Sample 1: logits [1, 2, 2, 2], predicted 1, label 3.
    const result = Mlp.evaluate(model, DATA)
    expect(result.accuracy).toBe(0.5)
    // Mean of ln 4 and ln(3 + e^-1).
    expect(result.loss).toBe(1.3002888307413256)
    expect(result.loss).toBeCloseTo((Math.log(4) + Math.log(3 + Math.exp(-1))) / 2, 15)
    expect(Mlp.evaluate(model, { ...DATA, codes: new Uint8Array(0), labels: new Uint8Array(0) })).toEqual({
      accuracy: 0,
      loss: 0
    })
  })

  it("draws the same seeded initial parameters on every runtime (golden checksum)", () => {
    const shape = { inputs: 784, hidden: 64, classes: 10 }
    const params = Mlp.initialParams(shape, 1)
    expect(fnvFloat32(params)).toBe(452987805)
    expect(fnvFloat32(Mlp.initialParams(shape, 1))).toBe(452987805)
    expect(fnvFloat32(Mlp.initialParams(shape, 2))).toBe(87730819)
    const limit1 = Math.sqrt(6 / 784)
    expect(params.subarray(0, 784 * 64).every((w) => Math.abs(w) < limit1)).toBe(true)
    expect(params.subarray(784 * 64, 784 * 64 + 64).every((b) => b === 0)).toBe(true)
    expect(params.subarray(50_880).every((b) => b === 0)).toBe(true)
  })
})
