/**
 * What a resume (`resume.ts`) continues from: the parent's journal, read with the report's
 * tolerant reader (a last line cut short is fine, and said), and the state to load, picked from
 * the parent's files; and the refusals of a resume (`resumeErrors`).
 *
 * Which state (the newest one consistent with what the parent's journal committed):
 *
 * 1. The parent ended `unrecoverable` or `interrupted` (its `ended` event is there): the survivors
 *    saved their last averaged parameters under `save/rank<r>/` (`cohort-params.f32`, `cohort-params.json`, the
 *    `cohort-saved.json` marker). Of the survivors in `saves.saved` whose save reads back good
 *    (`SavedModel.read`), the one of the newest round is loaded (the lowest rank of those: a ring
 *    joiner still waiting for its model saved its initial one, round -1, which lacks every
 *    committed sample; a note names a save left out); the run starts in `Outcome.uncommitted.epoch`, with that
 *    epoch's committed ranges (the complement of the uncommitted ones in `[0, trainSamples)`)
 *    handed to the core so that only the rest is trained and the epoch's audit covers both runs;
 *    rounds go on from the save's last round + 1.
 * 2. Otherwise (the journal has no `ended` event: the coordinator's process died; or no survivor's
 *    save is good): the newest checkpoint `checkpoints/v<E>/` that reads back good is loaded and
 *    the run starts at epoch `E + 1` from its start (that epoch is trained again; a note says so).
 *
 * An epoch whose `model` line carries an `error` has no audit line (`launcher-journal.ts`): the
 * survivors' saves, which hold training past it, are not loaded, and 2 trains it again (a completed
 * parent whose last epoch was withheld is resumed, not refused).
 *
 * A parent whose journal ends with `failed` before every rank joined (a formation timeout) trained
 * nothing and is refused (`failedAtFormation`); one that failed later is resumed as in 2.
 *
 * @since 0.1.0
 */
import * as Audit from "../../src/core/audit.ts"
import * as Files from "../../src/platform/files.ts"
import * as SavedModel from "../../src/train/saved-model.ts"
import { firstLine } from "../record/error-text.ts"
import { failureText, type PartialRun, parseJournal, printable, reportDefaults } from "../record/read-run.ts"
import { LaunchError } from "./launch-options.ts"
import * as RankActor from "../rank/rank.ts"
import type { RunEvent, RunResult } from "../record/run-types.ts"

/**
 * The refusals of `run({ resume })`, as the reason of a `LaunchError` with option `resume` (its
 * message, and the CLI's line, is `resume: <reason>`).
 *
 * @since 0.1.0
 * @category resume
 */
export const resumeErrors = {
  notARun: (dir: string, why: string) => `${dir} is not a run directory: ${why}`,
  unreadable: (dir: string, why: string) => `cannot read the journal of ${dir}: ${why}`,
  completed: (runId: string, epochs: number) =>
    `nothing to resume: run ${runId} completed all ${epochs} ${epochs === 1 ? "epoch" : "epochs"}`,
  failedAtFormation: (runId: string, failure: string) => `nothing to resume: ${failure}; run ${runId} trained nothing`,
  lastEpochDone: (runId: string, epochs: number) =>
    `nothing to resume: run ${runId} has a checkpoint of its last epoch (${epochs - 1}); every epoch was trained`,
  datasetSize: (trainer: string, samples: number, runId: string, parentSamples: number) =>
    `the trainer ${trainer} has ${samples} training samples, but run ${runId} trained on ${parentSamples}; resume needs the same dataset`,
  otherTrainer: (trainer: string, runId: string) =>
    `the trainer ${trainer} is not the file run ${runId} trained with (its SHA-256 differs); resume needs the same trainer`,
  noState: (runId: string, why: string, checkpoints: string) =>
    `no state to resume run ${runId} from: ${why}; and no good checkpoint under ${checkpoints}`,
  locked: (runId: string, pid: number | undefined, lock: string) =>
    `run ${runId} is already being resumed${pid === undefined ? "" : ` by process ${pid}`} (lock file ${lock}); wait for it to end`,
  cannotLock: (lock: string, why: string) => `cannot create the lock file ${lock}: ${why}`,
  stillRunning: (runId: string, pid: number | undefined, lock: string) =>
    `run ${runId} is still running${pid === undefined ? "" : ` in process ${pid}`} (lock file ${lock}); stop it first (SIGINT saves it) or wait for it to end`,
  alreadyResumed: (runId: string, childId: string, childDir: string, marker: string) =>
    `run ${runId} was already resumed by run ${childId} (${childDir}), which trained on from it: resume that run instead (resume ${childDir}), or, to train from run ${runId} again anyway, delete ${marker}`,
  parentResumedAgain: (runId: string, parentId: string, childId: string, childDir: string) =>
    `run ${runId} resumed run ${parentId}, which was already resumed by run ${childId} (${childDir}), which trained on from it: resume that run instead (resume ${childDir})`,
  outInsideRun: (out: string, runId: string, dir: string) =>
    `--out ${out} is inside the folder of run ${runId} (${dir}); a resumed run is written beside the run it resumes, never inside it`
} as const

/**
 * Refuses the resume; what came from the parent's files is made printable (`printable`).
 *
 * @since 0.1.0
 * @category resume
 */
export const fail = (reason: string): never => {
  throw new LaunchError("resume", printable(reason))
}

type Started = Extract<RunEvent, { type: "started" }>

/**
 * What the parent's journal says.
 *
 * @since 0.1.0
 * @category resume
 */
export interface Parent {
  readonly dir: string
  readonly started: Started
  readonly options: Readonly<Record<string, unknown>>
  /** The result as read: `outcome` undefined when the journal has no `ended` event. */
  readonly read: RunResult | PartialRun
  /** `was cut in line 22` when the last line was cut short, else `undefined`. */
  readonly cutLine: string | undefined
  /** The epochs whose `model` line says their model could not be written, in order, with the error. */
  readonly modelsMissing: ReadonlyArray<{ readonly epoch: number; readonly error: string }>
}

/**
 * Reads the parent's journal (`<dir>/events.ndjson`) with the report's tolerant reader; refuses
 * (`fail`) a folder that is not a run or whose journal cannot be read.
 *
 * @since 0.1.0
 * @category resume
 */
export const readParent = async (given: string): Promise<Parent> => {
  const dir = given.replace(/(.)\/+$/, "$1")
  const kind = await Files.kind(dir)
  if (kind === "missing") fail(resumeErrors.notARun(given, "no such directory"))
  if (kind !== "directory") fail(resumeErrors.notARun(given, "it is not a folder"))
  const path = `${dir}/events.ndjson`
  if ((await Files.kind(path)) === "missing") fail(resumeErrors.notARun(given, "it has no events.ndjson"))
  let read: Files.RegularFileRead
  try {
    read = await Files.readRegularFile(path, reportDefaults.fileBytesMax)
  } catch (error) {
    return fail(resumeErrors.unreadable(given, firstLine(error)))
  }
  if (read._tag === "NotRegular") fail(resumeErrors.notARun(given, `${path} is not a regular file`))
  if (read._tag === "TooLarge") fail(resumeErrors.unreadable(given, `${path} is larger than ${reportDefaults.fileBytesMax} bytes`))
  const text = new TextDecoder().decode((read as Extract<Files.RegularFileRead, { _tag: "Read" }>).bytes)
  const journal = parseJournal(text, path)
  if (typeof journal === "string") {
    return fail(
      journal.endsWith("has no started event")
        ? resumeErrors.notARun(given, "its journal has no started event")
        : resumeErrors.unreadable(given, journal)
    )
  }
  const { started, result } = journal
  const cutLine = result.outcome === undefined && result.cut.startsWith("was cut") ? result.cut : undefined
  return { dir, started, options: started.options ?? {}, read: result, cutLine, modelsMissing: modelsMissing(text) }
}

/** The journal's `model` lines with an `error` (whole lines only; `parseJournal` checked their shape). */
const modelsMissing = (text: string): Array<{ readonly epoch: number; readonly error: string }> =>
  text.split("\n").flatMap((line) => {
    if (!line.includes('"model"') || !line.includes('"error"')) return []
    try {
      const event = JSON.parse(line) as { readonly type?: unknown; readonly epoch?: unknown; readonly error?: unknown }
      return event.type === "model" && typeof event.epoch === "number" && typeof event.error === "string"
        ? [{ epoch: event.epoch, error: event.error }]
        : []
    } catch {
      return [] // the last line, cut short
    }
  })

/**
 * The state picked: the epoch to start in, its committed ranges, the model and where it came from.
 *
 * @since 0.1.0
 * @category resume
 */
export interface Picked {
  readonly epoch: number
  readonly firstRound: number
  readonly committed: ReadonlyArray<readonly [number, number]>
  readonly params: Float32Array | undefined
  readonly state: "save" | "checkpoint" | "start"
  readonly loadedFrom: string
  readonly notes: ReadonlyArray<string>
}

const readModel = async (
  dir: string,
  names: SavedModel.FileNames = SavedModel.rankFiles
): Promise<{ readonly params: Float32Array; readonly round: number; readonly epoch: number } | { readonly error: string }> => {
  try {
    const read = await SavedModel.read(dir, names)
    return read._tag === "Unusable" ? { error: read.reason } : { params: read.params, round: read.meta.round, epoch: read.meta.epoch }
  } catch (error) {
    return { error: firstLine(error) }
  }
}

/**
 * The model in a checkpoint folder: the coordinator's (`cohort-epoch-model.f32`, `.json`), else a rank's
 * (`cohort-params.*`: a run from before the coordinator wrote its own, or a rank's save folder).
 */
const readCheckpoint = async (dir: string): Promise<Awaited<ReturnType<typeof readModel>>> => {
  const own = await readModel(dir, SavedModel.coordinatorFiles)
  if (!("error" in own)) return own
  const rank = await readModel(dir)
  return "error" in rank ? { error: own.error } : rank
}

/**
 * The outer optimizer's momentum saved beside the picked model (the coordinator writes it with
 * each epoch model, same epoch and round): used when it has the model's length; otherwise none
 * (a rank's save, or a run without the outer optimizer), and the resumed run starts it at zero.
 *
 * @since 0.1.0
 * @category resume
 */
export const outerMomentumOf = async (picked: Picked): Promise<{ readonly outerMomentum?: Float32Array }> => {
  if (picked.params === undefined || picked.loadedFrom === "") return {}
  const momentum = await readModel(picked.loadedFrom, SavedModel.outerMomentumFiles)
  return "error" in momentum || momentum.params.length !== picked.params.length ? {} : { outerMomentum: momentum.params }
}

/**
 * The state to resume from (this module's doc): the survivors' newest good save, else the model
 * after the last audited epoch, else where the parent started; refuses (`fail`) when none is usable.
 *
 * @since 0.1.0
 * @category resume
 */
export const pickState = async (parent: Parent, epochSamples: number, epochs: number): Promise<Picked> => {
  const { dir, read } = parent
  const runId = parent.started.runId
  const outcome = read.outcome
  const saveProblems: Array<string> = []
  const notes: Array<string> = []
  if (parent.cutLine !== undefined)
    notes.push(`the parent's journal ${parent.cutLine} (a write cut short); every whole line before it was read`)
  const unaudited = firstUnaudited(parent)
  if (outcome !== undefined) {
    const epoch = outcome.uncommitted?.epoch ?? outcome.epochsCompleted
    if (epoch >= epochs && (unaudited === undefined || unaudited.epoch >= epochs)) fail(resumeErrors.completed(runId, epochs))
    const saved = read.saves?.saved ?? []
    // The saves hold training past an epoch the journal does not audit: loading them would leave
    // that epoch audited nowhere in the chain; it is trained again from the model before it.
    if (unaudited !== undefined && unaudited.epoch < epoch) saveProblems.push(`none is loaded: ${unaudited.why}`)
    else if (saved.length === 0)
      saveProblems.push(read.saves === undefined ? "the parent recorded no saves" : "no survivor of the parent finished its save")
    // Of the good saves, the one of the newest round (the lowest rank of those): every survivor
    // that applied the last commit holds its mean, but a ring joiner still waiting for its model
    // when the run stopped saved its initial one (round -1), which lacks the committed samples.
    let newest: { readonly rank: number; readonly folder: string; readonly params: Float32Array; readonly round: number } | undefined
    const older: Array<{ readonly rank: number; readonly round: number }> = []
    for (const rank of unaudited !== undefined && unaudited.epoch < epoch ? [] : [...saved].sort((a, b) => a - b)) {
      const folder = `${dir}/save/rank${rank}`
      if (!(await Files.exists(`${folder}/${RankActor.savedMarker}`))) {
        saveProblems.push(`rank ${rank}: ${folder}/${RankActor.savedMarker} is missing`)
        continue
      }
      const model = await readModel(folder)
      if ("error" in model) {
        saveProblems.push(`rank ${rank}: ${model.error}`)
        continue
      }
      if (model.epoch !== epoch) {
        saveProblems.push(`rank ${rank}: its save is of epoch ${model.epoch}, not ${epoch}`)
        continue
      }
      if (newest === undefined || model.round > newest.round) {
        if (newest !== undefined) older.push(newest)
        newest = { rank, folder, params: model.params, round: model.round }
      } else if (model.round < newest.round) older.push({ rank, round: model.round })
    }
    if (newest !== undefined) {
      const loaded = newest
      for (const { rank, round } of older)
        saveProblems.push(`rank ${rank}: its model is of round ${round}, older than rank ${loaded.rank}'s (round ${loaded.round})`)
      const uncommitted = outcome.uncommitted?.ranges ?? [[0, epochSamples] as const]
      return {
        epoch,
        firstRound: loaded.round + 1,
        committed: Audit.complement(uncommitted, epochSamples),
        params: loaded.params,
        state: "save",
        loadedFrom: loaded.folder,
        notes: [...notes, ...saveProblems.map((p) => `not loaded: the save of ${p}`)]
      }
    }
  }
  const storage = read.alerts.find((a) => a.class === "StorageFault" && a.severity === "critical")
  const why =
    outcome === undefined && read.failed !== undefined
      ? `the parent's journal ends without its outcome: ${failureText(read.failed)}`
      : outcome === undefined && storage !== undefined
        ? `the parent's journal ends without its outcome (it ${read.cut}): its coordinator stopped on a storage fault (${storage.detail}) before its end was written`
        : outcome === undefined
          ? `the parent's journal ends without its outcome (it ${read.cut}): its coordinator's process died`
          : `the survivors' saves are not usable (${saveProblems.join("; ")})`
  return fromAudited(parent, epochs, why, unaudited === undefined || outcome !== undefined ? notes : [...notes, unaudited.why])
}

/**
 * The first epoch the parent trained to its end whose audit line its journal lacks (the line is
 * withheld when the model after the epoch could not be written: `launcher-journal.ts`), with why;
 * `undefined` when every epoch from where the parent started up to its last `model` line is audited.
 *
 * @since 0.1.0
 * @category resume
 */
export const firstUnaudited = (parent: Parent): { readonly epoch: number; readonly why: string } | undefined => {
  const audited = new Set(parent.read.epochs.map((e) => e.epoch))
  const missing = parent.modelsMissing.find((m) => !audited.has(m.epoch))
  return missing === undefined
    ? undefined
    : {
        epoch: missing.epoch,
        why: `epoch ${missing.epoch}'s audit is not in the parent's journal: its model could not be written (${missing.error}), so epoch ${missing.epoch} is trained again`
      }
}

/**
 * The state after the last epoch the parent's journal audited: its model, written on the
 * coordinator's host before the audit line (`epoch-models.ts`), and the next epoch from its start.
 * So whenever the parent's process died, every audited epoch counts once (in the parent) and every
 * other one is trained here. With no audited epoch: where the parent itself started (a resume
 * that died before its first audit), or the run's initial model from its seed.
 */
const fromAudited = async (parent: Parent, epochs: number, why: string, notes: ReadonlyArray<string>): Promise<Picked> => {
  const { dir, read, started } = parent
  const runId = started.runId
  const audited = read.epochs.reduce((last, e) => Math.max(last, e.epoch), -1)
  if (audited < 0) return fromStart(parent, why, notes)
  if (audited + 1 >= epochs) fail(resumeErrors.lastEpochDone(runId, epochs))
  const problems: Array<string> = []
  for (let version = audited; version >= 0; version--) {
    const folder = `${dir}/checkpoints/v${version}`
    const model = await readCheckpoint(folder)
    if ("error" in model) {
      if ((await Files.kind(folder)) === "directory") problems.push(`checkpoint v${version}: ${model.error}`)
      continue
    }
    // Only a run from before the coordinator kept its own models lacks the audited epoch's.
    const again =
      version === audited
        ? []
        : [`epochs ${version + 1} to ${audited} were audited by run ${runId} but their model is missing: they are trained again`]
    return {
      epoch: version + 1,
      firstRound: model.round + 1,
      committed: [],
      params: model.params,
      state: "checkpoint",
      loadedFrom: folder,
      notes: [
        ...notes,
        ...problems.map((p) => `not loaded: ${p}`),
        ...again,
        `${why}: resuming from checkpoint v${version}, the model after the last audited epoch; epoch ${version + 1} is trained from its start`
      ]
    }
  }
  return fail(resumeErrors.noState(runId, [why, ...problems].join("; "), `${dir}/checkpoints`))
}

/**
 * `path` as recorded in the journal of the run in `dir`: a relative one (`--out runs`) was relative
 * to the folder that run ran in, which `dir` tells when it ends with the run's recorded `runDir`
 * (read as `/home/u/runs/x`, recorded as `runs/x`: `/home/u`); else `path` as it is.
 *
 * @since 0.1.0
 * @category resume
 */
export const recordedPath = (dir: string, recordedRunDir: string, path: string): string => {
  if (path === "" || path.startsWith("/") || recordedRunDir.startsWith("/")) return path
  const absolute = Files.absolutePath(dir)
  const suffix = `/${recordedRunDir.replace(/^\.\/+/, "").replace(/\/+$/, "")}`
  return absolute.endsWith(suffix) ? `${absolute.slice(0, -suffix.length)}/${path}` : path
}

/** No epoch audited: the state the parent started from (its own `resumed`), else its seed's model. */
const fromStart = async (parent: Parent, why: string, notes: ReadonlyArray<string>): Promise<Picked> => {
  const { started } = parent
  const recorded = started.resumed
  const from =
    recorded === undefined ? undefined : { ...recorded, loadedFrom: recordedPath(parent.dir, started.runDir, recorded.loadedFrom) }
  if (from === undefined || from.state === "start") {
    return {
      epoch: from?.epoch ?? 0,
      firstRound: from?.firstRound ?? 0,
      committed: from?.committed ?? [],
      params: undefined,
      state: "start",
      loadedFrom: "",
      notes: [
        ...notes,
        `${why}; it audited no epoch: training starts again from epoch ${from?.epoch ?? 0} with the run's initial model (its seed)`
      ]
    }
  }
  const model = await readCheckpoint(from.loadedFrom)
  if ("error" in model)
    return fail(
      resumeErrors.noState(
        started.runId,
        `${why}; it audited no epoch, and the model it started from (${from.loadedFrom}) is not usable: ${model.error}`,
        from.loadedFrom
      )
    )
  return {
    epoch: from.epoch,
    firstRound: from.firstRound,
    committed: from.committed,
    params: model.params,
    state: from.state,
    loadedFrom: from.loadedFrom,
    notes: [...notes, `${why}; it audited no epoch: resuming from where it started (epoch ${from.epoch}, the model of ${from.loadedFrom})`]
  }
}
