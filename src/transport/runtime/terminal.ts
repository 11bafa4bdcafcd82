/**
 * The terminal and working directory, for the `cohort` command line: where its output goes,
 * whether that is a terminal, how wide it is, and how a user's path resolves. `process.stdout`,
 * `process.cwd()`, `node:path` and `node:url` behave the same on Node 20, Bun and Deno (with `-A`),
 * so one file serves all three runtimes.
 *
 * @since 0.1.0
 */
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"

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
 * The terminal's width in columns, or 80 when standard output is not a terminal or does not say.
 *
 * @since 0.1.0
 * @category terminal
 */
export const stdoutColumns = (): number => {
  const columns = process.stdout.columns
  return typeof columns === "number" && columns > 0 ? columns : 80
}

/**
 * Standard output as a writable stream, for libraries that draw on a stream themselves (the
 * progress bars of `cli-progress`).
 *
 * @since 0.1.0
 * @category terminal
 */
export const stdoutStream = (): NodeJS.WritableStream => process.stdout

/**
 * `path` made absolute against the current working directory (an absolute path is only
 * normalized). Never touches the file system.
 *
 * @since 0.1.0
 * @category paths
 */
export const resolvePath = (path: string): string => resolve(process.cwd(), path)

/**
 * The `file:` URL of an absolute file-system path, for `import()`; characters such as spaces and
 * `#` are escaped.
 *
 * @since 0.1.0
 * @category paths
 */
export const fileUrl = (absolutePath: string): string => pathToFileURL(absolutePath).href
