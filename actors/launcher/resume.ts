/**
 * `run({ resume: dir })`: continues a run that ended unrecoverable, interrupted, or cut off by the
 * death of its coordinator's process. The parent's journal is read with
 * the report's tolerant reader (a last line cut short is fine, and said); the state to load is
 * picked, the parent's options are carried over, and the launcher runs a new run directory whose
 * journal names its parent.
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
 * A parent whose journal ends with `failed` before every rank joined (a formation timeout) trained
 * nothing and is refused (`failedAtFormation`); one that failed later is resumed as in 2.
 *
 * Refusals are `LaunchError`s with option `resume`, one line each (`resumeErrors` lists them), and
 * change nothing in the parent's directory. A resume holds the lock file `<dir>/resume.lock`
 * (created exclusively, holding its process id; removed when the resumed run ends, whatever the
 * outcome); a second resume of the same run meanwhile is refused, and a lock whose process is gone
 * (a resume that was SIGKILLed) is taken over.
 *
 * @since 0.1.0
 */
import * as Audit from "../../src/core/audit.ts"
import type * as Config from "../../src/core/config.ts"
import * as Files from "../../src/platform/files.ts"
import * as LockFile from "../../src/platform/lock-file.ts"
import * as SavedModel from "../../src/train/saved-model.ts"
import { firstLine } from "../record/error-text.ts"
import {
  chainOf,
  failureText,
  printable,
  readResumedBy,
  readText,
  reportDefaults,
  resultFromEvents,
  resumedByFileName
} from "../record/read-run.ts"
export { resumedByFileName } from "../record/read-run.ts"
import * as RunSchema from "../record/run-schema.ts"
import { defaults, LaunchError, loadTrainer, runLockFileName } from "./launch-options.ts"
import * as RankActor from "../rank/rank.ts"
import type { ResumeOptions, Resumed, RunEvent, RunOptions, RunResult } from "../record/run-types.ts"
import { trainerSha256 } from "./trainer-digest.ts"

/**
 * The lock file a resume holds in the parent's directory while it runs.
 *
 * @since 0.1.0
 * @category resume
 */
export const lockFileName = "resume.lock"

/**
 * `onEvent` that also writes the parent's `resumedByFileName` when the resumed run forms (its
 * `started` event gives the run's id and folder). A marker that cannot be written is not fatal.
 */
const markResumed = (
  path: string,
  unmarked: ReadonlyArray<{ readonly path: string; readonly child: { readonly runId: string; readonly runDir: string } }>,
  onEvent: ResumeOptions["onEvent"]
): NonNullable<ResumeOptions["onEvent"]> => {
  let self: { readonly runId: string; readonly runDir: string } | undefined
  return (event) => {
    if (event.type === "started") self = { runId: event.runId, runDir: event.runDir }
    if (event.type === "formed" && self !== undefined) {
      void Files.writeFileAtomic(path, `${JSON.stringify(self)}\n`).catch(() => {})
      // Ancestors whose own resume never formed: this run trains on from their state too.
      for (const ancestor of unmarked) {
        void Files.exists(ancestor.path)
          .then((found) => (found ? undefined : Files.writeFileAtomic(ancestor.path, `${JSON.stringify(ancestor.child)}\n`)))
          .catch(() => {})
      }
    }
    onEvent?.(event)
  }
}

/**
 * The parent's ancestors that no resume marked (the resume of each died before it formed), each
 * with the run that resumed it: once this resume forms, it marks them too, since it trains on
 * from their state; else each of them would still look resumable, and a resume of one would train
 * the same epochs a second time. Walks up from the parent's own parent to the first marked one.
 */
const unmarkedAncestors = async (parentDir: string, parent: { readonly runId: string; readonly runDir: string }) => {
  const chain = await chainOf(parentDir, parent)
  const before = chain.slice(0, chain.indexOf(parent))
  const unmarked: Array<{ readonly path: string; readonly child: { readonly runId: string; readonly runDir: string } }> = []
  for (let i = before.length - 1; i >= 0; i--) {
    // Paths recorded relative to where the chain ran (taken to be where the parent ran).
    const path = `${recordedPath(parentDir, parent.runDir, before[i]!.runDir).replace(/(.)\/+$/, "$1")}/${resumedByFileName}`
    if ((await readResumedBy(path)) !== undefined) break
    unmarked.push({ path, child: before[i + 1] ?? parent })
  }
  return unmarked
}

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
 * The one line a resume prints for a stale lock it found (its holder is gone: `LockFile.inspect`):
 * the run's own lock is no bar and stays as it is (the parent's folder is not changed), e.g.
 * `the lock <dir>/run.lock is stale: process 1 of another PID namespace (a container) is gone; the
 * run is not running`; a resume's lock is taken over, e.g. `took over the stale lock
 * <dir>/resume.lock: process 4242 started at another time (its PID was reused)`.
 */
const staleLockNote = (path: string, why: string, tookOver: boolean): string =>
  tookOver ? `took over the stale lock ${path}: ${why}` : `the lock ${path} is stale: ${why}; the run is not running`

/** Refuses the resume; what came from the parent's files is made printable (`printable`). */
const fail = (reason: string): never => {
  throw new LaunchError("resume", printable(reason))
}

type Started = Extract<RunEvent, { type: "started" }>

/** What the parent's journal says. */
interface Parent {
  readonly dir: string
  readonly started: Started
  readonly options: Readonly<Record<string, unknown>>
  /** The result as read: `outcome` undefined when the journal has no `ended` event. */
  readonly read: Exclude<ReturnType<typeof resultFromEvents>, string>
  /** `was cut in line 22` when the last line was cut short, else `undefined`. */
  readonly cutLine: string | undefined
}

const readParent = async (given: string): Promise<Parent> => {
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
  const result = resultFromEvents(text, path)
  if (typeof result === "string") {
    return fail(
      result.endsWith("has no started event")
        ? resumeErrors.notARun(given, "its journal has no started event")
        : resumeErrors.unreadable(given, result)
    )
  }
  // The first `started` line, checked (resultFromEvents found one, so there is one).
  let started: Started | undefined
  for (const line of text.split("\n")) {
    if (!line.includes('"started"')) continue
    try {
      const checked = RunSchema.validateRunEvent(JSON.parse(line))
      if ("ok" in checked && checked.ok.type === "started") {
        started = checked.ok
        break
      }
    } catch {
      // Not this line.
    }
  }
  if (started === undefined) return fail(resumeErrors.notARun(given, "its journal has no started event"))
  const cutLine = result.outcome === undefined && result.cut.startsWith("was cut") ? result.cut : undefined
  return { dir, started, options: started.options ?? {}, read: result, cutLine }
}

/** The state picked: the epoch to start in, its committed ranges, the model and where it came from. */
interface Picked {
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
 */
const outerMomentumOf = async (picked: Picked): Promise<{ readonly outerMomentum?: Float32Array }> => {
  if (picked.params === undefined || picked.loadedFrom === "") return {}
  const momentum = await readModel(picked.loadedFrom, SavedModel.outerMomentumFiles)
  return "error" in momentum || momentum.params.length !== picked.params.length ? {} : { outerMomentum: momentum.params }
}

const pickState = async (parent: Parent, epochSamples: number, epochs: number): Promise<Picked> => {
  const { dir, read } = parent
  const runId = parent.started.runId
  const outcome = read.outcome
  const saveProblems: Array<string> = []
  const notes: Array<string> = []
  if (parent.cutLine !== undefined)
    notes.push(`the parent's journal ${parent.cutLine} (a write cut short); every whole line before it was read`)
  if (outcome !== undefined) {
    const epoch = outcome.uncommitted?.epoch ?? outcome.epochsCompleted
    if (epoch >= epochs) fail(resumeErrors.completed(runId, epochs))
    const saved = read.saves?.saved ?? []
    if (saved.length === 0)
      saveProblems.push(read.saves === undefined ? "the parent recorded no saves" : "no survivor of the parent finished its save")
    // Of the good saves, the one of the newest round (the lowest rank of those): every survivor
    // that applied the last commit holds its mean, but a ring joiner still waiting for its model
    // when the run stopped saved its initial one (round -1), which lacks the committed samples.
    let newest: { readonly rank: number; readonly folder: string; readonly params: Float32Array; readonly round: number } | undefined
    const older: Array<{ readonly rank: number; readonly round: number }> = []
    for (const rank of [...saved].sort((a, b) => a - b)) {
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
  const why =
    outcome === undefined && read.failed !== undefined
      ? `the parent's journal ends without its outcome: ${failureText(read.failed)}`
      : outcome === undefined
        ? `the parent's journal ends without its outcome (it ${read.cut}): its coordinator's process died`
        : `the survivors' saves are not usable (${saveProblems.join("; ")})`
  return fromAudited(parent, epochs, why, notes)
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
 */
const recordedPath = (dir: string, recordedRunDir: string, path: string): string => {
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

const numberOr = (value: unknown, fallback: number): number => (typeof value === "number" && Number.isFinite(value) ? value : fallback)
const optionalNumber = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined)

const failureLimitOf = (value: unknown): Config.FailureLimit | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const { absolute, fraction } = value as Record<string, unknown>
  return typeof absolute === "number" ? { absolute } : typeof fraction === "number" ? { fraction } : undefined
}

const rolePolicyOf = (value: unknown): Config.RolePolicy | undefined =>
  value === "fastest"
    ? "fastest"
    : typeof value === "object" && value !== null && typeof (value as { rank?: unknown }).rank === "number"
      ? { rank: (value as { rank: number }).rank }
      : undefined

/**
 * `options` without the keys whose value is `undefined` (`exactOptionalPropertyTypes`): builds
 * `RunOptions` and `ResumeOptions` from optional values.
 *
 * @since 0.1.0
 * @category options
 */
export const defined = <A extends object>(options: { readonly [K in keyof A]?: A[K] | undefined }): A =>
  Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as A

/** Whether `<dir>/summary.json` records a completed run (a summary that cannot be read says nothing). */
const completedPerSummary = async (dir: string): Promise<boolean> => {
  const read = await readText(`${dir}/summary.json`, reportDefaults.fileBytesMax).catch(() => "unreadable")
  if (typeof read === "string") return false
  try {
    const summary: unknown = JSON.parse(read.text)
    return (summary as { readonly outcome?: { readonly status?: unknown } } | null)?.outcome?.status === "completed"
  } catch {
    return false
  }
}

/** The folder that holds `dir` (`.` for a bare name). */
const parentFolder = (dir: string): string => {
  const at = dir.lastIndexOf("/")
  return at < 0 ? "." : at === 0 ? "/" : dir.slice(0, at)
}

/**
 * Resumes the run in `options.resume` through `launch` (the launcher's run with a `Resumed`
 * record). Rejects with `LaunchError` (option `resume`, reasons in `resumeErrors`; option
 * `trainer` when the trainer module cannot be loaded) before anything runs; the parent's
 * directory changes only while the resumed run holds its lock file.
 *
 * @since 0.1.0
 * @category resume
 */
export const resume = async (
  options: ResumeOptions,
  launch: (options: RunOptions, resumed: Resumed) => Promise<RunResult>
): Promise<RunResult> => {
  // Long because it checks the refusals one after the other before anything is written; each check is a line or two with its why.
  // A run still training is not resumed, whatever its journal says so far: its own lock says so (a
  // stale one, of a process that is gone, is left as it is: the parent's folder is not changed).
  const runLockPath = `${options.resume.replace(/\/+$/, "")}/${runLockFileName}`
  const running = await LockFile.inspect(runLockPath)
  if (running._tag === "Live") {
    const runId = options.resume.replace(/\/+$/, "").split("/").at(-1) ?? options.resume
    return fail(resumeErrors.stillRunning(runId, running.owner.pid, runLockPath))
  }
  const parent = await readParent(options.resume)
  const { started } = parent
  const parentOptions = parent.options
  // A resume still running (its lock's process is alive) wrote the marker too once it formed: say
  // it is running, not that it is done (deleting the marker then would train the samples twice).
  const lockPath = `${parent.dir}/${lockFileName}`
  const resuming = await LockFile.liveOwner(lockPath)
  if (resuming !== undefined) fail(resumeErrors.locked(started.runId, resuming.pid, lockPath))
  const markerPath = `${parent.dir}/${resumedByFileName}`
  const child = await readResumedBy(markerPath)
  if (child !== undefined) fail(resumeErrors.alreadyResumed(started.runId, child.runId, child.runDir, markerPath))
  // A resume that died before it formed marked nothing: the run it resumed may have been resumed
  // again since, by a run that trained on from the same state.
  const grandparent = started.resumed?.parent
  const grandparentDir = grandparent === undefined ? undefined : recordedPath(parent.dir, started.runDir, grandparent.runDir)
  const sibling =
    grandparentDir === undefined ? undefined : await readResumedBy(`${grandparentDir.replace(/(.)\/+$/, "$1")}/${resumedByFileName}`)
  if (grandparent !== undefined && sibling !== undefined && sibling.runId !== "(unknown)" && sibling.runId !== started.runId) {
    fail(resumeErrors.parentResumedAgain(started.runId, grandparent.runId, sibling.runId, sibling.runDir))
  }
  // `summary.json` is the authority for a completed run: its journal may be short (a write that a
  // full or failing disk refused after the summary's), which alone would read as a cut-off run.
  if (parent.read.outcome?.status === "completed" || (await completedPerSummary(parent.dir)))
    fail(resumeErrors.completed(started.runId, started.epochs))
  // The resumed run's folder inside the parent's would be read as part of the parent (a later
  // report, resume or clean-up of the parent would take it along).
  if (options.outDir !== undefined) {
    const out = Files.absolutePath(options.outDir)
    const dir = Files.absolutePath(parent.dir)
    if (out === dir || out.startsWith(dir.endsWith("/") ? dir : `${dir}/`))
      fail(resumeErrors.outInsideRun(options.outDir, started.runId, parent.dir))
  }
  // A run that failed before every rank joined (its journal ends with `failed`) trained nothing.
  const failed = parent.read.outcome === undefined ? parent.read.failed : undefined
  if (failed !== undefined && !failed.formed) fail(resumeErrors.failedAtFormation(started.runId, failureText(failed)))
  // The trainer: the parent's (the absolute URL it recorded; an older journal's path as given), or
  // the one named, which must be the same module: same dataset size, same file contents.
  const recordedUrl =
    typeof parentOptions.trainerUrl === "string"
      ? parentOptions.trainerUrl
      : typeof parentOptions.trainer === "string"
        ? Files.fileUrl(parentOptions.trainer)
        : undefined
  const trainerGiven = options.trainer ?? recordedUrl
  if (trainerGiven === undefined) return fail(resumeErrors.notARun(options.resume, "its journal does not name its trainer"))
  const { url: trainerUrl, module } = await loadTrainer(trainerGiven)
  const shown = Files.pathOf(trainerGiven)
  if (module.trainSamples !== started.epochSamples) {
    fail(resumeErrors.datasetSize(shown, module.trainSamples, started.runId, started.epochSamples))
  }
  if (typeof parentOptions.trainerSha256 === "string" && (await trainerSha256(trainerUrl)) !== parentOptions.trainerSha256) {
    fail(resumeErrors.otherTrainer(shown, started.runId))
  }
  let lock: LockFile.Acquired
  try {
    // The lock's stamp is wall-clock time: another process reads it.
    lock = await LockFile.acquire(lockPath, Date.now())
  } catch (error) {
    return fail(resumeErrors.cannotLock(lockPath, firstLine(error)))
  }
  if (lock._tag === "Held") return fail(resumeErrors.locked(started.runId, lock.owner?.pid, lockPath))
  try {
    const picked = await pickState(parent, started.epochSamples, started.epochs)
    const resumed: Resumed = {
      parent: { runId: printable(started.runId), runDir: printable(started.runDir) },
      epoch: picked.epoch,
      firstRound: picked.firstRound,
      committedSamples: picked.committed.reduce((sum, [, size]) => sum + size, 0),
      committed: picked.committed,
      state: picked.state,
      loadedFrom: picked.loadedFrom,
      notes: [
        ...(running._tag === "Stale" ? [staleLockNote(runLockPath, running.why, false)] : []),
        ...(lock.tookOver === undefined ? [] : [staleLockNote(lockPath, lock.tookOver.why, true)]),
        ...(started.transport === "serve" && options.transport === undefined
          ? ["the run's ranks joined over WebSocket (cohort serve); this resume runs them here as worker threads"]
          : []),
        ...picked.notes
      ]
    }
    const o = parentOptions
    const fresh = defined<RunOptions>({
      // What the parent's model and data order were made of: never overridden.
      trainer: trainerUrl,
      epochs: started.epochs,
      mode: started.mode,
      seed: numberOr(o.seed, defaults.seed),
      batchSize: numberOr(o.batchSize, defaults.batchSize),
      averageEverySteps: numberOr(o.averageEverySteps, defaults.averageEverySteps),
      // How rounds were averaged: the parent's (an older journal without it averaged with cpu).
      backend: options.backend ?? (o.backend === "ring" || o.backend === "cpu" ? o.backend : undefined),
      ringSharedSlots: options.ringSharedSlots ?? optionalNumber(o.ringSharedSlots),
      ringAreaMemoryMb: options.ringAreaMemoryMb ?? optionalNumber(o.ringAreaMemoryMb),
      // The cluster, its bounds and its faults: the caller's, else the parent's (faults: none).
      worldSize: options.worldSize ?? started.worldSize,
      // A served parent's ranks joined from elsewhere: resumed here, they run as local workers
      // unless a transport is given (serving a resume is not built yet).
      transport: options.transport ?? (started.transport === "serve" ? "worker" : started.transport),
      kills: options.kills ?? [],
      hangs: options.hangs ?? [],
      floods: options.floods ?? [],
      heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? optionalNumber(o.heartbeatTimeoutMs),
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? optionalNumber(o.heartbeatIntervalMs),
      coordinatorStallMs: options.coordinatorStallMs ?? optionalNumber(o.coordinatorStallMs),
      coordinatorTimeoutMs: options.coordinatorTimeoutMs ?? optionalNumber(o.coordinatorTimeoutMs),
      roundDeadlineMs: options.roundDeadlineMs ?? optionalNumber(o.roundDeadlineMs),
      roundQuorum: options.roundQuorum ?? optionalNumber(o.roundQuorum),
      // How rounds were combined: the parent's unless the caller says otherwise.
      aggregate:
        options.aggregate ??
        (o.aggregate === "mean" || o.aggregate === "trimmed-mean" || o.aggregate === "median" ? o.aggregate : undefined),
      trimFraction: options.trimFraction ?? optionalNumber(o.trimFraction),
      clipNorm: options.clipNorm ?? optionalNumber(o.clipNorm),
      outlierFactor: options.outlierFactor ?? optionalNumber(o.outlierFactor),
      outlierRoundsMax: options.outlierRoundsMax ?? optionalNumber(o.outlierRoundsMax),
      compress: options.compress ?? (o.compress === "none" || o.compress === "fp16" || o.compress === "int8" ? o.compress : undefined),
      deltas: options.deltas ?? (typeof o.deltas === "boolean" ? o.deltas : undefined),
      outerLr: options.outerLr ?? optionalNumber(o.outerLr),
      outerMomentum: options.outerMomentum ?? optionalNumber(o.outerMomentum),
      tickMs: options.tickMs ?? optionalNumber(o.tickMs),
      saveTimeoutMs: options.saveTimeoutMs ?? optionalNumber(o.saveTimeoutMs),
      evalTimeoutMs: options.evalTimeoutMs ?? optionalNumber(o.evalTimeoutMs),
      livenessDetector:
        options.livenessDetector ?? (o.livenessDetector === "fixed" || o.livenessDetector === "adaptive" ? o.livenessDetector : undefined),
      adaptiveTimeoutMinMs: options.adaptiveTimeoutMinMs ?? optionalNumber(o.adaptiveTimeoutMinMs),
      failureLimit: "failureLimit" in options ? options.failureLimit : failureLimitOf(o.failureLimit),
      rolePolicy: options.rolePolicy ?? rolePolicyOf(o.rolePolicy),
      onRepeatedCrash:
        options.onRepeatedCrash ?? (o.onRepeatedCrash === "continue" || o.onRepeatedCrash === "stop" ? o.onRepeatedCrash : undefined),
      rankMemoryMb: options.rankMemoryMb ?? optionalNumber(o.rankMemoryMb),
      rankNice: options.rankNice ?? optionalNumber(o.rankNice),
      interruptGraceMs: options.interruptGraceMs ?? optionalNumber(o.interruptGraceMs),
      outDir: options.outDir ?? parentFolder(parent.dir),
      runId: options.runId,
      signal: options.signal,
      stopSignal: options.stopSignal,
      onEvent: markResumed(
        markerPath,
        await unmarkedAncestors(parent.dir, { runId: started.runId, runDir: started.runDir }),
        options.onEvent
      ),
      onRankOutput: options.onRankOutput,
      resumeState: {
        epoch: picked.epoch,
        firstRound: picked.firstRound,
        committed: picked.committed,
        params: picked.params,
        ...(await outerMomentumOf(picked))
      }
    })
    return await launch(fresh, resumed)
  } finally {
    await lock.release()
  }
}
