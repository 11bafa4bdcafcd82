/**
 * Synchronous writes for a record that must be on the operating system's side before the
 * caller goes on (a coordinator's recovery log: written before the frames that act on it are
 * sent). `node:fs`'s synchronous calls behave the same on Node 20, Bun and Deno. Each call
 * returns once `write` returned: the text survives the writer's process being killed, not the
 * machine's loss (no `fsync`).
 *
 * @since 0.1.0
 */
import { appendFileSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"

/**
 * Appends `text` to `path` (created if missing). Throws the runtime's `Error` (`ENOSPC`, `EIO`,
 * `EROFS`, ...) when the write fails.
 *
 * @since 0.1.0
 * @category files
 */
export const append = (path: string, text: string): void => appendFileSync(path, text)

/**
 * Writes `bytes` to `path`, replacing it. Throws the runtime's `Error` when the write fails.
 *
 * @since 0.1.0
 * @category files
 */
export const write = (path: string, bytes: Uint8Array): void => writeFileSync(path, bytes)

/**
 * Creates folder `path` and its parents. Throws the runtime's `Error` when it cannot.
 *
 * @since 0.1.0
 * @category files
 */
export const mkdir = (path: string): void => void mkdirSync(path, { recursive: true })

/**
 * The bytes of `path`, or `undefined` when it cannot be read (missing, unreadable).
 *
 * @since 0.1.0
 * @category files
 */
export const readIfAny = (path: string): Uint8Array | undefined => {
  try {
    return new Uint8Array(readFileSync(path))
  } catch {
    return undefined
  }
}

/**
 * When `path` was last written (wall-clock ms), or `undefined` when it cannot be read.
 *
 * @since 0.1.0
 * @category files
 */
export const modifiedMs = (path: string): number | undefined => {
  try {
    return statSync(path).mtimeMs
  } catch {
    return undefined
  }
}

/**
 * The names in folder `path`, sorted; none when it cannot be read (missing, not a folder).
 *
 * @since 0.1.0
 * @category files
 */
export const list = (path: string): Array<string> => {
  try {
    return readdirSync(path).sort()
  } catch {
    return []
  }
}
