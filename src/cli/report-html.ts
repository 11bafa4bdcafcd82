/**
 * `cohort report --html RUN_DIR [--out FILE]`: the run page (`src/dashboard/`) as one
 * self-contained HTML file, built from the run's journal (`events.ndjson`) of a finished,
 * interrupted, cut-off, failed or resumed run. The file needs no network to open: its style,
 * script (uPlot included) and the page's model, folded from the journal, are inline.
 *
 * @since 0.1.0
 */
import * as Build from "../dashboard/build.ts"
import * as Model from "../dashboard/model.ts"
import * as Files from "../platform/files.ts"
import { firstLine } from "./parse.ts"
import { printable, printableDeep, type RunFailure } from "../../actors/cli-entry.ts"
import { RunSchema } from "../../actors/cli-entry.ts"

/**
 * A journal's page, folded line by line (`push` each chunk of its text, then `finish`): every
 * whole line parsed, checked against `run-schema.ts`, made printable and folded into the page's
 * model (`Model.apply`) at once, so that no more than the model and one chunk is held. As `cohort
 * report` reads a journal: a last line cut short (no line end) is left out; lines of unknown
 * event types are skipped. `finish` gives the model and the run's `failed` event (when the
 * journal ends with one and no `ended`), or an error line: a whole line that is not JSON or not a
 * valid run event, or no `started` event.
 *
 * @since 0.1.0
 * @category report
 */
export const journalFold = (source: string) => {
  const model = Model.empty()
  let started = false
  let ended = false
  let failed: RunFailure | undefined
  let error: string | undefined
  let partial = ""
  let lineNumber = 0
  const decoder = new TextDecoder()

  const wholeLine = (text: string): void => {
    lineNumber += 1
    const line = text.trim()
    if (error !== undefined || line === "") return
    let event: unknown
    try {
      event = JSON.parse(line)
    } catch {
      error = `${source} line ${lineNumber} is not JSON`
      return
    }
    const type = typeof event === "object" && event !== null ? (event as { readonly type?: unknown }).type : undefined
    if (typeof type !== "string") {
      error = `${source} line ${lineNumber} is not a run event`
      return
    }
    if (!RunSchema.eventTypes.has(type)) return
    const checked = RunSchema.validateRunEvent(event)
    if ("bad" in checked) {
      error = `${source} line ${lineNumber} is not a valid ${type} event: ${checked.bad}`
      return
    }
    if (type === "started") started = true
    if (type === "ended") ended = true
    if (type === "failed") {
      const e = event as { readonly stage: string; readonly reason: string; readonly formed: boolean }
      failed = { stage: e.stage, reason: e.reason, formed: e.formed }
    }
    if (Model.isShown(event)) Model.apply(model, printableDeep(event))
  }

  return {
    /** Folds the whole lines of the next piece of the journal's bytes. */
    push: (bytes: Uint8Array): void => {
      const text = partial + decoder.decode(bytes, { stream: true })
      let from = 0
      for (let at = text.indexOf("\n"); at >= 0; at = text.indexOf("\n", from)) {
        wholeLine(text.slice(from, at))
        from = at + 1
      }
      partial = text.slice(from)
    },
    /** The page's model, or an error line; a last line without its line end is left out. */
    finish: (): { readonly model: Model.Model; readonly failed: RunFailure | undefined } | string => {
      if (error !== undefined) return error
      if (!started) return `${source} has no started event`
      return { model, failed: ended || failed === undefined ? undefined : (printableDeep(failed) as RunFailure) }
    }
  }
}

/**
 * The page model of a journal's whole text (`journalFold` in one piece), or an error line.
 *
 * @since 0.1.0
 * @category report
 */
export const journalModel = (
  text: string,
  source: string
): { readonly model: Model.Model; readonly failed: RunFailure | undefined } | string => {
  const fold = journalFold(source)
  fold.push(new TextEncoder().encode(text))
  return fold.finish()
}

/**
 * Writes the report page of the run in `runDir` to `outFile` (default `<runDir>/report.html`)
 * and returns the path written, with `failed` when the journal ends with a `failed` event (the run
 * failed, at formation say: the page and the command say so as the text report does); or an error
 * line (printable): no run folder, no readable `events.ndjson` (a regular file of at most
 * `fileBytesMax` bytes), a bad journal line, a page that does not build, a file that cannot be
 * written. The journal is read in pieces and folded as it is read: the memory it takes is about
 * the page's model and the page, not the journal's size.
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
  if ((await Files.kind(journal)) === "missing")
    return printable(`${runDir} has no events.ndjson; report --html draws the run from its journal`)
  const fold = journalFold(journal)
  let read: Awaited<ReturnType<typeof Files.readRegularFileChunks>>
  try {
    read = await Files.readRegularFileChunks(journal, fileBytesMax, fold.push)
  } catch (error) {
    return printable(`cannot read ${journal}: ${firstLine(error)}`)
  }
  if (read._tag === "NotRegular")
    return printable(`${journal} is not a regular file (it is a ${read.kind}); report reads only regular files`)
  if (read._tag === "TooLarge") return printable(`${journal} is larger than ${fileBytesMax} bytes (--file-bytes-max); it was not read`)
  const folded = fold.finish()
  if (typeof folded === "string") return printable(folded)
  const title = `cohort run ${folded.model.runId ?? ""}`.trim()
  let html: string
  try {
    html = await Build.pageHtml({ mode: "static", title, model: folded.model })
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
  return folded.failed === undefined ? { file, bytes } : { file, bytes, failed: folded.failed }
}
