/**
 * The model Cohort itself keeps in every save folder, so that a run can be resumed whatever the
 * trainer's own `save` writes: `cohort-params.f32`, the rank's **last averaged
 * parameters** as raw little-endian float32, and `cohort-params.json` describing them.
 *
 * Why the last average and not the rank's live parameters: a sample counts as committed once its
 * parameters were folded into a completed round (docs/design.md §3.3), so the last `Update` a rank
 * applied holds exactly what the journal committed, and nothing it trained since (which a resumed
 * run trains again). Before the first `Update` of a run it is the initial model.
 *
 * Written to `save/rank<r>/` on `ShutdownWithSave` and on an emergency save (the coordinator is
 * gone), and to `checkpoints/v<E>/` on `Checkpoint{E}` (the model after epoch `E`'s last round).
 *
 * @since 0.1.0
 */
import * as Files from "../platform/files.ts"

/** The parameters' file in a save folder. @since 0.1.0 @category files */
export const paramsFile = "cohort-params.f32"

/** The description's file in a save folder. @since 0.1.0 @category files */
export const metaFile = "cohort-params.json"

/**
 * The names of a model's two files in its folder: the raw parameters and their description. A
 * rank's saves use `paramsFile` and `metaFile` (the default); the coordinator's epoch models use
 * `coordinatorFiles`, so that both can sit in one checkpoint folder. All of Cohort's names start
 * with `cohort-`: the trainer's own `save` writes into the same folder (the bundled trainer's
 * `model.f32` and `model.json`).
 *
 * @since 0.1.0
 * @category files
 */
export interface FileNames {
  readonly params: string
  readonly meta: string
}

/** A rank's save: `cohort-params.f32` and `cohort-params.json`. @since 0.1.0 @category files */
export const rankFiles: FileNames = { params: paramsFile, meta: metaFile }

/**
 * The coordinator's model of an ended epoch, in `checkpoints/v<E>/`: `cohort-epoch-model.f32`
 * and `cohort-epoch-model.json` (its `rank` is -1: the coordinator wrote it, whoever computed the mean).
 *
 * @since 0.1.0
 * @category files
 */
export const coordinatorFiles: FileNames = { params: "cohort-epoch-model.f32", meta: "cohort-epoch-model.json" }

/**
 * The outer optimizer's momentum beside the coordinator's model of an ended epoch (docs/edge-averaging.md):
 * `cohort-outer-momentum.f32` and `.json`, written with it, with the same epoch and round.
 *
 * @since 0.1.0
 * @category files
 */
export const outerMomentumFiles: FileNames = { params: "cohort-outer-momentum.f32", meta: "cohort-outer-momentum.json" }

/** Bound on `cohort-params.json`'s size when reading, in bytes (64 KiB). @since 0.1.0 @category files */
export const metaBytesMax = 64 * 1024

/**
 * What `cohort-params.json` says about `cohort-params.f32`:
 * - `paramsLength`: float32 values in the file (its size is `4 * paramsLength` bytes);
 * - `checksum`: FNV-1a (32-bit) of the file's bytes, 8 lowercase hex digits;
 * - `epoch`: the epoch the rank was in when it saved (`-1` before its first);
 * - `round`: the last round whose `Update` it applied, `-1` when none (the initial model);
 * - `rank`: the rank that saved it.
 *
 * @since 0.1.0
 * @category model
 */
export interface Meta {
  readonly paramsLength: number
  readonly checksum: string
  readonly epoch: number
  readonly round: number
  readonly rank: number
}

/**
 * FNV-1a, 32 bits, of `bytes`, as 8 lowercase hex digits: a check against torn or altered files,
 * not a cryptographic hash. O(bytes).
 *
 * @since 0.1.0
 * @category files
 */
export const checksum = (bytes: Uint8Array): string => {
  let hash = 0x811c9dc5
  for (let i = 0; i < bytes.length; i++) {
    hash ^= bytes[i]!
    hash = Math.imul(hash, 0x01000193)
  }
  return (hash >>> 0).toString(16).padStart(8, "0")
}

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1

/** `params` as little-endian bytes (a copy). */
const toBytes = (params: Float32Array): Uint8Array => {
  const bytes = new Uint8Array(params.length * 4)
  if (littleEndian) {
    bytes.set(new Uint8Array(params.buffer, params.byteOffset, params.byteLength))
  } else {
    const view = new DataView(bytes.buffer)
    for (let i = 0; i < params.length; i++) view.setFloat32(i * 4, params[i]!, true)
  }
  return bytes
}

const fromBytes = (bytes: Uint8Array): Float32Array => {
  const params = new Float32Array(bytes.length / 4)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  for (let i = 0; i < params.length; i++) params[i] = view.getFloat32(i * 4, true)
  return params
}

/**
 * Writes `params` and its description into the folder `dir` (created when missing): `cohort-params.f32`
 * first, then `cohort-params.json`, each atomically (write then rename), so that a description never
 * names a torn file. Rejects with the runtime's error when a write fails.
 *
 * @since 0.1.0
 * @category files
 */
export const write = async (
  dir: string,
  params: Float32Array,
  where: { readonly epoch: number; readonly round: number; readonly rank: number },
  names: FileNames = rankFiles
): Promise<Meta> => {
  const bytes = toBytes(params)
  const meta: Meta = { paramsLength: params.length, checksum: checksum(bytes), epoch: where.epoch, round: where.round, rank: where.rank }
  await Files.mkdir(dir)
  await Files.writeFileAtomic(`${dir}/${names.params}`, bytes)
  await Files.writeFileAtomic(`${dir}/${names.meta}`, `${JSON.stringify(meta, null, 2)}\n`)
  // The renames themselves survive a crash of the machine too.
  await Files.syncDir(dir)
  return meta
}

/**
 * What `read` found: the parameters and their description, or one line saying why the folder
 * holds no usable model (`no cohort-params.json`, `cohort-params.json is not valid JSON`, `cohort-params.json has no
 * valid paramsLength`, `cohort-params.f32 has N bytes, expected M`, `cohort-params.f32 does not match its
 * checksum`, ...).
 *
 * @since 0.1.0
 * @category model
 */
export type Read =
  | { readonly _tag: "Model"; readonly params: Float32Array; readonly meta: Meta }
  | { readonly _tag: "Unusable"; readonly reason: string }

const unusable = (reason: string): Read => ({ _tag: "Unusable", reason })

const isInteger = (value: unknown, min: number): value is number => typeof value === "number" && Number.isSafeInteger(value) && value >= min

/**
 * Reads the model saved in `dir`. Never rejects: every problem is an `Unusable` with its reason.
 * Reads at most `metaBytesMax` bytes of `cohort-params.json` and exactly the `4 * paramsLength` bytes it
 * announces of `cohort-params.f32` (a longer file is refused, not truncated).
 *
 * @since 0.1.0
 * @category files
 */
export const read = async (dir: string, names: FileNames = rankFiles): Promise<Read> => {
  const metaFile = names.meta
  const paramsFile = names.params
  let metaText: string
  try {
    const found = await Files.readRegularFile(`${dir}/${metaFile}`, metaBytesMax)
    if (found._tag === "NotRegular") return unusable(`${metaFile} is a ${found.kind}, not a file`)
    if (found._tag === "TooLarge") return unusable(`${metaFile} is over ${metaBytesMax} bytes`)
    metaText = new TextDecoder().decode(found.bytes)
  } catch {
    return unusable(`no ${metaFile}`)
  }
  let raw: unknown
  try {
    raw = JSON.parse(metaText)
  } catch {
    return unusable(`${metaFile} is not valid JSON`)
  }
  if (raw === null || typeof raw !== "object") return unusable(`${metaFile} is not an object`)
  const record = raw as Record<string, unknown>
  if (!isInteger(record.paramsLength, 0)) return unusable(`${metaFile} has no valid paramsLength`)
  if (typeof record.checksum !== "string" || !/^[0-9a-f]{8}$/.test(record.checksum)) return unusable(`${metaFile} has no valid checksum`)
  if (!isInteger(record.epoch, -1) || !isInteger(record.round, -1) || !isInteger(record.rank, -1)) {
    return unusable(`${metaFile} has no valid epoch, round and rank`)
  }
  const meta: Meta = {
    paramsLength: record.paramsLength,
    checksum: record.checksum,
    epoch: record.epoch,
    round: record.round,
    rank: record.rank
  }
  const expected = meta.paramsLength * 4
  let bytes: Uint8Array
  try {
    const found = await Files.readRegularFile(`${dir}/${paramsFile}`, expected)
    if (found._tag === "NotRegular") return unusable(`${paramsFile} is a ${found.kind}, not a file`)
    if (found._tag === "TooLarge") return unusable(`${paramsFile} has ${found.bytes} bytes, expected ${expected}`)
    bytes = found.bytes
  } catch {
    return unusable(`no ${paramsFile}`)
  }
  if (bytes.length !== expected) return unusable(`${paramsFile} has ${bytes.length} bytes, expected ${expected}`)
  if (checksum(bytes) !== meta.checksum) return unusable(`${paramsFile} does not match its checksum`)
  return { _tag: "Model", params: fromBytes(bytes), meta }
}
