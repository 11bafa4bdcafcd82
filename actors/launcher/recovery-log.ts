/**
 * A served run's recovery log (docs/recovery.md): what a restarted coordinator needs to take the
 * run over, written before the frames that act on it are sent, under `<runDir>/recovery/`:
 *
 * - `log.ndjson`: a `base` line where the run (or a recovery of it) began, then a `commit` line
 *   for every round that closed, with the ranges it committed, and a `closed` line for every
 *   epoch that ended, with its audit and the round of its model, and with the ring backend a
 *   `ring` line for every generation formed (`Recovery.Entry`). The `closed`
 *   line is written before the next epoch's first frame goes out, while the journal's audit line
 *   waits for the epoch's model to be written: a kill in between leaves the audit here alone;
 * - `token.check`: a keyed hash of the run's token (`HMAC-SHA256(token, fixed text)`), so that a
 *   takeover given another token is refused before its ranks are (they would exit);
 * - `model-0.f32`, `model-1.f32`: the model of the last two rounds, a round's in slot
 *   `round mod 2` (8 bytes: the round as a float64, then the float32 parameters). A round's
 *   model is written before its `commit` line, and that line before its `Update`: a rank never
 *   holds a model the log lacks, and the last `commit` line's model is always on disk (the next
 *   round's write, cut short by a kill, goes to the other slot).
 *
 * Every write is synchronous (`SyncFiles`): it returns once the operating system has the bytes,
 * so a SIGKILL of the coordinator right after it loses nothing; the loss of the machine needs
 * the volume's own guarantees. A write that fails is a storage fault (the run stops as for its
 * journal), and the log's last write: it ends where its last good line and model are. The journal (`events.ndjson`) holds the rest: epochs audited, deaths.
 *
 * @since 0.1.0
 */
import type * as Core from "../../src/core/coordinator.ts"
import type { EpochSummary } from "../../src/core/outcome.ts"
import type * as Recovery from "../../src/core/recovery.ts"
import * as SyncFiles from "../../src/platform/sync-files.ts"
import type { Hooks } from "../coordinator/coordinator-inbound.ts"

/** The recovery log's folder inside the run's. @since 0.1.0 @category recovery */
export const dirName = "recovery"

const logName = "log.ndjson"
const tokenName = "token.check"
const modelName = (round: number): string => `model-${((round % 2) + 2) % 2}.f32`

/**
 * An open recovery log: `base` records where the run begins (and its model, the one the ranks
 * get as `Update{firstRound - 1}`), `beforeRound` is the coordinator's hook that records each
 * closed round.
 *
 * @since 0.1.0
 * @category recovery
 */
export interface RecoveryLog {
  readonly base: (point: Core.Resume, params: Float32Array | undefined) => void
  readonly beforeRound: NonNullable<Hooks["beforeRound"]>
  /** The run token's check (a keyed hash): a takeover with another token is refused. */
  readonly token: (check: string) => void
  /** An epoch ended with `summary` (its audit): written at once, before the next epoch's frames. */
  readonly closed: (summary: EpochSummary) => void
  /** Ring backend: generation `generation` forms; written before its `FormRing`s go out. */
  readonly ring: (generation: number) => void
}

/**
 * Opens the log under `runDir` (its folder is made). `onError(path, error)` is called with the
 * first write that failed; no later write is tried.
 *
 * @since 0.1.0
 * @category recovery
 */
export const open = (runDir: string, onError: (path: string, error: unknown) => void): RecoveryLog => {
  const dir = `${runDir}/${dirName}`
  // After a failed write nothing more is written: a log with a round left out and a later one
  // in would fold into a point that misses samples the later model holds (they would be trained
  // twice). The log stays what it was before the failure, a point older than the ranks' models,
  // which a takeover sends them back to (their newer rounds are trained again).
  let broken = false
  const attempt = (path: string, write: () => void): boolean => {
    if (broken) return false
    try {
      write()
      return true
    } catch (error) {
      broken = true
      onError(path, error)
      return false
    }
  }
  attempt(dir, () => SyncFiles.mkdir(dir))
  const line = (value: object): boolean =>
    attempt(`${dir}/${logName}`, () => SyncFiles.append(`${dir}/${logName}`, `${JSON.stringify(value)}\n`))
  const model = (round: number, params: Float32Array): boolean => {
    const bytes = new Uint8Array(8 + params.byteLength)
    new DataView(bytes.buffer).setFloat64(0, round, true)
    bytes.set(new Uint8Array(params.buffer, params.byteOffset, params.byteLength), 8)
    return attempt(`${dir}/${modelName(round)}`, () => SyncFiles.write(`${dir}/${modelName(round)}`, bytes))
  }
  // The epoch's model is the last round's: the one a `closed` line names.
  let lastRound = -1
  return {
    base: (point, params) => {
      lastRound = point.firstRound - 1
      if (params !== undefined) model(point.firstRound - 1, params)
      line({ type: "base", epoch: point.epoch, firstRound: point.firstRound, committed: point.committed })
    },
    beforeRound: (command, params) => {
      lastRound = command.round
      if (params !== undefined) model(command.round, params)
      line({
        type: "commit",
        epoch: command.epoch,
        round: command.round,
        ranges: command.committed,
        ...(command.generation === undefined ? {} : { generation: command.generation })
      })
    },
    token: (check) => {
      attempt(`${dir}/${tokenName}`, () => SyncFiles.write(`${dir}/${tokenName}`, new TextEncoder().encode(`${check}\n`)))
    },
    closed: (summary) => {
      line({ type: "closed", epoch: summary.epoch, round: lastRound, summary })
    },
    ring: (generation) => {
      line({ type: "ring", generation })
    }
  }
}

const isRanges = (value: unknown): value is ReadonlyArray<readonly [number, number]> =>
  Array.isArray(value) &&
  value.every((r) => Array.isArray(r) && r.length === 2 && r.every((v) => Number.isSafeInteger(v) && (v as number) >= 0))

/** One line of the log as an entry, or `undefined` for a line that is not one (a write cut short). */
const entryOf = (text: string): Recovery.Entry | undefined => {
  let value: Record<string, unknown>
  try {
    value = JSON.parse(text) as Record<string, unknown>
  } catch {
    return undefined
  }
  const { type, epoch, round, firstRound, committed, ranges, generation } = value
  if (type === "ring") return Number.isSafeInteger(generation) ? { _tag: "Ring", generation: generation as number } : undefined
  if (!Number.isSafeInteger(epoch)) return undefined
  if (type === "base" && Number.isSafeInteger(firstRound) && isRanges(committed))
    return { _tag: "Base", epoch: epoch as number, firstRound: firstRound as number, committed }
  if (type === "commit" && Number.isSafeInteger(round) && isRanges(ranges))
    return {
      _tag: "Commit",
      epoch: epoch as number,
      round: round as number,
      ranges,
      ...(Number.isSafeInteger(generation) ? { generation: generation as number } : {})
    }
  if (type === "closed" && Number.isSafeInteger(round) && typeof value.summary === "object" && value.summary !== null)
    return { _tag: "Closed", epoch: epoch as number }
  return undefined
}

/**
 * What the log under `runDir` holds: its entries (a line cut short is left out), each epoch's
 * `closed` line (its audit and the round of its model), and the model of round `round`
 * (`undefined` when its slot holds another round's, or none).
 *
 * @since 0.1.0
 * @category recovery
 */
export const read = (
  runDir: string
): {
  readonly entries: ReadonlyArray<Recovery.Entry>
  readonly closed: ReadonlyMap<number, { readonly summary: EpochSummary; readonly round: number }>
  readonly model: (round: number) => Float32Array | undefined
  readonly tokenCheck: () => string | undefined
} => {
  const dir = `${runDir}/${dirName}`
  const text = new TextDecoder().decode(SyncFiles.readIfAny(`${dir}/${logName}`) ?? new Uint8Array(0))
  const closed = new Map<number, { readonly summary: EpochSummary; readonly round: number }>()
  const entries = text.split("\n").flatMap((l) => {
    const entry = l.trim() === "" ? undefined : entryOf(l)
    if (entry?._tag === "Closed") {
      const { summary, round } = JSON.parse(l) as { summary: EpochSummary; round: number }
      closed.set(entry.epoch, { summary, round })
    }
    return entry === undefined ? [] : [entry]
  })
  const model = (round: number): Float32Array | undefined => {
    const bytes = SyncFiles.readIfAny(`${dir}/${modelName(round)}`)
    if (bytes === undefined || bytes.byteLength < 8 || (bytes.byteLength - 8) % 4 !== 0) return undefined
    if (new DataView(bytes.buffer, bytes.byteOffset).getFloat64(0, true) !== round) return undefined
    return new Float32Array(bytes.slice(8).buffer)
  }
  const tokenCheck = (): string | undefined => {
    const bytes = SyncFiles.readIfAny(`${dir}/${tokenName}`)
    return bytes === undefined ? undefined : new TextDecoder().decode(bytes).trim()
  }
  return { entries, closed, model, tokenCheck }
}
