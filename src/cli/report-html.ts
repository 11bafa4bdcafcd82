/**
 * `cohort report --html RUN_DIR [--out FILE]`: the run page (`src/dashboard/`) as one
 * self-contained HTML file, built from the run's journal (`events.ndjson`) of a finished,
 * interrupted, cut-off or resumed run. The file needs no network to open: its style, script
 * (uPlot included) and the journal events it shows are inline.
 *
 * @since 0.1.0
 */
import * as Build from "../dashboard/build.ts"
import * as Model from "../dashboard/model.ts"
import * as Files from "../platform/files.ts"
import { firstLine } from "./parse.ts"
import { printable, printableDeep, readText, resultFromEvents, type RunFailure } from "../../actors/read-run.ts"
import * as RunSchema from "../../actors/run-schema.ts"

/**
 * The events of a journal's text that the page shows (`Model.isShown`), each checked against
 * `run-schema.ts` and with every string made printable, in order. As `cohort report` reads a
 * journal: a last line cut short (no line end) is left out; lines of unknown event types are
 * skipped. Returns an error line when a whole line is not JSON or not a valid run event, or there
 * is no `started` event.
 *
 * @since 0.1.0
 * @category report
 */
export const journalEvents = (text: string, source: string): ReadonlyArray<unknown> | string => {
  const events: Array<unknown> = []
  const lines = text.split("\n")
  let started = false
  for (let index = 0; index < lines.length; index++) {
    const line = (lines[index] ?? "").trim()
    if (line === "") continue
    const whole = index < lines.length - 1
    let event: unknown
    try {
      event = JSON.parse(line)
    } catch {
      if (!whole) break
      return `${source} line ${index + 1} is not JSON`
    }
    const type = typeof event === "object" && event !== null ? (event as { readonly type?: unknown }).type : undefined
    if (typeof type !== "string") {
      if (!whole) break
      return `${source} line ${index + 1} is not a run event`
    }
    if (!RunSchema.eventTypes.has(type)) continue
    const checked = RunSchema.validateRunEvent(event)
    if ("bad" in checked) {
      if (!whole) break
      return `${source} line ${index + 1} is not a valid ${type} event: ${checked.bad}`
    }
    if (type === "started") started = true
    if (Model.isShown(event)) events.push(printableDeep(event))
  }
  return started ? events : `${source} has no started event`
}

/**
 * Writes the report page of the run in `runDir` to `outFile` (default `<runDir>/report.html`)
 * and returns the path written, with `failed` when the journal ends with a `failed` event (the run
 * failed, at formation say: the command says so as the text report does); or an error line
 * (printable): no run folder, no readable
 * `events.ndjson` (a regular file of at most `fileBytesMax` bytes), a bad journal line, a page
 * that does not build, a file that cannot be written.
 *
 * @since 0.1.0
 * @category report
 */
export const writeReport = async (
  runDir: string,
  outFile: string | undefined,
  fileBytesMax: number
): Promise<{ readonly file: string; readonly bytes: number; readonly failed?: RunFailure } | string> => {
  const dir = runDir.replace(/(.)\/+$/, "$1")
  const dirKind = await Files.kind(dir)
  if (dirKind === "missing") return printable(`no run directory at ${runDir}`)
  if (dirKind !== "directory") return printable(`${runDir} is not a folder; report reads a run directory`)
  const journal = `${dir}/events.ndjson`
  if ((await Files.kind(journal)) === "missing") return printable(`${runDir} has no events.ndjson; report --html draws the run from its journal`)
  const read = await readText(journal, fileBytesMax)
  if (typeof read === "string") return printable(read)
  const events = journalEvents(read.text, journal)
  if (typeof events === "string") return printable(events)
  const started = events.find((event) => (event as { readonly type?: unknown }).type === "started") as { readonly runId?: unknown }
  const title = `cohort run ${typeof started.runId === "string" ? started.runId : ""}`.trim()
  let html: string
  try {
    html = await Build.pageHtml({ mode: "static", title, events })
  } catch (error) {
    return printable(`the report page did not build: ${firstLine(error)}`)
  }
  const file = outFile ?? `${dir}/report.html`
  try {
    await Files.writeFileAtomic(file, html)
  } catch (error) {
    return printable(`cannot write ${file}: ${firstLine(error)}`)
  }
  const bytes = new TextEncoder().encode(html).length
  // The page has no place for a run that failed: the command's line and exit code say it.
  const result = resultFromEvents(read.text, journal)
  const failed = typeof result !== "string" && result.outcome === undefined ? result.failed : undefined
  return failed === undefined ? { file, bytes } : { file, bytes, failed: printableDeep(failed) as RunFailure }
}
