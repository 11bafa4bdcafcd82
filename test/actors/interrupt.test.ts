// Never lose a run: the journal is streamed while the run goes on, and SIGINT, SIGTERM or an
// AbortSignal stop it cleanly: the survivors save, the journal ends `interrupted`, no process of
// the run is left. Real workers, real child processes, the real CLI under each runtime.
import { spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { cliCommand, removeDir } from "../cli-process.ts"
import { journalOf, onlyRunDir } from "../run-folders.ts"
import { expectRecordsAgree } from "../run-records.ts"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { RunEvent, RunResult } from "../../actors/record/run-types.ts"
import * as Cli from "../../src/cli/index.ts"
import * as Runtime from "../../src/platform/detect.ts"

const runtime = Runtime.detect()
const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
// 40 ms a batch: about 2 s an epoch with 3 ranks, so a signal can land part-way into epoch 1.
const steadySlow = fileURLToPath(new URL("../fixtures/trainers/steady-slow.ts", import.meta.url))
const cli = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-interrupt-"))
// A killed CLI process may still be writing its run folder: retry the removal (ENOTEMPTY).
afterAll(() => removeDir(outDir))

const cliArgs = (args: ReadonlyArray<string>): Array<string> => [...(runtime === "deno" ? ["run", "-A", cli] : [cli]), ...args]

const alive = (pid: number): boolean => spawnSync("kill", ["-0", String(pid)]).status === 0
const childrenOf = (pid: number): Array<number> =>
  (spawnSync("ps", ["-o", "pid=", "--ppid", String(pid)]).stdout?.toString() ?? "")
    .split("\n")
    .map((s) => Number(s.trim()))
    .filter((n) => n > 0)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Sums of the ranges, and whether they are sorted, disjoint and inside `[0, size)`. */
const rangesOk = (ranges: ReadonlyArray<readonly [number, number]>, size: number): boolean =>
  ranges.every(
    ([offset, length], i) => length > 0 && offset + length <= size && (i === 0 || ranges[i - 1]![0] + ranges[i - 1]![1] <= offset)
  )

interface Interrupted {
  readonly code: number | null
  readonly exitAfterMs: number
  readonly stderr: string
  readonly runDir: string
  readonly journalWhileRunning: ReadonlyArray<RunEvent>
  /** The CLI's child processes just before the signal. */
  readonly ranks: ReadonlyArray<number>
}

/**
 * Starts the CLI, waits (reading the journal like `tail -f`) until epoch 0's audit line is there
 * and a progress line shows epoch 1 at least 40% done (or, on a slow machine, epoch 1 ended), sends `signal` with kill(1) (Deno's ChildProcess.kill cannot send
 * every signal), and waits for the exit.
 */
const interruptCli = async (name: string, signal: "INT" | "TERM", transport: "process" | "worker"): Promise<Interrupted> => {
  const parent = join(outDir, name)
  const child = spawn(
    process.execPath,
    cliArgs([
      "run",
      "--trainer",
      steadySlow,
      "--transport",
      transport,
      "--world-size",
      "3",
      "--epochs",
      "400",
      "--no-kill",
      "--json",
      "--out",
      parent
    ]),
    { stdio: ["ignore", "pipe", "pipe"] }
  )
  let stderr = ""
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  child.stdout.on("data", () => undefined)
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  let exitedEarly = false
  void exited.then(() => (exitedEarly = true))
  let journal: Array<RunEvent> = []
  const until = Date.now() + 120_000
  while (Date.now() < until && !exitedEarly) {
    journal = journalOf(onlyRunDir(parent))
    const epoch1 = journal
      .filter((e) => e.type === "progress" && e.epoch === 1)
      .reduce((sum, e) => sum + (e.type === "progress" ? e.samplesDone : 0), 0)
    if (
      journal.some((e) => e.type === "epoch" && e.summary.epoch === 0) &&
      (epoch1 >= 0.4 * 1600 || journal.some((e) => e.type === "epoch" && e.summary.epoch >= 1))
    )
      break
    await sleep(20)
  }
  const ranks = childrenOf(child.pid!)
  const sentMs = Date.now()
  spawnSync("kill", [`-${signal}`, String(child.pid)])
  const code = await exited
  return { code, exitAfterMs: Date.now() - sentMs, stderr, runDir: onlyRunDir(parent), journalWhileRunning: journal, ranks }
}

describe(`interrupts and the streamed journal (${runtime})`, () => {
  // The two CLI runs go side by side (each its own folder and processes; their ranks wait 40 ms a
  // batch); the in-process runs after them one at a time.
  it.concurrent("SIGINT in epoch 1 of a CLI run with rank processes: exit 130 within the grace, every rank saved, the journal ends interrupted, no process left, report reads it", async () => {
    const run = await interruptCli("sigint", "INT", "process")
    // The journal had lines while the run was still going (tail -f works): up to epoch 1's progress.
    expect(run.journalWhileRunning.some((e) => e.type === "ended")).toBe(false)
    expect(run.journalWhileRunning.map((e) => e.type).slice(0, 2)).toEqual(["started", "formed"])
    expect(run.code).toBe(130)
    expect(run.exitAfterMs).toBeLessThan(30_000)
    const lastLine = run.stderr.trimEnd().split("\n").at(-1)!
    expect(lastLine).toBe(
      `cohort: run interrupted by SIGINT: run in ${run.runDir}; ranks 0, 1, 2 saved under ${run.runDir}/save; ` +
        `the epoch's uncommitted ranges are in ${run.runDir}/summary.json; resume with: ${cliCommand()} resume ${run.runDir}`
    )
    expect(run.stderr).toContain(`cohort: SIGINT: asking the ranks to save and stop (grace 30 s); send it again to stop at once\n`)
    // Every event up to then, in order, epoch 0's audit included; the journal ends with the outcome.
    const journal = journalOf(run.runDir)
    expect(journal.slice(0, run.journalWhileRunning.length)).toEqual(run.journalWhileRunning)
    const started = journal[0]!
    expect(started.type === "started" && started.options).toMatchObject({
      trainer: steadySlow,
      worldSize: 3,
      epochs: 400,
      transport: "process",
      interruptGraceMs: 30_000
    })
    const epoch0 = journal.find((e) => e.type === "epoch" && e.summary.epoch === 0)
    expect(epoch0?.type === "epoch" && [epoch0.summary.samplesCommitted, epoch0.summary.lost, epoch0.summary.duplicated]).toEqual([
      4800, 0, 0
    ])
    const ended = journal.at(-1)!
    expect(ended.type).toBe("ended")
    if (ended.type !== "ended") return
    expect(ended.exitCode).toBe(130)
    expect(ended.saves).toEqual({ saved: [0, 1, 2], notSaved: [] })
    // The summary agrees, with the epoch it stopped in and exactly that epoch's uncommitted ranges.
    const summary = JSON.parse(readFileSync(join(run.runDir, "summary.json"), "utf8")) as RunResult
    expect(summary.exitCode).toBe(130)
    expect(summary.outcome).toMatchObject({
      status: "interrupted",
      reason: "GracefulShutdown",
      detail: "interrupted by SIGINT",
      failures: []
    })
    // Every rank announced its exit after its save (in the order they finished).
    expect([...summary.outcome.exits].sort()).toEqual([0, 1, 2])
    expect(summary.outcome.uncommitted?.epoch).toBe(summary.outcome.epochsCompleted)
    const committed = summary.epochs.map((e) => e.samplesCommitted)
    expect(committed).toEqual(summary.epochs.map(() => 4800))
    expect(rangesOk(summary.outcome.uncommitted!.ranges, 4800)).toBe(true)
    expect(ended.outcome).toEqual(summary.outcome)
    for (const rank of [0, 1, 2]) expect(existsSync(join(run.runDir, "save", `rank${rank}`, "steady.json"))).toBe(true)
    // No process of the run is left: its 3 ranks (and, under Node, the bundler's service process).
    expect(run.ranks.length).toBeGreaterThanOrEqual(3)
    // (A child that outlives its parent by a moment, as esbuild's service after its stdin closed, gets 5 s.)
    const left = async (): Promise<Array<string>> => {
      for (let i = 0; i < 100 && run.ranks.some(alive); i++) await sleep(50)
      return run.ranks.filter(alive).map((pid) =>
        spawnSync("ps", ["-o", "args=", "-p", String(pid)])
          .stdout.toString()
          .trim()
      )
    }
    expect(await left()).toEqual([])
    // cohort report prints it: one line says it was interrupted; its exit code is the run's.
    const report = spawnSync(process.execPath, cliArgs(["report", run.runDir]), { encoding: "utf8" })
    expect(report.status).toBe(130)
    expect(report.stdout.split("\n").filter((line) => line.startsWith("outcome:"))).toEqual([
      expect.stringMatching(
        /^outcome: interrupted by SIGINT after \d+ completed epochs? in \d+\.\d s; failures: none; final test accuracy -; (every audit clean|no epoch finished, so no audit)$/
      )
    ])
  }, 180_000)

  it.concurrent("SIGTERM on a CLI run with worker ranks: exit 143, the journal and summary end interrupted by SIGTERM", async () => {
    const run = await interruptCli("sigterm", "TERM", "worker")
    expect(run.code).toBe(143)
    expect(run.exitAfterMs).toBeLessThan(30_000)
    const ended = journalOf(run.runDir).at(-1)!
    expect(ended.type === "ended" && [ended.outcome.status, ended.outcome.detail, ended.exitCode, ended.saves]).toEqual([
      "interrupted",
      "interrupted by SIGTERM",
      143,
      { saved: [0, 1, 2], notSaved: [] }
    ])
    const summary = JSON.parse(readFileSync(join(run.runDir, "summary.json"), "utf8")) as RunResult
    expect([summary.outcome.status, summary.exitCode]).toEqual(["interrupted", 143])
  }, 180_000)

  it("an AbortSignal given to run() once epoch 0 is audited: outcome interrupted, exitCode 130, every rank saved, the journal ends with it", async () => {
    const controller = new AbortController()
    const result = await Launcher.run({
      trainer: steady,
      worldSize: 3,
      epochs: 400,
      transport: "process",
      outDir,
      signal: controller.signal,
      onEvent: (event) => {
        if (event.type === "epoch" && event.summary.epoch === 0) controller.abort()
      }
    })
    expect(result.outcome).toMatchObject({
      status: "interrupted",
      reason: "GracefulShutdown",
      detail: "interrupted by aborted",
      failures: []
    })
    expect(result.exitCode).toBe(130)
    expect(result.saves).toEqual({ saved: [0, 1, 2], notSaved: [] })
    expect(result.outcome.uncommitted?.epoch).toBe(result.outcome.epochsCompleted)
    expect(result.epochs.every((e) => e.samplesCommitted === 4800 && e.lost === 0 && e.duplicated === 0)).toBe(true)
    const journal = journalOf(result.runDir)
    const ended = journal.at(-1)!
    expect(ended.type === "ended" && ended.outcome).toEqual(JSON.parse(JSON.stringify(result.outcome)))
    expect(JSON.parse(readFileSync(join(result.runDir, "summary.json"), "utf8"))).toEqual(JSON.parse(JSON.stringify(result)))
    await expectRecordsAgree(result.runDir, result)
  }, 180_000)

  it("a run interrupted before the demo's own kill records nothing about that kill; a kill the user asked for is still reported as not done", async () => {
    const controller = new AbortController()
    const result = await Launcher.run({
      trainer: steady,
      worldSize: 3,
      epochs: 400,
      outDir,
      kills: [
        { rank: 2, atEpoch: 300, atFraction: 0.4, plan: "demo" },
        { rank: 1, atEpoch: 300, atFraction: 0.5 }
      ],
      signal: controller.signal,
      onEvent: (event) => {
        if (event.type === "epoch" && event.summary.epoch === 0) controller.abort()
      }
    })
    expect(result.outcome.status).toBe("interrupted")
    expect(result.skippedFaults.map((f) => [f.rank, f.reason.startsWith("the run ended after ")])).toEqual([[1, true]])
    expect(
      journalOf(result.runDir)
        .filter((e) => e.type === "fault-skipped")
        .map((e) => e.type === "fault-skipped" && e.skipped.rank)
    ).toEqual([1])
    const warnings = Cli.renderResult(result)
      .err?.split("\n")
      .filter((line) => /did not happen/.test(line))
    expect(warnings).toEqual([`cohort: warning: --kill 1@epoch 300 did not happen: ${result.skippedFaults[0]!.reason}`])
  }, 180_000)

  it("a stop signal right after the interrupt cuts the grace: run() returns at once, still with its journal and summary", async () => {
    const controller = new AbortController()
    const stop = new AbortController()
    const started = Date.now()
    let abortedMs = 0
    const result = await Launcher.run({
      trainer: steady,
      worldSize: 2,
      epochs: 400,
      outDir,
      signal: controller.signal,
      stopSignal: stop.signal,
      interruptGraceMs: 120_000,
      onEvent: (event) => {
        if (event.type === "epoch" && event.summary.epoch === 0) {
          abortedMs = Date.now()
          controller.abort("SIGTERM")
          stop.abort("SIGTERM")
        }
      }
    })
    expect(abortedMs).toBeGreaterThan(started)
    // Far below the 120 s grace: nothing waited for the saves.
    expect(Date.now() - abortedMs).toBeLessThan(60_000)
    expect([result.outcome.status, result.outcome.detail, result.exitCode]).toEqual(["interrupted", "interrupted by SIGTERM", 143])
    expect([...result.saves!.saved, ...result.saves!.notSaved].sort()).toEqual([0, 1])
    expect(journalOf(result.runDir).at(-1)?.type).toBe("ended")
    expect(existsSync(join(result.runDir, "summary.json"))).toBe(true)
  }, 180_000)
})
