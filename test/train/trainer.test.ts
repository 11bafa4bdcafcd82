import { describe, expect, it } from "vitest"
import * as MnistTrainer from "../../src/train/mnist-trainer.ts"
import * as Trainer from "../../src/train/trainer.ts"

const createTrainer = (): Trainer.Trainer => ({
  trainBatch: () => ({ loss: 0 }),
  getParams: () => new Float32Array(1),
  setParams: () => undefined,
  save: () => undefined
})

describe("validateTrainerModule", () => {
  it("accepts the bundled trainer module and returns it", () => {
    expect(Trainer.validateTrainerModule(MnistTrainer)).toBe(MnistTrainer)
    expect(MnistTrainer.trainSamples).toBe(8000)
  })

  it("accepts any object with createTrainer and a positive integer trainSamples", () => {
    const mod = { trainSamples: 1, createTrainer, extra: "ignored" }
    expect(Trainer.validateTrainerModule(mod)).toBe(mod)
  })

  it("says exactly what is wrong with a bad module, never throwing", () => {
    const reasons: Array<[unknown, string]> = [
      [null, "the trainer module is not an object"],
      [undefined, "the trainer module is not an object"],
      ["./trainer.ts", "the trainer module is not an object"],
      [{}, "the trainer module does not export createTrainer"],
      [{ trainSamples: 10 }, "the trainer module does not export createTrainer"],
      [{ trainSamples: 10, createTrainer: undefined }, "the trainer module does not export createTrainer"],
      [{ trainSamples: 10, createTrainer: {} }, "createTrainer must be a function, got object"],
      [{ trainSamples: 10, createTrainer: null }, "createTrainer must be a function, got null"],
      [{ createTrainer }, "the trainer module does not export trainSamples"],
      [{ createTrainer, trainSamples: "8000" }, "trainSamples must be a positive safe integer, got string"],
      [{ createTrainer, trainSamples: 0 }, "trainSamples must be a positive safe integer, got 0"],
      [{ createTrainer, trainSamples: -5 }, "trainSamples must be a positive safe integer, got -5"],
      [{ createTrainer, trainSamples: 2.5 }, "trainSamples must be a positive safe integer, got 2.5"],
      [{ createTrainer, trainSamples: Number.NaN }, "trainSamples must be a positive safe integer, got NaN"],
      [{ createTrainer, trainSamples: 2 ** 53 }, "trainSamples must be a positive safe integer, got 9007199254740992"],
      [
        { createTrainer, trainSamples: 2 ** 40 },
        "trainSamples must be at most 4294967295 (sample indices are 32-bit: Uint32Array), got 1099511627776"
      ],
      [
        {
          createTrainer,
          get trainSamples(): number {
            throw new Error("not initialized")
          }
        },
        "cannot read the trainer module: Error: not initialized"
      ]
    ]
    for (const [mod, reason] of reasons) expect(Trainer.validateTrainerModule(mod)).toBe(reason)
  })
})

describe("validateTrainer", () => {
  it("accepts a trainer with or without evaluate", () => {
    const plain = createTrainer()
    const withEvaluate = { ...plain, evaluate: () => ({ accuracy: 1, loss: 0 }) }
    expect(Trainer.validateTrainer(plain)).toBe(plain)
    expect(Trainer.validateTrainer(withEvaluate)).toBe(withEvaluate)
  })

  it("says exactly what is missing", () => {
    const { trainBatch: _t, ...noTrainBatch } = createTrainer()
    const { save: _s, ...noSave } = createTrainer()
    const reasons: Array<[unknown, string]> = [
      [undefined, "createTrainer did not return an object"],
      [42, "createTrainer did not return an object"],
      [noTrainBatch, "the trainer has no trainBatch method"],
      [{ ...createTrainer(), getParams: new Float32Array(1) }, "the trainer has no getParams method"],
      [{ ...createTrainer(), setParams: undefined }, "the trainer has no setParams method"],
      [noSave, "the trainer has no save method"],
      [{ ...createTrainer(), evaluate: 1 }, "the trainer's evaluate must be a function when present"],
      [
        Object.defineProperty(createTrainer(), "evaluate", {
          get: () => {
            throw new TypeError("boom")
          }
        }),
        "cannot read the trainer: TypeError: boom"
      ]
    ]
    for (const [trainer, reason] of reasons) expect(Trainer.validateTrainer(trainer)).toBe(reason)
  })
})
