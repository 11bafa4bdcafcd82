// The bundled MNIST trainer (src/train/mnist-trainer.ts: the same 8,000 images, learning-rate
// schedule, seeding and saves) with 64 hidden units instead of 512 (50,890 parameters, about an
// eighth of the arithmetic per batch): for the compression bench's `--quick` accuracy table and
// the rate-limited link test, where the bundled model would take minutes.
import * as MnistTrainer from "../../src/train/mnist-trainer.ts"
import type * as Trainer from "../../src/train/trainer.ts"

export const trainSamples = MnistTrainer.trainSamples

export const shape = { ...MnistTrainer.SHAPE, hidden: 64 }

export const createTrainer = (context: Trainer.TrainerContext) => MnistTrainer.createTrainerOfShape(shape, context)
