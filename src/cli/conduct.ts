/**
 * What every training command of the `cohort` command line shares (`demo`, `run`, `serve`): the
 * `Io` it writes through, the trainer module check, and `conduct`, which shows a run's events as
 * they happen, turns SIGINT and SIGTERM into the run's interrupt, and ends with the result table.
 *
 * @since 0.1.0
 */
import type { RunTypes } from "../../actors/cli-entry.ts"
import * as Trainer from "../train/trainer.ts"
import * as Bundle from "../platform/bundle.ts"
import * as Files from "../platform/files.ts"
import * as ListenError from "../platform/listen-error.ts"
import * as Signals from "../platform/signals.ts"
import * as Terminal from "../platform/terminal.ts"
import * as RankOutput from "../transport/rank-output.ts"
import { ExitCode } from "./defaults.ts"
import { firstLine } from "./parse.ts"
import type { PartialRun } from "../../actors/cli-entry.ts"
import { barsView, lineView } from "./live-view.ts"
import { renderResult } from "./result-table.ts"

/**
 * Where `main` writes, and what it knows about the terminal. `out` and `err` take text as is
 * (line ends included); `progressStream` is where the bars draw when `isTerminal`; `env` reads an
 * environment variable (default: this process's; `COHORT_TOKEN`); `leaving(code)` is called by a
 * command that ends the process itself instead of returning (`cohort join` once its rank left),
 * just before it exits with `code` (default none).
 *
 * @since 0.1.0
 * @category cli
 */
export interface Io {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
  readonly isTerminal: boolean
  readonly progressStream: () => NodeJS.WritableStream
  readonly env?: (name: string) => string | undefined
  readonly leaving?: (code: number) => void
  /**
   * How the user started the command, for the commands its hints print (`resume with: <command>
   * resume ...`, serve's join line): `commandOf`'s answer (`bin/cohort.mjs` passes it); default
   * `cohort`.
   */
  readonly command?: string
}

/**
 * The real terminal: standard output and standard error.
 *
 * @since 0.1.0
 * @category cli
 */
export const terminalIo = (): Io => ({
  out: Terminal.writeStdout,
  err: Terminal.writeStderr,
  isTerminal: Terminal.stdoutIsTerminal(),
  progressStream: Terminal.stdoutStream,
  env: Terminal.env
})

/**
 * Runs a training run: `run` of `actors/launcher/launcher.ts`, or a stand-in in tests.
 *
 * @since 0.1.0
 * @category cli
 */
export type Launch = (options: RunTypes.RunOptions) => Promise<RunTypes.RunResult>

/** Writes `cohort: message` to stderr; returns `ExitCode.usage`. @since 0.1.0 @category cli */
export const usage = (io: Io, message: string): number => {
  io.err(`cohort: ${message}\n`)
  return ExitCode.usage
}

/** The bundled workload's trainer module, as a `file:` URL (the launcher accepts paths or URLs). @since 0.1.0 @category cli */
export const demoTrainer = (): string => Files.moduleUrl("../train/mnist-trainer.ts", import.meta.url).href

/**
 * The absolute path of the trainer module `given`, once imported and checked; or the exit code
 * (2) after one line on stderr when it is missing, does not load, or is not a trainer module.
 *
 * @since 0.1.0
 * @category cli
 */
export const loadTrainerPath = async (io: Io, given: string): Promise<string | number> => {
  const path = Files.absolutePath(given)
  if (!(await Files.exists(path))) return usage(io, `trainer file not found: ${given}`)
  let mod: unknown
  try {
    mod = await Bundle.importModule(Files.fileUrl(path))
  } catch (error) {
    return usage(io, `cannot import the trainer module ${given}: ${firstLine(error)}`)
  }
  const checked = Trainer.validateTrainerModule(mod)
  return typeof checked === "string" ? usage(io, `${given}: ${checked}`) : path
}

/**
 * Runs `body` with `console.log`, `info` and `debug` sent to stderr when `json` (under `--json`
 * the trainer module is imported here too, and what it prints while loading must not reach
 * stdout, which holds only the result).
 *
 * @since 0.1.0
 * @category cli
 */
export const withConsoleOnStderr = async <A>(json: boolean, body: () => Promise<A>): Promise<A> => {
  if (!json) return body()
  const saved = { log: console.log, info: console.info, debug: console.debug }
  console.log = console.info = console.debug = console.error
  try {
    return await body()
  } finally {
    Object.assign(console, saved)
  }
}

/**
 * Prints a run's result (the table, or JSON) and returns its exit code; a journal cut before the
 * run ended (`report`) is bad input (2); one that ends with `failed` is the run's own code (3).
 *
 * @since 0.1.0
 * @category cli
 */
export const finish = (io: Io, result: RunTypes.RunResult | PartialRun, json: boolean, runDir?: string): number => {
  const rendered = renderResult(result, runDir, io.command)
  io.out(json ? `${JSON.stringify(result, null, 2)}\n` : rendered.out)
  if (rendered.err !== undefined) io.err(`${rendered.err}\n`)
  return result.outcome !== undefined ? result.exitCode : result.failed !== undefined ? ExitCode.unavailable : ExitCode.usage
}

/**
 * What `conduct` hands the run it starts: the live view's `onEvent`, `onRankOutput` (`[rank N]
 * line` on stderr) and the interrupt signals.
 *
 * @since 0.1.0
 * @category cli
 */
export interface RunHooks {
  readonly onEvent: (event: RunTypes.RunEvent) => void
  readonly onRankOutput: (rank: number, line: string) => void
  readonly signal: AbortSignal
  readonly stopSignal: AbortSignal
  /** The dashboard's kill buttons (`--dashboard-faults`); absent without them. */
  readonly killRequests?: RunTypes.RunOptions["killRequests"]
  /** What the dashboard's listener saw of the coordinator process's resources (its cap, `EMFILE`). */
  readonly coordinatorAlerts?: RunTypes.RunOptions["coordinatorAlerts"]
}

/**
 * The live dashboard a run serves (`--dashboard [PORT]`, `src/dashboard/live.ts`): where it
 * listens, whether it has kill buttons (`--dashboard-faults`), and the run token its requests
 * must carry (`serve` off loopback; read at each request).
 *
 * @since 0.1.0
 * @category cli
 */
export interface DashboardSetup {
  readonly host: string
  readonly port: number
  readonly faults: boolean
  /** The listener's connection cap (`--dashboard-connections-max`); default `liveDefaults.connectionsMax`. */
  readonly connectionsMax?: number
  readonly token?: (() => string | undefined) | undefined
  /** Serve the dashboard over HTTPS with the run's certificate and key (`serve --tls-cert`). */
  readonly tls?: { readonly cert: string; readonly key: string } | undefined
}

/**
 * Conducts one run started by `start`: the live view (bars on a terminal, timestamped lines
 * otherwise, on stderr under `json`), SIGINT or SIGTERM (the first asks the run to stop, the
 * survivors save within the grace, and says how to resume it; a second stops it at once), and the
 * result. `interruptGraceMs` is the grace the interrupt's line names until the run's `started`
 * event gives it. A
 * `LaunchError` for an option is bad input (2, one line); one for the formation or the run, or
 * any other failure, is `cohort: the run failed: ...` and 3.
 *
 * @since 0.1.0
 * @category cli
 */
export const conduct = async (
  io: Io,
  options: { readonly json: boolean; readonly interruptGraceMs: number; readonly dashboard?: DashboardSetup | undefined },
  start: (hooks: RunHooks) => Promise<RunTypes.RunResult>
): Promise<number> => {
  // The dashboard listens before the run starts, so that it sees every event.
  const kills: Array<number> = []
  // At most a line a second per kind comes from the dashboard; the run drains them 4 times a second.
  const resourceLines: Array<string> = []
  let live: Awaited<ReturnType<typeof import("../dashboard/live.ts").start>> | undefined
  const dashboard = options.dashboard
  if (dashboard !== undefined) {
    try {
      const Live = await import("../dashboard/live.ts")
      live = await Live.start({
        host: dashboard.host,
        port: dashboard.port,
        title: "cohort run",
        token: dashboard.token,
        ...(dashboard.tls === undefined ? {} : { tls: dashboard.tls }),
        ...(dashboard.connectionsMax === undefined ? {} : { connectionsMax: dashboard.connectionsMax }),
        // One request per rank at most waits (a rank is killed once): the queue stays within worldSize.
        kill: dashboard.faults ? (rank) => void (kills.includes(rank) ? undefined : kills.push(rank)) : undefined,
        onResource: (line) => void (resourceLines.length < 64 ? resourceLines.push(line) : undefined)
      })
    } catch (error) {
      const why = ListenError.addressInUse(firstLine(error))
        ? `${ListenError.addressInUseText}; choose another port with --dashboard PORT, or leave PORT out for a free one`
        : firstLine(error)
      io.err(`cohort: the dashboard could not start on ${dashboard.host}:${dashboard.port}: ${why}\n`)
      return ExitCode.unavailable
    }
    io.err(
      `cohort: dashboard: ${live.url}${dashboard.token === undefined ? "" : "?token=<the run token>"}${dashboard.faults ? " (with kill buttons)" : ""}\n`
    )
  }
  const view = options.json ? lineView(io.err) : io.isTerminal ? barsView(io.progressStream()) : lineView(io.out)
  // The run's folder and grace, from its `started` event, for the interrupt's line.
  let started: Extract<RunTypes.RunEvent, { type: "started" }> | undefined
  const onEvent = (event: RunTypes.RunEvent): void => {
    if (event.type === "started") started = event
    live?.onEvent(event)
    // A listener that could not bind is the run's one line, below (the journal keeps the event).
    if (event.type !== "failed" || event.stage !== "listen") view.onEvent(event)
  }
  const interrupt = new AbortController()
  const stop = new AbortController()
  const removeHandlers = Signals.onInterrupt((signal) => {
    if (!interrupt.signal.aborted) {
      const logged = started?.options?.interruptGraceMs
      const grace = typeof logged === "number" ? logged : options.interruptGraceMs
      // No resume hint here: whether there is anything to resume (a run still forming, one whose
      // last epoch just ended, a served run whose ranks save on their hosts) is known at the end,
      // and the end's line gives the hint when there is.
      io.err(`cohort: ${signal}: asking the ranks to save and stop (grace ${grace / 1000} s); send it again to stop at once\n`)
      interrupt.abort(signal)
    } else if (!stop.signal.aborted) {
      io.err(`cohort: ${signal} again: stopping at once (a third time ends this process now)\n`)
      stop.abort(signal)
    } else {
      // A run stuck where no stop reaches it (a file system call that never returns) still ends.
      io.err(`cohort: ${signal} a third time: ending now; rank processes may be left running\n`)
      Signals.endAsSignal(signal)
    }
  })
  let result: RunTypes.RunResult
  try {
    // What ranks print goes to stderr as `[rank N] line` (never stdout: under --json it holds only the result).
    result = await start({
      onEvent,
      onRankOutput: (rank, line) => io.err(`${RankOutput.prefixed(rank, line)}\n`),
      signal: interrupt.signal,
      stopSignal: stop.signal,
      ...(dashboard?.faults === true ? { killRequests: { drain: () => kills.splice(0) } } : {}),
      ...(dashboard !== undefined ? { coordinatorAlerts: { drain: () => resourceLines.splice(0) } } : {})
    })
  } catch (error) {
    removeHandlers()
    view.stop()
    await live?.close()
    const option =
      (error as { readonly _tag?: unknown; readonly option?: unknown })._tag === "LaunchError"
        ? (error as { readonly option: string }).option
        : undefined
    if (option !== undefined && option !== "formation" && option !== "run" && option !== "listen") return usage(io, firstLine(error))
    if (option === "listen") {
      // One line: where, why, and (for a taken port) what to do.
      const reason = (error as { readonly reason: string }).reason
      const hint = reason.endsWith(ListenError.addressInUseText)
        ? "; choose another port with --listen HOST:PORT (port 0: any free one)"
        : ""
      io.err(`cohort: the run could not start: ${reason}${hint}\n`)
      return ExitCode.unavailable
    }
    io.err(`cohort: the run failed: ${firstLine(error)}\n`)
    return ExitCode.unavailable
  }
  removeHandlers()
  view.stop()
  await live?.close()
  return finish(io, result, options.json)
}
