/**
 * The trainer contract: what a user's workload implements so that Cohort can train it on many
 * ranks. A **trainer module** is a file that the rank workers import (`cohort run --trainer
 * FILE`); it exports:
 *
 * - `trainSamples: number`: the training set's size, a positive integer. The launcher reads it in
 *   the main thread to plan the epochs, so importing the module must be cheap: load data in
 *   `createTrainer`, never at import time.
 * - `createTrainer(context)`: called once per rank, in that rank's worker; returns the rank's
 *   `Trainer` (or a promise of it).
 *
 * ```ts
 * // my-trainer.ts
 * import type * as Trainer from "../cohort/src/train/trainer.ts" // wherever Cohort is
 * export const trainSamples = 60_000
 * export const createTrainer = async (context: Trainer.TrainerContext): Promise<Trainer.Trainer> => {
 *   const data = await loadMyData()
 *   const model = initModel(context.seed) // same seed on every rank: same starting model
 *   return { trainBatch, getParams, setParams, save, evaluate }
 * }
 * ```
 *
 * Every method may be synchronous or return a promise. A method that throws or rejects is a
 * crash of its rank (docs/design.md §5: the supervisor reports it and the coordinator moves its work).
 *
 * @since 0.1.0
 */

/**
 * What `createTrainer` learns about its rank: `rank` in `[0, worldSize)`, `worldSize` the ranks
 * at formation (docs/design.md §1), and the run's `seed` (an integer, the same on every rank, so that
 * every rank can build the same initial model).
 *
 * @since 0.1.0
 * @category contract
 */
export interface TrainerContext {
  readonly rank: number
  readonly worldSize: number
  readonly seed: number
}

/**
 * Test-set metrics: `accuracy` in `[0, 1]` and mean `loss` (the model's own unit, e.g. nats of
 * cross-entropy).
 *
 * @since 0.1.0
 * @category contract
 */
export interface Evaluation {
  readonly accuracy: number
  readonly loss: number
}

/**
 * One rank's model and data.
 *
 * - `trainBatch(indices)`: one optimizer step on the training samples `indices` (dataset indices
 *   in `[0, trainSamples)`, usually `batchSize` of them, fewer at the end of a range); returns the
 *   batch's mean loss. The caller does not reuse `indices` after the call returns or settles.
 * - `getParams()`: the model's parameters as one flat `Float32Array`, the same length on every
 *   rank and every call. Cohort averages these between ranks; it may keep or transfer the
 *   array, so return a copy if the trainer keeps using its own. The rank checks every result
 *   (`paramsProblem`) and crashes with the reason when it is not so.
 * - `setParams(params)`: replaces the parameters with `params` (same length as `getParams()`),
 *   e.g. after an averaging round. Copy it and never write into it: the caller may reuse the
 *   array, and with worker-thread ranks it may be a row of memory every rank reads.
 * - `save(dir)`: writes the model under the folder `dir` (created by the caller) so that it can
 *   be loaded again; used by checkpoints and save-and-shutdown.
 * - `evaluate()` (optional): metrics on the held-out test set, run by the rank holding the eval
 *   role (docs/design.md §3.5).
 *
 * @since 0.1.0
 * @category contract
 */
export interface Trainer {
  readonly trainBatch: (indices: Uint32Array) => { readonly loss: number } | Promise<{ readonly loss: number }>
  readonly getParams: () => Float32Array
  readonly setParams: (params: Float32Array) => void
  readonly save: (dir: string) => void | Promise<void>
  readonly evaluate?: () => Evaluation | Promise<Evaluation>
}

/**
 * A trainer module, as the rank workers import it (module doc).
 *
 * @since 0.1.0
 * @category contract
 */
export interface TrainerModule {
  readonly trainSamples: number
  readonly createTrainer: (context: TrainerContext) => Trainer | Promise<Trainer>
}

/**
 * The largest `trainSamples`: 2^32 - 1, since a rank's permutation of an epoch holds its sample
 * indices in a `Uint32Array` (`permutation.ts`).
 *
 * @since 0.1.0
 * @category contract
 */
export const trainSamplesMax = 4_294_967_295

/**
 * Checks an imported module against the contract. Returns the module, typed, or one line saying
 * what is wrong, e.g. for the CLI's exit-2 message. Never throws, even on getters that throw.
 *
 * Reasons, checked in this order:
 * - `"the trainer module is not an object"` (`mod` is `null` or a primitive);
 * - `"the trainer module does not export createTrainer"`;
 * - `"createTrainer must be a function, got <type>"`;
 * - `"the trainer module does not export trainSamples"`;
 * - `"trainSamples must be a positive safe integer, got <value>"` (a number such as 0, -1, 2.5,
 *   NaN, or above 2^53 - 1), or `"... got <type>"` for a non-number;
 * - `"trainSamples must be at most 4294967295 (sample indices are 32-bit: Uint32Array), got <value>"`
 *   (`trainSamplesMax`: a rank's permutation of the epoch is a `Uint32Array`);
 * - `"cannot read the trainer module: <error>"` when reading an export throws.
 *
 * Methods of the trainer itself are checked by `validateTrainer`, once it is created.
 *
 * @since 0.1.0
 * @category contract
 */
export const validateTrainerModule = (mod: unknown): TrainerModule | string => {
  if (mod === null || (typeof mod !== "object" && typeof mod !== "function")) {
    return "the trainer module is not an object"
  }
  try {
    const record = mod as Record<string, unknown>
    if (!("createTrainer" in record) || record.createTrainer === undefined) {
      return "the trainer module does not export createTrainer"
    }
    if (typeof record.createTrainer !== "function") {
      return `createTrainer must be a function, got ${describeType(record.createTrainer)}`
    }
    if (!("trainSamples" in record) || record.trainSamples === undefined) {
      return "the trainer module does not export trainSamples"
    }
    const samples = record.trainSamples
    if (typeof samples !== "number") {
      return `trainSamples must be a positive safe integer, got ${describeType(samples)}`
    }
    if (!Number.isSafeInteger(samples) || samples <= 0) {
      return `trainSamples must be a positive safe integer, got ${String(samples)}`
    }
    if (samples > trainSamplesMax) {
      return `trainSamples must be at most ${trainSamplesMax} (sample indices are 32-bit: Uint32Array), got ${String(samples)}`
    }
    return mod as TrainerModule
  } catch (error) {
    return `cannot read the trainer module: ${String(error)}`
  }
}

/**
 * Checks what `createTrainer` returned (after awaiting). Returns it, typed, or one line:
 * - `"createTrainer did not return an object"`;
 * - `"the trainer has no <method> method"` for `trainBatch`, `getParams`, `setParams`, `save`,
 *   checked in that order, or when one is not a function;
 * - `"the trainer's evaluate must be a function when present"`;
 * - `"cannot read the trainer: <error>"` when reading a property throws.
 *
 * Never throws.
 *
 * @since 0.1.0
 * @category contract
 */
export const validateTrainer = (trainer: unknown): Trainer | string => {
  if (trainer === null || (typeof trainer !== "object" && typeof trainer !== "function")) {
    return "createTrainer did not return an object"
  }
  try {
    const record = trainer as Record<string, unknown>
    for (const method of ["trainBatch", "getParams", "setParams", "save"] as const) {
      if (typeof record[method] !== "function") return `the trainer has no ${method} method`
    }
    if (record.evaluate !== undefined && typeof record.evaluate !== "function") {
      return "the trainer's evaluate must be a function when present"
    }
    return trainer as Trainer
  } catch (error) {
    return `cannot read the trainer: ${String(error)}`
  }
}

/**
 * What is wrong with a `getParams()` result, as the rank's crash says it: `"getParams() must
 * return a Float32Array, got Float64Array"` (or `array`, `object`, `undefined`, ...), or, once the
 * length is known (`length`), `"getParams() returned 3 values; it returned 2 at the start (the
 * parameter count never changes)"`. `undefined` when `params` is a Float32Array of `length` values.
 *
 * @since 0.1.0
 * @category contract
 */
export const paramsProblem = (params: unknown, length: number | undefined): string | undefined => {
  if (!(params instanceof Float32Array)) {
    const kind = ArrayBuffer.isView(params) ? params.constructor.name : Array.isArray(params) ? "an array" : describeType(params)
    return `getParams() must return a Float32Array, got ${kind}`
  }
  if (length !== undefined && params.length !== length) {
    return `getParams() returned ${params.length} values; it returned ${length} at the start (the parameter count never changes)`
  }
  return undefined
}

const describeType = (value: unknown): string => (value === null ? "null" : typeof value)
