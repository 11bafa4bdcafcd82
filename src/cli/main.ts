/**
 * The `cohort` command line's entry: runs `demo`, `run`, `serve`, `join`, `revoke`, `bundle`, `report`, `resume` and `help`
 * through an `Io`.
 *
 * @since 0.1.0
 */
import type { RunTypes } from "../../actors/cli-entry.ts"
import { conduct, demoTrainer, finish, type Io, type Launch, loadTrainerPath, terminalIo, usage, withConsoleOnStderr } from "./conduct.ts"
import * as Runtime from "../platform/detect.ts"
import * as Join from "./join.ts"
import { helpText } from "./help.ts"
import { ExitCode } from "./defaults.ts"
import { type RunCommandOptions, sharedRunOptions } from "./flags.ts"
import { type BundleCommandOptions, firstLine, parse, type ReportCommandOptions } from "./parse.ts"
import { importLauncher, readRun } from "../../actors/cli-entry.ts"
import { failureLine } from "./event-text.ts"
import { resume } from "./resume.ts"
import * as Revoke from "./revoke.ts"
import * as Serve from "./serve.ts"
import { version } from "./version.ts"

const loadLauncher = async (): Promise<Launch> => {
  const launcher = await importLauncher()
  return launcher.run
}

const toRunOptions = (
  options: RunCommandOptions,
  trainer: string,
  onEvent: (event: RunTypes.RunEvent) => void,
  onRankOutput: (rank: number, line: string) => void,
  signals: {
    readonly signal: AbortSignal
    readonly stopSignal: AbortSignal
    readonly killRequests?: RunTypes.RunOptions["killRequests"]
    readonly coordinatorAlerts?: RunTypes.RunOptions["coordinatorAlerts"]
  }
): RunTypes.RunOptions => ({
  signal: signals.signal,
  stopSignal: signals.stopSignal,
  ...(signals.killRequests === undefined ? {} : { killRequests: signals.killRequests }),
  ...(signals.coordinatorAlerts === undefined ? {} : { coordinatorAlerts: signals.coordinatorAlerts }),
  trainer,
  ...sharedRunOptions(options),
  transport: options.transport,
  kills: options.kills,
  hangs: options.hangs,
  rankMemoryMb: options.rankMemoryMb,
  onEvent,
  onRankOutput
})

const train = (io: Io, command: "demo" | "run", options: RunCommandOptions, launch: Launch | undefined): Promise<number> =>
  withConsoleOnStderr(options.json, async () => {
    let trainer = demoTrainer()
    if (command === "run") {
      const loaded = await loadTrainerPath(io, options.trainer ?? "")
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
    const dashboard = options.dashboard === undefined ? undefined : { host: "127.0.0.1", ...options.dashboard }
    return conduct(io, { ...options, dashboard }, (hooks) => run(toRunOptions(options, trainer, hooks.onEvent, hooks.onRankOutput, hooks)))
  })

const report = async (io: Io, options: ReportCommandOptions): Promise<number> => {
  if (options.html) {
    const { writeReport } = await import("./report-html.ts")
    const written = await writeReport(options.runDir, options.outFile, options.fileBytesMax)
    if (typeof written === "string") return usage(io, written)
    io.out(`${written.file}  ${Math.ceil(written.bytes / 1024)} KiB\n`)
    if (written.failed === undefined) return ExitCode.ok
    io.err(`${failureLine(written.failed, options.runDir.replace(/(.)\/+$/, "$1"), io.command)}\n`)
    return ExitCode.unavailable
  }
  const result = await readRun(options.runDir, { fileBytesMax: options.fileBytesMax })
  if (typeof result === "string") return usage(io, result)
  return finish(io, result, options.json, options.runDir.replace(/(.)\/+$/, "$1"))
}

const bundle = async (io: Io, options: BundleCommandOptions): Promise<number> => {
  const loaded = await loadTrainerPath(io, options.trainer)
  if (typeof loaded === "number") return loaded
  const Browser = await import("./bundle.ts")
  let files: Awaited<ReturnType<typeof Browser.buildBrowserRank>>
  try {
    files = await Browser.buildBrowserRank(loaded)
  } catch (error) {
    return usage(io, Browser.buildFailure(options.trainer, error))
  }
  try {
    await Browser.writeBrowserRank(options.outDir, files)
  } catch (error) {
    return usage(io, `cannot write the bundle to ${options.outDir}: ${firstLine(error)}`)
  }
  for (const [name, text] of Object.entries(files)) {
    io.out(`${options.outDir}/${name}  ${Math.ceil(new TextEncoder().encode(text).length / 1024)} KiB\n`)
  }
  return ExitCode.ok
}

/**
 * Runs the command line on `argv` (the arguments after the program name) and returns the exit
 * code (`ExitCode`). Bad input writes one `cohort: ...` line to `io.err` and returns 2; nothing
 * here throws for bad input or calls `process.exit`.
 *
 * `launch` replaces the launcher (tests); by default `actors/launcher/launcher.ts` is imported when a run
 * starts.
 *
 * @since 0.1.0
 * @category cli
 */
export const main = async (argv: ReadonlyArray<string>, io: Io = terminalIo(), launch?: Launch): Promise<number> => {
  // serve and join parse their own flags (serve.ts, join.ts); help is the same for all.
  const parsed = parse(argv)
  if ("error" in parsed) return usage(io, parsed.error)
  switch (parsed.command) {
    case "help":
      io.out(helpText())
      return ExitCode.ok
    case "version":
      io.out(`cohort ${version} (runtime: ${Runtime.describe()})\n`)
      return ExitCode.ok
    case "demo":
    case "run":
      return train(io, parsed.command, parsed.options, launch)
    case "serve":
      return Serve.main(parsed.argv, io)
    case "join":
      return Join.main(parsed.argv, io)
    case "revoke":
      return Revoke.main(parsed.argv, io)
    case "report":
      return report(io, parsed.options)
    case "resume":
      return resume(io, parsed.options)
    case "bundle":
      return bundle(io, parsed.options)
  }
}
