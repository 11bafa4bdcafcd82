/**
 * `run({ resume: dir })`: continues a run that ended unrecoverable, interrupted, or cut off by the
 * death of its coordinator's process. The parent's journal is read with
 * the report's tolerant reader (a last line cut short is fine, and said); the state to load is
 * picked, the parent's options are carried over, and the launcher runs a new run directory whose
 * journal names its parent.
 *
 * Which state is loaded: `resume-state.ts`.
 *
 * Refusals are `LaunchError`s with option `resume`, one line each (`resume-state.ts`'s
 * `resumeErrors` lists them), and
 * change nothing in the parent's directory. A resume holds the lock file `<dir>/resume.lock`
 * (created exclusively, holding its process id; removed when the resumed run ends, whatever the
 * outcome); a second resume of the same run meanwhile is refused, and a lock whose process is gone
 * (a resume that was SIGKILLed) is taken over.
 *
 * @since 0.1.0
 */
import * as Files from "../../src/platform/files.ts"
import * as LockFile from "../../src/platform/lock-file.ts"
import { firstLine } from "../record/error-text.ts"
import { chainOf, failureText, printable, readResumedBy, readText, reportDefaults, resumedByFileName } from "../record/read-run.ts"
export { resumedByFileName } from "../record/read-run.ts"
import { carriedRules } from "./carried-options.ts"
import { defaults, loadTrainer, runLockFileName } from "./launch-options.ts"
import type { ResumeOptions, Resumed, RunOptions, RunResult } from "../record/run-types.ts"
import { fail, firstUnaudited, outerMomentumOf, pickState, readParent, recordedPath, resumeErrors } from "./resume-state.ts"
import { trainerSha256 } from "./trainer-digest.ts"

/**
 * The lock file a resume holds in the parent's directory while it runs.
 *
 * @since 0.1.0
 * @category resume
 */
export const lockFileName = "resume.lock"

/**
 * What the launch does once the resumed run forms: writes the parent's `resumedByFileName` with
 * the run's id and folder (`self`). A marker that cannot be written does not stop the run, but is
 * told (`warn`: the launcher's `StorageFault` alert with the path and the cause): the parent still
 * looks resumable, and a resume of it would train the same epochs again.
 *
 * @since 0.1.0
 * @category resume
 */
export type OnFormed = (self: { readonly runId: string; readonly runDir: string }, warn: (path: string, error: unknown) => void) => void

/** `OnFormed` marking the parent at `path`, and the `unmarked` ancestors. */
const markResumed =
  (
    path: string,
    unmarked: ReadonlyArray<{ readonly path: string; readonly child: { readonly runId: string; readonly runDir: string } }>
  ): OnFormed =>
  (self, warn) => {
    void Files.writeFileAtomic(path, `${JSON.stringify(self)}\n`).catch((error: unknown) => warn(path, error))
    // Ancestors whose own resume never formed: this run trains on from their state too.
    for (const ancestor of unmarked) {
      void Files.exists(ancestor.path)
        .then((found) => (found ? undefined : Files.writeFileAtomic(ancestor.path, `${JSON.stringify(ancestor.child)}\n`)))
        .catch((error: unknown) => warn(ancestor.path, error))
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
 * The one line a resume prints for a stale lock it found (its holder is gone: `LockFile.inspect`):
 * the run's own lock is no bar and stays as it is (the parent's folder is not changed), e.g.
 * `the lock <dir>/run.lock is stale: process 1 of another PID namespace (a container) is gone; the
 * run is not running`; a resume's lock is taken over, e.g. `took over the stale lock
 * <dir>/resume.lock: process 4242 started at another time (its PID was reused)`.
 */
const staleLockNote = (path: string, why: string, tookOver: boolean): string =>
  tookOver ? `took over the stale lock ${path}: ${why}` : `the lock ${path} is stale: ${why}; the run is not running`

const numberOr = (value: unknown, fallback: number): number => (typeof value === "number" && Number.isFinite(value) ? value : fallback)
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
  launch: (options: RunOptions, resumed: Resumed, onFormed: OnFormed) => Promise<RunResult>
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
  // One whose last epoch's model could not be written withheld that epoch's audit: it is resumed.
  const completed = parent.read.outcome?.status === "completed" || (await completedPerSummary(parent.dir))
  if (completed && firstUnaudited(parent) === undefined) fail(resumeErrors.completed(started.runId, started.epochs))
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
      // The parent's rules (how rounds close and combine, liveness, bounds, the ranks' limits),
      // each overridden by the caller's: an older journal without `backend` averaged with cpu.
      ...carriedRules(o, options),
      failureLimit: "failureLimit" in options ? options.failureLimit : carriedRules(o).failureLimit,
      // The cluster and its faults: the caller's, else the parent's (faults: none).
      worldSize: options.worldSize ?? started.worldSize,
      // A served parent's ranks joined from elsewhere: resumed here, they run as local workers
      // unless a transport is given (serving a resume is not built yet).
      transport: options.transport ?? (started.transport === "serve" ? "worker" : started.transport),
      kills: options.kills ?? [],
      hangs: options.hangs ?? [],
      floods: options.floods ?? [],
      outDir: options.outDir ?? parentFolder(parent.dir),
      runId: options.runId,
      signal: options.signal,
      stopSignal: options.stopSignal,
      onEvent: options.onEvent,
      onRankOutput: options.onRankOutput,
      resumeState: {
        epoch: picked.epoch,
        firstRound: picked.firstRound,
        committed: picked.committed,
        params: picked.params,
        ...(await outerMomentumOf(picked))
      }
    })
    const unmarked = await unmarkedAncestors(parent.dir, { runId: started.runId, runDir: started.runDir })
    return await launch(fresh, resumed, markResumed(markerPath, unmarked))
  } finally {
    await lock.release()
  }
}
