/**
 * What the `cohort` command line prints: live event lines and progress bars, and the end tables.
 *
 * @since 0.1.0
 */
import * as CliProgress from "cli-progress"
import type * as RunTypes from "../../actors/run-types.ts"
import type * as Alerts from "../core/alerts.ts"
import { saveFolder } from "./parse.ts"
import { failureText, type PartialRun, type RunFailure } from "../../actors/read-run.ts"

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1).padStart(6)}s`

const stamp = (ms: number): string => `[${seconds(ms)}]`

const msText = (ms: number | undefined): string => (ms === undefined ? "-" : ms.toFixed(1))

const accuracyText = (accuracy: number | undefined): string => (accuracy === undefined ? "-" : accuracy.toFixed(4))

/** A skipped fault that was the demo's own kill (nobody passed `--kill`): told as the demo's plan. */
const isDemoPlan = (skipped: RunTypes.SkippedFault): boolean => "plan" in skipped.spec && skipped.spec.plan === "demo"

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? "" : "s"}`

const ranksText = (ranks: ReadonlyArray<number>): string =>
  ranks.length === 0 ? "none" : `${ranks.length === 1 ? "rank" : "ranks"} ${ranks.join(", ")}`

const deathText = (death: RunTypes.DeathTiming): string => {
  const parts = [`${death.cause}`]
  if (death.detectedAfterFaultMs !== undefined) parts.push(`detected ${msText(death.detectedAfterFaultMs)} ms after the fault`)
  if (death.redistributed === false) parts.push(`${plural(death.remainderSamples, "sample")} left uncommitted (the run stopped)`)
  else {
    parts.push(
      `${plural(death.remainderSamples, "sample")} moved to the survivors` +
        (death.recoveredAfterFaultMs !== undefined ? ` ${msText(death.recoveredAfterFaultMs)} ms after the fault` : "")
    )
  }
  return parts.join("; ")
}

/** A departure's cost, e.g. `detected in 10043 ms, survivors given its 96 samples 0.4 ms later; ...`. */
const leaveText = (leave: RunTypes.LeaveCost): string =>
  `detected in ${leave.detectionMs} ms, ` +
  (leave.recoveryMs === undefined
    ? `${plural(leave.remainderSamples, "sample")} left uncommitted (the run stopped)`
    : `survivors given its ${plural(leave.remainderSamples, "sample")} ${msText(leave.recoveryMs)} ms later`) +
  `; lost ${leave.lostSamples}, duplicated ${leave.duplicatedSamples}, redone ${leave.redoneSamples}, ${leave.bytesMoved} bytes moved`

const alertText = (alert: Alerts.Alert): string =>
  `alert ${alert.severity} ${alert.class} ${alert.path}: ${alert.detail}${alert.count > 1 ? ` (${alert.count} times)` : ""}`

/**
 * The one line of a run whose record could not be written (`RunResult.storageFault`): the path and
 * the operating system's error, what happened to the run, and how to go on.
 */
const storageLine = (fault: NonNullable<RunTypes.RunResult["storageFault"]>, status: string, runDir: string, command: string): string =>
  status === "completed"
    ? `cohort: cannot write ${fault.path}: ${fault.error}; the run completed, but its record is incomplete`
    : `cohort: cannot write ${fault.path}: ${fault.error}; the run stopped (its survivors were asked to save); ` +
      `once ${runDir} can be written again (or from a copy on a good disk), resume with: ${resumeCommand(runDir, command)}`

/** `interrupted by SIGINT` from an interrupted outcome's detail (the launcher's words, or another caller's). */
const interruptedText = (detail: string): string => detail.startsWith("interrupted") ? detail : `interrupted (${detail})`

/** `word` quoted for a POSIX shell when it needs to be. */
const shellQuoted = (word: string): string => /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`

/**
 * How the user started the command, as its hints should print it: `npx cohort` through npx,
 * `cohort` through the package's bin link otherwise, and `node bin/cohort.mjs` (`bun ...`, `deno
 * run -A ...`, each after `npx` through npx) when the entry file was started by its path. `script` is the entry's path
 * (`process.argv[1]`), shown relative to `cwd` when it is inside it, else absolute; `viaNpx`:
 * npm's `npm_command` is `exec`. Deno does not tell which permission flags it was started with:
 * `-A` is the one the docs give.
 *
 * @since 0.1.0
 * @category rendering
 */
export const commandOf = (
  started: { readonly script: string; readonly cwd: string; readonly runtime: "node" | "bun" | "deno" | "unknown"; readonly viaNpx: boolean }
): string => {
  const base = started.script.split(/[\\/]/).at(-1) ?? ""
  if (!/\.m?[jt]s$/.test(base)) return started.viaNpx ? "npx cohort" : "cohort"
  const cwd = started.cwd.endsWith("/") ? started.cwd : `${started.cwd}/`
  const path = shellQuoted(started.script.startsWith(cwd) ? started.script.slice(cwd.length) : started.script)
  // Bun and Deno come with the package as dev dependencies: through npx unless on the PATH.
  const npx = started.viaNpx ? "npx " : ""
  switch (started.runtime) {
    case "bun":
      return `${npx}bun ${path}`
    case "deno":
      return `${npx}deno run -A ${path}`
    default:
      return `node ${path}`
  }
}

/**
 * The command line that resumes the run in `runDir`, quoted for a POSIX shell when it needs to be:
 * `cohort resume runs/abc` (`command` is how the user starts `cohort`: `commandOf`).
 *
 * @since 0.1.0
 * @category rendering
 */
export const resumeCommand = (runDir: string, command = "cohort"): string => `${command} resume ${shellQuoted(runDir)}`

/** Where a resumed run picked up, for its `started` line and its report. */
const resumedText = (resumed: RunTypes.Resumed): string =>
  `resumes run ${resumed.parent.runId} (${resumed.parent.runDir}) in epoch ${resumed.epoch}: ` +
  (resumed.committedSamples > 0
    ? `${plural(resumed.committedSamples, "sample")} of it committed by run ${resumed.parent.runId}, the rest trained here`
    : "the epoch is trained from its start") +
  (resumed.state === "start"
    ? "; the initial model of the run's seed"
    : `; model from ${resumed.loadedFrom} (${resumed.state === "save" ? "the survivors' save" : "the last audited epoch's checkpoint"})`)

/**
 * The line `report` prints on stderr for a run whose journal ends with `failed`: `cohort: the run
 * failed at formation: <reason>; nothing was trained: there is nothing to resume`, or, for a run
 * that failed once every rank had joined, its words and how to resume it from a checkpoint.
 *
 * @since 0.1.0
 * @category rendering
 */
export const failureLine = (failed: RunFailure, runDir: string, command = "cohort"): string =>
  `cohort: ${failureText(failed)}` +
  (failed.formed ? `; if it saved a checkpoint, resume it from there with: ${resumeCommand(runDir, command)}` : "; nothing was trained: there is nothing to resume")

/**
 * One event as a line without its time stamp, e.g. `rank 2 lost (supervisor): killed by
 * terminate; ...`. The same words serve the timestamped lines and the lines above the bars.
 *
 * @since 0.1.0
 * @category rendering
 */
export const eventText = (event: RunTypes.RunEvent): string => {
  switch (event.type) {
    case "started":
      return `run ${event.runId}: ${plural(event.worldSize, "rank")} as ${
        event.transport === "worker"
          ? "worker threads"
          : event.transport === "process"
          ? "child processes"
          : event.transport === "websocket"
          ? "child processes over WebSocket"
          : "joining ranks over WebSocket"
      }, ${plural(event.epochs, "epoch")} of ${event.epochSamples} samples, ${event.mode} mode; writing ${event.runDir}${
        event.resumed === undefined ? "" : `; ${resumedText(event.resumed)}`
      }`
    case "progress":
      return `rank ${event.rank} epoch ${event.epoch}: ${event.samplesDone} samples done, ${
        Math.round(event.samplesPerSecond)
      } samples/s, ${event.state}`
    case "alert":
      return alertText(event.alert)
    case "fault":
      return `rank ${event.rank} ${event.fault === "kill" ? "killed" : "hung"} (injected fault)`
    case "fault-skipped":
      return isDemoPlan(event.skipped)
        ? `the demo's planned kill of rank ${event.skipped.rank} did not happen: ${event.skipped.reason}`
        : `${event.skipped.fault} of rank ${event.skipped.rank} did not happen: ${event.skipped.reason}`
    case "death":
      return `rank ${event.death.rank} lost (${event.death.detector}): ${deathText(event.death)}`
    case "leave":
      return `rank ${event.leave.rank} left (${event.leave.kind}): ${leaveText(event.leave)}`
    case "epoch": {
      const s = event.summary
      // The eval runs after the epoch ends: live, its accuracy follows on its own line.
      return `epoch ${s.epoch} done: ${s.samplesCommitted} samples committed, lost ${s.lost}, duplicated ${s.duplicated}, ${
        plural(s.deaths.length, "death")
      }, test accuracy ${event.accuracy === undefined ? "pending" : accuracyText(event.accuracy)}`
    }
    case "eval":
      return `epoch ${event.epoch} test accuracy ${accuracyText(event.accuracy)} (eval on rank ${event.rank}, loss ${event.loss.toFixed(4)})`
    case "model":
      return event.error === undefined
        ? `epoch ${event.epoch}'s model (round ${event.round}) written to ${event.path} (${(event.bytes / 1e6).toFixed(1)} MB in ${event.writeMs} ms)`
        : `epoch ${event.epoch}'s model NOT written to ${event.path}: ${event.error}`
    case "decision":
      return `decision: ${event.detail}`
    case "round":
      return `round ${event.round} of epoch ${event.epoch} closed: ${plural(event.contributors, "contribution")}, open ${event.openMs} ms`
    case "listening":
      return `listening on ${event.url}`
    case "joined":
      return `rank ${event.rank} joined from ${event.address === "" ? "an unknown address" : event.address}`
    case "resumed":
      return `rank ${event.rank} resumed its link from ${event.address === "" ? "an unknown address" : event.address} after ${event.silentMs} ms of silence`
    case "refused":
      return `join refused with ${event.closeCode} (${event.reason}) from ${event.address === "" ? "an unknown address" : event.address}`
    case "formed":
      return event.joined === undefined
        ? (event.worldSize === 1 ? "formed: its one rank joined" : `formed: every one of the ${event.worldSize} ranks joined`)
        : `formed: ${event.joined} of the ${plural(event.worldSize, "rank")} joined (--min-ranks); the others join while it trains`
    case "welcomed":
      return `rank ${event.rank} joined the running run in epoch ${event.epoch} (rounds from ${event.firstRound}; ${plural(event.samples, "sample")} handed at once)${
        event.given === "" ? "" : `: ${event.given}`
      }`
    case "ended":
      return event.outcome.status === "completed"
        ? "run ended: completed"
        : event.outcome.status === "interrupted"
        ? `run ended: ${interruptedText(event.outcome.detail)}`
        : `run ended: unrecoverable (${event.outcome.reason ?? "no reason"}): ${event.outcome.detail}`
    case "failed":
      return failureText(event).replace(/^the run/, "run")
  }
}

/**
 * `eventText` for a live view, which reads events in order: a joiner's `welcomed` line names what
 * it was given only when that differs from what the joiner before it was given (the core's words
 * once, not once per joiner), and never repeats the rank, epoch and round the line starts with.
 */
const liveText = (): ((event: RunTypes.RunEvent) => string) => {
  let lastGiven: string | undefined
  return (event) => {
    if (event.type !== "welcomed") return eventText(event)
    // The core's reason starts with what the line already says: "rank R joins at epoch E, round F onwards (path): ".
    const given = event.given.replace(/^rank \d+ joins at epoch \d+, round \d+ onwards \([^)]*\): /, "")
    const same = given === lastGiven
    lastGiven = given
    return eventText({ ...event, given: same ? "" : given })
  }
}

/**
 * A live view of a run: `onEvent` for each event as it happens, `stop` once the run is over.
 *
 * @since 0.1.0
 * @category rendering
 */
export interface LiveView {
  readonly onEvent: (event: RunTypes.RunEvent) => void
  readonly stop: () => void
}

/**
 * Timestamped lines (`[  12.3s] rank 2 lost (supervisor): ...`), one per event, except progress:
 * at most one line per rank per `progressEveryMs` (default 1000) of run time.
 *
 * @since 0.1.0
 * @category rendering
 */
export const lineView = (write: (text: string) => void, progressEveryMs = 1000): LiveView => {
  const lastProgressMs = new Map<number, number>()
  const text = liveText()
  return {
    onEvent: (event) => {
      // Averaging rounds go to the journal only: one a line would drown the rest.
      if (event.type === "round") return
      if (event.type === "progress") {
        const last = lastProgressMs.get(event.rank)
        if (last !== undefined && event.ms - last < progressEveryMs) return
        lastProgressMs.set(event.rank, event.ms)
      }
      write(`${stamp(event.ms)} ${text(event)}\n`)
    },
    stop: () => {}
  }
}

interface RankBar {
  readonly bar: CliProgress.SingleBar
  epoch: number
  total: number
  value: number
}

/**
 * One `cli-progress` bar per rank (rank, epoch, samples done of its expected share, samples/s,
 * state) on `stream`; every other event is printed above the bars as a timestamped line. A bar's
 * total starts as the rank's equal share of the epoch among the live ranks and grows when the
 * rank is handed more (extensions, chunks); when the epoch ends, a live rank's bar shows what it
 * trained of it (the launcher's last progress event of the epoch), full: redistributed samples
 * make a rank's part differ from its share.
 *
 * @since 0.1.0
 * @category rendering
 */
export const barsView = (stream: NodeJS.WritableStream): LiveView => {
  const multibar = new CliProgress.MultiBar(
    {
      stream,
      format: "rank {rank} [{bar}] {value}/{total} samples | epoch {epoch} | {speed} samples/s | {state}",
      hideCursor: false,
      clearOnComplete: false,
      stopOnComplete: false,
      // Log lines are written over the bars' rows: a bar that did not change since (a dead rank's)
      // must be drawn again, or its row keeps the log line's text.
      forceRedraw: true,
      autopadding: true,
      barsize: 24
    },
    CliProgress.Presets.shades_classic
  )
  const bars = new Map<number, RankBar>()
  const dead = new Set<number>()
  let epochSamples = 0
  let live = 0
  const rankWidth = { value: 1 }
  const share = (): number => Math.max(1, Math.ceil(epochSamples / Math.max(1, live)))
  // cli-progress clears only the first row it writes its buffered log lines on; each line clears
  // its own row (ESC [2K) so that no longer bar row shows through past its end.
  const text = liveText()
  const log = (event: RunTypes.RunEvent): void => multibar.log(`\x1b[2K${stamp(event.ms)} ${text(event)}\n`)
  return {
    onEvent: (event) => {
      switch (event.type) {
        case "started": {
          epochSamples = event.epochSamples
          live = event.worldSize
          rankWidth.value = String(event.worldSize - 1).length
          for (let rank = 0; rank < event.worldSize; rank++) {
            const payload = { rank: String(rank).padStart(rankWidth.value), epoch: 0, speed: 0, state: "starting" }
            bars.set(rank, { bar: multibar.create(share(), 0, payload), epoch: 0, total: share(), value: 0 })
          }
          log(event)
          return
        }
        case "progress": {
          const entry = bars.get(event.rank)
          if (entry === undefined) return
          if (event.epoch !== entry.epoch) {
            entry.epoch = event.epoch
            entry.total = share()
            entry.bar.setTotal(entry.total)
          }
          if (event.samplesDone > entry.total) {
            entry.total = event.samplesDone
            entry.bar.setTotal(entry.total)
          }
          entry.value = event.samplesDone
          entry.bar.update(event.samplesDone, {
            epoch: event.epoch,
            speed: Math.round(event.samplesPerSecond),
            state: event.state
          })
          return
        }
        case "welcomed": {
          // A rank that joined the running run gets its bar now.
          live += 1
          if (!bars.has(event.rank)) {
            const payload = { rank: String(event.rank).padStart(rankWidth.value), epoch: event.epoch, speed: 0, state: "joined" }
            bars.set(event.rank, { bar: multibar.create(share(), 0, payload), epoch: event.epoch, total: share(), value: 0 })
          }
          log(event)
          return
        }
        case "death": {
          live = Math.max(0, live - 1)
          dead.add(event.death.rank)
          bars.get(event.death.rank)?.bar.update({ state: "dead", speed: 0 })
          log(event)
          return
        }
        case "round":
          return
        case "epoch": {
          for (const [rank, entry] of bars) {
            if (dead.has(rank) || entry.epoch !== event.summary.epoch || entry.value === 0 || entry.total === entry.value) continue
            entry.total = entry.value
            entry.bar.setTotal(entry.total)
          }
          log(event)
          return
        }
        case "ended": {
          const state = event.outcome.status === "completed" ? "done" : "stopped"
          for (const [rank, entry] of bars) if (!dead.has(rank)) entry.bar.update({ state, speed: 0 })
          log(event)
          return
        }
        default:
          log(event)
      }
    },
    stop: () => {
      // stop() draws the bars a last time but drops log lines not yet drawn: draw them first.
      if (bars.size > 0) multibar.update()
      multibar.stop()
    }
  }
}

const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => (row[column] ?? "").length)))
  const line = (cells: ReadonlyArray<string>): string =>
    cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join("  ")
  return [line(headers), ...rows.map(line)].join("\n") + "\n"
}

/** The `p`-quantile (0..1) of `values` by nearest rank; `undefined` for none. */
const quantile = (values: ReadonlyArray<number>, p: number): number | undefined => {
  if (values.length === 0) return undefined
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]
}

/**
 * The departures' cost lines (`RunResult.leaves`): one row each, then per kind the median and p90
 * of detection and recovery and the sums of samples and bytes.
 *
 * @since 0.1.0
 * @category rendering
 */
export const leavesLines = (leaves: ReadonlyArray<RunTypes.LeaveCost>): Array<string> => {
  const rows = leaves.map((l) => [
    String(l.rank),
    String(l.epoch),
    l.kind,
    String(l.detectionMs),
    msText(l.recoveryMs),
    String(l.remainderSamples),
    String(l.lostSamples),
    String(l.duplicatedSamples),
    String(l.redoneSamples),
    String(l.bytesMoved)
  ])
  const kinds = (["graceful", "crash", "silent"] as const).map((kind) => {
    const of = leaves.filter((l) => l.kind === kind)
    const recovery = of.flatMap((l) => (l.recoveryMs === undefined ? [] : [l.recoveryMs]))
    const sum = (pick: (l: RunTypes.LeaveCost) => number) => String(of.reduce((total, l) => total + pick(l), 0))
    return [
      kind,
      String(of.length),
      msText(quantile(of.map((l) => l.detectionMs), 0.5)),
      msText(quantile(of.map((l) => l.detectionMs), 0.9)),
      msText(quantile(recovery, 0.5)),
      msText(quantile(recovery, 0.9)),
      sum((l) => l.lostSamples),
      sum((l) => l.duplicatedSamples),
      sum((l) => l.redoneSamples),
      sum((l) => l.bytesMoved)
    ]
  }).filter((row) => row[1] !== "0")
  const indent = (text: string) => text.trimEnd().split("\n").map((line) => `  ${line}`)
  return [
    "departures (what each cost):",
    ...indent(table(["rank", "epoch", "kind", "detection ms", "recovery ms", "remainder", "lost", "duplicated", "redone", "bytes moved"], rows)),
    "departures by kind:",
    ...indent(table(["kind", "count", "detection median ms", "p90", "recovery median ms", "p90", "lost", "duplicated", "redone", "bytes moved"], kinds))
  ]
}

const epochHeaders = [
  "epoch",
  "samples committed",
  "lost",
  "duplicated",
  "deaths",
  "detection ms",
  "recovery ms",
  "test accuracy"
]

/** Which survivors saved after a save-and-shutdown, and which did not. */
const savesText = (saves: RunTypes.RunResult["saves"], folder: string): string => {
  // A summary written before `saves` existed: only the request is known.
  if (saves === undefined) return `survivors were asked to save under ${folder}`
  const { saved, notSaved } = saves
  if (saved.length === 0 && notSaved.length === 0) return "no survivor was left to save"
  const parts: Array<string> = []
  if (saved.length > 0) parts.push(`${ranksText(saved)} saved under ${folder}`)
  if (notSaved.length > 0) parts.push(`${ranksText(notSaved)} did not finish ${notSaved.length === 1 ? "its" : "their"} save`)
  return parts.join("; ")
}

/**
 * The stack of the run's first crash, printed once: the repeated crash that stopped the run
 * (`TrainerFault`), else the first crashed death that carried a stack. For a run that was not
 * stopped by it, a `cohort: warning:` line says whose crash it is.
 */
const crashLines = (result: RunTypes.RunResult | PartialRun): ReadonlyArray<string> => {
  const outcome = result.outcome
  const repeated = outcome?.repeatedCrash
  if (repeated !== undefined) {
    const head = outcome?.reason === "TrainerFault"
      ? []
      : [`cohort: warning: the trainer failed the same way on ranks ${repeated.ranks[0]} and ${repeated.ranks[1]}: ${repeated.error}`]
    return [...head, ...(repeated.stack === undefined ? [] : [repeated.stack])]
  }
  const crashed = result.deaths.find((death) => death.stack !== undefined)
  return crashed === undefined ? [] : [`cohort: warning: rank ${crashed.rank} ${crashed.cause}`, crashed.stack!]
}

/**
 * `averaging: ring, 2 generations, direct links between worker threads` (or
 * `shared-memory links` with `links` `shared`, `a shared-memory all-reduce` with `area`).
 */
const averagingText = (backend: "cpu" | "ring", ring: RunTypes.RunResult["ring"]): string =>
  backend === "cpu" || ring === undefined
    ? "averaging: cpu (the coordinator averaged every round)"
    : `averaging: ring, ${plural(ring.generations, "generation")}, ${
      ring.links === "port"
        ? "direct links between worker threads"
        : ring.links === "shared"
        ? "shared-memory links between worker threads"
        : ring.links === "area"
        ? "a shared-memory all-reduce between worker threads"
        : `steps relayed by the coordinator (${ring.relayed} relayed, ${ring.dropped} dropped)`
    }`

const failedAudits = (result: RunTypes.RunResult | PartialRun): ReadonlyArray<RunTypes.RunResult["epochs"][number]> =>
  result.epochs.filter((epoch) => epoch.lost !== 0 || epoch.duplicated !== 0)

/**
 * What a finished run prints: `out` (the table per epoch, deaths, alerts, the outcome line and
 * the run directory) for stdout, and `err`, one `cohort: ...` line for stderr when the run was
 * unrecoverable or an audit failed (else `undefined`). `runDir` overrides the directory shown
 * (`report` shows the folder it read). A `PartialRun` (a journal cut before the run ended) shows
 * what was read, an unknown outcome, and a warning line saying where the journal stops; one whose
 * journal ends with `failed` says so instead (`cohort: the run failed at formation: ...; nothing
 * was trained: there is nothing to resume`).
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderResult = (
  result: RunTypes.RunResult | PartialRun,
  runDir: string = result.runDir,
  command = "cohort"
): { readonly out: string; readonly err: string | undefined } => {
  const outcome = result.outcome
  // A finished epoch's deaths are the core's (its summary); a death declared after the run ended
  // carries the last epoch's number but belongs to no row (docs/design.md §3.6).
  const shown = new Set<RunTypes.DeathTiming>()
  const timingOf = (epoch: number, rank: number): RunTypes.DeathTiming | undefined => {
    const timing = result.deaths.find((d) => d.epoch === epoch && d.rank === rank && !shown.has(d))
    if (timing !== undefined) shown.add(timing)
    return timing
  }
  const timings = (deaths: ReadonlyArray<RunTypes.DeathTiming | undefined>, pick: (d: RunTypes.DeathTiming) => number | undefined) =>
    deaths.length === 0 ? "-" : deaths.map((d) => msText(d === undefined ? undefined : pick(d))).join(", ")
  const row = (
    epoch: number | string,
    cells: readonly [string, string, string],
    deaths: ReadonlyArray<RunTypes.DeathTiming | undefined>,
    accuracy: string
  ): ReadonlyArray<string> => [
    String(epoch),
    ...cells,
    String(deaths.length),
    timings(deaths, (d) => d.detectedAfterFaultMs),
    timings(deaths, (d) => d.recoveredAfterFaultMs),
    accuracy
  ]
  const rows = result.epochs.map((e) =>
    row(
      e.spansRuns === undefined ? String(e.epoch) : `${e.epoch}*`,
      [String(e.samplesCommitted), String(e.lost), String(e.duplicated)],
      e.deaths.map((death) => timingOf(e.epoch, death.rank)),
      accuracyText(e.accuracy)
    )
  )
  // An unrecoverable run stopped in the middle of an epoch: one more row, with that epoch's deaths.
  // A resume stopped before it formed stopped in the epoch it was to resume in, not in epoch 0.
  const completedEpochs = outcome === undefined ? 0 : Math.max(outcome.epochsCompleted, result.resumed?.epoch ?? 0)
  const stoppedEpoch = outcome !== undefined && outcome.status !== "completed" ? (outcome.uncommitted?.epoch ?? completedEpochs) : undefined
  if (stoppedEpoch !== undefined && !result.epochs.some((e) => e.epoch === stoppedEpoch)) {
    const deaths = result.deaths.filter((d) => d.epoch === stoppedEpoch && !shown.has(d))
    for (const death of deaths) shown.add(death)
    rows.push(row(stoppedEpoch, ["stopped", "-", "-"], deaths, "-"))
  }
  const stopped = outcome !== undefined && outcome.status !== "completed" ? outcome.uncommitted : undefined
  const lines: Array<string> = []
  if (rows.length > 0) lines.push(table(epochHeaders, rows).trimEnd())
  else lines.push("no epoch finished")
  const resumed = result.resumed
  if (resumed !== undefined) {
    const spanning = result.epochs.find((e) => e.spansRuns !== undefined)
    if (spanning?.spansRuns !== undefined) {
      const [before, after] = spanning.spansRuns
      lines.push(
        `* epoch ${spanning.epoch} spans runs ${before} and ${after}: ${plural(resumed.committedSamples, "sample")} committed by run ${before}, ` +
          `${spanning.samplesCommitted - resumed.committedSamples} by run ${after}; the audit covers both`
      )
    }
    lines.push(`resumed: this run ${resumedText(resumed)}`)
    for (const note of resumed.notes) lines.push(`  ${note}`)
  }
  if (stopped !== undefined) {
    const samples = stopped.ranges.reduce((sum, [, size]) => sum + size, 0)
    const listed = stopped.ranges.slice(0, 8).map(([offset, size]) => `[${offset}, ${offset + size})`)
    const more = stopped.ranges.length > 8 ? `, and ${stopped.ranges.length - 8} more` : ""
    lines.push(
      `uncommitted in epoch ${stopped.epoch}: ${plural(samples, "sample")} in ${plural(stopped.ranges.length, "range")}${
        listed.length > 0 ? `: ${listed.join(", ")}${more}` : ""
      }`
    )
  }
  if (result.deaths.length > 0) {
    lines.push("deaths:")
    for (const death of result.deaths) {
      // A cut journal has no outcome: a death no row showed happened in the epoch it was cut in.
      const when = shown.has(death) || outcome === undefined ? `in epoch ${death.epoch}` : "after the run ended"
      lines.push(`  rank ${death.rank} ${when} (${death.detector}): ${deathText(death)}`)
    }
  }
  const leaves = result.leaves ?? []
  if (leaves.length > 0) lines.push(...leavesLines(leaves))
  const joins = outcome?.joins ?? []
  if (joins.length > 0) {
    // Ranks that joined the running run: which index, when, and what it was given.
    lines.push("joins:")
    for (const j of joins) {
      lines.push(`  rank ${j.rank} joined in epoch ${j.epoch}, in the rounds from round ${j.firstRound}; ${plural(j.samples, "sample")} handed at once`)
    }
  }
  if (result.alerts.length > 0) {
    lines.push("alerts:")
    for (const alert of result.alerts) lines.push(`  ${alertText(alert).replace(/^alert /, "")}`)
  }
  const failed = failedAudits(result)
  const storageFault = (result as { readonly storageFault?: RunTypes.RunResult["storageFault"] }).storageFault
  // A record that could not be written claims no audit: the journal may lack what the run did.
  const audits = failed.length === 0 && storageFault !== undefined
    ? `its record is incomplete (cannot write ${storageFault.path}), so no audit is claimed`
    : failed.length === 0 && result.epochs.length === 0
    ? "no epoch finished, so no audit"
    : failed.length === 0
    ? (outcome?.status === "unrecoverable" ? "every completed epoch's audit clean" : "every audit clean")
    : `audit failed in ${failed.map((e) => `epoch ${e.epoch} (lost ${e.lost}, duplicated ${e.duplicated})`).join(", ")}`
  if (outcome === undefined && result.failed !== undefined && !result.failed.formed) {
    lines.push(`outcome: failed at formation (${(result.durationMs / 1000).toFixed(1)} s into the run): nothing was trained`)
  } else if (outcome === undefined) {
    const deadRanks = [...new Set(result.deaths.map((d) => d.rank))].sort((a, b) => a - b)
    lines.push(
      `outcome: unknown: the journal ${result.cut} (${(result.durationMs / 1000).toFixed(1)} s into the run), before the run ended; ` +
        `${plural(result.epochs.length, "epoch")} finished; deaths so far: ${ranksText(deadRanks)}; ` +
        `last test accuracy ${accuracyText(result.finalAccuracy)}; ${audits === "every audit clean" ? "every audit read clean" : audits}`
    )
  } else {
    const head = outcome.status === "completed"
      ? `completed ${plural(outcome.epochsCompleted, "epoch")}`
      : outcome.status === "interrupted"
      ? `${interruptedText(outcome.detail)} after ${plural(completedEpochs, "completed epoch")}`
      : `unrecoverable (${outcome.reason ?? "no reason"}) after ${plural(completedEpochs, "completed epoch")}`
    lines.push(
      `outcome: ${head} in ${(result.durationMs / 1000).toFixed(1)} s; failures: ${ranksText(outcome.failures)}; ` +
        `final test accuracy ${accuracyText(result.finalAccuracy)}; ${audits}`
    )
  }
  if (result.backend !== undefined) lines.push(averagingText(result.backend, result.ring))
  const refusals = Object.entries((result as { readonly refusals?: Readonly<Record<string, number>> }).refusals ?? {})
  if (refusals.length > 0) lines.push(`refused joins: ${refusals.map(([code, count]) => `${count} × ${code}`).join(", ")}`)
  lines.push(`run directory: ${runDir}`)
  const chain = (result as { readonly chain?: ReadonlyArray<{ readonly runId: string; readonly runDir: string }> }).chain
  if (chain !== undefined && chain.length > 1) {
    lines.push(`chain: ${chain.map((run) => (run.runId === result.runId ? `${run.runId} (this run)` : `${run.runId} (${run.runDir})`)).join(" -> ")}`)
  }
  const skipped = (result.skippedFaults ?? []).map((f) =>
    isDemoPlan(f)
      ? `cohort: note: the demo's planned kill of rank ${f.rank} (at ${Math.round((f.spec as { atFraction: number }).atFraction * 100)}% of epoch ${(f.spec as { atEpoch: number }).atEpoch}) did not happen: ${f.reason}`
      : `cohort: warning: --${f.fault} ${f.rank}@${"atSeconds" in f.spec ? f.spec.atSeconds : `epoch ${(f.spec as { atEpoch: number }).atEpoch}`} did not happen: ${f.reason}`
  )
  // A served run's ranks save on their own hosts (`cohort join --save-dir`), out of a resume's reach.
  const served = (result as { readonly transport?: string }).transport === "serve"
  const savedWhere = served ? "their hosts' --save-dir" : `${runDir}/${saveFolder}`
  // Interrupted before training started (still forming): nothing was trained, nothing to resume.
  const trainedNothing = outcome?.status === "interrupted" && outcome.uncommitted === undefined && result.epochs.length === 0
  // No survivor's save: a resume can only start from an epoch checkpoint, if the run wrote one.
  const nothingSaved = result.saves !== undefined && result.saves.saved.length === 0
  const resumedBy = (result as { readonly resumedBy?: { readonly runId: string; readonly runDir: string } }).resumedBy
  const resumeHint = trainedNothing
    ? ""
    : resumedBy !== undefined
    ? `; run ${resumedBy.runId} (${resumedBy.runDir}) resumed it and trained on from it`
    : nothingSaved
    ? `; if it saved an epoch checkpoint, resume it from there with: ${resumeCommand(runDir, command)}`
    : `; resume with: ${resumeCommand(runDir, command)}`
  const stoppedLine = storageFault !== undefined && outcome !== undefined
    ? storageLine(storageFault, outcome.status, runDir, command)
    : outcome === undefined && result.failed !== undefined
    ? failureLine(result.failed, runDir, command)
    : outcome === undefined
    ? `cohort: warning: ${result.journal} ${result.cut}: the report shows the run as far as it was read; its outcome is unknown; ` +
      (resumedBy !== undefined
        ? `run ${resumedBy.runId} (${resumedBy.runDir}) resumed it and trained on from it`
        : `if its coordinator's process died, resume it from its last checkpoint with: ${resumeCommand(runDir, command)}`)
    : outcome.status === "unrecoverable"
    ? `cohort: run stopped: ${outcome.reason ?? "no reason"}: ${outcome.detail}; ${savesText(result.saves, savedWhere)}${resumeHint}`
    : outcome.status === "interrupted" && trainedNothing && resumedBy !== undefined
    ? `cohort: run ${interruptedText(outcome.detail)}: run in ${runDir}; it stopped before training started; run ${resumedBy.runId} (${resumedBy.runDir}) resumed it and trained on from it`
    : outcome.status === "interrupted" && trainedNothing && result.resumed !== undefined
    ? `cohort: run ${interruptedText(outcome.detail)}: run in ${runDir}; it stopped before training started, so run ${result.resumed.parent.runId} ` +
      `was not resumed: resume it with: ${resumeCommand(result.resumed.parent.runDir, command)}`
    : outcome.status === "interrupted" && trainedNothing
    ? `cohort: run ${interruptedText(outcome.detail)}: run in ${runDir}; it stopped before training started: there is nothing to resume`
    : outcome.status === "interrupted"
    ? `cohort: run ${interruptedText(outcome.detail)}: run in ${runDir}; ${savesText(result.saves, savedWhere)}; ` +
      `the epoch's uncommitted ranges are in ${runDir}/summary.json${resumeHint}`
    : failed.length > 0
    ? `cohort: audit failed: ${failed.map((e) => `epoch ${e.epoch} lost ${e.lost}, duplicated ${e.duplicated}`).join("; ")}`
    : undefined
  const incomplete = (result as { readonly journalIncomplete?: string }).journalIncomplete
  // The trainer's error, once: the stop line names it, its stack follows.
  const errLines = [
    ...(incomplete === undefined ? [] : [`cohort: warning: ${incomplete}`]),
    ...(stoppedLine === undefined ? [] : [stoppedLine]),
    ...crashLines(result),
    ...skipped
  ]
  return { out: lines.join("\n") + "\n", err: errLines.length === 0 ? undefined : errLines.join("\n") }
}

