/**
 * Reading a finished run back from its folder (`summary.json`, else `events.ndjson`) for `cohort report`.
 *
 * @since 0.1.0
 */
import type * as RunTypes from "../../actors/run-types.ts"
import type * as Alerts from "../core/alerts.ts"
import type * as Coordinator from "../core/coordinator.ts"
import * as Files from "../platform/files.ts"
import { firstLine } from "./parse.ts"

// ---------------------------------------------------------------------------------------------
// Reading a finished run (report)
// ---------------------------------------------------------------------------------------------

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

const looksLikeResult = (value: unknown): value is RunTypes.RunResult =>
  isRecord(value) && typeof value.runId === "string" && typeof value.runDir === "string" && isRecord(value.outcome) &&
  (value.outcome.status === "completed" || value.outcome.status === "unrecoverable") &&
  Array.isArray(value.outcome.failures) && typeof value.outcome.epochsCompleted === "number" &&
  Array.isArray(value.epochs) && Array.isArray(value.deaths) && Array.isArray(value.alerts) &&
  typeof value.durationMs === "number" && (value.exitCode === 0 || value.exitCode === 1 || value.exitCode === 4)

const decoder = new TextDecoder()

const readText = async (path: string): Promise<string> => decoder.decode(await Files.readFile(path))

const exitCodeOf = (outcome: Coordinator.Outcome, epochs: RunTypes.RunResult["epochs"]): 0 | 1 | 4 =>
  epochs.some((e) => e.lost !== 0 || e.duplicated !== 0) ? 4 : outcome.status === "unrecoverable" ? 1 : 0

/**
 * Rebuilds a run's result from the lines of its `events.ndjson`: the run from `started`, deaths,
 * alerts and epochs (with accuracy) in order, the outcome and duration from `ended`. The final
 * accuracy is the last finished epoch's. Returns an error line when a line is not a JSON event
 * or the log has no `started` or no `ended` event (the run did not finish).
 *
 * @since 0.1.0
 * @category report
 */
export const resultFromEvents = (text: string, source = "events.ndjson"): RunTypes.RunResult | string => {
  let started: Extract<RunTypes.RunEvent, { type: "started" }> | undefined
  let ended: Extract<RunTypes.RunEvent, { type: "ended" }> | undefined
  const deaths: Array<RunTypes.DeathTiming> = []
  const skippedFaults: Array<RunTypes.SkippedFault> = []
  const alerts: Array<Alerts.Alert> = []
  const epochs: Array<RunTypes.RunResult["epochs"][number]> = []
  const lines = text.split("\n")
  for (let index = 0; index < lines.length; index++) {
    const line = (lines[index] ?? "").trim()
    if (line === "") continue
    let event: unknown
    try {
      event = JSON.parse(line)
    } catch {
      return `${source} line ${index + 1} is not JSON`
    }
    if (!isRecord(event) || typeof event.type !== "string" || typeof event.ms !== "number") {
      return `${source} line ${index + 1} is not a run event`
    }
    const e = event as RunTypes.RunEvent
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
      case "alert":
        alerts.push(e.alert)
        break
      case "epoch":
        epochs.push({ ...e.summary, accuracy: e.accuracy })
        break
      case "ended":
        ended = e
        break
      default:
        break
    }
  }
  if (started === undefined) return `${source} has no started event`
  if (ended === undefined) return `${source} has no ended event: the run did not finish`
  return {
    runId: started.runId,
    runDir: started.runDir,
    outcome: ended.outcome,
    deaths,
    skippedFaults,
    alerts,
    epochs,
    finalAccuracy: epochs.at(-1)?.accuracy,
    durationMs: ended.ms,
    exitCode: exitCodeOf(ended.outcome, epochs)
  }
}

/**
 * Reads a finished run from its folder: `summary.json` (the `RunResult`) when present, else
 * `events.ndjson` through `resultFromEvents`. Returns an error line when the folder or both files
 * are missing, or a file is not what a run writes.
 *
 * @since 0.1.0
 * @category report
 */
export const readRun = async (runDir: string): Promise<RunTypes.RunResult | string> => {
  const dir = runDir.replace(/(.)\/+$/, "$1")
  if (!(await Files.exists(dir))) return `no run directory at ${runDir}${runDir.includes("/") ? "" : ` (runs are written to runs/<runId> unless --out says otherwise)`}`
  const summaryPath = `${dir}/summary.json`
  if (await Files.exists(summaryPath)) {
    let value: unknown
    try {
      value = JSON.parse(await readText(summaryPath))
    } catch (error) {
      return `cannot read ${summaryPath}: ${firstLine(error)}`
    }
    return looksLikeResult(value) ? value : `${summaryPath} is not a Cohort run summary`
  }
  const eventsPath = `${dir}/events.ndjson`
  if (await Files.exists(eventsPath)) {
    let text: string
    try {
      text = await readText(eventsPath)
    } catch (error) {
      return `cannot read ${eventsPath}: ${firstLine(error)}`
    }
    return resultFromEvents(text, eventsPath)
  }
  return `${runDir} has neither summary.json nor events.ndjson; is it a run directory?`
}

