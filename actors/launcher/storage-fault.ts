/**
 * Storage faults of a run's record: a write of its journal, its summary or a checkpoint that the
 * operating system refused (a full disk, `ENOSPC`; a failing one, `EIO`; a file system turned
 * read-only, `EROFS`; too many open files, `EMFILE`). Each is a critical `StorageFault` alert at
 * once; a journal that cannot be written stops the run (`launcher.ts`), since a run whose record
 * is not kept must not go on as if it were.
 *
 * @since 0.1.0
 */
import type * as Alerts from "../../src/core/alerts.ts"
import { firstLine } from "../record/error-text.ts"

/**
 * A failed write: the file (or folder) and the runtime's error as one line, e.g. `ENOSPC: no space
 * left on device, write` (the code first, then the operating system's words).
 *
 * @since 0.1.0
 * @category model
 */
export interface StorageFault {
  readonly path: string
  readonly error: string
}

/**
 * The fault of writing `path` that failed with `error` (the runtime's `Error`, or a rank's text).
 *
 * @since 0.1.0
 * @category constructors
 */
export const of = (path: string, error: unknown): StorageFault => ({ path, error: errorText(error) })

/**
 * The error as one line that starts with its code, on every runtime: Node says `ENOSPC: no space
 * left on device, write`; Deno says `No space left on device (os error 28)` with the same `code`.
 */
const errorText = (error: unknown): string => {
  const line = firstLine(error)
  const code = (error as { readonly code?: unknown } | null)?.code
  if (typeof code !== "string" || !/^E[A-Z]+$/.test(code) || line.startsWith(`${code}:`)) return line
  return `${code}: ${line.charAt(0).toLowerCase()}${line.slice(1)}`
}

/**
 * Whether a rank's failure text (a checkpoint's `detail`) is a storage fault: it names an error
 * code of a refused write (`ENOSPC`, `EDQUOT`, `EIO`, `EROFS`, `EMFILE`, `ENFILE`, `EFBIG`,
 * `EACCES`, `EPERM`).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isStorageError = (text: string): boolean => /\b(ENOSPC|EDQUOT|EIO|EROFS|EMFILE|ENFILE|EFBIG|EACCES|EPERM)\b/.test(text)

/**
 * `cannot write <path>: <error>`: the fault in the words of every line that names it.
 *
 * @since 0.1.0
 * @category text
 */
export const text = (fault: StorageFault): string => `cannot write ${fault.path}: ${fault.error}`

/**
 * The critical `StorageFault` alert for `fault` at `nowMs` (wall ms), on path `root`: the run's
 * own record, not a rank, failed.
 *
 * @since 0.1.0
 * @category alerts
 */
export const alert = (fault: StorageFault, nowMs: number): Alerts.Alert => ({
  ts: nowMs,
  severity: "critical",
  path: "root",
  class: "StorageFault",
  detail: text(fault),
  count: 1
})
