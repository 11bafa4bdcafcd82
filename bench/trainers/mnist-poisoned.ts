// The 64-hidden-unit MNIST trainer (./mnist-small.ts) whose rank 3 poisons every contribution when
// COHORT_BENCH_POISON says so (read when the rank starts): `scale` sends its parameters times 1e6,
// `flip` sends them sign-flipped, `flip-scale` times −1e6; it trains honestly. For the compression bench's poisoning table.
import type * as Trainer from "../../src/train/trainer.ts"
import * as Small from "./mnist-small.ts"

export const trainSamples = Small.trainSamples

export const createTrainer = async (context: Trainer.TrainerContext) => {
  const trainer = await Small.createTrainer(context)
  const poison = context.rank === 3 ? process.env["COHORT_BENCH_POISON"] : undefined
  const factor = poison === "scale" ? 1e6 : poison === "flip" ? -1 : poison === "flip-scale" ? -1e6 : undefined
  if (factor === undefined) return trainer
  const getParams = trainer.getParams.bind(trainer)
  return {
    ...trainer,
    trainBatch: trainer.trainBatch.bind(trainer),
    setParams: trainer.setParams.bind(trainer),
    save: trainer.save.bind(trainer),
    evaluate: trainer.evaluate.bind(trainer),
    getParams: () => getParams().map((v) => v * factor)
  }
}
