// A browser tab as a rank, on a real network path (docs/testing.md): headless
// Chromium (Debian's `chromium` package, driven by playwright-core) opens the page that
// `cohort serve --serve-browser` serves, beside two `cohort join` rank processes. The tab trains,
// is closed mid-epoch, is declared dead (`disconnected (close code 1001)`), the two others take
// its remainder, and every epoch's audit is clean; the page logs no error.
//
// Node is enough for this test: it drives Chromium from the test process (vitest.config.ts leaves
// test/browser out of the Bun and Deno passes; the page's HTTP side is tested under all three
// runtimes in test/transport/web-socket-http.test.ts). `.ci/run` installs Chromium with apt-get
// when it is missing; without it this test fails, it never skips.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Browser } from "playwright-core"
import { afterAll, describe, expect, it } from "vitest"
import { killStarted, launchChromium, requireChromium, root, start, until } from "./cohort-cli.ts"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as BrowserRank from "../../src/cli/bundle.ts"

const trainer = join(root, "src/train/mnist-trainer.ts")
const scratch = mkdtempSync(join(tmpdir(), "cohort-browser-test-"))
let browser: Browser | undefined

afterAll(async () => {
  await browser?.close()
  killStarted()
  rmSync(scratch, { recursive: true, force: true })
})

/** The run's journal (`<out>/<runId>/events.ndjson`), complete lines only. */
const journal = (out: string): ReadonlyArray<RunTypes.RunEvent> => {
  if (!existsSync(out)) return []
  const runs = readdirSync(out)
  if (runs.length !== 1) return []
  const path = join(out, runs[0]!, "events.ndjson")
  if (!existsSync(path)) return []
  return readFileSync(path, "utf8")
    .split("\n")
    .slice(0, -1)
    .map((line) => JSON.parse(line) as RunTypes.RunEvent)
}

describe("a browser tab as a rank (headless Chromium)", () => {
  it("trains beside two cohort join ranks, is closed mid-epoch, is declared dead, and every audit is clean", async () => {
    requireChromium()
    const out = join(scratch, "runs")
    const tokenFile = join(scratch, "token")
    const token = "browser-test-token-5d0c7e2a91"
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 })

    const serve = start([
      "serve",
      "--trainer",
      trainer,
      "--world-size",
      "3",
      "--epochs",
      "1",
      "--listen",
      "127.0.0.1:0",
      "--token-file",
      tokenFile,
      "--serve-browser",
      "--out",
      out
    ])
    const context = () => `cohort serve printed:\n${serve.output()}`
    const listening = await until(
      "cohort serve to listen",
      60_000,
      () => {
        const event = journal(out).find((e) => e.type === "listening")
        return event?.type === "listening" ? event : undefined
      },
      serve
    )
    const port = Number(new URL(listening.url).port)

    // Two `cohort join` ranks first, so that the tab's `auto` rank is the last one: 2.
    for (const rank of ["0", "1"]) {
      start(["join", listening.url, "--trainer", trainer, "--token-file", tokenFile, "--rank", rank, "--save-dir", join(scratch, "save")])
    }
    await until(
      "both cohort join ranks to join",
      60_000,
      () => (journal(out).filter((e) => e.type === "joined").length === 2 ? true : undefined),
      serve
    )

    browser = await launchChromium()
    const pageErrors: Array<string> = []
    const newPage = async (name: string) => {
      const page = await browser!.newPage()
      page.on("console", (message) => {
        if (message.type() === "error") pageErrors.push(`${name} console: ${message.text()}`)
      })
      page.on("pageerror", (error) => pageErrors.push(`${name} page: ${error.message}`))
      page.on("requestfailed", (request) => pageErrors.push(`${name} request failed: ${request.url()}`))
      return page
    }

    // A tab with a wrong token is refused, says why in one line, and logs no error.
    const wrong = await newPage("wrong-token tab")
    await wrong.goto(BrowserRank.pageUrl("127.0.0.1", port, "not-the-run-token-0123"))
    await wrong.waitForFunction(() => document.body.dataset.state === "ended", undefined, { timeout: 60_000, polling: 50 })
    expect(await wrong.textContent("#state")).toBe("stopped: the coordinator refused the join: wrong token (close code 4001)")
    await wrong.close()

    const page = await newPage("tab")
    await page.goto(BrowserRank.pageUrl("127.0.0.1", port, token))
    // The token leaves the address bar once read.
    expect(page.url()).toBe(`http://127.0.0.1:${port}/`)

    // The tab trains past its first contribution (every `averageEverySteps` 32 batches of 32
    // samples: 1024), which it sends and then waits for the round's Update: once its page shows
    // more than 1024 samples of epoch 0, the coordinator has committed 1024 of them.
    await page.waitForFunction(
      () =>
        document.body.dataset.state === "training" &&
        document.getElementById("epoch")?.textContent === "0" &&
        Number.parseInt((document.getElementById("samples")?.textContent ?? "").replace(/,/g, ""), 10) > 1024,
      undefined,
      { timeout: 120_000, polling: 50 }
    )
    const shown = await page.evaluate(() => ({
      rank: document.getElementById("rank")?.textContent,
      epoch: document.getElementById("epoch")?.textContent
    }))
    expect(shown).toEqual({ rank: "2", epoch: "0" })

    expect(pageErrors).toEqual([])
    await page.close()

    const ended = await serve.exited
    if (process.env.COHORT_TEST_VERBOSE === "1") console.log(ended.output)
    expect(ended.code, context()).toBe(0)
    const runs = readdirSync(out)
    const result = JSON.parse(readFileSync(join(out, runs[0]!, "summary.json"), "utf8")) as RunTypes.RunResult
    // Declared dead once, by its socket's close, in epoch 0, mid-epoch: of its partition of
    // 2666 samples (8000 over 3 ranks; ranks 0 and 1 have 2667), whole contributions of 1024 were
    // committed and the rest moved to the survivors.
    expect(result.deaths.map((d) => [d.rank, d.epoch, d.detector, d.cause, d.redistributed])).toEqual([
      [2, 0, "supervisor", "disconnected (close code 1001)", true]
    ])
    const committedByTab = 2666 - result.deaths[0]!.remainderSamples
    expect([committedByTab % 1024, committedByTab >= 1024, committedByTab < 2666]).toEqual([0, true, true])
    // Every sample trained exactly once: the tab's committed part, and the rest by the survivors.
    expect(result.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([[0, 8000, 0, 0]])
    expect(result.outcome.status).toBe("completed")
    expect(result.refusals).toEqual({ "4001": 1 })
    expect(pageErrors).toEqual([])
  }, 240_000)

  it("a tab whose coordinator is killed says so on its page, with the save it could not make", async () => {
    requireChromium()
    const out = join(scratch, "runs-killed")
    const tokenFile = join(scratch, "token-killed")
    const token = "browser-test-token-killed-7e41"
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 })
    const serve = start([
      "serve",
      "--trainer",
      trainer,
      "--world-size",
      "1",
      "--epochs",
      "3",
      "--listen",
      "127.0.0.1:0",
      "--token-file",
      tokenFile,
      "--serve-browser",
      "--out",
      out
    ])
    const listening = await until(
      "cohort serve to listen",
      60_000,
      () => {
        const event = journal(out).find((e) => e.type === "listening")
        return event?.type === "listening" ? event : undefined
      },
      serve
    )
    browser ??= await launchChromium()
    const page = await browser.newPage()
    const pageErrors: Array<string> = []
    page.on("pageerror", (error) => pageErrors.push(`page: ${error.message}`))
    await page.goto(BrowserRank.pageUrl("127.0.0.1", Number(new URL(listening.url).port), token))
    await page.waitForFunction(() => document.body.dataset.state === "training", undefined, { timeout: 120_000, polling: 50 })
    serve.child.kill("SIGKILL")
    await page.waitForFunction(() => document.body.dataset.state === "ended", undefined, { timeout: 60_000, polling: 50 })
    expect(await page.textContent("#state")).toBe(
      "stopped: cohort rank 0: the coordinator is gone (channel closed); the emergency save to save/rank0 failed: " +
        "a browser rank has no file system: cannot create save/rank0"
    )
    expect(pageErrors).toEqual([])
    await page.close()
  }, 240_000)
})
