/**
 * The terminal and working directory, for the `cohort` command line: where its output goes,
 * whether that is a terminal, how wide it is, and how a user's path resolves. `process.stdout`,
 * `process.cwd()`, `node:path` and `node:url` behave the same on Node 20, Bun and Deno (with `-A`),
 * so one file serves all three runtimes.
 *
 * @since 0.1.0
 */

/**
 * Writes `text` to standard output as is (the caller adds line ends).
 *
 * @since 0.1.0
 * @category terminal
 */
export const writeStdout = (text: string): void => {
  process.stdout.write(text)
}

/**
 * Writes `text` to standard error as is (the caller adds line ends).
 *
 * @since 0.1.0
 * @category terminal
 */
export const writeStderr = (text: string): void => {
  process.stderr.write(text)
}

/**
 * Whether standard output is a terminal (`false` when it is piped or redirected to a file).
 *
 * @since 0.1.0
 * @category terminal
 */
export const stdoutIsTerminal = (): boolean => process.stdout.isTTY === true

/**
 * Standard output as a writable stream, for libraries that draw on a stream themselves (the
 * progress bars of `cli-progress`).
 *
 * @since 0.1.0
 * @category terminal
 */
export const stdoutStream = (): NodeJS.WritableStream => process.stdout

/**
 * The value of this process's environment variable `name`, or `undefined` when it is not set.
 *
 * @since 0.1.0
 * @category terminal
 */
export const env = (name: string): string | undefined => process.env[name]
