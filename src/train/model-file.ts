/**
 * The on-disk form of a saved model: two files in one folder.
 *
 * - `model.f32`: the parameters as raw IEEE-754 float32, little-endian, no header
 *   (`4 * params.length` bytes).
 * - `model.json`: `{"format": "cohort-model", "version": 1, "params": <count>, ...meta}`, where
 *   `meta` is whatever the trainer adds (shape, hyper-parameters, samples trained).
 *
 * All I/O goes through `src/platform/files.ts`.
 *
 * @since 0.1.0
 */
import * as Files from "../platform/files.ts"
import * as Data from "effect/Data"

/**
 * File name of the raw parameters inside the folder.
 *
 * @since 0.1.0
 * @category files
 */
export const PARAMS_FILE = "model.f32"

/**
 * File name of the JSON description inside the folder.
 *
 * @since 0.1.0
 * @category files
 */
export const META_FILE = "model.json"

/**
 * Why a saved model could not be read: `path` is the file at fault, `detail` what was wrong
 * (unreadable, not the expected JSON, a byte length that does not match the declared count).
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelFileError extends Data.TaggedError("ModelFileError")<{
  readonly path: string
  readonly detail: string
}> {
  /** One line: the file and what was wrong with it. */
  override get message(): string {
    return `cannot read the saved model ${this.path}: ${this.detail}`
  }
}

/**
 * A saved model: the parameters and the JSON description (including `format`, `version`,
 * `params`).
 *
 * @since 0.1.0
 * @category files
 */
export interface Saved {
  readonly params: Float32Array
  readonly meta: Readonly<Record<string, unknown>>
}

const join = (dir: string, name: string): string => (dir.endsWith("/") ? `${dir}${name}` : `${dir}/${name}`)

/**
 * Writes `params` and `meta` under `dir`, creating the folder (and parents) if needed; replaces
 * earlier files. `meta` must be JSON-serializable; its `format`, `version` and `params` keys are
 * overwritten. Rejects with the runtime's file-system error.
 *
 * @since 0.1.0
 * @category files
 */
export const write = async (dir: string, params: Float32Array, meta: Readonly<Record<string, unknown>> = {}): Promise<void> => {
  await Files.mkdir(dir)
  const bytes = new Uint8Array(params.length * 4)
  const view = new DataView(bytes.buffer)
  for (let i = 0; i < params.length; i++) view.setFloat32(i * 4, params[i]!, true)
  await Files.writeFile(join(dir, PARAMS_FILE), bytes)
  const description = { ...meta, format: "cohort-model", version: 1, params: params.length }
  await Files.writeFile(join(dir, META_FILE), `${JSON.stringify(description, null, 2)}\n`)
}

/**
 * Reads a model written by `write`. Rejects with `ModelFileError` when a file is missing or
 * unreadable, the JSON is not a `cohort-model` version 1 description, or `model.f32` does not
 * hold exactly `4 * params` bytes.
 *
 * @since 0.1.0
 * @category files
 */
export const read = async (dir: string): Promise<Saved> => {
  const metaPath = join(dir, META_FILE)
  const paramsPath = join(dir, PARAMS_FILE)
  let meta: Record<string, unknown>
  try {
    meta = JSON.parse(new TextDecoder().decode(await Files.readFile(metaPath))) as Record<string, unknown>
  } catch (error) {
    throw new ModelFileError({ path: metaPath, detail: String(error) })
  }
  if (typeof meta !== "object" || meta === null || meta.format !== "cohort-model" || meta.version !== 1) {
    throw new ModelFileError({ path: metaPath, detail: "not a cohort-model version 1 description" })
  }
  const count = meta.params
  if (typeof count !== "number" || !Number.isSafeInteger(count) || count < 0) {
    throw new ModelFileError({ path: metaPath, detail: `params must be a count, got ${JSON.stringify(count)}` })
  }
  let bytes: Uint8Array
  try {
    bytes = await Files.readFile(paramsPath)
  } catch (error) {
    throw new ModelFileError({ path: paramsPath, detail: String(error) })
  }
  if (bytes.length !== count * 4) {
    throw new ModelFileError({ path: paramsPath, detail: `expected ${count * 4} bytes, got ${bytes.length}` })
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const params = new Float32Array(count)
  for (let i = 0; i < count; i++) params[i] = view.getFloat32(i * 4, true)
  return { params, meta }
}
