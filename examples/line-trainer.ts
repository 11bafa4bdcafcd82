/**
 * An example trainer module: fits y = 3x + 1 by minibatch SGD on 262,144 synthetic points. It shows
 * the whole contract a Cohort trainer implements; run it with
 * `node bin/cohort.mjs run --trainer examples/line-trainer.ts`.
 */
import type { Trainer, TrainerContext } from "../src/train/trainer.ts"

/** The training set size: the coordinator plans every epoch over `[0, trainSamples)`. */
export const trainSamples = 262_144

const xOf = (index: number): number => (index / trainSamples) * 2 - 1
const yOf = (index: number): number => 3 * xOf(index) + 1 + 0.01 * Math.sin(index)

/** Called once in each rank's worker; every rank starts from the same parameters. */
export const createTrainer = (_context: TrainerContext): Trainer => {
  const params = new Float32Array([0, 0]) // slope, intercept
  const learningRate = 0.2
  return {
    trainBatch(indices) {
      let gradSlope = 0
      let gradIntercept = 0
      let loss = 0
      for (const i of indices) {
        const error = params[0]! * xOf(i) + params[1]! - yOf(i)
        gradSlope += error * xOf(i)
        gradIntercept += error
        loss += error * error
      }
      params[0]! -= (learningRate * gradSlope) / indices.length
      params[1]! -= (learningRate * gradIntercept) / indices.length
      return { loss: loss / indices.length }
    },
    getParams: () => params,
    setParams: (next) => params.set(next),
    save: async (dir) => {
      // A real trainer writes files here; see src/train/mnist-trainer.ts.
      console.log(`save to ${dir}: slope ${params[0]}, intercept ${params[1]}`)
    },
    evaluate() {
      let loss = 0
      for (let i = 0; i < trainSamples; i += 16) loss += (params[0]! * xOf(i) + params[1]! - yOf(i)) ** 2
      loss /= trainSamples / 16
      return { accuracy: Math.max(0, 1 - loss), loss }
    }
  }
}
