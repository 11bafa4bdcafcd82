/**
 * File access for code outside `src/platform/` (the bundled workload's dataset loading
 * and model saves). `node:fs/promises` and `node:module` behave the same on Node 20, Bun and Deno
 * (with `-A`), so one file serves all three runtimes.
 *
 * Paths are file-system paths (absolute, or relative to the working directory) with `/`
 * separators. Every function rejects with the runtime's own `Error` (its `code` is `ENOENT`,
 * `EACCES`, ... as on Node) when the operating system refuses; none retries.
 *
 * @since 0.1.0
 */
import { constants as fsConstants, createWriteStream } from "node:fs"
import { access, mkdir as mkdirFs, open, readFile as readFileFs, rename, stat, writeFile as writeFileFs } from "node:fs/promises"
import { createRequire } from "node:module"
import { resolve as resolvePath } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

/**
 * Reads a whole file as bytes.
 *
 * @since 0.1.0
 * @category files
 */
export const readFile = async (path: string): Promise<Uint8Array> => {
  const buffer = await readFileFs(path)
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
}

/**
 * What `readRegularFile` found: the bytes; or `NotRegular` (`kind`: `directory`, `fifo`, `device`,
 * `socket` or `other`; symbolic links are followed, so a link to `/dev/zero` is a `device`); or
 * `TooLarge` (`bytes`: the size seen, above `bytesMax`).
 *
 * @since 0.1.0
 * @category files
 */
export type RegularFileRead =
  | { readonly _tag: "Read"; readonly bytes: Uint8Array }
  | { readonly _tag: "NotRegular"; readonly kind: "directory" | "fifo" | "device" | "socket" | "other" }
  | { readonly _tag: "TooLarge"; readonly bytes: number; readonly bytesMax: number }

const kindOf = (info: {
  isDirectory(): boolean
  isFIFO(): boolean
  isCharacterDevice(): boolean
  isBlockDevice(): boolean
  isSocket(): boolean
}) =>
  info.isDirectory()
    ? ("directory" as const)
    : info.isFIFO()
      ? ("fifo" as const)
      : info.isCharacterDevice() || info.isBlockDevice()
        ? ("device" as const)
        : info.isSocket()
          ? ("socket" as const)
          : ("other" as const)

/**
 * Reads a whole regular file of at most `bytesMax` bytes. The file is opened without blocking
 * (`O_NONBLOCK`: a named pipe with no writer never hangs the caller) and checked on the open handle,
 * so that it cannot be swapped between the check and the read; reading stops past `bytesMax`
 * bytes, so a file that grows meanwhile is still bounded. Rejects with the runtime's `Error`
 * (`ENOENT`, `EACCES`, ...) when the file cannot be opened or read.
 *
 * @since 0.1.0
 * @category files
 */
export const readRegularFile = async (path: string, bytesMax: number): Promise<RegularFileRead> => {
  const handle = await open(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK)
  try {
    const info = await handle.stat()
    if (!info.isFile()) return { _tag: "NotRegular", kind: kindOf(info) }
    if (info.size > bytesMax) return { _tag: "TooLarge", bytes: info.size, bytesMax }
    let buffer = new Uint8Array(info.size + 1)
    let length = 0
    for (;;) {
      if (length === buffer.length) {
        // The file grew since the check: keep reading, still bounded by bytesMax + 1.
        const grown = new Uint8Array(Math.min(bytesMax + 1, buffer.length * 2))
        grown.set(buffer)
        buffer = grown
      }
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null)
      if (bytesRead === 0) break
      length += bytesRead
      if (length > bytesMax) return { _tag: "TooLarge", bytes: length, bytesMax }
    }
    return { _tag: "Read", bytes: buffer.subarray(0, length) }
  } finally {
    await handle.close()
  }
}

/**
 * Reads a regular file of at most `bytesMax` bytes as `readRegularFile` does (the same checks, the
 * same errors), handing it to `onChunk` in pieces of at most `chunkBytes` (default 1 MiB) instead
 * of keeping it whole: the caller's memory stays its own. `Read` then carries the bytes read;
 * `TooLarge` may come after some chunks were handed over (a file that grew past the bound).
 *
 * @since 0.1.0
 * @category files
 */
export const readRegularFileChunks = async (
  path: string,
  bytesMax: number,
  onChunk: (bytes: Uint8Array) => void,
  chunkBytes = 1024 * 1024
): Promise<{ readonly _tag: "Read"; readonly bytes: number } | Exclude<RegularFileRead, { readonly _tag: "Read" }>> => {
  const handle = await open(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK)
  try {
    const info = await handle.stat()
    if (!info.isFile()) return { _tag: "NotRegular", kind: kindOf(info) }
    if (info.size > bytesMax) return { _tag: "TooLarge", bytes: info.size, bytesMax }
    const buffer = new Uint8Array(Math.max(1, chunkBytes))
    let length = 0
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null)
      if (bytesRead === 0) break
      length += bytesRead
      // The file grew since the check: still bounded by bytesMax.
      if (length > bytesMax) return { _tag: "TooLarge", bytes: length, bytesMax }
      onChunk(buffer.subarray(0, bytesRead))
    }
    return { _tag: "Read", bytes: length }
  } finally {
    await handle.close()
  }
}

/**
 * What is at `path` (symbolic links followed): `file`, `directory`, `other` (a pipe, device or
 * socket), or `missing` when nothing is there or it cannot be seen. Never rejects.
 *
 * @since 0.1.0
 * @category files
 */
export const kind = async (path: string): Promise<"file" | "directory" | "other" | "missing"> => {
  try {
    const info = await stat(path)
    return info.isFile() ? "file" : info.isDirectory() ? "directory" : "other"
  } catch {
    return "missing"
  }
}

/**
 * Writes `data` to `path`, replacing the file if it exists; a string is written as UTF-8. The
 * parent folder must exist (see `mkdir`).
 *
 * @since 0.1.0
 * @category files
 */
export const writeFile = async (path: string, data: Uint8Array | string): Promise<void> => {
  await writeFileFs(path, data)
}

/**
 * Writes a secret (a run token) to a new file `path` readable and writable by its owner only
 * (mode 0600, set at creation: the file is never readable by others, not even for a moment).
 * Rejects with `EEXIST` when `path` exists. The parent folder must exist.
 *
 * @since 0.1.0
 * @category files
 */
export const writeSecretFile = async (path: string, data: string): Promise<void> => {
  const handle = await open(path, "wx", 0o600)
  try {
    await handle.writeFile(data)
  } finally {
    await handle.close()
  }
}

/**
 * Writes `data` to `path` atomically: to `<path>.tmp` first, synced to disk (fsync), then renamed
 * over `path`, so that a reader sees the old file or the whole new one, never a part (a crash or a
 * kill in the middle leaves at most the `.tmp` file). The parent folder must exist.
 *
 * @since 0.1.0
 * @category files
 */
export const writeFileAtomic = async (path: string, data: Uint8Array | string): Promise<void> => {
  const temporary = `${path}.tmp`
  const handle = await open(temporary, "w")
  try {
    await writeAll(handle, typeof data === "string" ? encoder.encode(data) : data)
    await handle.sync()
  } finally {
    await handle.close()
  }
  await rename(temporary, path)
}

/**
 * Syncs the folder `path` itself (fsync of its entry list), so that a rename into it survives a
 * crash of the machine, not only of the process. Best effort: where the runtime or the file
 * system cannot open a folder for syncing (some platforms refuse), it does nothing.
 *
 * @since 0.1.0
 * @category files
 */
export const syncDir = async (path: string): Promise<void> => {
  let handle: Awaited<ReturnType<typeof open>> | undefined
  try {
    handle = await open(path, "r")
    await handle.sync()
  } catch {
    // Not every platform syncs a folder; the files themselves were synced before their rename.
  } finally {
    await handle?.close().catch(() => {})
  }
}

const encoder = new TextEncoder()

/** Writes every byte (a `write` may take fewer than it was given). */
const writeAll = async (handle: Awaited<ReturnType<typeof open>>, bytes: Uint8Array): Promise<void> => {
  let offset = 0
  while (offset < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset, null)
    offset += bytesWritten
  }
}

/**
 * An append-only journal file with a handle of its own: `append` queues text (whole lines, UTF-8)
 * and returns at once; queued text is written in order as soon as the write before it is done
 * (no timer: a line reaches the operating system within milliseconds, so `tail -f` follows it).
 * `sync` resolves once everything appended before it is written and synced to disk (fsync);
 * `close` writes what is queued, syncs and closes. Nothing is ever rewritten: a crash can cut at
 * most the last line short. The first write error is kept in `error`, handed to `openJournal`'s
 * `onError` at once, and later text is dropped (a journal that cannot be written must not stop its
 * writer by throwing: it is told, and decides); `sync` and `close` never reject.
 *
 * @since 0.1.0
 * @category files
 */
export interface Journal {
  readonly append: (text: string) => void
  readonly sync: () => Promise<void>
  readonly close: () => Promise<void>
  readonly error: () => unknown
}

/**
 * Opens `path` as a `Journal` (created if missing, else appended to; the parent folder must
 * exist). `onError` is called once, with the runtime's `Error` (`ENOSPC`, `EIO`, `EROFS`, ...), as
 * soon as a write or a sync fails. Rejects with the runtime's `Error` when the file cannot be opened.
 *
 * @since 0.1.0
 * @category files
 */
export const openJournal = async (path: string, onError?: (error: unknown) => void): Promise<Journal> => {
  const handle = await open(path, "a")
  let queued: Array<string> = []
  let failed: unknown
  const fail = (error: unknown): void => {
    if (failed !== undefined) return
    failed = error
    try {
      onError?.(error)
    } catch {
      // The writer's observer must not break the journal's own bookkeeping.
    }
  }
  let closed = false
  let drained: Promise<void> = Promise.resolve()
  let draining = false
  const drain = (): Promise<void> => {
    if (draining) return drained
    draining = true
    drained = (async () => {
      try {
        while (queued.length > 0 && failed === undefined) {
          const text = queued.join("")
          queued = []
          await writeAll(handle, encoder.encode(text))
        }
      } catch (error) {
        fail(error)
      } finally {
        draining = false
      }
    })()
    return drained
  }
  const sync = async (): Promise<void> => {
    // Text appended while a write was going on waits for the next round.
    while (draining || (queued.length > 0 && failed === undefined)) await drain()
    if (failed !== undefined || closed) return
    try {
      await handle.sync()
    } catch (error) {
      fail(error)
    }
  }
  return {
    append: (text) => {
      if (failed !== undefined || closed) return
      queued.push(text)
      void drain()
    },
    sync,
    close: async () => {
      if (closed) return
      await sync()
      closed = true
      await handle.close().catch(() => undefined)
    },
    error: () => failed
  }
}

/**
 * A file open for appending text: `write` queues `text` (UTF-8) without waiting; `close` resolves
 * once everything queued is written, or the file could not be. Write errors are swallowed (a log
 * that cannot be written must not stop its writer), and later writes are dropped.
 *
 * @since 0.1.0
 * @category files
 */
export interface Appender {
  readonly write: (text: string) => void
  readonly close: () => Promise<void>
}

/**
 * Opens `path` for appending (created if missing; the parent folder must exist).
 *
 * @since 0.1.0
 * @category files
 */
export const openAppend = (path: string): Appender => {
  const stream = createWriteStream(path, { flags: "a" })
  let failed = false
  const closed = new Promise<void>((resolve) => {
    stream.on("close", resolve)
    stream.on("error", () => {
      failed = true
      resolve()
    })
  })
  return {
    write: (text) => {
      if (!failed) stream.write(text)
    },
    close: () => {
      if (!failed) stream.end()
      return closed
    }
  }
}

/**
 * Creates a folder and any missing parents; succeeds if it already exists. Rejects with the
 * runtime's `Error` naming the real cause (`EROFS` on a read-only file system, `EACCES`), never
 * the `ENOENT` a recursive create reports there.
 *
 * @since 0.1.0
 * @category files
 */
export const mkdir = async (path: string): Promise<void> => {
  try {
    await mkdirFs(path, { recursive: true })
  } catch (error) {
    // Node's recursive mkdir says ENOENT when a folder cannot be created on a read-only file
    // system: create the first missing folder alone, which fails with the real cause (EROFS, EACCES).
    if ((error as { readonly code?: unknown }).code !== "ENOENT") throw error
    throw (await firstMissingError(resolvePath(path))) ?? error
  }
}

/** The error of creating, alone, the first folder of `path` that does not exist; `undefined` if that works. */
const firstMissingError = async (path: string): Promise<unknown> => {
  const parts = path.split("/")
  for (let at = 2; at <= parts.length; at++) {
    const prefix = parts.slice(0, at).join("/")
    if (await exists(prefix)) continue
    try {
      await mkdirFs(prefix)
      return undefined
    } catch (error) {
      return error
    }
  }
  return undefined
}

/**
 * Whether `path` exists (file or folder). Never rejects: any failure to see it gives `false`.
 *
 * @since 0.1.0
 * @category files
 */
export const exists = async (path: string): Promise<boolean> => {
  try {
    await access(path)
    return true
  } catch {
    return false
  }
}

/**
 * The file-system path of a file inside an installed package, resolved with Node's package
 * resolution from the module at `fromUrl` (pass `import.meta.url`), e.g.
 * `resolvePackageFile("mnist/src/digits/0.json", import.meta.url)`. Uses `createRequire` because
 * `import.meta.resolve` is unavailable for transformed modules under vitest on Deno.
 *
 * Throws the runtime's `MODULE_NOT_FOUND` error when the package or file is missing.
 *
 * @since 0.1.0
 * @category files
 */
export const resolvePackageFile = (specifier: string, fromUrl: string): string => createRequire(fromUrl).resolve(specifier)

/**
 * A `file:` URL for a path (relative paths resolve against the working directory); a string that
 * already is a `file:` URL is returned as it is.
 *
 * @since 0.1.0
 * @category files
 */
export const fileUrl = (path: string): string => (path.startsWith("file:") ? path : pathToFileURL(resolvePath(path)).href)

/**
 * An absolute path for `path` (resolved against the working directory).
 *
 * @since 0.1.0
 * @category files
 */
export const absolutePath = (path: string): string => resolvePath(path)

/**
 * The URL of another module of this package, `path` written as in the source tree (`./rank.ts`)
 * and resolved from `fromUrl` (pass `import.meta.url`): in the published package, whose modules
 * are built JavaScript (`from` ends in `.js`), the `.ts` name becomes `.js`.
 *
 * @since 0.1.0
 * @category files
 */
export const moduleUrl = (path: string, fromUrl: string): URL =>
  new URL(fromUrl.endsWith(".js") ? path.replace(/\.ts$/, ".js") : path, fromUrl)

/**
 * The file-system path of a `file:` URL; any other string is returned as it is.
 *
 * @since 0.1.0
 * @category files
 */
export const pathOf = (url: string): string => (url.startsWith("file:") ? fileURLToPath(url) : url)

/**
 * Whether this process can open a file descriptor now: opens `path` (a file or a directory)
 * read-only and closes it. `undefined` when it could (or failed for another reason than a
 * shortage); `{code, message}` when the process or the system is out of descriptors (`EMFILE`,
 * `ENFILE`). Never rejects.
 *
 * @since 0.1.0
 * @category files
 */
export const descriptorShortage = async (path: string): Promise<{ readonly code: string; readonly message: string } | undefined> => {
  try {
    await (await open(path, "r")).close()
    return undefined
  } catch (error) {
    const code = (error as { readonly code?: unknown }).code
    return code === "EMFILE" || code === "ENFILE" ? { code, message: (error as Error).message } : undefined
  }
}
