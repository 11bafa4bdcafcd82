/**
 * The failover bench's coordinator rows (docs/recovery.md): a served run's coordinator SIGKILLed,
 * and the run training again, two ways, measured the same way on loopback:
 *
 * - **takeover**: `cohort serve` with 2 `cohort join` ranks (`bench/trainers/waiting.ts`, 2 ms a
 *   batch, rounds of 32 batches of 32) is killed at a random instant 300-1500 ms after it trains
 *   again, `kills` times in one run, and each time `cohort serve --recover` starts at once; the
 *   ranks wait for it and come back.
 * - **resume** (what a user did before): a fresh served run is killed the same way (its ranks
 *   killed too: they would wait for a coordinator that never comes), and `cohort resume RUN_DIR`
 *   starts at once, its ranks local worker threads (the default for a served parent).
 *
 * Per kill, from the kill (the signal sent) to: **training again**, the first round closed after
 * it (a `round` line in the journal, the takeover's own or the resumed run's); and **committed
 * progress back**, the first round past what the run had committed at the kill (its recovery
 * log's commits of the epoch): the takeover keeps every committed sample, so its first round is
 * past it; the resume trains the epoch again from its last audited epoch's model, and gets there
 * after as many rounds as that took (each commits 2 x 32 x 32 samples here). Median and p99 of
 * each, the samples trained again by the resume, and each row's CLI start included (both start one).
 *
 * Run: `node --import tsx bench/failover.ts --takeover-only [--quick]` (or `--takeover` after the
 * other rows).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Lib from "./lib.ts"

const cli = fileURLToPath(new URL("../bin/cohort.mjs", import.meta.url))
const trainer = fileURLToPath(new URL("./trainers/waiting.ts", import.meta.url))
const worldSize = 2
const samplesPerRound = worldSize * 32 * 32

export interface TakeoverResult {
  readonly kills: number
  readonly resumes: number
  readonly takeoverTrainingMs: { readonly median: number; readonly p99: number }
  readonly takeoverProgressMs: { readonly median: number; readonly p99: number }
  readonly resumeTrainingMs: { readonly median: number; readonly p99: number }
  readonly resumeProgressMs: { readonly median: number; readonly p99: number }
  /** Samples the resumes trained again before they were back where the kill left the run (median). */
  readonly resumeTrainedAgainSamples: number
  /**
   * The takeover's time, median of each step: kill → the new process's first journal line (its
   * start, the CLI's included), → its ranks back (`recovered`), → its first round closed.
   */
  readonly takeoverStepsMs: { readonly started: number; readonly ranksBack: number; readonly firstRound: number }
  /** The takeover run's audits: every epoch once, lost 0, duplicated 0. */
  readonly takeoverAuditsClean: boolean
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port
      server.close(() => resolve(port))
    })
  })

interface Proc {
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
}

const cohort = (cwd: string, args: ReadonlyArray<string>, all: Array<Proc>): Proc => {
  const child = spawn(process.execPath, [cli, ...args], { cwd, stdio: "ignore" })
  const proc = { child, exited: new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code))) }
  all.push(proc)
  return proc
}

const readIfAny = (path: string): string => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return ""
  }
}

/** The journal's events, a line cut short left out. */
const eventsOf = (path: string): Array<Record<string, unknown>> =>
  readIfAny(path)
    .split("\n")
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>]
      } catch {
        return []
      }
    })

const roundsIn = (path: string): Array<{ readonly epoch: number }> =>
  eventsOf(path).flatMap((e) => (e.type === "round" ? [{ epoch: e.epoch as number }] : []))

/** Where the run stands in its recovery log: its open epoch (the first not closed) and the samples of it committed. */
const committedAt = (runDir: string): { readonly epoch: number; readonly samples: number } => {
  const lines = eventsOf(join(runDir, "recovery", "log.ndjson"))
  const closed = new Set(lines.flatMap((l) => (l.type === "closed" ? [l.epoch as number] : [])))
  let epoch = 0
  while (closed.has(epoch)) epoch += 1
  const samples = lines
    .filter((l) => l.type === "commit" && l.epoch === epoch)
    .reduce((sum, l) => sum + (l.ranges as Array<[number, number]>).reduce((s, [, size]) => s + size, 0), 0)
  return { epoch, samples }
}

/** Polls every 5 ms until `found()` holds (then the time it did, `Lib.nowMs`), or `timeoutMs` passed. */
const until = async (found: () => boolean, timeoutMs: number): Promise<number> => {
  const deadline = Lib.nowMs() + timeoutMs
  while (!found()) {
    if (Lib.nowMs() > deadline) throw new Error(`takeover bench: nothing within ${timeoutMs} ms`)
    await sleep(5)
  }
  return Lib.nowMs()
}

/** A served run of `epochs` epochs with its 2 ranks, in its own scratch folder. */
const serve = async (dir: string, epochs: number, all: Array<Proc>) => {
  const port = await freePort()
  const first = ["serve", "--trainer", trainer, "--world-size", String(worldSize), "--epochs", String(epochs)]
  const common = ["--listen", `127.0.0.1:${port}`, "--token-file", "token", "--out", "runs"]
  const server = cohort(dir, [...first, ...common], all)
  const ranks = Array.from({ length: worldSize }, (_, rank) =>
    cohort(
      dir,
      ["join", `ws://127.0.0.1:${port}/`, "--trainer", trainer, "--token-file", "token", "--rank", String(rank), "--save-dir", "save"],
      all
    )
  )
  const runs = (): Array<string> => {
    try {
      return readdirSync(join(dir, "runs"))
    } catch {
      return [] // not made yet
    }
  }
  await until(() => runs().length > 0, 60_000)
  const runDir = join(dir, "runs", runs()[0]!)
  return { server, ranks, runDir }
}

const scratch = (): string => {
  const dir = mkdtempSync(join(tmpdir(), "cohort-bench-takeover-"))
  writeFileSync(join(dir, "token"), "bench-takeover-token-0123456789abcdef\n")
  return dir
}

/** One run, its coordinator killed `kills` times, each taken over by `serve --recover`. */
const takeovers = async (kills: number) => {
  const dir = scratch()
  const all: Array<Proc> = []
  try {
    const { server, ranks, runDir } = await serve(dir, 12, all)
    const journal = join(runDir, "events.ndjson")
    let running = server
    await until(() => roundsIn(journal).length > 0, 60_000)
    const training: Array<number> = []
    const steps: Array<readonly [number, number, number]> = []
    for (let kill = 0; kill < kills; kill++) {
      await sleep(300 + Math.floor(Math.random() * 1200))
      if (running.child.exitCode !== null) break // the run completed first
      const killedMs = Lib.nowMs()
      running.child.kill("SIGKILL")
      await running.exited
      const before = eventsOf(journal)
      const count = (type: string) => (events: ReadonlyArray<Record<string, unknown>>) => events.filter((e) => e.type === type).length
      const [lost, recovered, rounds] = [count("coordinatorLost"), count("recovered"), count("round")]
      running = cohort(dir, ["serve", "--recover", runDir, "--token-file", "token", "--recovery-window-ms", "30000"], all)
      // Where the time goes: the new process reads the run (its first line), its ranks come back
      // (`recovered`), its first round closes.
      const startedMs = await until(() => lost(eventsOf(journal)) > lost(before), 60_000)
      const backMs = await until(() => recovered(eventsOf(journal)) > recovered(before), 60_000)
      const roundMs = await until(() => rounds(eventsOf(journal)) > rounds(before), 60_000)
      training.push(roundMs - killedMs)
      steps.push([startedMs - killedMs, backMs - startedMs, roundMs - backMs])
    }
    await Promise.all([running.exited, ...ranks.map((r) => r.exited)])
    const audits = eventsOf(journal).flatMap((e) =>
      e.type === "epoch" ? [e.summary as { epoch: number; lost: number; duplicated: number }] : []
    )
    const clean =
      audits.length === 12 && new Set(audits.map((a) => a.epoch)).size === 12 && audits.every((a) => a.lost + a.duplicated === 0)
    return { training, steps, clean }
  } finally {
    for (const p of all) if (p.child.exitCode === null) p.child.kill("SIGKILL")
    rmSync(dir, { recursive: true, force: true })
  }
}

/** A fresh served run killed once, continued by `cohort resume`. */
const resumeOnce = async () => {
  const dir = scratch()
  const all: Array<Proc> = []
  try {
    const { server, ranks, runDir } = await serve(dir, 12, all)
    const journal = join(runDir, "events.ndjson")
    await until(() => roundsIn(journal).length > 0, 60_000)
    await sleep(300 + Math.floor(Math.random() * 1200))
    const killedMs = Lib.nowMs()
    server.child.kill("SIGKILL")
    for (const rank of ranks) rank.child.kill("SIGKILL")
    await Promise.all([server.exited, ...ranks.map((r) => r.exited)])
    const at = committedAt(runDir)
    cohort(dir, ["resume", runDir], all)
    const resumedJournal = (): string => {
      const other = readdirSync(join(dir, "runs")).find((name) => join(dir, "runs", name) !== runDir)
      return other === undefined ? "" : join(dir, "runs", other, "events.ndjson")
    }
    const training = (await until(() => roundsIn(resumedJournal()).length > 0, 90_000)) - killedMs
    // Back where the kill left it: as many rounds of the epoch as its commits took, and one more.
    const roundsBack = Math.floor(at.samples / samplesPerRound) + 1
    const progress =
      (await until(() => roundsIn(resumedJournal()).filter((r) => r.epoch === at.epoch).length >= roundsBack, 90_000)) - killedMs
    return { training, progress, trainedAgain: at.samples }
  } finally {
    for (const p of all) if (p.child.exitCode === null) p.child.kill("SIGKILL")
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * Measures both rows (module doc): `kills` takeovers in one run, and `resumes` resumes, each of a
 * fresh run. Fails when a run does not train again within a minute or so.
 */
export const run = async (quick: boolean): Promise<{ readonly result: TakeoverResult; readonly markdown: string }> => {
  const kills = quick ? 3 : 10
  const resumes = quick ? 2 : 5
  const taken = await takeovers(kills)
  const resumed: Array<Awaited<ReturnType<typeof resumeOnce>>> = []
  for (let i = 0; i < resumes; i++) resumed.push(await resumeOnce())
  const result: TakeoverResult = {
    kills: taken.training.length,
    resumes: resumed.length,
    takeoverTrainingMs: Lib.percentiles(taken.training),
    // Its first round after the kill is past the kill's point: it keeps every committed sample.
    takeoverProgressMs: Lib.percentiles(taken.training),
    resumeTrainingMs: Lib.percentiles(resumed.map((r) => r.training)),
    resumeProgressMs: Lib.percentiles(resumed.map((r) => r.progress)),
    resumeTrainedAgainSamples: Lib.quantile(
      resumed.map((r) => r.trainedAgain),
      0.5
    ),
    takeoverStepsMs: {
      started: Lib.quantile(
        taken.steps.map((t) => t[0]),
        0.5
      ),
      ranksBack: Lib.quantile(
        taken.steps.map((t) => t[1]),
        0.5
      ),
      firstRound: Lib.quantile(
        taken.steps.map((t) => t[2]),
        0.5
      )
    },
    takeoverAuditsClean: taken.clean
  }
  const row = (
    name: string,
    count: number,
    training: TakeoverResult["takeoverTrainingMs"],
    progress: TakeoverResult["takeoverTrainingMs"]
  ) => [name, count, training.median, training.p99, progress.median, progress.p99]
  const markdown = [
    Lib.table(
      [
        "coordinator killed, then",
        "kills",
        "kill → training again median ms",
        "p99 ms",
        "kill → committed progress back median ms",
        "p99 ms"
      ],
      [
        row("`serve --recover` (the ranks wait)", result.kills, result.takeoverTrainingMs, result.takeoverProgressMs),
        row("`cohort resume` (new local ranks)", result.resumes, result.resumeTrainingMs, result.resumeProgressMs)
      ]
    ),
    `\ntakeover, median steps: kill → its process read the run ${Lib.fmt(result.takeoverStepsMs.started)} ms (the CLI's start), → ranks back ${Lib.fmt(result.takeoverStepsMs.ranksBack)} ms, → first round ${Lib.fmt(result.takeoverStepsMs.firstRound)} ms` +
      `\ntakeover run: ${result.takeoverAuditsClean ? "every epoch audited once, lost 0, duplicated 0" : "AUDITS NOT CLEAN"}; the resumes trained again a median ${Lib.fmt(result.resumeTrainedAgainSamples)} samples committed before the kill (the takeover: none, at most its open round uncommitted)`
  ].join("\n")
  return { result, markdown }
}
