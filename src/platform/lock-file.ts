/**
 * Lock files: a file created exclusively (a hard link, which fails when the name exists) that
 * names its holder, so that two processes on one machine never do the same thing at once (`cohort
 * resume` of one run; a run still training). A process id alone does not name a process: PID 1 of
 * a container that died, or a PID the system gave to another process since, looks alive. Where
 * Linux's `/proc` is there, the lock also holds the holder's start time (field 22 of
 * `/proc/<pid>/stat`), the machine's boot id (`/proc/sys/kernel/random/boot_id`) and its PID
 * namespace (`/proc/self/ns/pid`); a lock is held only while a process with that start time lives
 * in that namespace since that boot. Elsewhere (macOS), and for an old lock that holds only a
 * process id, the process id's liveness decides. `node:fs/promises` and `process.kill(pid, 0)`
 * behave the same on Node 20, Bun and Deno (with `-A`), so one file serves all three runtimes.
 *
 * @since 0.1.0
 */
import { link, readdir, readFile, readlink, unlink, writeFile } from "node:fs/promises"

/**
 * What a lock file holds, as one JSON line: the holder's process id and when it took the lock (ms
 * since the Unix epoch); where `/proc` is there, also `startTicks` (when the process started, in
 * clock ticks after boot: field 22 of `/proc/<pid>/stat`), `bootId` (the kernel's boot id) and
 * `pidNamespace` (e.g. `pid:[4026531836]`, the namespace `pid` is counted in). A lock written
 * before these existed holds only `pid` and `acquiredAtMs`, and still reads.
 *
 * @since 0.1.0
 * @category locks
 */
export interface LockOwner {
  readonly pid: number
  readonly acquiredAtMs: number
  readonly startTicks?: number
  readonly bootId?: string
  readonly pidNamespace?: string
}

/**
 * What `inspect` found at a lock's path: no lock (`None`); a lock whose holder is alive (`Live`);
 * a lock whose holder is gone (`Stale`, `why` says how that is known, e.g. `process 1 started at
 * another time (its PID was reused)`); or a file that is not a lock (`Unreadable`).
 *
 * @since 0.1.0
 * @category locks
 */
export type Inspected =
  | { readonly _tag: "None" }
  | { readonly _tag: "Live"; readonly owner: LockOwner }
  | { readonly _tag: "Stale"; readonly owner: LockOwner; readonly why: string }
  | { readonly _tag: "Unreadable" }

/**
 * What `acquire` found: the lock (`release` removes the file; calling it twice is harmless), with
 * `tookOver` set when a stale lock was replaced (its holder and why it was stale: `Inspected`); or
 * `Held` by a live process (`owner` undefined when the file is not a lock).
 *
 * @since 0.1.0
 * @category locks
 */
export type Acquired =
  | {
      readonly _tag: "Acquired"
      readonly release: () => Promise<void>
      readonly tookOver: { readonly owner: LockOwner; readonly why: string } | undefined
    }
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

/** `/proc/<pid>/stat`: the process's state letter and start time (ticks after boot); `undefined` without it. */
const procStat = async (pid: number | "self"): Promise<{ readonly state: string; readonly startTicks: number } | undefined> => {
  try {
    const text = await readFile(`/proc/${pid}/stat`, "utf8")
    // The command name (field 2) may hold spaces and parentheses: the fields after it follow the last `)`.
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
    const startTicks = Number(fields[19])
    return fields[0] !== undefined && Number.isSafeInteger(startTicks) ? { state: fields[0], startTicks } : undefined
  } catch {
    return undefined
  }
}

const bootId = async (): Promise<string | undefined> =>
  readFile("/proc/sys/kernel/random/boot_id", "utf8").then(
    (text) => text.trim() || undefined,
    () => undefined
  )

const pidNamespaceOf = async (pid: number | "self"): Promise<string | undefined> => readlink(`/proc/${pid}/ns/pid`).catch(() => undefined)

/** This process as a lock names it: its id, and where `/proc` is there its start, boot and namespace. */
const self = async (acquiredAtMs: number): Promise<LockOwner> => {
  const [stat, boot, namespace] = await Promise.all([procStat("self"), bootId(), pidNamespaceOf("self")])
  return {
    pid: process.pid,
    acquiredAtMs,
    ...(stat === undefined ? {} : { startTicks: stat.startTicks }),
    ...(boot === undefined ? {} : { bootId: boot }),
    ...(namespace === undefined ? {} : { pidNamespace: namespace })
  }
}

/**
 * Whether a process of PID namespace `namespace` started at `startTicks` is still running,
 * looked for among every process this one sees (a PID namespace's processes are seen from its
 * ancestors); `undefined` when a candidate's namespace cannot be read (another user's process).
 */
const aliveInNamespace = async (namespace: string, startTicks: number): Promise<boolean | undefined> => {
  let unsure = false
  for (const name of await readdir("/proc").catch(() => [] as Array<string>)) {
    if (!/^\d+$/.test(name)) continue
    const stat = await procStat(Number(name))
    if (stat === undefined || stat.startTicks !== startTicks || stat.state === "Z" || stat.state === "X") continue
    const found = await pidNamespaceOf(Number(name))
    if (found === namespace) return true
    if (found === undefined) unsure = true
  }
  return unsure ? undefined : false
}

/**
 * Why the lock of `owner` is stale, or `undefined` while its holder may be alive. A fact that
 * cannot be read (no `/proc`, an old lock without it) decides nothing; the process id's liveness
 * then does.
 */
const staleBecause = async (owner: LockOwner): Promise<string | undefined> => {
  const { pid } = owner
  const boot = owner.bootId === undefined ? undefined : await bootId()
  if (boot !== undefined && boot !== owner.bootId) return `process ${pid} ran before the machine restarted (another boot id)`
  const namespace = owner.pidNamespace === undefined ? undefined : await pidNamespaceOf("self")
  if (namespace !== undefined && owner.startTicks !== undefined && namespace !== owner.pidNamespace) {
    // The holder counted its id in another PID namespace (a container): its id means nothing here.
    const alive = await aliveInNamespace(owner.pidNamespace!, owner.startTicks)
    return alive === false ? `process ${pid} of another PID namespace (a container) is gone` : undefined
  }
  if (!processAlive(pid)) return `process ${pid} is gone`
  const stat = await procStat(pid)
  if (stat?.state === "Z" || stat?.state === "X") return `process ${pid} has ended`
  if (stat !== undefined && owner.startTicks !== undefined && stat.startTicks !== owner.startTicks) {
    return `process ${pid} started at another time (its PID was reused)`
  }
  return undefined
}

const readOwner = async (path: string): Promise<LockOwner | "missing" | undefined> => {
  let text: string
  try {
    text = await readFile(path, "utf8")
  } catch (error) {
    return (error as { readonly code?: unknown }).code === "ENOENT" ? "missing" : undefined
  }
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value !== "object" || value === null) return undefined
    const { pid, acquiredAtMs, startTicks, bootId, pidNamespace } = value as Record<string, unknown>
    if (typeof pid !== "number" || typeof acquiredAtMs !== "number") return undefined
    return {
      pid,
      acquiredAtMs,
      ...(typeof startTicks === "number" ? { startTicks } : {}),
      ...(typeof bootId === "string" ? { bootId } : {}),
      ...(typeof pidNamespace === "string" ? { pidNamespace } : {})
    }
  } catch {
    return undefined
  }
}

/**
 * What is at the lock path `path`, without touching the file (`Inspected`): its holder, and
 * whether that holder is alive (module doc: start time, boot id and PID namespace where `/proc`
 * is there, the process id's liveness elsewhere). Never rejects.
 *
 * @since 0.1.0
 * @category locks
 */
export const inspect = async (path: string): Promise<Inspected> => {
  const owner = await readOwner(path)
  if (owner === "missing") return { _tag: "None" }
  if (owner === undefined) return { _tag: "Unreadable" }
  const why = await staleBecause(owner)
  return why === undefined ? { _tag: "Live", owner } : { _tag: "Stale", owner, why }
}

/**
 * The holder of the lock at `path` when it is alive (`inspect`), without touching the file;
 * `undefined` when there is no lock, it is stale, or it cannot be read.
 *
 * @since 0.1.0
 * @category locks
 */
export const liveOwner = async (path: string): Promise<LockOwner | undefined> => {
  const found = await inspect(path)
  return found._tag === "Live" ? found.owner : undefined
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
 * Takes the lock at `path` for this process: creates the file exclusively with `LockOwner`
 * (written first under a name of its own, then linked to `path`, so it is never seen empty). When
 * it exists and its holder is alive (`inspect`), the lock is `Held`. When its holder is gone (a
 * stale lock: killed, a container's PID 1, a reused PID, another boot), the file is removed and
 * created again, once (not atomic: two takeovers in the same instant may both succeed). A lock
 * that cannot be read (not a lock file) counts as held.
 * Rejects with the runtime's `Error` (`EACCES`, `EROFS`, `ENOENT` for a missing folder, ...) when
 * the file cannot be created.
 *
 * @since 0.1.0
 * @category locks
 */
export const acquire = async (path: string, nowMs: number): Promise<Acquired> => {
  const owner = await self(nowMs)
  let released = false
  const release = async (): Promise<void> => {
    if (released) return
    released = true
    await unlink(path).catch(() => undefined)
  }
  if (await createExclusive(path, owner)) return { _tag: "Acquired", release, tookOver: undefined }
  const found = await inspect(path)
  if (found._tag === "Live") return { _tag: "Held", owner: found.owner }
  if (found._tag === "Unreadable") return { _tag: "Held", owner: undefined }
  // Stale: its holder is gone (or it vanished meanwhile). Two processes taking it over in the same
  // instant can both succeed (the second's unlink may remove the first's new lock): a remove then
  // a create is not one step.
  if (found._tag === "Stale") await unlink(path).catch(() => undefined)
  const tookOver = found._tag === "Stale" ? { owner: found.owner, why: found.why } : undefined
  if (await createExclusive(path, owner)) return { _tag: "Acquired", release, tookOver }
  const now = await inspect(path)
  return { _tag: "Held", owner: now._tag === "Live" || now._tag === "Stale" ? now.owner : undefined }
}
