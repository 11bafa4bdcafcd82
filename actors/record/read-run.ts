/**
 * Reading a finished run back from its folder (`summary.json`, else `events.ndjson`) for `cohort report`.
 *
 * A run folder may hold anything: every file is opened only if it is a regular file of at most
 * `fileBytesMax` bytes (`reportDefaults`), checked against `run-schema.ts`, and every string in it is made printable
 * (`printable`) before the report shows it.
 *
 * @since 0.1.0
 */
import type * as Alerts from "../../src/core/alerts.ts"
import * as Files from "../../src/platform/files.ts"
import { firstLine } from "./error-text.ts"
import type * as RunTypes from "./run-types.ts"
import * as RunSchema from "./run-schema.ts"
import * as Traffic from "./traffic.ts"

/**
 * Defaults of reading a run back (`cohort report` and its `--file-bytes-max`, `cohort resume`):
 * `fileBytesMax` (256 MiB), the largest `summary.json` or `events.ndjson` read; a larger file is
 * refused, not read in part (the demo writes about 100 kB).
 *
 * @since 0.1.0
 * @category reading
 */
export const reportDefaults = { fileBytesMax: 268_435_456 } as const

// ---------------------------------------------------------------------------------------------
// Reading a finished run (report)
// ---------------------------------------------------------------------------------------------

/**
 * Options of `readRun`.
 *
 * @since 0.1.0
 * @category report
 */
export interface ReadRunOptions {
  /** Largest file read, in bytes. Default `reportDefaults.fileBytesMax`. */
  readonly fileBytesMax?: number
}

/**
 * What a journal (`events.ndjson`) cut before its `ended` event still tells: the run as far as it
 * was read, without an outcome. `durationMs` is the last event's `ms`; `journal` is the file read;
 * `cut` says where it stops (`was cut in line 22`, or `ends after line 21`).
 *
 * @since 0.1.0
 * @category report
 */
export interface PartialRun extends Omit<RunTypes.RunResult, "outcome" | "exitCode"> {
  readonly outcome: undefined
  readonly journal: string
  readonly cut: string
  /** The journal's last event said the run failed (`failed`: a formation timeout, ...); absent when it was cut off. */
  readonly failed?: RunFailure
}

/**
 * A journal's `failed` event: the run could not be carried out (`RunEvent` in `run-events.ts`).
 * `formed` false: it failed at formation and nothing was trained.
 *
 * @since 0.1.0
 * @category report
 */
export interface RunFailure {
  readonly stage: string
  readonly reason: string
  readonly formed: boolean
}

/**
 * The words for a failed run, e.g. `the run failed at formation: rank 0 did not join within 20000
 * ms` (a formation timeout), or `the run failed: run: <reason>` once every rank had joined.
 *
 * @since 0.1.0
 * @category report
 */
export const failureText = (failed: RunFailure): string =>
  failed.formed
    ? `the run failed: ${failed.stage}: ${failed.reason}`
    : `the run failed at formation: ${failed.stage === "formation" ? "" : `${failed.stage}: `}${failed.reason}`

// C0 and C1 control characters (ESC starts terminal sequences; a newline fakes a line) and the
// Unicode direction overrides (they reorder what a terminal shows).
const controlCharacters = /[\p{Cc}\u200E\u200F\u202A-\u202E\u2066-\u2069]/gu
const whitespaceControls = /[\t\n\v\f\r]/g

/**
 * `text` without control characters, safe to print: tabs and line ends become a space, every other
 * C0/C1 control character (ESC, BEL, ...) and Unicode direction override is removed.
 *
 * @since 0.1.0
 * @category report
 */
export const printable = (text: string): string => text.replace(whitespaceControls, " ").replace(controlCharacters, "")

/** A copy of a parsed JSON value with every string (keys too) made `printable`. @since 0.1.0 @category report */
export const printableDeep = (value: unknown): unknown => {
  if (typeof value === "string") return printable(value)
  if (Array.isArray(value)) return value.map(printableDeep)
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, entry]) => [printable(key), printableDeep(entry)]))
  }
  return value
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

const decoder = new TextDecoder()

/**
 * The text of the regular file `path` of at most `bytesMax` bytes, or an error line (not a regular
 * file, too large, unreadable).
 *
 * @since 0.1.0
 * @category report
 */
export const readText = async (path: string, bytesMax: number): Promise<{ readonly text: string } | string> => {
  let read: Files.RegularFileRead
  try {
    read = await Files.readRegularFile(path, bytesMax)
  } catch (error) {
    return `cannot read ${path}: ${firstLine(error)}`
  }
  switch (read._tag) {
    case "NotRegular":
      return `${path} is not a regular file (it is a ${read.kind}); report reads only regular files`
    case "TooLarge":
      return `${path} is larger than ${bytesMax} bytes (--file-bytes-max); it was not read`
    case "Read":
      return { text: decoder.decode(read.bytes) }
  }
}

const exitCodeOf = (outcome: RunTypes.RunResult["outcome"], epochs: RunTypes.RunResult["epochs"]): RunTypes.RunResult["exitCode"] =>
  epochs.some((e) => e.lost !== 0 || e.duplicated !== 0)
    ? 4
    : outcome.status === "unrecoverable"
      ? 1
      : outcome.status === "interrupted"
        ? 130
        : 0

/**
 * Rebuilds a run's result from the lines of its `events.ndjson`: the run from `started`, deaths,
 * alerts and epochs in order, each epoch's accuracy from the last `eval` event for it (the
 * journal is streamed: an `epoch` line is written before its eval arrives), the outcome, duration
 * and exit code from `ended` (an `ended` without `exitCode`, from an older writer, gets it from
 * the outcome; an interrupted one then reads 130). The final accuracy is the last finished
 * epoch's. Lines of unknown event types are skipped.
 *
 * A journal without its `ended` event gives a `PartialRun` of every whole line before that, with
 * `failed` when its `failed` event says the run failed (at formation, say). Its
 * last line may be cut short (it has no line end and is not a whole event). Returns an error line
 * when a whole line is not JSON or not a valid run event (naming the line and its first bad
 * field), or there is no `started` event. Strings are returned as they are (see `readRun`).
 *
 * @since 0.1.0
 * @category report
 */
export const resultFromEvents = (text: string, source = "events.ndjson"): RunTypes.RunResult | PartialRun | string => {
  const journal = parseJournal(text, source)
  return typeof journal === "string" ? journal : journal.result
}

/**
 * `resultFromEvents` with the `started` event the result was rebuilt from (the run's world size
 * and options, which a `RunResult` does not carry), whether the run formed (a `formed` event),
 * and the takeovers of it that formed (each `coordinatorLost` with its `recovered`), for readers
 * that need them: the error line and the result are `resultFromEvents`'s.
 *
 * @since 0.1.0
 * @category report
 */
export const parseJournal = (
  text: string,
  source = "events.ndjson"
):
  | {
      readonly started: Extract<RunTypes.RunEvent, { type: "started" }>
      readonly result: RunTypes.RunResult | PartialRun
      readonly formed: boolean
      readonly recoveries: ReadonlyArray<RunTypes.RecoveryRecord>
    }
  | string => {
  // Long because: one walk over the journal gathers every list of the result, one case per event type.
  let started: Extract<RunTypes.RunEvent, { type: "started" }> | undefined
  let ended: Extract<RunTypes.RunEvent, { type: "ended" }> | undefined
  let failed: RunFailure | undefined
  let lastMs = 0
  let cut: string | undefined
  const deaths: Array<RunTypes.DeathTiming> = []
  const leaves: Array<RunTypes.LeaveCost> = []
  const joins: Array<RunTypes.JoinCost> = []
  const skippedFaults: Array<RunTypes.SkippedFault> = []
  const alerts: Array<Alerts.Alert> = []
  const epochs: Array<RunTypes.RunResult["epochs"][number]> = []
  let formed = false
  let lost: Extract<RunTypes.RunEvent, { type: "coordinatorLost" }> | undefined
  const recoveries: Array<RunTypes.RecoveryRecord> = []
  const traffic = Traffic.make()
  const lines = text.split("\n")
  let lastLine = 0
  for (let index = 0; index < lines.length; index++) {
    const line = (lines[index] ?? "").trim()
    if (line === "") continue
    // Only the last piece can lack its line end: a write cut short.
    const whole = index < lines.length - 1
    const bad = (why: string): string | undefined => {
      if (whole || ended !== undefined) return `${source} line ${index + 1} ${why}`
      cut = `was cut in line ${index + 1}`
      return undefined
    }
    let event: unknown
    try {
      event = JSON.parse(line)
    } catch {
      const error = bad("is not JSON")
      if (error !== undefined) return error
      break
    }
    if (!isRecord(event) || typeof event.type !== "string") {
      const error = bad("is not a run event")
      if (error !== undefined) return error
      break
    }
    if (!RunSchema.eventTypes.has(event.type)) continue
    const checked = RunSchema.validateRunEvent(event)
    if ("bad" in checked) {
      const error = bad(`is not a valid ${event.type} event: ${checked.bad}`)
      if (error !== undefined) return error
      break
    }
    const e = checked.ok
    lastLine = index + 1
    lastMs = Math.max(lastMs, e.ms)
    switch (e.type) {
      case "started":
        started = e
        break
      case "fault-skipped":
        skippedFaults.push(e.skipped)
        break
      case "death":
        deaths.push(e.death)
        break
      case "leave":
        leaves.push(e.leave)
        break
      case "join":
        joins.push(e.join)
        break
      case "alert":
        alerts.push(e.alert)
        break
      case "epoch":
        epochs.push({ ...e.summary, accuracy: e.accuracy })
        break
      case "eval": {
        const at = epochs.findIndex((row) => row.epoch === e.epoch)
        if (at >= 0) epochs[at] = { ...epochs[at]!, accuracy: e.accuracy }
        break
      }
      case "ended":
        ended = e
        break
      case "failed":
        failed = { stage: e.stage, reason: e.reason, formed: e.formed }
        break
      case "formed":
        formed = true
        break
      case "round":
        traffic.add(e)
        break
      case "coordinatorLost":
        lost = e
        break
      case "recovered":
        if (lost !== undefined)
          recoveries.push({
            lostMs: lost.lostMs,
            withoutCoordinatorMs: e.withoutCoordinatorMs,
            epoch: lost.epoch,
            committedSamples: lost.committedSamples,
            returned: e.returned,
            missing: e.missing
          })
        lost = undefined
        break
      default:
        break
    }
  }
  if (started === undefined) return `${source} has no started event`
  // A resumed run: the epoch it picked up in the middle of spans both runs (as in its summary).
  const resumed = started.resumed
  const rows =
    resumed === undefined || resumed.committedSamples === 0
      ? epochs
      : epochs.map((row) => (row.epoch === resumed.epoch ? { ...row, spansRuns: [resumed.parent.runId, started!.runId] as const } : row))
  const trafficTotal = traffic.total()
  const read = {
    runId: started.runId,
    runDir: started.runDir,
    deaths,
    ...(leaves.length === 0 ? {} : { leaves }),
    ...(joins.length === 0 ? {} : { joins }),
    skippedFaults,
    alerts,
    epochs: rows,
    finalAccuracy: epochs.at(-1)?.accuracy,
    ...(resumed === undefined ? {} : { resumed }),
    ...(trafficTotal === undefined ? {} : { traffic: trafficTotal })
  }
  if (ended === undefined) {
    const result: PartialRun = {
      ...read,
      outcome: undefined,
      durationMs: lastMs,
      journal: source,
      cut: cut ?? `ends after line ${lastLine}`,
      ...(failed === undefined ? {} : { failed })
    }
    return { started, result, formed, recoveries }
  }
  const backend =
    started.options?.["backend"] === "ring" ? ("ring" as const) : started.options?.["backend"] === "cpu" ? ("cpu" as const) : undefined
  return {
    started,
    formed,
    recoveries,
    result: {
      ...read,
      outcome: ended.outcome,
      saves: ended.saves,
      durationMs: ended.ms,
      exitCode: ended.exitCode ?? exitCodeOf(ended.outcome, epochs),
      ...(backend === undefined ? {} : { backend }),
      ...(ended.ring === undefined ? {} : { ring: ended.ring })
    }
  }
}

/**
 * The file a resumed run writes into its parent's directory once it formed (started training),
 * `{"runId", "runDir"}` of the resumed run: the parent's uncommitted samples are that run's from
 * then on, so a second resume of the parent is refused (`resumeErrors.alreadyResumed`), never
 * training them twice. A resume that stopped before it formed writes nothing.
 *
 * @since 0.1.0
 * @category resume
 */
export const resumedByFileName = "resumed-by.json"

/**
 * The run that resumed the run whose marker is at `path` (`resumedByFileName`), if any; an
 * unreadable marker still marks the run resumed (`runId` `(unknown)`).
 *
 * @since 0.1.0
 * @category report
 */
export const readResumedBy = async (path: string): Promise<{ readonly runId: string; readonly runDir: string } | undefined> => {
  if ((await Files.kind(path)) === "missing") return undefined
  try {
    const read = await Files.readRegularFile(path, 64 * 1024)
    const value = read._tag === "Read" ? (JSON.parse(new TextDecoder().decode(read.bytes)) as unknown) : undefined
    if (
      typeof value === "object" &&
      value !== null &&
      "runId" in value &&
      "runDir" in value &&
      typeof value.runId === "string" &&
      typeof value.runDir === "string"
    ) {
      return { runId: printable(value.runId), runDir: printable(value.runDir) }
    }
  } catch {
    // An unreadable marker still marks the run resumed.
  }
  return { runId: "(unknown)", runDir: `the marker ${path}` }
}

/** How many runs the chain walks each way from the one reported (a bound against a marker loop). */
const chainHopsMax = 64

/** The parent a run's journal names in its `started` event (`resumed.parent`), read from its first 64 KiB. */
const parentOf = async (runDir: string): Promise<{ readonly runId: string; readonly runDir: string } | undefined> => {
  try {
    const read = await Files.readRegularFile(`${runDir}/events.ndjson`, 64 * 1024).catch(() => undefined)
    if (read === undefined || read._tag === "NotRegular") return undefined
    const bytes = read._tag === "Read" ? read.bytes : undefined
    const first = bytes === undefined ? undefined : new TextDecoder().decode(bytes).split("\n")[0]
    const started =
      first === undefined
        ? undefined
        : (JSON.parse(first) as { readonly resumed?: { readonly parent?: { readonly runId?: unknown; readonly runDir?: unknown } } })
    const parent = started?.resumed?.parent
    return typeof parent?.runId === "string" && typeof parent.runDir === "string"
      ? { runId: parent.runId, runDir: parent.runDir }
      : undefined
  } catch {
    return undefined
  }
}

/**
 * The chain of runs `runDir` belongs to (`RunResult.chain`): its parents, first run first, then
 * `self`, then the runs that resumed it in turn. At most `chainHopsMax` runs each way.
 *
 * @since 0.1.0
 * @category report
 */
export const chainOf = async (
  runDir: string,
  self: { readonly runId: string; readonly runDir: string }
): Promise<ReadonlyArray<{ readonly runId: string; readonly runDir: string }>> => {
  const before: Array<{ readonly runId: string; readonly runDir: string }> = []
  for (let dir = runDir, hops = 0; hops < chainHopsMax; hops++) {
    const parent = await parentOf(dir)
    if (parent === undefined) break
    before.unshift(parent)
    dir = parent.runDir
  }
  const after: Array<{ readonly runId: string; readonly runDir: string }> = []
  for (let dir = runDir, hops = 0; hops < chainHopsMax; hops++) {
    const child = await readResumedBy(`${dir.replace(/(.)\/+$/, "$1")}/${resumedByFileName}`)
    if (child === undefined || child.runId === "(unknown)") break
    after.push(child)
    dir = child.runDir
  }
  return [...before, self, ...after]
}

/**
 * Reads a finished run from its folder: `summary.json` (the `RunResult`) when present, else
 * `events.ndjson` through `resultFromEvents` (possibly a `PartialRun`). Every string of the result
 * is `printable`. Returns an error line (printable too) when the folder or both files are missing,
 * a file is not a regular file (a named pipe, a link to a device) or is larger than
 * `fileBytesMax`, is not JSON, or does not match `run-schema.ts` (the first bad field is named).
 *
 * @since 0.1.0
 * @category report
 */
export const readRun = async (runDir: string, options: ReadRunOptions = {}): Promise<RunTypes.RunResult | PartialRun | string> => {
  const found = await readRunRaw(runDir, options.fileBytesMax ?? reportDefaults.fileBytesMax)
  if (typeof found === "string") return printable(found)
  // A run that a resume took on from (its marker): the report names that run instead of a resume.
  const resumedBy = await readResumedBy(`${runDir.replace(/(.)\/+$/, "$1")}/${resumedByFileName}`)
  const chain =
    found.resumed === undefined && resumedBy === undefined ? undefined : await chainOf(runDir, { runId: found.runId, runDir: found.runDir })
  return printableDeep({ ...found, ...(resumedBy === undefined ? {} : { resumedBy }), ...(chain === undefined ? {} : { chain }) }) as
    | RunTypes.RunResult
    | PartialRun
}

/**
 * Why the journal at `path` is shorter than `summary` says (it lacks the run's end, or epochs the
 * summary lists: a write cut short or refused by a full or failing disk), or `undefined` when it
 * is whole (or missing, or unreadable: the summary is the authority either way).
 */
const journalShortOf = async (path: string, summary: RunTypes.RunResult, bytesMax: number): Promise<string | undefined> => {
  if ((await Files.kind(path)) === "missing") return undefined
  const read = await readText(path, bytesMax)
  if (typeof read === "string") return undefined
  const journal = resultFromEvents(read.text, path)
  if (typeof journal === "string") return undefined
  const epochs = journal.epochs.length
  if (journal.outcome !== undefined && epochs >= summary.epochs.length) return undefined
  const where = journal.outcome === undefined ? (journal as PartialRun).cut : "holds the run's end"
  return (
    `the journal ${path} is incomplete: it ${where}, with ${epochs} of the ${summary.epochs.length} finished ${summary.epochs.length === 1 ? "epoch" : "epochs"} ` +
    `that summary.json records; the report shows summary.json`
  )
}

const readRunRaw = async (runDir: string, bytesMax: number): Promise<RunTypes.RunResult | PartialRun | string> => {
  const dir = runDir.replace(/(.)\/+$/, "$1")
  const dirKind = await Files.kind(dir)
  if (dirKind === "missing")
    return `no run directory at ${runDir}${runDir.includes("/") ? "" : ` (runs are written to runs/<runId> unless --out says otherwise)`}`
  if (dirKind !== "directory") return `${runDir} is not a folder; report reads a run directory`
  const summaryPath = `${dir}/summary.json`
  if ((await Files.kind(summaryPath)) !== "missing") {
    const read = await readText(summaryPath, bytesMax)
    if (typeof read === "string") return read
    let value: unknown
    try {
      value = JSON.parse(read.text)
    } catch {
      // The parser's message quotes the file's first bytes: never echo what a file holds.
      return `cannot read ${summaryPath}: it is not valid JSON`
    }
    const checked = RunSchema.validateRunResult(value)
    if (!("ok" in checked)) return `${summaryPath} is not a Cohort run summary: ${checked.bad}`
    const incomplete = await journalShortOf(`${dir}/events.ndjson`, checked.ok, bytesMax)
    return incomplete === undefined ? checked.ok : { ...checked.ok, journalIncomplete: incomplete }
  }
  const eventsPath = `${dir}/events.ndjson`
  if ((await Files.kind(eventsPath)) !== "missing") {
    const read = await readText(eventsPath, bytesMax)
    return typeof read === "string" ? read : resultFromEvents(read.text, eventsPath)
  }
  return `${runDir} has neither summary.json nor events.ndjson; is it a run directory?`
}
