// Churn at edge scale, end to end (docs/churn.md): 64 served ranks from two processes of
// `SocketRanks.joinRanks` (what `cohort join --ranks 32` runs, here told by the churn bench when
// to leave and join), 30% of the live ranks leaving after rounds (graceful, crash, silent) and as
// many joining, for 2 epochs over WebSocket on loopback. Exact audits, a cost line for every rank
// made to leave (of its kind) and for joiners that trained; then `cohort report --html` of the
// run in headless Chromium shows them: a Departures row per cost line, the detection and recovery
// chart, a Joins row per joiner. Results only, never speed. Node only (test/browser).
import { rmSync } from "node:fs"
import { dirname, join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Churn from "../../bench/churn.ts"
import { expectEveryDepartureCosted } from "../churn-checks.ts"
import { killStarted, launchChromium, requireChromium, start } from "./cohort-cli.ts"

let scenarioDir: string | undefined

afterAll(() => {
  killStarted()
  if (scenarioDir !== undefined) rmSync(scenarioDir, { recursive: true, force: true })
})

describe("churn at 64 ranks, and its report page in Chromium", () => {
  it("64 ranks from two processes with churn for 2 epochs: exact audits, every departure has its cost line of its kind, and the report page shows them", async () => {
    requireChromium()
    const row = await Churn.measure({
      ranks: 64,
      processes: 2,
      backend: "cpu",
      mode: "progressive",
      epochs: 2,
      fraction: 0.3,
      params: 1000,
      batchMs: 5,
      heartbeatTimeoutMs: 2000,
      keep: true
    })
    // The scenario's folder holds the run's: <dir>/runs/<runId>.
    scenarioDir = dirname(dirname(row.runDir))
    expectEveryDepartureCosted(row, 2, 2000)

    const report = start(["report", "--html", row.runDir])
    const done = await report.exited
    expect(done.code, done.output).toBe(0)
    const browser = await launchChromium()
    try {
      const page = await browser.newPage({ viewport: { width: 1200, height: 1800 } })
      const errors: Array<string> = []
      page.on("pageerror", (error) => errors.push(error.message))
      page.on("console", (message) => {
        if (message.type() === "error") errors.push(message.text())
      })
      await page.goto(pathToFileURL(join(row.runDir, "report.html")).href)
      await page.waitForFunction(() => document.body.dataset.state !== "loading", undefined, { timeout: 30_000 })
      const shown = await page.evaluate(() => ({
        leaves: [...document.querySelectorAll<HTMLElement>("#leaves tr")].map((tr) => [
          Number(tr.querySelector("td")?.textContent),
          tr.dataset.leaveKind
        ]),
        joins: document.querySelectorAll("#joins tr").length,
        chartPoints: Number(document.getElementById("leaves-chart")?.dataset.points),
        chartCanvas: document.querySelector("#leaves-chart canvas") !== null
      }))
      expect(shown.leaves).toEqual(row.leaves.map((l) => [l.rank, l.kind]))
      expect(shown.joins).toBe(row.joins.length)
      // A detection point per departure and a recovery point per one that moved its remainder.
      expect(shown.chartPoints).toBe(row.leaves.length + row.leaves.filter((l) => l.recoveryMs !== undefined).length)
      expect(shown.chartCanvas).toBe(true)
      expect(errors).toEqual([])
    } finally {
      await browser.close()
    }
  }, 240_000)
})
