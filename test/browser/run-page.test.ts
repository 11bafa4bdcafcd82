// The run page (issue 16, "See the run") in headless Chromium (Debian's `chromium`, driven by
// playwright-core): `cohort report --html` of an interrupted run and of a demo run opens with no
// console error and shows every epoch's audit and every death with its three marks.
//
// Node only (vitest.config.ts leaves test/browser out of the Bun and Deno passes; the page's model
// and HTML are tested under all three in test/dashboard/). `.ci/run` installs Chromium with
// apt-get when it is missing; without it this test fails, it never skips.
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, describe, expect, it } from "vitest"

const chromiumPath = "/usr/bin/chromium"
const chromiumArgs = [
  "--headless=new",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

const root = new URL("../..", import.meta.url).pathname
const cohort = join(root, "bin/cohort.mjs")
const scratch = mkdtempSync(join(tmpdir(), "cohort-run-page-test-"))
const children: Array<ChildProcess> = []
let browser: Browser | undefined

afterAll(async () => {
  await browser?.close()
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  rmSync(scratch, { recursive: true, force: true })
})

const requireChromium = (): void => {
  if (!existsSync(chromiumPath)) {
    throw new Error(`${chromiumPath} is missing: install Debian's chromium (apt-get install -y chromium), as .ci/run does`)
  }
}

/** Starts `cohort ARGS` under Node; resolves with its exit code and everything it printed. */
const start = (args: ReadonlyArray<string>) => {
  const child = spawn(process.execPath, [cohort, ...args], { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
  children.push(child)
  let output = ""
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  let ended = false
  const exited = new Promise<{ readonly code: number | null; readonly output: string }>((resolve) =>
    child.on("close", (code) => {
      ended = true
      resolve({ code, output })
    })
  )
  return { child, exited, output: () => output, ended: () => ended }
}
type Started = ReturnType<typeof start>

/** Polls `read` every 100 ms until it gives a value; fails after `timeoutMs` or once `run` ended. */
const until = async <A>(what: string, timeoutMs: number, read: () => A | undefined, run: Started): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = read()
    if (value !== undefined) return value
    const over = Date.now() > deadline ? `timed out after ${timeoutMs} ms` : run.ended() ? "the run ended" : undefined
    if (over !== undefined) throw new Error(`${over} waiting for ${what}; cohort printed:\n${run.output()}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

type JournalEvent = { readonly type: string; readonly [key: string]: unknown }

/** The only run folder under `out`, or undefined. */
const runDirOf = (out: string): string | undefined => {
  if (!existsSync(out)) return undefined
  const runs = readdirSync(out)
  return runs.length === 1 ? join(out, runs[0]!) : undefined
}

/** The run's journal, complete lines only. */
const journal = (out: string): ReadonlyArray<JournalEvent> => {
  const dir = runDirOf(out)
  if (dir === undefined || !existsSync(join(dir, "events.ndjson"))) return []
  return readFileSync(join(dir, "events.ndjson"), "utf8").split("\n").slice(0, -1).map((line) => JSON.parse(line) as JournalEvent)
}

/** A page that records every console error, page error and failed request. */
const watchedPage = async (errors: Array<string>): Promise<Page> => {
  browser ??= await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs })
  const page = await browser.newPage({ viewport: { width: 1200, height: 1800 } })
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console: ${message.text()}`)
  })
  page.on("pageerror", (error) => errors.push(`page: ${error.message}`))
  page.on("requestfailed", (request) => errors.push(`request failed: ${request.url()}`))
  return page
}

/** What the page shows: audit rows, death rows (rank, detector, marks), chart points, state. */
const shownOn = (page: Page) =>
  page.evaluate(() => ({
    state: document.body.dataset.state,
    audits: [...document.querySelectorAll("#audits tr")].map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)),
    deaths: [...document.querySelectorAll<HTMLElement>("#deaths tr")].map((tr) => ({
      rank: tr.dataset.deathRank,
      marks: tr.dataset.marks,
      detector: tr.querySelectorAll("td")[2]?.textContent
    })),
    rounds: document.getElementById("rounds-chart")?.dataset.points,
    accuracy: document.getElementById("accuracy-chart")?.dataset.points,
    canvases: document.querySelectorAll("canvas").length
  }))

/** Writes `cohort report --html` of `runDir` and checks what it printed. */
const reportHtml = async (runDir: string): Promise<string> => {
  const report = start(["report", "--html", runDir])
  const done = await report.exited
  expect(done.code, done.output).toBe(0)
  const file = join(runDir, "report.html")
  expect(done.output).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}  \\d+ KiB\\n$`))
  // Self-contained: nothing is loaded from anywhere.
  expect(readFileSync(file, "utf8")).not.toMatch(/<script[^>]* src=|<link[^>]* rel="stylesheet"/)
  return file
}

/** The audit rows the journal's epoch events call for (`committed of samples`, lost, duplicated, deaths). */
const auditsOf = (events: ReadonlyArray<JournalEvent>) =>
  events.filter((e) => e.type === "epoch").map((e) => {
    const s = e.summary as { epoch: number; samplesCommitted: number; epochSamples: number; lost: number; duplicated: number; deaths: ReadonlyArray<unknown> }
    return [String(s.epoch), `${s.samplesCommitted.toLocaleString("en")} of ${s.epochSamples.toLocaleString("en")}`, String(s.lost), String(s.duplicated), String(s.deaths.length)]
  })

describe("the run page in headless Chromium", () => {
  it("cohort report --html of an interrupted run shows its audits, its death with three marks, and no error", async () => {
    requireChromium()
    const out = join(scratch, "interrupted")
    const run = start(["demo", "--epochs", "3", "--world-size", "3", "--kill", "1@1", "--out", out])
    // Interrupted once the death is in the journal and the survivors hold the remainder.
    await until("rank 1's death", 120_000, () => (journal(out).some((e) => e.type === "death") ? true : undefined), run)
    run.child.kill("SIGINT")
    const ended = await run.exited
    expect(ended.code, ended.output).toBe(130)
    const runDir = runDirOf(out)!
    const events = journal(out)
    const file = await reportHtml(runDir)

    const errors: Array<string> = []
    const page = await watchedPage(errors)
    await page.goto(pathToFileURL(file).href)
    await page.waitForFunction(() => document.body.dataset.state !== "loading", undefined, { timeout: 30_000 })
    const shown = await shownOn(page)
    expect(shown.state).toBe("ended")
    expect(shown.audits.map((row) => row.slice(0, 5))).toEqual(auditsOf(events))
    expect(shown.deaths).toEqual([{ rank: "1", marks: "3", detector: "supervisor" }])
    expect(shown.rounds).toBe(String(events.filter((e) => e.type === "round").length))
    expect(shown.canvases).toBe(3)
    expect(await page.textContent("#outcome")).toMatch(/^interrupted \(GracefulShutdown\): .*; exit code 130$/)
    expect(errors).toEqual([])
    await page.close()
  }, 240_000)

  it("cohort report --html of a demo run shows every epoch's audit passed and the death of rank 2", async () => {
    requireChromium()
    const out = join(scratch, "demo")
    const run = start(["demo", "--epochs", "2", "--out", out])
    const ended = await run.exited
    expect(ended.code, ended.output).toBe(0)
    const runDir = runDirOf(out)!
    const events = journal(out)
    const file = await reportHtml(runDir)

    const errors: Array<string> = []
    const page = await watchedPage(errors)
    await page.goto(pathToFileURL(file).href)
    await page.waitForFunction(() => document.body.dataset.state !== "loading", undefined, { timeout: 30_000 })
    const shown = await shownOn(page)
    expect(shown.state).toBe("ended")
    expect(shown.audits.map((row) => row.slice(0, 5))).toEqual(auditsOf(events))
    expect(shown.audits.map((row) => row[6])).toEqual(["passed", "passed"])
    expect(shown.deaths).toEqual([{ rank: "2", marks: "3", detector: "supervisor" }])
    expect(shown.rounds).toBe(String(events.filter((e) => e.type === "round").length))
    expect(shown.accuracy).toBe("2")
    expect(await page.textContent("#outcome")).toMatch(/^completed: .*; exit code 0$/)
    expect(errors).toEqual([])
    await page.close()
  }, 240_000)
})
