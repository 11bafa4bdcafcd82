/**
 * The `cohort` command line.
 *
 * Until the end-to-end issue lands, `demo` and `run` explain that the training job is not built
 * yet and exit with code 3, so that nobody mistakes this for a working run.
 *
 * @since 0.1.0
 * @category cli
 */
import * as Runtime from "./transport/runtime/detect.ts"

/**
 * Exit codes of the `cohort` command.
 *
 * @since 0.1.0
 * @category cli
 */
export const ExitCode = {
  /** The command finished and, for a run, every epoch's audit passed. */
  ok: 0,
  /** Bad input: an unknown command or flag, or an invalid value. */
  usage: 2,
  /** The command exists but its job is not available in this build. */
  unavailable: 3
} as const

const help = `cohort: elastic data-parallel training for TypeScript (runtime: ${Runtime.describe()})

Usage:
  cohort demo              train the bundled workload with 4 ranks and kill one mid-run
  cohort run --trainer F   train your own trainer module
  cohort report RUN_DIR    print a finished run's summary again
  cohort help              print this help
`

/**
 * Runs the command line on `argv` (the arguments after the program name) and returns the exit code.
 * Writes help and errors to stdout/stderr; never throws for bad input.
 *
 * @since 0.1.0
 * @category cli
 */
export const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  const [command] = argv
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    console.log(help)
    return ExitCode.ok
  }
  if (command === "demo" || command === "run" || command === "report") {
    console.log(help)
    console.error(`cohort ${command}: the training job is not built yet (see the open end-to-end issue)`)
    return ExitCode.unavailable
  }
  console.error(`cohort: unknown command '${command}'; try 'cohort help'`)
  return ExitCode.usage
}
