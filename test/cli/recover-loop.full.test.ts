// A served run whose coordinator is SIGKILLed again and again at random instants (docs/recovery.md):
// `cohort serve` with 2 joined ranks over 127.0.0.1 is killed at a random instant after each
// (re)start formed, the second time at an epoch's end (its `closed` line in the recovery log, its
// audit line perhaps not yet in the journal), up to three times, and started again each time within 2 s, alternately with
// `--recover` and with its first command (it takes the run over by itself). The run completes in
// its one run directory with every epoch audited exactly once and clean, both ranks exit 0, and
// each takeover is in the journal. The instants are printed, for a rerun.
// On Node, Bun and Deno: the CLI spawned is the runtime running the test.
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { resultFromEvents } from "../../actors/record/read-run.ts"
import { type CliProcess, freePort, startCli, waitFor } from "../cli-process.ts"

// 40 ms a batch while the hold file exists (the kills), then 4 ms: nothing is done to the run
// once the last coordinator is started.
const slow = fileURLToPath(new URL("../fixtures/trainers/steady-held.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-recover-loop-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const tokenFile = join(dir, "token")
writeFileSync(tokenFile, "recover-loop-token-0123456789abcdef\n")

const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
})
const holdFile = join(dir, "hold")
writeFileSync(holdFile, "")
const cohort = (args: ReadonlyArray<string>): CliProcess =>
  startCli(args, { cwd: dir, env: { COHORT_TEST_HOLD: holdFile }, started: children })
const runDirOf = (): string => join("runs", readdirSync(join(dir, "runs"))[0]!)
const readIfAny = (path: string): string => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return ""
  }
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("a coordinator killed at random instants", () => {
  it("is taken over each time; the run completes with every epoch audited exactly once", async () => {
    const port = await freePort()
    const first = ["serve", "--trainer", slow, "--world-size", "2", "--epochs", "3", "--listen", `127.0.0.1:${port}`]
    const common = ["--token-file", tokenFile, "--out", "runs", "--json", "--recovery-window-ms", "30000"]
    let serve = cohort([...first, ...common])
    const ranks = [0, 1].map((rank) =>
      cohort([
        "join",
        `ws://127.0.0.1:${port}/`,
        "--trainer",
        slow,
        "--token-file",
        tokenFile,
        "--rank",
        String(rank),
        "--save-dir",
        "save"
      ])
    )
    const instants: Array<number> = []
    let closedAtKill: number | undefined
    let ended = false
    void serve.exit.then(() => (ended = true))
    for (let kill = 0; kill < 3; kill++) {
      const current = serve
      await waitFor(() => /formed: /.test(current.err()) || ended, 90_000, `coordinator ${kill} formed`)
      if (kill === 1) {
        // At an epoch's end: its `closed` line is in the recovery log, its audit line may not be
        // in the journal yet (it waits for the epoch's model); the takeover writes it if not.
        const closedNow = () => (readIfAny(join(dir, runDirOf(), "recovery", "log.ndjson")).match(/"type":"closed"/g) ?? []).length
        const before = closedNow()
        // Polled every millisecond: the audit line follows within tens of ms.
        for (const until = Date.now() + 90_000; closedNow() === before && !ended && Date.now() < until; ) await sleep(1)
        instants.push(-1)
        closedAtKill = closedNow()
      } else {
        const afterMs = 300 + Math.floor(Math.random() * 2200)
        instants.push(afterMs)
        await sleep(afterMs)
      }
      if (current.child.exitCode !== null) break // the run completed first
      current.child.kill("SIGKILL")
      await current.exit
      await sleep(Math.floor(Math.random() * 1500))
      serve = cohort(kill % 2 === 0 ? ["serve", "--recover", runDirOf(), ...common] : [...first, ...common])
      ended = false
      const started = serve
      void started.exit.then(() => (ended = true))
    }
    unlinkSync(holdFile)
    console.log(
      `[recover loop] killed ${instants.map((ms) => (ms < 0 ? "at an epoch's end" : `${ms} ms`)).join(", ")} after each formation`
    )
    expect(await serve.exit, serve.err()).toBe(0)
    expect(await Promise.all(ranks.map((r) => r.exit))).toEqual([0, 0])
    const runDir = join(dir, "runs", readdirSync(join(dir, "runs"))[0]!)
    const events = readFileSync(join(runDir, "events.ndjson"), "utf8")
      .split("\n")
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as { type: string; [key: string]: unknown }]
        } catch {
          return []
        }
      })
    const audits = events
      .filter((e) => e.type === "epoch")
      .map((e) => e.summary as { epoch: number; samplesCommitted: number; lost: number; duplicated: number })
      .map((s) => [s.epoch, s.samplesCommitted, s.lost, s.duplicated])
    expect(audits.sort()).toEqual([
      [0, 4800, 0, 0],
      [1, 4800, 0, 0],
      [2, 4800, 0, 0]
    ])
    // The takeover after the kill at an epoch's end goes on in the next epoch: nothing ended is trained again.
    const lost = events.filter((e) => e.type === "coordinatorLost")
    if (closedAtKill !== undefined && lost.length >= 2 && closedAtKill < 3) expect(lost[1]!.epoch).toBe(closedAtKill)
    const losses = lost.length
    expect(losses).toBeGreaterThanOrEqual(1)
    expect(events.filter((e) => e.type === "recovered").length).toBe(losses)
    expect(events.filter((e) => e.type === "death")).toEqual([])
    const summary = JSON.parse(readFileSync(join(runDir, "summary.json"), "utf8")) as {
      epochs: ReadonlyArray<unknown>
      recoveries: ReadonlyArray<unknown>
      traffic?: unknown
    }
    expect(summary.epochs.length).toBe(3)
    expect(summary.recoveries.length).toBe(losses)
    // Every coordinator's rounds count in summary.json's traffic, as `cohort report` sums the journal's.
    const rebuilt = resultFromEvents(readFileSync(join(runDir, "events.ndjson"), "utf8"))
    expect(typeof rebuilt === "string" ? rebuilt : rebuilt.traffic).toEqual(summary.traffic)
    expect(summary.traffic).toBeDefined()
  }, 300_000)
})
