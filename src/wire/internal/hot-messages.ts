/**
 * Checks in plain code for the messages a coordinator receives every round from every rank
 * (`Params`, `ChunkDone`, `Progress`, `Heartbeat`): the same rules as their schemas
 * (`../schema.ts`), without the schema interpreter's cost per frame (about 4 ms a round of 256
 * ranks). Each accepts only what its schema accepts and returns what the schema's decode returns
 * (its fields in schema order, others dropped); `undefined` sends the record to the schema,
 * which gives the error. Internal to `src/wire`.
 *
 * @since 0.1.0
 */

type Fields = Readonly<Record<string, unknown>>

/** `Schema.Natural`: a non-negative safe integer. */
const isCount = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value) && value >= 0

/** `Schema.Finite`. */
const isFinite = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

/** `TrainLoss`: finite, of magnitude at most 1e12. */
const isLoss = (value: unknown): value is number => isFinite(value) && value >= -1e12 && value <= 1e12

const params = (record: Fields): object | undefined => {
  const { epoch, round, samplesDone, params, loss } = record
  if (!isCount(epoch) || !isCount(round) || !isCount(samplesDone) || !(params instanceof Float32Array)) return undefined
  if (!("loss" in record)) return { _tag: "Params", epoch, round, samplesDone, params }
  return isLoss(loss) ? { _tag: "Params", epoch, round, samplesDone, params, loss } : undefined
}

const chunkDone = (record: Fields): object | undefined => {
  const { epoch, offset, size } = record
  return isCount(epoch) && isCount(offset) && isCount(size) ? { _tag: "ChunkDone", epoch, offset, size } : undefined
}

const progress = (record: Fields): object | undefined => {
  const { epoch, samplesDone, msPerBatch } = record
  return isCount(epoch) && isCount(samplesDone) && isFinite(msPerBatch) ? { _tag: "Progress", epoch, samplesDone, msPerBatch } : undefined
}

const checks = new Map<unknown, (record: Fields) => object | undefined>([
  ["Params", params],
  ["ChunkDone", chunkDone],
  ["Progress", progress],
  ["Heartbeat", () => ({ _tag: "Heartbeat" })]
])

/**
 * The decoded message of `record` (its `_tag` already the message's name) when it is one of the
 * messages checked here and valid; `undefined` otherwise (the schema decides).
 *
 * @since 0.1.0
 * @category decoding
 */
export const decode = (record: Fields): object | undefined => checks.get(record["_tag"])?.(record)
