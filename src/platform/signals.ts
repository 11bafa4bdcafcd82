/**
 * Process signals for the command line: SIGINT (Ctrl-C) and SIGTERM. `process.on` for signals
 * behaves the same on Node 20, Bun and Deno (with `-A`), so one file serves all three runtimes.
 * Signals are the shell's business, never the core's: the handler only asks (docs/design.md §2).
 *
 * @since 0.1.0
 */

/**
 * The signals that interrupt a run.
 *
 * @since 0.1.0
 * @category signals
 */
export type InterruptSignal = "SIGINT" | "SIGTERM"

/**
 * Calls `handler` with each SIGINT or SIGTERM this process receives, instead of the default
 * (ending the process at once), until the returned function is called.
 *
 * @since 0.1.0
 * @category signals
 */
export const onInterrupt = (handler: (signal: InterruptSignal) => void): (() => void) => {
  const onInt = (): void => handler("SIGINT")
  const onTerm = (): void => handler("SIGTERM")
  process.on("SIGINT", onInt)
  process.on("SIGTERM", onTerm)
  return () => {
    process.off("SIGINT", onInt)
    process.off("SIGTERM", onTerm)
  }
}

/**
 * Ends this process at once as `signal` would by default (exit status 128 + the signal's
 * number): every handler of it is removed and the signal is sent again. For a run stuck where
 * no save or stop can reach it (a file system call that never returns), after the user asked
 * twice.
 *
 * @since 0.1.0
 * @category signals
 */
export const endAsSignal = (signal: InterruptSignal): void => {
  process.removeAllListeners(signal)
  process.kill(process.pid, signal)
}
