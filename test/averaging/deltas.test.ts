import { describe, expect, it } from "vitest"
import * as Deltas from "../../src/averaging/deltas.ts"
import type { Params } from "../../src/core/messages.ts"

const f32 = (values: ReadonlyArray<number>) => new Float32Array(values)
const params = (round: number, values: ReadonlyArray<number>): Params => ({
  _tag: "Params",
  epoch: 0,
  round,
  samplesDone: 32,
  params: f32(values)
})

describe("contributions as changes (the coordinator's side)", () => {
  it("a rank's contribution is a change once it was sent a model of an earlier round, and becomes base + change", () => {
    const deltas = Deltas.make()
    const base = f32([1, 2, 3])
    // A fresh run's first round: nobody was sent a model, every contribution is parameters.
    const first = params(0, [1.5, 2.5, 3.5])
    expect(deltas.toParams(0, first, undefined)).toBe(first)
    deltas.modelSent(0, 0)
    deltas.modelSent(1, 0)
    // Round 1 after the model of round 0: changes, added to the model last sent.
    expect([...deltas.toParams(0, params(1, [0.25, -0.5, 0]), base).params]).toEqual([1.25, 1.5, 3])
    // A late contribution to round 0 (sent before that rank applied round 0's model): parameters.
    const late = params(0, [1.5, 2.5, 3.5])
    expect(deltas.toParams(1, late, base)).toBe(late)
    // A rank never sent a model (a joiner welcomed without one): parameters.
    const joiner = params(5, [9, 9, 9])
    expect(deltas.toParams(2, joiner, base)).toBe(joiner)
    // A change of the wrong length is left as it is, for the core to refuse.
    const short = params(1, [1])
    expect(deltas.toParams(0, short, base)).toBe(short)
  })

  it("a later model does not move the round a rank first held one (a joiner's welcome, then the rounds)", () => {
    const deltas = Deltas.make()
    deltas.modelSent(3, 7)
    deltas.modelSent(3, 8)
    const base = f32([0])
    expect([...deltas.toParams(3, params(8, [1]), base).params]).toEqual([1])
    const before = params(7, [5])
    expect(deltas.toParams(3, before, base)).toBe(before)
  })
  it("with reuse, a change that owns its buffer becomes the parameters in place (the same values); a view into a larger buffer never does", () => {
    const deltas = Deltas.make()
    deltas.modelSent(0, 0)
    const base = f32([1, 2, 3])
    const change = params(1, [0.1, -0.5, 1e-8])
    const copied = deltas.toParams(0, params(1, [0.1, -0.5, 1e-8]), base)
    const reused = deltas.toParams(0, change, base, true)
    expect(reused.params).toBe(change.params)
    expect([...reused.params]).toEqual([...copied.params])
    const frame = new Float32Array([7, 0.25, -0.5, 0, 7])
    const view = { ...params(1, [0]), params: frame.subarray(1, 4) }
    expect([...deltas.toParams(0, view, base, true).params]).toEqual([1.25, 1.5, 3])
    expect([...frame]).toEqual([7, 0.25, -0.5, 0, 7])
  })
})
