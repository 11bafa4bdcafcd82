/**
 * The `cohort` command line: `demo`, `run --trainer FILE`, `report RUN_DIR` and `help`.
 *
 * `main` parses with `commander` (whose own output and `process.exit` are switched off: every
 * error becomes one `cohort: ...` line on stderr and exit code 2), then runs the launcher
 * (imported lazily, so that `help`, `report` and bad input never load the training stack), shows
 * each run's events as they happen (progress bars from `cli-progress` when stdout is a terminal,
 * timestamped lines otherwise) and ends with a table per epoch. All output goes through an `Io`
 * object, so that tests can capture it.
 *
 * @since 0.1.0
 */
import * as CliProgress from "cli-progress"
import * as Commander from "commander"
import type * as RunTypes from "../actors/run-types.ts"
import type * as Alerts from "./core/alerts.ts"
import * as Config from "./core/config.ts"
import type * as Coordinator from "./core/coordinator.ts"
import * as Trainer from "./train/trainer.ts"
import * as Runtime from "./platform/detect.ts"
import * as Files from "./platform/files.ts"
import * as Terminal from "./platform/terminal.ts"

// ---------------------------------------------------------------------------------------------
// Exit codes, defaults, help
// ---------------------------------------------------------------------------------------------

/**
 * Exit codes of the `cohort` command. A run's own codes (0, 1, 4) are `RunResult.exitCode`.
 *
 * @since 0.1.0
 * @category cli
 */
export const ExitCode = {
  /** The command finished; for a run (or the run `report` reads), every epoch's audit passed. */
  ok: 0,
  /** The run was unrecoverable: the survivors saved their state and stopped (DESIGN.md §3.6). */
  unrecoverable: 1,
  /** Bad input: an unknown command or flag, an invalid value, a missing file or folder. */
  usage: 2,
  /** The run could not be carried out: the launcher is missing or failed before a result. */
  unavailable: 3,
  /** An epoch's audit found lost or duplicated samples (DESIGN.md §3.8). */
  auditFailed: 4
} as const

/**
 * Defaults of the `demo` and `run` flags. The demo's default kill is `demoKill`.
 *
 * @since 0.1.0
 * @category cli
 */
export const defaults = {
  worldSize: 4,
  epochs: 3,
  mode: "static",
  transport: "worker",
  heartbeatTimeoutMs: Config.defaults.heartbeatTimeoutMs,
  rolePolicy: "fastest",
  seed: 1,
  outDir: "runs"
} as const

/**
 * The demo's default kill: rank 2's worker, 40% into epoch 1 (epochs count from 0). With fewer
 * ranks or epochs it moves to the last rank and the last epoch; with one rank there is none,
 * since nobody would survive it.
 *
 * @since 0.1.0
 * @category cli
 */
export const demoKill = (worldSize: number, epochs: number): ReadonlyArray<RunTypes.KillSpec> =>
  worldSize < 2 ? [] : [{ rank: Math.min(2, worldSize - 1), atEpoch: Math.min(1, epochs - 1), atFraction: 0.4 }]

/** Where the survivors of a save-and-shutdown write their state, under the run directory. */
const saveFolder = "save"

/**
 * The text of `cohort help` (also `-h` and `--help` anywhere, and no arguments at all).
 *
 * @since 0.1.0
 * @category cli
 */
export const helpText = (): string =>
  `cohort: elastic data-parallel training for TypeScript (runtime: ${Runtime.describe()})

Usage:
  cohort demo [options]                train the bundled workload (handwritten digits, 8000
                                       training samples) and kill a rank mid-run
  cohort run --trainer FILE [options]  train your own trainer module (no kill by default)
  cohort report [--json] RUN_DIR       print a finished run's summary again from RUN_DIR
  cohort help                          print this help (also -h, --help)

Options of demo and run:
  --trainer FILE              run only: the trainer module, a path from the current folder; it
                              must export trainSamples and createTrainer
  --world-size N              ranks, N >= 1 (default 4)
  --epochs N                  epochs, N >= 1; they count from 0 (default 3)
  --mode static|progressive   whole partitions, or small chunks on demand (default static)
  --transport worker|process  ranks as worker threads or child processes (default worker)
  --kill RANK@SECONDS         kill RANK's worker SECONDS after training starts; repeatable;
                              replaces the demo's kill (demo default: rank 2 killed 40% into
                              epoch 1; the last rank or epoch if there are fewer; none with 1 rank)
  --hang RANK@SECONDS         RANK stops responding SECONDS after training starts while its
                              worker stays alive, so only heartbeats catch it; repeatable
                              (default none)
  --no-kill                   no kill at all (removes the demo's kill)
  --heartbeat-timeout-ms N    a rank silent for more than N ms is dead (default 10000)
  --failure-limit N|F         save and stop once N ranks died (an integer >= 0) or a fraction F
                              of the ranks (0 < F < 1) (default none: stop when no rank is left)
  --role-policy fastest|N     who runs eval and checkpoints: the fastest rank, or rank N
                              (default fastest)
  --seed N                    seed of the data order and the model, 0 to 4294967295 (default 1)
  --out DIR                   write the run to DIR/<runId>/ (default runs)
  --json                      print the result as JSON on stdout instead of tables (progress
                              lines then go to stderr)

The end table has one row per epoch: samples committed, lost and duplicated (the audit; both
must be 0), deaths, detection ms (from the injected fault to the declared death), recovery ms
(from the fault to the survivors holding the dead rank's remainder) and test accuracy.

Exit codes:
  0  the run completed and every epoch's audit passed (report: the run it reads did)
  1  the run was unrecoverable: the survivors saved their state and stopped
  2  bad input: unknown command or flag, invalid value, missing trainer file or run directory
  3  the run could not be carried out: the launcher is missing or failed
  4  an epoch's audit found lost or duplicated samples
`

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/**
 * The options of `demo` and `run`, every default filled in. `trainer` is the path as given
 * (`run` only; `undefined` for `demo`, which trains the bundled workload).
 *
 * @since 0.1.0
 * @category parsing
 */
export interface RunCommandOptions {
  readonly trainer: string | undefined
  readonly worldSize: number
  readonly epochs: number
  readonly mode: "static" | "progressive"
  readonly transport: "worker" | "process"
  readonly kills: ReadonlyArray<RunTypes.KillSpec>
  readonly hangs: ReadonlyArray<RunTypes.HangSpec>
  readonly heartbeatTimeoutMs: number
  readonly failureLimit: Config.FailureLimit | undefined
  readonly rolePolicy: Config.RolePolicy
  readonly seed: number
  readonly outDir: string
  readonly json: boolean
}

/**
 * The options of `report`: the run directory as given, and `--json`.
 *
 * @since 0.1.0
 * @category parsing
 */
export interface ReportCommandOptions {
  readonly runDir: string
  readonly json: boolean
}

/**
 * What `parse` found: a command with its options, or `error`, one line without the `cohort: `
 * prefix (e.g. `--world-size must be an integer >= 1, got '0'`).
 *
 * @since 0.1.0
 * @category parsing
 */
export type Parsed =
  | { readonly command: "help" }
  | { readonly command: "demo" | "run"; readonly options: RunCommandOptions }
  | { readonly command: "report"; readonly options: ReportCommandOptions }
  | { readonly error: string }

interface RawRunOptions {
  readonly trainer?: string
  readonly worldSize?: string
  readonly epochs?: string
  readonly mode?: string
  readonly transport?: string
  readonly kill?: ReadonlyArray<string> | false
  readonly hang?: ReadonlyArray<string>
  readonly heartbeatTimeoutMs?: string
  readonly failureLimit?: string
  readonly rolePolicy?: string
  readonly seed?: string
  readonly out?: string
  readonly json?: boolean
}

class UsageError extends Error {}

const collect = (value: string, previous: unknown): ReadonlyArray<string> => [
  ...(Array.isArray(previous) ? (previous as ReadonlyArray<string>) : []),
  value
]

const integerPattern = /^\d+$/

const integerAtLeast = (flag: string, text: string | undefined, min: number, fallback: number): number => {
  if (text === undefined) return fallback
  const value = Number(text)
  if (!integerPattern.test(text) || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`${flag} must be an integer >= ${min}, got '${text}'`)
  }
  return value
}

const oneOf = <A extends string>(flag: string, text: string | undefined, choices: ReadonlyArray<A>, fallback: A): A => {
  if (text === undefined) return fallback
  const found = choices.find((choice) => choice === text)
  if (found === undefined) throw new UsageError(`${flag} must be ${choices.join(" or ")}, got '${text}'`)
  return found
}

const outOfRange = (rank: number, worldSize: number): string =>
  `rank ${rank} is out of range for ${worldSize} ${worldSize === 1 ? "rank" : "ranks"} (0 to ${worldSize - 1})`

const faultSpecPattern = /^(-?\d+)@(-?(?:\d+(?:\.\d*)?|\.\d+))$/

const faultSpec = (flag: string, text: string, worldSize: number): { readonly rank: number; readonly atSeconds: number } => {
  const match = faultSpecPattern.exec(text)
  if (match === null) throw new UsageError(`${flag} expects RANK@SECONDS (e.g. 2@5), got '${text}'`)
  const rank = Number(match[1])
  const atSeconds = Number(match[2])
  if (rank < 0 || rank >= worldSize) {
    throw new UsageError(`${flag} ${text}: ${outOfRange(rank, worldSize)}`)
  }
  if (atSeconds < 0) throw new UsageError(`${flag} ${text}: seconds must be >= 0`)
  return { rank, atSeconds }
}

const failureLimit = (text: string | undefined): Config.FailureLimit | undefined => {
  if (text === undefined) return undefined
  const value = Number(text)
  if (integerPattern.test(text) && Number.isSafeInteger(value)) return { absolute: value }
  if (/^\d*\.\d+$/.test(text) && value > 0 && value < 1) return { fraction: value }
  throw new UsageError(`--failure-limit must be an integer >= 0 or a fraction between 0 and 1, got '${text}'`)
}

const rolePolicy = (text: string | undefined, worldSize: number): Config.RolePolicy => {
  if (text === undefined || text === "fastest") return "fastest"
  const rank = Number(text)
  if (!integerPattern.test(text) || !Number.isSafeInteger(rank)) {
    throw new UsageError(`--role-policy must be fastest or a rank (an integer >= 0), got '${text}'`)
  }
  if (rank >= worldSize) throw new UsageError(`--role-policy ${text}: ${outOfRange(rank, worldSize)}`)
  return { rank }
}

const seedMax = 4_294_967_295

const seed = (text: string | undefined): number => {
  if (text === undefined) return defaults.seed
  const value = Number(text)
  if (!integerPattern.test(text) || value > seedMax) {
    throw new UsageError(`--seed must be an integer from 0 to ${seedMax}, got '${text}'`)
  }
  return value
}

const runOptions = (command: "demo" | "run", raw: RawRunOptions, killAndNoKill: boolean): RunCommandOptions => {
  if (command === "run" && raw.trainer === undefined) throw new UsageError("run needs --trainer FILE")
  if (raw.trainer === "") throw new UsageError("--trainer needs a file path")
  if (killAndNoKill) throw new UsageError("--kill cannot be used with --no-kill")
  const worldSize = integerAtLeast("--world-size", raw.worldSize, 1, defaults.worldSize)
  const epochs = integerAtLeast("--epochs", raw.epochs, 1, defaults.epochs)
  const mode = oneOf("--mode", raw.mode, ["static", "progressive"], defaults.mode)
  const transport = oneOf("--transport", raw.transport, ["worker", "process"], defaults.transport)
  const kills: ReadonlyArray<RunTypes.KillSpec> = raw.kill === false
    ? []
    : raw.kill !== undefined
    ? raw.kill.map((text) => faultSpec("--kill", text, worldSize))
    : command === "demo"
    ? demoKill(worldSize, epochs)
    : []
  const hangs = (raw.hang ?? []).map((text) => faultSpec("--hang", text, worldSize))
  const heartbeatTimeoutMs = integerAtLeast("--heartbeat-timeout-ms", raw.heartbeatTimeoutMs, 1, defaults.heartbeatTimeoutMs)
  if (raw.out === "") throw new UsageError("--out needs a folder path")
  return {
    trainer: raw.trainer,
    worldSize,
    epochs,
    mode,
    transport,
    kills,
    hangs,
    heartbeatTimeoutMs,
    failureLimit: failureLimit(raw.failureLimit),
    rolePolicy: rolePolicy(raw.rolePolicy, worldSize),
    seed: seed(raw.seed),
    outDir: raw.out ?? defaults.outDir,
    json: raw.json === true
  }
}

const isHelpRequest = (argv: ReadonlyArray<string>): boolean => {
  if (argv.length === 0 || argv[0] === "help") return true
  const end = argv.indexOf("--")
  return (end === -1 ? argv : argv.slice(0, end)).some((arg) => arg === "-h" || arg === "--help")
}

/** Commander's messages start with `error: ` and put a suggestion on a second line. */
const oneLine = (message: string): string =>
  message.replace(/^error: /, "").replace(/\n\(Did you mean/g, " (did you mean").replace(/\s*\n\s*/g, " ").trim()

/**
 * Parses `argv` (the arguments after the program name) into a command with its options filled in
 * and checked, or an error line. Never throws and never exits.
 *
 * Checks, in this order: the command and flags (commander: unknown command or flag, missing
 * value, extra arguments), then `--trainer`, `--kill` with `--no-kill`, `--world-size`,
 * `--epochs`, `--mode`, `--transport`, each `--kill`, each `--hang` (format, rank in
 * `[0, worldSize)`, seconds >= 0), `--heartbeat-timeout-ms`, `--out`, `--failure-limit`,
 * `--role-policy`, `--seed`. Files are not looked at here (see `main`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (argv: ReadonlyArray<string>): Parsed => {
  if (isHelpRequest(argv)) return { command: "help" }
  let parsed: Parsed | undefined
  const program = new Commander.Command("cohort")
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {}, outputError: () => {} })
    .helpOption(false)
    .helpCommand(false)
    .showSuggestionAfterError(true)
  const addRunCommand = (name: "demo" | "run"): void => {
    let sawKill = false
    let sawNoKill = false
    const command = program.command(name)
    if (name === "run") command.option("--trainer <file>")
    command
      .option("--world-size <n>")
      .option("--epochs <n>")
      .option("--mode <mode>")
      .option("--transport <kind>")
      .option("--kill <spec>", "", collect)
      .option("--no-kill")
      .option("--hang <spec>", "", collect)
      .option("--heartbeat-timeout-ms <ms>")
      .option("--failure-limit <limit>")
      .option("--role-policy <policy>")
      .option("--seed <n>")
      .option("--out <dir>")
      .option("--json")
      .on("option:kill", () => {
        sawKill = true
      })
      .on("option:no-kill", () => {
        sawNoKill = true
      })
      .action((raw: RawRunOptions) => {
        parsed = { command: name, options: runOptions(name, raw, sawKill && sawNoKill) }
      })
  }
  addRunCommand("demo")
  addRunCommand("run")
  program
    .command("report")
    .argument("<RUN_DIR>")
    .option("--json")
    .action((runDir: string, raw: { readonly json?: boolean }) => {
      parsed = { command: "report", options: { runDir, json: raw.json === true } }
    })
  try {
    program.parse([...argv], { from: "user" })
  } catch (error) {
    if (error instanceof UsageError || error instanceof Commander.CommanderError) return { error: oneLine(error.message) }
    return { error: oneLine(String(error)) }
  }
  return parsed ?? { error: "no command given; try 'cohort help'" }
}

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1).padStart(6)}s`

const stamp = (ms: number): string => `[${seconds(ms)}]`

const msText = (ms: number | undefined): string => (ms === undefined ? "-" : ms.toFixed(1))

const accuracyText = (accuracy: number | undefined): string => (accuracy === undefined ? "-" : accuracy.toFixed(4))

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

const alertText = (alert: Alerts.Alert): string =>
  `alert ${alert.severity} ${alert.class} ${alert.path}: ${alert.detail}${alert.count > 1 ? ` (${alert.count} times)` : ""}`

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
        event.transport === "worker" ? "worker threads" : "child processes"
      }, ${plural(event.epochs, "epoch")} of ${event.epochSamples} samples, ${event.mode} mode; writing ${event.runDir}`
    case "progress":
      return `rank ${event.rank} epoch ${event.epoch}: ${event.samplesDone} samples done, ${
        Math.round(event.samplesPerSecond)
      } samples/s, ${event.state}`
    case "alert":
      return alertText(event.alert)
    case "fault":
      return `rank ${event.rank} ${event.fault === "kill" ? "killed" : "hung"} (injected fault)`
    case "fault-skipped":
      return `${event.skipped.fault} of rank ${event.skipped.rank} did not happen: ${event.skipped.reason}`
    case "death":
      return `rank ${event.death.rank} lost (${event.death.detector}): ${deathText(event.death)}`
    case "epoch": {
      const s = event.summary
      return `epoch ${s.epoch} done: ${s.samplesCommitted} samples committed, lost ${s.lost}, duplicated ${s.duplicated}, ${
        plural(s.deaths.length, "death")
      }, test accuracy ${accuracyText(event.accuracy)}`
    }
    case "decision":
      return `decision: ${event.detail}`
    case "ended":
      return event.outcome.status === "completed"
        ? "run ended: completed"
        : `run ended: unrecoverable (${event.outcome.reason ?? "no reason"}): ${event.outcome.detail}`
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
  return {
    onEvent: (event) => {
      if (event.type === "progress") {
        const last = lastProgressMs.get(event.rank)
        if (last !== undefined && event.ms - last < progressEveryMs) return
        lastProgressMs.set(event.rank, event.ms)
      }
      write(`${stamp(event.ms)} ${eventText(event)}\n`)
    },
    stop: () => {}
  }
}

interface RankBar {
  readonly bar: CliProgress.SingleBar
  epoch: number
  total: number
}

/**
 * One `cli-progress` bar per rank (rank, epoch, samples done of its expected share, samples/s,
 * state) on `stream`; every other event is printed above the bars as a timestamped line. A bar's
 * total starts as the rank's equal share of the epoch among the live ranks and grows when the
 * rank is handed more (extensions, chunks).
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
  const log = (event: RunTypes.RunEvent): void => multibar.log(`${stamp(event.ms)} ${eventText(event)}\n`)
  return {
    onEvent: (event) => {
      switch (event.type) {
        case "started": {
          epochSamples = event.epochSamples
          live = event.worldSize
          rankWidth.value = String(event.worldSize - 1).length
          for (let rank = 0; rank < event.worldSize; rank++) {
            const payload = { rank: String(rank).padStart(rankWidth.value), epoch: 0, speed: 0, state: "starting" }
            bars.set(rank, { bar: multibar.create(share(), 0, payload), epoch: 0, total: share() })
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
          entry.bar.update(event.samplesDone, {
            epoch: event.epoch,
            speed: Math.round(event.samplesPerSecond),
            state: event.state
          })
          return
        }
        case "death": {
          live = Math.max(0, live - 1)
          dead.add(event.death.rank)
          bars.get(event.death.rank)?.bar.update({ state: "dead", speed: 0 })
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

const failedAudits = (result: RunTypes.RunResult): ReadonlyArray<RunTypes.RunResult["epochs"][number]> =>
  result.epochs.filter((epoch) => epoch.lost !== 0 || epoch.duplicated !== 0)

/**
 * What a finished run prints: `out` (the table per epoch, deaths, alerts, the outcome line and
 * the run directory) for stdout, and `err`, one `cohort: ...` line for stderr when the run was
 * unrecoverable or an audit failed (else `undefined`). `runDir` overrides the directory shown
 * (`report` shows the folder it read).
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderResult = (
  result: RunTypes.RunResult,
  runDir: string = result.runDir
): { readonly out: string; readonly err: string | undefined } => {
  const outcome = result.outcome
  // A finished epoch's deaths are the core's (its summary); a death declared after the run ended
  // carries the last epoch's number but belongs to no row (DESIGN.md §3.6).
  const shown = new Set<RunTypes.DeathTiming>()
  const timingOf = (epoch: number, rank: number): RunTypes.DeathTiming | undefined => {
    const timing = result.deaths.find((d) => d.epoch === epoch && d.rank === rank && !shown.has(d))
    if (timing !== undefined) shown.add(timing)
    return timing
  }
  const timings = (deaths: ReadonlyArray<RunTypes.DeathTiming | undefined>, pick: (d: RunTypes.DeathTiming) => number | undefined) =>
    deaths.length === 0 ? "-" : deaths.map((d) => msText(d === undefined ? undefined : pick(d))).join(", ")
  const row = (
    epoch: number,
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
      e.epoch,
      [String(e.samplesCommitted), String(e.lost), String(e.duplicated)],
      e.deaths.map((death) => timingOf(e.epoch, death.rank)),
      accuracyText(e.accuracy)
    )
  )
  // An unrecoverable run stopped in the middle of an epoch: one more row, with that epoch's deaths.
  const stoppedEpoch = outcome.status === "unrecoverable" ? (outcome.uncommitted?.epoch ?? outcome.epochsCompleted) : undefined
  if (stoppedEpoch !== undefined && !result.epochs.some((e) => e.epoch === stoppedEpoch)) {
    const deaths = result.deaths.filter((d) => d.epoch === stoppedEpoch && !shown.has(d))
    for (const death of deaths) shown.add(death)
    rows.push(row(stoppedEpoch, ["stopped", "-", "-"], deaths, "-"))
  }
  const stopped = outcome.status === "unrecoverable" ? outcome.uncommitted : undefined
  const lines: Array<string> = []
  if (rows.length > 0) lines.push(table(epochHeaders, rows).trimEnd())
  else lines.push("no epoch finished")
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
      const when = shown.has(death) ? `in epoch ${death.epoch}` : "after the run ended"
      lines.push(`  rank ${death.rank} ${when} (${death.detector}): ${deathText(death)}`)
    }
  }
  if (result.alerts.length > 0) {
    lines.push("alerts:")
    for (const alert of result.alerts) lines.push(`  ${alertText(alert).replace(/^alert /, "")}`)
  }
  const failed = failedAudits(result)
  const audits = failed.length === 0
    ? "every audit clean"
    : `audit failed in ${failed.map((e) => `epoch ${e.epoch} (lost ${e.lost}, duplicated ${e.duplicated})`).join(", ")}`
  const head = outcome.status === "completed"
    ? `completed ${plural(outcome.epochsCompleted, "epoch")}`
    : `unrecoverable (${outcome.reason ?? "no reason"}) after ${plural(outcome.epochsCompleted, "completed epoch")}`
  lines.push(
    `outcome: ${head} in ${(result.durationMs / 1000).toFixed(1)} s; failures: ${ranksText(outcome.failures)}; ` +
      `final test accuracy ${accuracyText(result.finalAccuracy)}; ${audits}`
  )
  lines.push(`run directory: ${runDir}`)
  const skipped = (result.skippedFaults ?? []).map((f) =>
    `cohort: warning: --${f.fault} ${f.rank}@${"atSeconds" in f.spec ? f.spec.atSeconds : `epoch ${(f.spec as { atEpoch: number }).atEpoch}`} did not happen: ${f.reason}`
  )
  const stoppedLine = outcome.status === "unrecoverable"
    ? `cohort: run stopped: ${outcome.reason ?? "no reason"}: ${outcome.detail}` +
      (outcome.exits.length > 0 ? `; survivors saved under ${runDir}/${saveFolder}` : "; no survivor was left to save")
    : failed.length > 0
    ? `cohort: audit failed: ${failed.map((e) => `epoch ${e.epoch} lost ${e.lost}, duplicated ${e.duplicated}`).join("; ")}`
    : undefined
  const errLines = [...skipped, ...(stoppedLine === undefined ? [] : [stoppedLine])]
  return { out: lines.join("\n") + "\n", err: errLines.length === 0 ? undefined : errLines.join("\n") }
}

// ---------------------------------------------------------------------------------------------
// Reading a finished run (report)
// ---------------------------------------------------------------------------------------------

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

const looksLikeResult = (value: unknown): value is RunTypes.RunResult =>
  isRecord(value) && typeof value.runId === "string" && typeof value.runDir === "string" && isRecord(value.outcome) &&
  (value.outcome.status === "completed" || value.outcome.status === "unrecoverable") &&
  Array.isArray(value.outcome.failures) && typeof value.outcome.epochsCompleted === "number" &&
  Array.isArray(value.epochs) && Array.isArray(value.deaths) && Array.isArray(value.alerts) &&
  typeof value.durationMs === "number" && (value.exitCode === 0 || value.exitCode === 1 || value.exitCode === 4)

const decoder = new TextDecoder()

const readText = async (path: string): Promise<string> => decoder.decode(await Files.readFile(path))

const exitCodeOf = (outcome: Coordinator.Outcome, epochs: RunTypes.RunResult["epochs"]): 0 | 1 | 4 =>
  epochs.some((e) => e.lost !== 0 || e.duplicated !== 0) ? 4 : outcome.status === "unrecoverable" ? 1 : 0

/**
 * Rebuilds a run's result from the lines of its `events.ndjson`: the run from `started`, deaths,
 * alerts and epochs (with accuracy) in order, the outcome and duration from `ended`. The final
 * accuracy is the last finished epoch's. Returns an error line when a line is not a JSON event
 * or the log has no `started` or no `ended` event (the run did not finish).
 *
 * @since 0.1.0
 * @category report
 */
export const resultFromEvents = (text: string, source = "events.ndjson"): RunTypes.RunResult | string => {
  let started: Extract<RunTypes.RunEvent, { type: "started" }> | undefined
  let ended: Extract<RunTypes.RunEvent, { type: "ended" }> | undefined
  const deaths: Array<RunTypes.DeathTiming> = []
  const skippedFaults: Array<RunTypes.SkippedFault> = []
  const alerts: Array<Alerts.Alert> = []
  const epochs: Array<RunTypes.RunResult["epochs"][number]> = []
  const lines = text.split("\n")
  for (let index = 0; index < lines.length; index++) {
    const line = (lines[index] ?? "").trim()
    if (line === "") continue
    let event: unknown
    try {
      event = JSON.parse(line)
    } catch {
      return `${source} line ${index + 1} is not JSON`
    }
    if (!isRecord(event) || typeof event.type !== "string" || typeof event.ms !== "number") {
      return `${source} line ${index + 1} is not a run event`
    }
    const e = event as RunTypes.RunEvent
    switch (e.type) {
      case "started":
        started = e
        break
      case "fault-skipped":
        skippedFaults.push(e.skipped)
        break
      case "death":
        deaths.push(e.death)
        break
      case "alert":
        alerts.push(e.alert)
        break
      case "epoch":
        epochs.push({ ...e.summary, accuracy: e.accuracy })
        break
      case "ended":
        ended = e
        break
      default:
        break
    }
  }
  if (started === undefined) return `${source} has no started event`
  if (ended === undefined) return `${source} has no ended event: the run did not finish`
  return {
    runId: started.runId,
    runDir: started.runDir,
    outcome: ended.outcome,
    deaths,
    skippedFaults,
    alerts,
    epochs,
    finalAccuracy: epochs.at(-1)?.accuracy,
    durationMs: ended.ms,
    exitCode: exitCodeOf(ended.outcome, epochs)
  }
}

/**
 * Reads a finished run from its folder: `summary.json` (the `RunResult`) when present, else
 * `events.ndjson` through `resultFromEvents`. Returns an error line when the folder or both files
 * are missing, or a file is not what a run writes.
 *
 * @since 0.1.0
 * @category report
 */
export const readRun = async (runDir: string): Promise<RunTypes.RunResult | string> => {
  const dir = runDir.replace(/(.)\/+$/, "$1")
  if (!(await Files.exists(dir))) return `no run directory at ${runDir}${runDir.includes("/") ? "" : ` (runs are written to runs/<runId> unless --out says otherwise)`}`
  const summaryPath = `${dir}/summary.json`
  if (await Files.exists(summaryPath)) {
    let value: unknown
    try {
      value = JSON.parse(await readText(summaryPath))
    } catch (error) {
      return `cannot read ${summaryPath}: ${firstLine(error)}`
    }
    return looksLikeResult(value) ? value : `${summaryPath} is not a Cohort run summary`
  }
  const eventsPath = `${dir}/events.ndjson`
  if (await Files.exists(eventsPath)) {
    let text: string
    try {
      text = await readText(eventsPath)
    } catch (error) {
      return `cannot read ${eventsPath}: ${firstLine(error)}`
    }
    return resultFromEvents(text, eventsPath)
  }
  return `${runDir} has neither summary.json nor events.ndjson; is it a run directory?`
}

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

const firstLine = (error: unknown): string => {
  const text = error instanceof Error ? error.message : String(error)
  return text.split("\n").find((line) => line.trim() !== "")?.trim() ?? "unknown error"
}

const usage = (io: Io, message: string): number => {
  io.err(`cohort: ${message}\n`)
  return ExitCode.usage
}

/** The bundled workload's trainer module, as a `file:` URL (the launcher accepts paths or URLs). */
const demoTrainer = (): string => new URL("./train/mnist-trainer.ts", import.meta.url).href

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
  const launcher = await import("../actors/launcher.ts")
  return launcher.run
}

const toRunOptions = (options: RunCommandOptions, trainer: string, onEvent: (event: RunTypes.RunEvent) => void): RunTypes.RunOptions => ({
  trainer,
  worldSize: options.worldSize,
  epochs: options.epochs,
  mode: options.mode,
  transport: options.transport,
  kills: options.kills,
  hangs: options.hangs,
  heartbeatTimeoutMs: options.heartbeatTimeoutMs,
  failureLimit: options.failureLimit,
  rolePolicy: options.rolePolicy,
  seed: options.seed,
  outDir: options.outDir,
  onEvent
})

const finish = (io: Io, result: RunTypes.RunResult, json: boolean, runDir?: string): number => {
  const rendered = renderResult(result, runDir)
  io.out(json ? `${JSON.stringify(result, null, 2)}\n` : rendered.out)
  if (rendered.err !== undefined) io.err(`${rendered.err}\n`)
  return result.exitCode
}

const train = async (io: Io, command: "demo" | "run", options: RunCommandOptions, launch: Launch | undefined): Promise<number> => {
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
  try {
    result = await run(toRunOptions(options, trainer, view.onEvent))
  } catch (error) {
    view.stop()
    // The launcher's refusal of an option is bad input; anything else is a failed run.
    const option = (error as { readonly _tag?: unknown; readonly option?: unknown })._tag === "LaunchError"
      ? (error as { readonly option: string }).option
      : undefined
    if (option !== undefined && option !== "formation" && option !== "run") return usage(io, firstLine(error))
    io.err(`cohort: the run failed: ${firstLine(error)}\n`)
    return ExitCode.unavailable
  }
  view.stop()
  return finish(io, result, options.json)
}

const report = async (io: Io, options: ReportCommandOptions): Promise<number> => {
  const result = await readRun(options.runDir)
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
