import { describe, expect, it } from "vitest"
import * as MnistTrainer from "../../src/train/mnist-trainer.ts"
import * as Permutation from "../../src/train/permutation.ts"
import { fnvFloat32 } from "./checksum.ts"

// Full tier: three epochs of the bundled trainer (8 s on an idle core, 45 s at load 16); the quick
// tier trains one in mnist-trainer.test.ts.
const SEED = 1
const BATCH = 32

const trainEpoch = async (trainer: MnistTrainer.MnistTrainer, epoch: number): Promise<void> => {
  const order = Permutation.permutation(SEED, epoch, MnistTrainer.trainSamples)
  for (let offset = 0; offset < order.length; offset += BATCH) await trainer.trainBatch(order.subarray(offset, offset + BATCH))
}

describe("the bundled MNIST trainer over three epochs", () => {
  it("reaches test accuracy 0.946 after 3 epochs of batches of 32 on all 8000 images, the same on every runtime", async () => {
    const trainer = await MnistTrainer.createTrainer({ rank: 0, worldSize: 1, seed: SEED })
    const started = performance.now()
    const accuracies: Array<number> = []
    for (let epoch = 0; epoch < 3; epoch++) {
      await trainEpoch(trainer, epoch)
      accuracies.push(trainer.evaluate().accuracy)
    }
    const trainMs = performance.now() - started
    console.log(`mnist trainer: 3 epochs + 3 evaluations in ${trainMs.toFixed(0)} ms`)
    expect(trainer.samplesTrained).toBe(24_000)
    expect(accuracies).toEqual([0.934, 0.939, 0.946])
    expect(trainer.evaluate()).toEqual({ accuracy: 0.946, loss: 0.1953238168955371 })
    expect(fnvFloat32(trainer.getParams())).toBe(1392894878)
  }, 120_000)
})
