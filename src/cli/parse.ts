/**
 * Argument parsing of the `cohort` command line: the commands and their flags (commander), each
 * flag's value checked in `flags.ts`; exit codes and defaults are in `defaults.ts`, the help text
 * in `help.ts`.
 *
 * @since 0.1.0
 */
import * as Commander from "commander"
import { firstLine } from "../../actors/cli-entry.ts"
import { reportDefaults } from "../../actors/cli-entry.ts"
import type { RawRunOptions, ResumeCommandOptions, RunCommandOptions } from "./flags.ts"
import { integerAtLeast, refuseFlagsAsValues, resumeOptions, runOptions, UsageError } from "./flags.ts"

export { firstLine }

/**
 * The options of `report`: the run directory as given, `--json` and `--file-bytes-max`.
 *
 * @since 0.1.0
 * @category parsing
 */
export interface ReportCommandOptions {
  readonly runDir: string
  readonly json: boolean
  /** `--file-bytes-max`: the largest file read, in bytes (default 268435456, 256 MiB). */
  readonly fileBytesMax: number
  /** `--html`: write the run page (`src/cli/report-html.ts`) instead of printing the summary. */
  readonly html: boolean
  /** `--out FILE` (with `--html` only): where the page goes; default `<RUN_DIR>/report.html`. */
  readonly outFile: string | undefined
}

/**
 * The options of `bundle`: the trainer module and the folder to write the page into, as given.
 *
 * @since 0.1.0
 * @category parsing
 */
export interface BundleCommandOptions {
  readonly trainer: string
  readonly outDir: string
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
  | { readonly command: "version" }
  | { readonly command: "demo" | "run"; readonly options: RunCommandOptions }
  | { readonly command: "report"; readonly options: ReportCommandOptions }
  | { readonly command: "resume"; readonly options: ResumeCommandOptions }
  | { readonly command: "bundle"; readonly options: BundleCommandOptions }
  | { readonly command: "serve" | "join" | "revoke"; readonly argv: ReadonlyArray<string> }
  | { readonly error: string }

const collect = (value: string, previous: unknown): ReadonlyArray<string> => [
  ...(Array.isArray(previous) ? (previous as ReadonlyArray<string>) : []),
  value
]

const isHelpRequest = (argv: ReadonlyArray<string>): boolean => {
  if (argv.length === 0 || argv[0] === "help") return true
  const end = argv.indexOf("--")
  return (end === -1 ? argv : argv.slice(0, end)).some((arg) => arg === "-h" || arg === "--help")
}

/**
 * One line of a commander or usage message: commander's start with `error: ` and put a suggestion
 * on a second line.
 *
 * @since 0.1.0
 * @category parsing
 */
export const oneLine = (message: string): string =>
  message
    .replace(/^error: /, "")
    .replace(/\n\(Did you mean/g, " (did you mean")
    .replace(/\s*\n\s*/g, " ")
    .trim()

/**
 * The run flags `demo`, `run` and `serve` share (`flags.ts` `runOptions` checks them): the run's
 * size and mode, liveness, rounds and how they are combined, the failure policy, the output and
 * the dashboard. Each command adds its own: the transport and the injected faults of a local run,
 * the listener and the credentials of a served one (`serve.ts`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const runFlags = (command: Commander.Command): Commander.Command =>
  command
    .option("--world-size <n>")
    .option("--epochs <n>")
    .option("--mode <mode>")
    .option("--backend <backend>")
    .option("--ring-links <links>")
    .option("--ring-area-mb <mb>")
    .option("--ring-area-dir <dir>")
    .option("--heartbeat-timeout-ms <ms>")
    .option("--coordinator-timeout-ms <ms>")
    .option("--round-deadline-ms <ms>")
    .option("--round-quorum <fraction>")
    .option("--round-silence-ms <ms>")
    .option("--blocking-silence-ms <ms>")
    .option("--blocking-quiet-max <fraction>")
    .option("--aggregate <rule>")
    .option("--clip-norm <norm>")
    .option("--outlier-rounds-max <rounds>")
    .option("--compress <kind>")
    .option("--deltas <on|off>")
    .option("--outer-lr <rate>")
    .option("--outer-momentum <momentum>")
    .option("--failure-limit <limit>")
    .option("--role-policy <policy>")
    .option("--on-repeated-crash <action>")
    .option("--interrupt-grace-ms <ms>")
    .option("--seed <n>")
    .option("--out <dir>")
    .option("--json")
    .option("--dashboard [port]")
    .option("--dashboard-faults")
    .option("--dashboard-connections-max <n>")
    .option("--save-timeout-ms <ms>")
    .option("--eval-timeout-ms <ms>")
    .option("--beat-links")
    .option("--liveness <detector>")

/**
 * Parses `argv` (the arguments after the program name) into a command with its options filled in
 * and checked, or an error line. Never throws and never exits.
 *
 * Checks, in this order: the command and flags (commander: unknown command or flag, missing
 * value, extra arguments), then `--trainer`, `--kill` with `--no-kill`, `--world-size`,
 * `--epochs`, `--mode`, `--backend` (ring needs `--world-size` >= 2), `--transport`, each `--kill`, each `--hang` (format, rank in
 * `[0, worldSize)`, seconds >= 0), `--heartbeat-timeout-ms`, `--out`, `--failure-limit`,
 * `--role-policy`, `--on-repeated-crash`, `--rank-memory-mb`, `--interrupt-grace-ms`, `--seed`. Files are not looked at here (see `main`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (argv: ReadonlyArray<string>): Parsed => {
  // Long because one check per flag of demo and run, in the table's order; pieces would only move the list.
  if (isHelpRequest(argv)) return { command: "help" }
  if (argv.length === 1 && (argv[0] === "version" || argv[0] === "--version" || argv[0] === "-V")) return { command: "version" }
  // serve, join and revoke parse their own flags (src/cli/serve.ts, join.ts, revoke.ts).
  if (argv[0] === "serve" || argv[0] === "join" || argv[0] === "revoke") return { command: argv[0], argv: argv.slice(1) }
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
    runFlags(command)
      .option("--transport <kind>")
      .option("--kill <spec>", "", collect)
      .option("--no-kill")
      .option("--hang <spec>", "", collect)
      .option("--rank-memory-mb <mb>")
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
    .option("--file-bytes-max <n>")
    .option("--html")
    .option("--out <file>")
    .action(
      (
        runDir: string,
        raw: { readonly json?: boolean; readonly fileBytesMax?: string; readonly html?: boolean; readonly out?: string }
      ) => {
        const fileBytesMax = integerAtLeast("--file-bytes-max", raw.fileBytesMax, 1, reportDefaults.fileBytesMax)
        const html = raw.html === true
        if (raw.out !== undefined && !html) throw new UsageError("report: --out FILE goes with --html (the summary is printed)")
        if (html && raw.json === true) throw new UsageError("report: --html and --json exclude each other")
        parsed = { command: "report", options: { runDir, json: raw.json === true, fileBytesMax, html, outFile: raw.out } }
      }
    )
  program
    .command("resume")
    .argument("<RUN_DIR>")
    .option("--trainer <file>")
    .option("--world-size <n>")
    .option("--transport <kind>")
    .option("--kill <spec>", "", collect)
    .option("--hang <spec>", "", collect)
    .option("--heartbeat-timeout-ms <ms>")
    .option("--coordinator-timeout-ms <ms>")
    .option("--failure-limit <limit>")
    .option("--rank-memory-mb <mb>")
    .option("--interrupt-grace-ms <ms>")
    .option("--out <dir>")
    .option("--json")
    .option("--dashboard [port]")
    .option("--dashboard-faults")
    // Refused with why (`resumeRefusedFlags`), rather than as unknown options.
    .option("--seed <n>")
    .option("--epochs <n>")
    .option("--mode <mode>")
    .option("--backend <backend>")
    .option("--role-policy <policy>")
    .option("--on-repeated-crash <action>")
    .option("--no-kill")
    .action((runDir: string, raw: RawRunOptions) => {
      parsed = { command: "resume", options: resumeOptions(runDir, raw) }
    })
  program
    .command("bundle")
    .requiredOption("--trainer <file>")
    .requiredOption("--out <dir>")
    .action((raw: { readonly trainer: string; readonly out: string }) => {
      parsed = { command: "bundle", options: { trainer: raw.trainer, outDir: raw.out } }
    })
  try {
    refuseFlagsAsValues(program).parse([...argv], { from: "user" })
  } catch (error) {
    if (error instanceof UsageError || error instanceof Commander.CommanderError) return { error: oneLine(error.message) }
    return { error: oneLine(String(error)) }
  }
  return parsed ?? { error: "no command given; try 'cohort help'" }
}
