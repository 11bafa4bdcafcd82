/**
 * Lock files: a file created exclusively (a hard link, which fails when the name exists) that
 * holds the owner's process id,
 * so that two processes on one machine never do the same thing at once (`cohort resume` of one run).
 * `node:fs/promises` and `process.kill(pid, 0)` behave the same on Node 20, Bun and Deno
 * (with `-A`), so one file serves all three runtimes.
 *
 * @since 0.1.0
 */
import { link, readFile, unlink, writeFile } from "node:fs/promises"

/**
 * What a lock file holds: the owner's process id and when it took the lock (ms since the Unix
 * epoch), as one JSON line.
 *
 * @since 0.1.0
 * @category locks
 */
export interface LockOwner {
  readonly pid: number
  readonly acquiredAtMs: number
}

/**
 * What `acquire` found: the lock (`release` removes the file; calling it twice is harmless), with
 * `tookOverFrom` set when a stale lock (its process gone) was replaced; or `Held` by a live process.
 *
 * @since 0.1.0
 * @category locks
 */
export type Acquired =
  | { readonly _tag: "Acquired"; readonly release: () => Promise<void>; readonly tookOverFrom: number | undefined }
  | { readonly _tag: "Held"; readonly owner: LockOwner | undefined }

/**
 * Whether process `pid` exists on this machine (signal 0: nothing is sent). A process that exists
 * but belongs to another user (`EPERM`) counts as alive.
 *
 * @since 0.1.0
 * @category locks
 */
export const processAlive = (pid: number): boolean => {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as { readonly code?: unknown }).code === "EPERM"
  }
}

const readOwner = async (path: string): Promise<LockOwner | undefined> => {
  try {
    const value: unknown = JSON.parse(await readFile(path, "utf8"))
    if (typeof value !== "object" || value === null) return undefined
    const { pid, acquiredAtMs } = value as Record<string, unknown>
    return typeof pid === "number" && typeof acquiredAtMs === "number" ? { pid, acquiredAtMs } : undefined
  } catch {
    return undefined
  }
}

/**
 * The owner of the lock at `path` when its process is alive (`processAlive`), without touching
 * the file; `undefined` when there is no lock, its process is gone (stale), or it cannot be read.
 *
 * @since 0.1.0
 * @category locks
 */
export const liveOwner = async (path: string): Promise<LockOwner | undefined> => {
  const found = await readOwner(path)
  return found !== undefined && processAlive(found.pid) ? found : undefined
}

/**
 * Creates `path` holding `owner`, only if it does not exist: the content is written to a file of
 * this process's own first, then hard-linked to `path` (`link` fails with `EEXIST` when it
 * exists), so that nobody ever sees the lock file empty or half-written.
 */
const createExclusive = async (path: string, owner: LockOwner): Promise<boolean> => {
  const temporary = `${path}.${process.pid}.tmp`
  await writeFile(temporary, `${JSON.stringify(owner)}\n`)
  try {
    await link(temporary, path)
    return true
  } catch (error) {
    if ((error as { readonly code?: unknown }).code === "EEXIST") return false
    throw error
  } finally {
    await unlink(temporary).catch(() => undefined)
  }
}

/**
 * Takes the lock at `path` for this process: creates the file exclusively with `{pid,
 * acquiredAtMs}` (written first under a name of its own, then linked to `path`, so it is never
 * seen empty). When it exists and its process is alive (`processAlive`), the lock is `Held`.
 * When its process is gone (a stale lock: its owner was killed), the file is removed and created
 * again, once (not atomic: two takeovers in the same instant may both succeed). A lock that
 * cannot be read (not a lock file) counts as held.
 * Rejects with the runtime's `Error` (`EACCES`, `ENOENT` for a missing folder, ...) when the file
 * cannot be created.
 *
 * @since 0.1.0
 * @category locks
 */
export const acquire = async (path: string, nowMs: number): Promise<Acquired> => {
  const owner: LockOwner = { pid: process.pid, acquiredAtMs: nowMs }
  let released = false
  const release = async (): Promise<void> => {
    if (released) return
    released = true
    await unlink(path).catch(() => undefined)
  }
  if (await createExclusive(path, owner)) return { _tag: "Acquired", release, tookOverFrom: undefined }
  const found = await readOwner(path)
  if (found === undefined || processAlive(found.pid)) return { _tag: "Held", owner: found }
  // Stale: its owner is gone. Two processes taking it over in the same instant can both succeed
  // (the second's unlink may remove the first's new lock): a remove then a create is not one step.
  await unlink(path).catch(() => undefined)
  if (await createExclusive(path, owner)) return { _tag: "Acquired", release, tookOverFrom: found.pid }
  return { _tag: "Held", owner: await readOwner(path) }
}
