/**
 * The text of one run event as the command line prints it, and the lines that name a run's
 * commands (`commandOf`, `resumeCommand`, `failureLine`); the live views and the result table
 * build on it.
 *
 * @since 0.1.0
 */
import type { RunTypes } from "../../actors/cli-entry.ts"
import type * as Alerts from "../core/alerts.ts"
import { failureText, type RunFailure } from "../../actors/cli-entry.ts"

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1).padStart(6)}s`

/** `[  12.3s]`: a run time in ms as a live line's stamp. */
export const stamp = (ms: number): string => `[${seconds(ms)}]`

/** Milliseconds with one decimal, or `-` when unknown. */
export const msText = (ms: number | undefined): string => (ms === undefined ? "-" : ms.toFixed(1))

/** An accuracy with four decimals, or `-` when unknown. */
export const accuracyText = (accuracy: number | undefined): string => (accuracy === undefined ? "-" : accuracy.toFixed(4))

/** A skipped fault that was the demo's own kill (nobody passed `--kill`): told as the demo's plan. */
export const isDemoPlan = (skipped: RunTypes.SkippedFault): boolean => "plan" in skipped.spec && skipped.spec.plan === "demo"

/** `1 rank`, `2 ranks`. */
export const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? "" : "s"}`

/** `rank 2`, `ranks 1, 3`, or `none`. */
export const ranksText = (ranks: ReadonlyArray<number>): string =>
  ranks.length === 0 ? "none" : `${ranks.length === 1 ? "rank" : "ranks"} ${ranks.join(", ")}`

/** One death's cause, detection time and where its remainder went, as parts of a line. */
export const deathText = (death: RunTypes.DeathTiming): string => {
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
export const leaveText = (leave: RunTypes.LeaveCost): string =>
  `detected in ${leave.detectionMs} ms, ` +
  (leave.recoveryMs === undefined
    ? `${plural(leave.remainderSamples, "sample")} left uncommitted (the run stopped)`
    : `survivors given its ${plural(leave.remainderSamples, "sample")} ${msText(leave.recoveryMs)} ms later`) +
  `; lost ${leave.lostSamples}, duplicated ${leave.duplicatedSamples}, redone ${leave.redoneSamples}, ${leave.bytesMoved} bytes moved`

/** One alert as a line: severity, class, path, detail, and how often it was raised. */
export const alertText = (alert: Alerts.Alert): string =>
  `alert ${alert.severity} ${alert.class} ${alert.path}: ${alert.detail}${alert.count > 1 ? ` (${alert.count} times)` : ""}`

/**
 * The one line of a run whose record could not be written (`RunResult.storageFault`): the path and
 * the operating system's error, what happened to the run, and how to go on. `notTrained`: the run
 * stopped before training started, and how to go on instead of resuming it (its journal may lack
 * even the `started` line a resume reads, and there is nothing to resume anyway).
 */
export const storageLine = (
  fault: NonNullable<RunTypes.RunResult["storageFault"]>,
  status: string,
  runDir: string,
  command: string,
  notTrained?: string
): string =>
  notTrained !== undefined
    ? `cohort: cannot write ${fault.path}: ${fault.error}; the run stopped before training started; once ${runDir} can be written again, ${notTrained}`
    : status === "completed" && /\/checkpoints\/v\d+$/.test(fault.path)
      ? `cohort: cannot write ${fault.path}: ${fault.error}; the run completed, but that epoch's model is not kept, so its journal does not audit it; ` +
        `once ${runDir} can be written again (or from a copy on a good disk), resume with: ${resumeCommand(runDir, command)}`
      : status === "completed"
        ? `cohort: cannot write ${fault.path}: ${fault.error}; the run completed, but its record is incomplete`
        : `cohort: cannot write ${fault.path}: ${fault.error}; the run stopped (its survivors were asked to save); ` +
          `once ${runDir} can be written again (or from a copy on a good disk), resume with: ${resumeCommand(runDir, command)}`

/** `interrupted by SIGINT` from an interrupted outcome's detail (the launcher's words, or another caller's). */
export const interruptedText = (detail: string): string => (detail.startsWith("interrupted") ? detail : `interrupted (${detail})`)

/** `word` quoted for a POSIX shell when it needs to be. */
const shellQuoted = (word: string): string => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`)

/**
 * How the user started the command, as its hints should print it: through the package's bin link
 * `npx cohort` (npx), `bun --bun x cohort` (Bun), `deno run -A npm:cohort` (Deno), else `cohort`; and `node bin/cohort.mjs` (`bun ...`, `deno
 * run -A ...`, each after `npx` through npx) when the entry file was started by its path. `script` is the entry's path
 * (`process.argv[1]`), shown relative to `cwd` when it is inside it, else absolute; `viaNpx`:
 * npm's `npm_command` is `exec`. Deno does not tell which permission flags it was started with:
 * `-A` is the one the docs give.
 *
 * @since 0.1.0
 * @category rendering
 */
export const commandOf = (started: {
  readonly script: string
  readonly cwd: string
  readonly runtime: "node" | "bun" | "deno" | "unknown"
  readonly viaNpx: boolean
}): string => {
  const base = started.script.split(/[\\/]/).at(-1) ?? ""
  if (!/\.m?[jt]s$/.test(base)) return binLinkCommand(started.runtime, started.viaNpx)
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

/** The package's bin link as the docs start it on each runtime (Bun's `x` sets npm's `npm_command` too). */
const binLinkCommand = (runtime: "node" | "bun" | "deno" | "unknown", viaNpx: boolean): string => {
  if (runtime === "bun") return "bun --bun x cohort"
  if (runtime === "deno") return "deno run -A npm:cohort"
  return viaNpx ? "npx cohort" : "cohort"
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
export const resumedText = (resumed: RunTypes.Resumed): string =>
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
  (failed.formed
    ? `; if it saved a checkpoint, resume it from there with: ${resumeCommand(runDir, command)}`
    : "; nothing was trained: there is nothing to resume")

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
      return `rank ${event.rank} epoch ${event.epoch}: ${event.samplesDone} samples done, ${Math.round(
        event.samplesPerSecond
      )} samples/s, ${event.state}`
    case "alert":
      return alertText(event.alert)
    case "fault":
      return `rank ${event.rank} ${event.fault === "kill" ? "killed" : "hung"} (injected fault)`
    case "fault-skipped":
      return isDemoPlan(event.skipped)
        ? `the demo's planned kill of rank ${event.skipped.rank} did not happen: ${event.skipped.reason}`
        : `${event.skipped.fault} of rank ${event.skipped.rank} did not happen: ${event.skipped.reason}`
    case "leave":
      return `rank ${event.leave.rank} left (${event.leave.kind}): ${leaveText(event.leave)}`
    case "join":
      return `rank ${event.join.rank} is up to date: it trained ${Math.round(event.join.trainingMs)} ms after it connected (welcomed after ${Math.round(event.join.welcomeMs)} ms), ${event.join.bytes} bytes sent to it`
    case "death":
      return `rank ${event.death.rank} lost (${event.death.detector}): ${deathText(event.death)}`
    case "epoch": {
      const s = event.summary
      // The eval runs after the epoch ends: live, its accuracy follows on its own line.
      return `epoch ${s.epoch} done: ${s.samplesCommitted} samples committed, lost ${s.lost}, duplicated ${s.duplicated}, ${plural(
        s.deaths.length,
        "death"
      )}, test accuracy ${
        event.accuracy !== undefined
          ? accuracyText(event.accuracy)
          : event.noEval === true
            ? "none (the trainer has no evaluate)"
            : "pending"
      }`
    }
    case "noEval":
      return `epoch ${event.epoch} has no test accuracy: rank ${event.rank} went on without evaluating (the trainer has no evaluate)`
    case "eval":
      return `epoch ${event.epoch} test accuracy ${accuracyText(event.accuracy)} (eval on rank ${event.rank}, loss ${event.loss.toFixed(4)})`
    case "model":
      return event.error === undefined
        ? `epoch ${event.epoch}'s model (round ${event.round}) written to ${event.path} (${(event.bytes / 1e6).toFixed(1)} MB in ${event.writeMs} ms)`
        : `epoch ${event.epoch}'s model NOT written to ${event.path}: ${event.error}; its audit is not journaled: a resume trains epoch ${event.epoch} again`
    case "decision":
      return `decision: ${event.detail}`
    case "round":
      return `round ${event.round} of epoch ${event.epoch} closed: ${plural(event.contributors, "contribution")}, open ${event.openMs} ms`
    case "listening":
      return `listening on ${event.url}`
    case "coordinatorLost":
      return `a new coordinator takes the run over: the last one wrote its last line at ${(event.lostMs / 1000).toFixed(1)} s; epoch ${event.epoch} goes on from round ${event.lastRound}'s model, ${plural(event.committedSamples, "sample")} of it committed`
    case "recovered":
      return `the run goes on after ${(event.withoutCoordinatorMs / 1000).toFixed(1)} s without a coordinator: ${
        event.returned.length === 0 ? "no rank" : `rank${event.returned.length === 1 ? "" : "s"} ${event.returned.join(", ")}`
      } came back${event.missing.length === 0 ? "" : `; ${event.missing.join(", ")} did not (declared dead)`}`
    case "joined":
      return `rank ${event.rank} joined from ${event.address === "" ? "an unknown address" : event.address}${
        event.credential === undefined ? "" : ` with credential ${event.credential}`
      }`
    case "revoked":
      return `revoked ${event.credential === undefined ? "" : `credential ${event.credential} `}${
        event.rank === undefined ? "(no rank holds it)" : `(rank ${event.rank}): closed with 4022 and refused on return`
      }`
    case "resumed":
      return `rank ${event.rank} resumed its link from ${event.address === "" ? "an unknown address" : event.address} after ${event.silentMs} ms of silence`
    case "left":
      return `rank ${event.rank} left before the run formed: ${event.reason}; its index is free for another join`
    case "refused":
      return `join refused with ${event.closeCode} (${event.reason}) from ${event.address === "" ? "an unknown address" : event.address}`
    case "formed":
      return event.joined === undefined
        ? event.worldSize === 1
          ? "formed: its one rank joined"
          : `formed: every one of the ${event.worldSize} ranks joined`
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
