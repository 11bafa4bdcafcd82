// The run page (docs/dashboard.md) in headless Chromium (Debian's `chromium`, driven by
// playwright-core): `cohort report --html` of an interrupted run and of a demo run opens with no
// console error and shows every epoch's audit and every death with its three marks; a live demo
// with `--dashboard --dashboard-faults` shows four ranks training, rank 2 killed from its button
// and shown dead within 2 s, a page opened after the death showing its samples, and its round
// and loss charts keep up (a point per round so far); a screenshot is saved in the run
// directory and is not blank.
//
// Node only (vitest.config.ts leaves test/browser out of the Bun and Deno passes; the page's model
// and HTML are tested under all three in test/dashboard/). `.ci/run` installs Chromium with
// apt-get when it is missing; without it this test fails, it never skips.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import type { Browser, Page } from "playwright-core"
import { afterAll, describe, expect, it } from "vitest"
import * as Coordinator from "../../src/core/coordinator.ts"
import { killStarted, launchChromium, requireChromium, start, until } from "./cohort-cli.ts"

const scratch = mkdtempSync(join(tmpdir(), "cohort-run-page-test-"))
let browser: Browser | undefined

afterAll(async () => {
  await browser?.close()
  killStarted()
  rmSync(scratch, { recursive: true, force: true })
})

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
  return readFileSync(join(dir, "events.ndjson"), "utf8")
    .split("\n")
    .slice(0, -1)
    .map((line) => JSON.parse(line) as JournalEvent)
}

/** A page that records every console error, page error and failed request. */
const watchedPage = async (errors: Array<string>): Promise<Page> => {
  browser ??= await launchChromium()
  const page = await browser.newPage({ viewport: { width: 1200, height: 1800 } })
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`console: ${message.text()}`)
  })
  page.on("pageerror", (error) => errors.push(`page: ${error.message}`))
  // A live page closes its event stream once the run ended: that request ends aborted, as it should.
  page.on("requestfailed", (request) => {
    const aborted = request.failure()?.errorText === "net::ERR_ABORTED" && new URL(request.url()).pathname === "/events"
    if (!aborted) errors.push(`request failed: ${request.url()}: ${request.failure()?.errorText}`)
  })
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
    losses: document.getElementById("loss-chart")?.dataset.points,
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
  events
    .filter((e) => e.type === "epoch")
    .map((e) => {
      const s = e.summary as {
        epoch: number
        samplesCommitted: number
        epochSamples: number
        lost: number
        duplicated: number
        deaths: ReadonlyArray<unknown>
      }
      return [
        String(s.epoch),
        `${s.samplesCommitted.toLocaleString("en")} of ${s.epochSamples.toLocaleString("en")}`,
        String(s.lost),
        String(s.duplicated),
        String(s.deaths.length)
      ]
    })

/** How many colours a PNG shows (drawn into a canvas in a blank page): a blank screenshot has one. */
const distinctColors = async (png: string): Promise<number> => {
  const page = await browser!.newPage()
  const data = readFileSync(png).toString("base64")
  const count = await page.evaluate(async (base64) => {
    const image = new Image()
    image.src = `data:image/png;base64,${base64}`
    await image.decode()
    const canvas = document.createElement("canvas")
    canvas.width = image.width
    canvas.height = image.height
    const context = canvas.getContext("2d")!
    context.drawImage(image, 0, 0)
    const pixels = context.getImageData(0, 0, image.width, image.height).data
    const colours = new Set<number>()
    for (let i = 0; i < pixels.length; i += 4) colours.add((pixels[i]! << 16) | (pixels[i + 1]! << 8) | pixels[i + 2]!)
    return colours.size
  }, data)
  await page.close()
  return count
}

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
    expect(shown.losses).toBe(String(events.filter((e) => e.type === "round" && typeof e.loss === "number").length))
    // The averaging traffic's chart is the fifth; rank 1's departure adds the detection and recovery chart.
    expect(shown.canvases).toBe(6)
    expect(await page.textContent("#outcome")).toMatch(/^interrupted \(GracefulShutdown\): .*; exit code 130$/)
    expect(errors).toEqual([])
    await page.close()
  }, 240_000)

  it("the page of a finished run with no deaths says 'no deaths' and the run's duration, and its chart legends show values only for a hovered point", async () => {
    requireChromium()
    const dir = join(scratch, "no-deaths")
    mkdirSync(dir, { recursive: true })
    const summary = (epoch: number) => ({
      epoch,
      epochSamples: 100,
      samplesCommitted: 100,
      lost: 0,
      duplicated: 0,
      deaths: [],
      exits: [],
      startedAtMs: epoch * 1000,
      endedAtMs: epoch * 1000 + 900
    })
    const events: ReadonlyArray<JournalEvent> = [
      {
        type: "started",
        ms: 0,
        runId: "nd1",
        runDir: dir,
        worldSize: 2,
        epochs: 2,
        epochSamples: 100,
        mode: "static",
        transport: "worker"
      },
      { type: "formed", ms: 100, worldSize: 2 },
      ...[0, 1, 2, 3].map((round) => ({
        type: "round",
        ms: 300 + round * 400,
        epoch: round >> 1,
        round,
        contributors: 2,
        openMs: 5,
        loss: 1 - round / 10,
        // A ring over direct links: the coordinator's small frames, and the steps rank to rank.
        receivedBytes: 60,
        sentBytes: 0,
        linkSentBytes: 196_896,
        linkReceivedBytes: 196_896
      })),
      { type: "epoch", ms: 800, summary: summary(0) },
      { type: "eval", ms: 850, epoch: 0, rank: 0, accuracy: 0.5, loss: 1.2 },
      { type: "epoch", ms: 1700, summary: summary(1) },
      { type: "eval", ms: 1750, epoch: 1, rank: 0, accuracy: 0.6, loss: 1.1 },
      {
        type: "ended",
        ms: 13_412,
        exitCode: 0,
        outcome: {
          status: "completed",
          detail: "all epochs done",
          endedAtMs: 1700,
          epochsCompleted: 2,
          failures: [],
          exits: [0, 1],
          deaths: [],
          epochs: [summary(0), summary(1)],
          evals: [
            { epoch: 0, rank: 0, accuracy: 0.5, loss: 1.2 },
            { epoch: 1, rank: 0, accuracy: 0.6, loss: 1.1 }
          ],
          counters: Coordinator.zeroCounters()
        }
      }
    ]
    writeFileSync(join(dir, "events.ndjson"), events.map((e) => `${JSON.stringify(e)}\n`).join(""))
    const file = await reportHtml(dir)
    const errors: Array<string> = []
    const page = await watchedPage(errors)
    await page.goto(pathToFileURL(file).href)
    await page.waitForFunction(() => document.body.dataset.state !== "loading", undefined, { timeout: 30_000 })
    const shown = () =>
      page.evaluate(() => ({
        clock: document.getElementById("clock")!.textContent,
        noDeaths: document.getElementById("deaths-none")!.checkVisibility()
          ? document.getElementById("deaths-none")!.textContent
          : undefined,
        deathsTable: document.getElementById("deaths")!.closest("table")!.checkVisibility(),
        trafficPoints: document.getElementById("bytes-chart")?.dataset.points,
        // Each live legend's visible entries, as `label` or `label: value`.
        legends: [...document.querySelectorAll<HTMLElement>(".u-legend.u-live")].map((legend) =>
          [...legend.querySelectorAll<HTMLElement>("tr.u-series")]
            .filter((tr) => tr.checkVisibility())
            .map((tr) =>
              [...tr.querySelectorAll<HTMLElement>(".u-label, .u-value")]
                .filter((cell) => cell.checkVisibility())
                .map((cell) => cell.textContent)
                .join(": ")
            )
        )
      }))
    const idle = await shown()
    expect({ ...idle, legends: undefined }).toEqual({
      clock: "the run took 13.4 s",
      noDeaths: "no deaths",
      deathsTable: false,
      trafficPoints: "4",
      legends: undefined
    })
    // Nothing hovered: the series' names, no x entry and no values.
    expect(idle.legends).toEqual([
      ["round time (ms since the previous round)", "open (ms after its first contribution)"],
      ["received (contributions)", "sent (updates)", "direct links: sent by the ranks", "direct links: received by the ranks"],
      ["training loss (contributors' mean)"],
      ["test accuracy", "test loss"]
    ])
    // A point hovered: its round and values.
    const box = (await page.locator("#rounds-chart .u-over").boundingBox())!
    await page.mouse.move(box.x + box.width - 2, box.y + box.height / 2)
    await page.waitForFunction(() => !document.querySelector("#rounds-chart .u-legend")!.classList.contains("idle"), undefined, {
      timeout: 10_000
    })
    expect((await shown()).legends[0]).toEqual([
      "round: 3",
      "round time (ms since the previous round): 400",
      "open (ms after its first contribution): 5"
    ])
    expect(errors).toEqual([])
    await page.close()
  }, 120_000)

  it("a live demo with --dashboard: four ranks training, rank 2 killed from its button shown dead (supervisor) within 2 s with three marks, a round chart point per round; then its report", async () => {
    requireChromium()
    const out = join(scratch, "live")
    const run = start(["demo", "--epochs", "2", "--no-kill", "--dashboard", "--dashboard-faults", "--out", out])
    const url = await until(
      "the dashboard's address",
      120_000,
      () => /cohort: dashboard: (http:\/\/127\.0\.0\.1:\d+\/) \(with kill buttons\)/.exec(run.output())?.[1],
      run
    )

    const errors: Array<string> = []
    const page = await watchedPage(errors)
    await page.goto(url)
    await page.waitForFunction(
      () =>
        [...document.querySelectorAll<HTMLElement>("#ranks tr")].filter((tr) => tr.dataset.status === "training").length === 4 &&
        document.body.dataset.state === "live",
      undefined,
      { timeout: 120_000, polling: 50 }
    )
    // A request without the page's key cannot kill a rank.
    expect((await fetch(`${url}kill?rank=1`, { method: "POST" })).status).toBe(403)

    // Rank 2's kill button, once the ranks are past their first round.
    await until("a first averaging round", 120_000, () => (journal(out).some((e) => e.type === "round") ? true : undefined), run)
    const clickedMs = Date.now()
    await page.click("#ranks tr[data-rank='2'] button")
    await page.waitForFunction(
      () => document.querySelector<HTMLElement>("#ranks tr[data-rank='2']")?.dataset.status === "dead",
      undefined,
      { timeout: 30_000, polling: 20 }
    )
    const shownAfterMs = Date.now() - clickedMs
    const marks = journal(out).find((e) => e.type === "death")?.death as
      | { faultMs: number; declaredMs: number; recoveredMs: number }
      | undefined
    expect(shownAfterMs, `rank 2 shown dead ${shownAfterMs} ms after the kill (journal: ${JSON.stringify(marks)})`).toBeLessThan(2000)
    expect(await page.getAttribute("#ranks tr[data-rank='2']", "data-detector")).toBe("supervisor")
    await page.waitForFunction(() => document.querySelector<HTMLElement>("#deaths tr")?.dataset.marks === "3", undefined, {
      timeout: 10_000
    })
    // A page opened after the death shows rank 2's samples as the first page does (its replay
    // holds the dead rank's last progress), not an empty row.
    await new Promise((resolve) => setTimeout(resolve, 1500))
    const samplesOf = (on: Page) => on.evaluate(() => document.querySelectorAll("#ranks tr[data-rank='2'] td")[3]?.textContent)
    const deadSamples = await samplesOf(page)
    expect(deadSamples).toMatch(/^[1-9][\d,]*$/)
    const late = await watchedPage(errors)
    await late.goto(url)
    await late.waitForFunction(
      (shown) =>
        document.querySelector<HTMLElement>("#ranks tr[data-rank='2']")?.dataset.status === "dead" &&
        document.querySelectorAll("#ranks tr[data-rank='2'] td")[3]?.textContent === shown,
      deadSamples,
      { timeout: 10_000, polling: 50 }
    )
    await late.close()
    // The round and loss charts keep up: at least one point per round the journal held a moment
    // ago (every round of the demo carries its contributors' training loss).
    const roundsSoFar = journal(out).filter((e) => e.type === "round")
    expect(roundsSoFar.every((e) => typeof e.loss === "number" && e.loss > 0)).toBe(true)
    await page.waitForFunction(
      (n) =>
        Number(document.getElementById("rounds-chart")?.dataset.points) >= n &&
        Number(document.getElementById("loss-chart")?.dataset.points) >= n,
      roundsSoFar.length,
      { timeout: 5_000, polling: 50 }
    )

    const ended = await run.exited
    expect(ended.code, ended.output).toBe(0)
    const runDir = runDirOf(out)!
    const events = journal(out)
    expect(events.filter((e) => e.type === "fault")).toEqual([{ type: "fault", ms: expect.any(Number), rank: 2, fault: "kill" }])
    await page.waitForFunction(() => document.body.dataset.state === "ended", undefined, { timeout: 10_000 })
    const live = await shownOn(page)
    expect(live.audits.map((row) => row.slice(0, 5))).toEqual(auditsOf(events))
    expect(live.deaths).toEqual([{ rank: "2", marks: "3", detector: "supervisor" }])
    expect(live.rounds).toBe(String(events.filter((e) => e.type === "round").length))
    expect(live.losses).toBe(live.rounds)
    const screenshot = join(runDir, "dashboard.png")
    await page.screenshot({ path: screenshot, fullPage: true })
    expect(errors).toEqual([])
    await page.close()
    expect(await distinctColors(screenshot)).toBeGreaterThan(20)

    // The same run as a report file.
    const file = await reportHtml(runDir)
    const reportPage = await watchedPage(errors)
    await reportPage.goto(pathToFileURL(file).href)
    await reportPage.waitForFunction(() => document.body.dataset.state !== "loading", undefined, { timeout: 30_000 })
    const shown = await shownOn(reportPage)
    expect(shown.state).toBe("ended")
    expect(shown.audits.map((row) => row.slice(0, 5))).toEqual(auditsOf(events))
    expect(shown.audits.map((row) => row[6])).toEqual(["passed", "passed"])
    expect(shown.deaths).toEqual([{ rank: "2", marks: "3", detector: "supervisor" }])
    expect(shown.rounds).toBe(String(events.filter((e) => e.type === "round").length))
    expect(shown.losses).toBe(shown.rounds)
    expect(shown.accuracy).toBe("2")
    expect(await reportPage.textContent("#outcome")).toMatch(/^completed: .*; exit code 0$/)
    expect(errors).toEqual([])
    await reportPage.close()
  }, 300_000)
})
