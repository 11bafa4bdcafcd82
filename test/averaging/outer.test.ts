import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Outer from "../../src/averaging/outer.ts"

const f32 = (values: ReadonlyArray<number>) => new Float32Array(values)

describe("the outer optimizer (SGD with Nesterov momentum on each round's mean change)", () => {
  it("steps by hand: delta, momentum m' = mu m + delta, model base + lr (delta + mu m')", () => {
    const first = Outer.step(f32([1, 2]), f32([1.5, 1]), { lr: 0.5, momentum: 0.5 }, undefined)
    // delta (0.5, -1); m' = delta; update delta + 0.5 m' = (0.75, -1.5); model base + 0.5 update.
    expect([...first.momentum]).toEqual([0.5, -1])
    expect([...first.params]).toEqual([1.375, 1.25])
    const second = Outer.step(first.params, f32([1.375, 1.25]), { lr: 0.5, momentum: 0.5 }, first.momentum)
    // No change this round: momentum alone moves the model, m' = (0.25, -0.5), update (0.125, -0.25).
    expect([...second.momentum]).toEqual([0.25, -0.5])
    expect([...second.params]).toEqual([1.4375, 1.125])
    expect(Outer.isOn({ lr: 1, momentum: 0 })).toBe(false)
    expect(Outer.isOn(undefined)).toBe(false)
    expect(Outer.isOn({ lr: 0.7, momentum: 0 })).toBe(true)
  })

  it("property: lr 1 without momentum is the averaged model itself; momentum of another length counts as zeros", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.float({ min: -100, max: 100, noNaN: true }), fc.float({ min: -100, max: 100, noNaN: true })), {
          maxLength: 50
        }),
        (pairs) => {
          const base = f32(pairs.map(([b]) => b))
          const averaged = f32(pairs.map(([, a]) => a))
          const plain = Outer.step(base, averaged, { lr: 1, momentum: 0 }, f32([9]))
          // base + (averaged - base), taken in float64 and rounded once: within a float32 step of the larger.
          plain.params.forEach((v, j) =>
            expect(Math.abs(v - averaged[j]!)).toBeLessThanOrEqual(Math.max(Math.abs(averaged[j]!), Math.abs(base[j]!)) * 2 ** -23)
          )
        }
      )
    )
  })

  it("property: resuming from the saved momentum gives the same model as going on without a break", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.float({ min: -1, max: 1, noNaN: true }), { minLength: 4, maxLength: 4 }), { minLength: 2, maxLength: 8 }),
        fc.integer({ min: 1, max: 7 }),
        (rounds, cut) => {
          const settings = { lr: 0.7, momentum: 0.9 }
          const run = (from: Float32Array, momentum: Float32Array | undefined, changes: ReadonlyArray<ReadonlyArray<number>>) => {
            let model = from
            let m = momentum
            for (const change of changes) {
              const stepped = Outer.step(model, f32(change.map((d, j) => model[j]! + d)), settings, m)
              model = stepped.params
              m = stepped.momentum
            }
            return { model, m }
          }
          const whole = run(f32([0, 0, 0, 0]), undefined, rounds)
          const at = Math.min(cut, rounds.length)
          const before = run(f32([0, 0, 0, 0]), undefined, rounds.slice(0, at))
          // What a checkpoint holds: the model and the momentum as float32 files.
          const resumed = run(
            Float32Array.from(before.model),
            before.m === undefined ? undefined : Float32Array.from(before.m),
            rounds.slice(at)
          )
          expect([...resumed.model]).toEqual([...whole.model])
        }
      )
    )
  })
})
