/**
 * The `cohort` command line's entry: runs `demo`, `run`, `report` and `help` through an `Io`.
 *
 * @since 0.1.0
 */
import type * as RunTypes from "../../actors/run-types.ts"
import * as Trainer from "../train/trainer.ts"
import * as Files from "../platform/files.ts"
import * as Signals from "../platform/signals.ts"
import * as Terminal from "../platform/terminal.ts"
import * as RankOutput from "../transport/rank-output.ts"
import { ExitCode, firstLine, helpText, parse, type ReportCommandOptions, type RunCommandOptions } from "./parse.ts"
import { type PartialRun, readRun } from "./read-run.ts"
import { barsView, lineView, renderResult } from "./render.ts"

// ---------------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------------

/**
 * Where `main` writes, and what it knows about the terminal. `out` and `err` take text as is
 * (line ends included); `progressStream` is where the bars draw when `isTerminal`.
 *
 * @since 0.1.0
 * @category cli
 */
export interface Io {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
  readonly isTerminal: boolean
  readonly progressStream: () => NodeJS.WritableStream
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
  progressStream: Terminal.stdoutStream
})

/**
 * Runs a training run: `run` of `actors/launcher.ts`, or a stand-in in tests.
 *
 * @since 0.1.0
 * @category cli
 */
export type Launch = (options: RunTypes.RunOptions) => Promise<RunTypes.RunResult>


const usage = (io: Io, message: string): number => {
  io.err(`cohort: ${message}\n`)
  return ExitCode.usage
}

/** The bundled workload's trainer module, as a `file:` URL (the launcher accepts paths or URLs). */
const demoTrainer = (): string => new URL("../train/mnist-trainer.ts", import.meta.url).href

const loadTrainer = async (io: Io, given: string): Promise<string | number> => {
  const path = Files.absolutePath(given)
  if (!(await Files.exists(path))) return usage(io, `trainer file not found: ${given}`)
  let mod: unknown
  try {
    mod = await import(Files.fileUrl(path))
  } catch (error) {
    return usage(io, `cannot import the trainer module ${given}: ${firstLine(error)}`)
  }
  const checked = Trainer.validateTrainerModule(mod)
  return typeof checked === "string" ? usage(io, `${given}: ${checked}`) : path
}

const loadLauncher = async (): Promise<Launch> => {
  const launcher = await import("../../actors/launcher.ts")
  return launcher.run
}

const toRunOptions = (
  options: RunCommandOptions,
  trainer: string,
  onEvent: (event: RunTypes.RunEvent) => void,
  onRankOutput: (rank: number, line: string) => void,
  signals: { readonly signal: AbortSignal; readonly stopSignal: AbortSignal }
): RunTypes.RunOptions => ({
  ...signals,
  trainer,
  worldSize: options.worldSize,
  epochs: options.epochs,
  mode: options.mode,
  backend: options.backend,
  transport: options.transport,
  kills: options.kills,
  hangs: options.hangs,
  heartbeatTimeoutMs: options.heartbeatTimeoutMs,
  coordinatorTimeoutMs: options.coordinatorTimeoutMs,
  failureLimit: options.failureLimit,
  rolePolicy: options.rolePolicy,
  onRepeatedCrash: options.onRepeatedCrash,
  rankMemoryMb: options.rankMemoryMb,
  interruptGraceMs: options.interruptGraceMs,
  seed: options.seed,
  outDir: options.outDir,
  onEvent,
  onRankOutput
})

/**
 * Sends `console.log`, `info` and `debug` of this process to stderr until the returned function
 * restores them. Under `--json` the trainer module is imported here too (to check it), and what it
 * prints while loading must not reach stdout, which holds only the result.
 */
const consoleToStderr = (): (() => void) => {
  const saved = { log: console.log, info: console.info, debug: console.debug }
  console.log = console.info = console.debug = console.error
  return () => void Object.assign(console, saved)
}

const finish = (io: Io, result: RunTypes.RunResult | PartialRun, json: boolean, runDir?: string): number => {
  const rendered = renderResult(result, runDir)
  io.out(json ? `${JSON.stringify(result, null, 2)}\n` : rendered.out)
  if (rendered.err !== undefined) io.err(`${rendered.err}\n`)
  // A journal cut before the run ended is a bad file, even though part of it was shown.
  return result.outcome === undefined ? ExitCode.usage : result.exitCode
}

const train = async (io: Io, command: "demo" | "run", options: RunCommandOptions, launch: Launch | undefined): Promise<number> => {
  if (!options.json) return trainWith(io, command, options, launch)
  const restore = consoleToStderr()
  try {
    return await trainWith(io, command, options, launch)
  } finally {
    restore()
  }
}

const trainWith = async (io: Io, command: "demo" | "run", options: RunCommandOptions, launch: Launch | undefined): Promise<number> => {
  let trainer = demoTrainer()
  if (command === "run") {
    const loaded = await loadTrainer(io, options.trainer ?? "")
    if (typeof loaded === "number") return loaded
    trainer = loaded
  }
  let run: Launch
  try {
    run = launch ?? (await loadLauncher())
  } catch (error) {
    io.err(`cohort: the launcher is not available: ${firstLine(error)}\n`)
    return ExitCode.unavailable
  }
  const view = options.json ? lineView(io.err) : io.isTerminal ? barsView(io.progressStream()) : lineView(io.out)
  let result: RunTypes.RunResult
  // SIGINT or SIGTERM: the first asks the run to stop (survivors save, within the grace); a second
  // stops it at once. Either way the run still ends its journal and summary (README, "Interrupts").
  const interrupt = new AbortController()
  const stop = new AbortController()
  const removeHandlers = Signals.onInterrupt((signal) => {
    if (!interrupt.signal.aborted) {
      const graceMs = options.interruptGraceMs
      io.err(
        `cohort: ${signal}: asking the ranks to save and stop (grace ${graceMs / 1000} s); ` +
          `send it again to stop at once\n`
      )
      interrupt.abort(signal)
    } else if (!stop.signal.aborted) {
      io.err(`cohort: ${signal} again: stopping at once\n`)
      stop.abort(signal)
    }
  })
  try {
    // What ranks print goes to stderr as `[rank N] line` (never stdout: under --json it holds only the result).
    result = await run(toRunOptions(options, trainer, view.onEvent, (rank, line) => io.err(`${RankOutput.prefixed(rank, line)}\n`), {
      signal: interrupt.signal,
      stopSignal: stop.signal
    }))
  } catch (error) {
    removeHandlers()
    view.stop()
    // The launcher's refusal of an option is bad input; anything else is a failed run.
    const option = (error as { readonly _tag?: unknown; readonly option?: unknown })._tag === "LaunchError"
      ? (error as { readonly option: string }).option
      : undefined
    if (option !== undefined && option !== "formation" && option !== "run") return usage(io, firstLine(error))
    io.err(`cohort: the run failed: ${firstLine(error)}\n`)
    return ExitCode.unavailable
  }
  removeHandlers()
  view.stop()
  return finish(io, result, options.json)
}

const report = async (io: Io, options: ReportCommandOptions): Promise<number> => {
  const result = await readRun(options.runDir, { fileBytesMax: options.fileBytesMax })
  if (typeof result === "string") return usage(io, result)
  return finish(io, result, options.json, options.runDir.replace(/(.)\/+$/, "$1"))
}

/**
 * Runs the command line on `argv` (the arguments after the program name) and returns the exit
 * code (`ExitCode`). Bad input writes one `cohort: ...` line to `io.err` and returns 2; nothing
 * here throws for bad input or calls `process.exit`.
 *
 * `launch` replaces the launcher (tests); by default `actors/launcher.ts` is imported when a run
 * starts.
 *
 * @since 0.1.0
 * @category cli
 */
export const main = async (argv: ReadonlyArray<string>, io: Io = terminalIo(), launch?: Launch): Promise<number> => {
  const parsed = parse(argv)
  if ("error" in parsed) return usage(io, parsed.error)
  switch (parsed.command) {
    case "help":
      io.out(helpText())
      return ExitCode.ok
    case "demo":
    case "run":
      return train(io, parsed.command, parsed.options, launch)
    case "report":
      return report(io, parsed.options)
  }
}

