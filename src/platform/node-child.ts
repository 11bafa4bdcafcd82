/**
 * Node APIs for child processes (which Bun and Deno also provide, so all three runtimes use this
 * file for them): starting a rank's process with its frame channel (`frameFd`) and its host's
 * stderr (`hostStderrFd`), the child's side of its link to the parent, and how a rank's
 * out-of-memory end is told. `node.ts` re-exports it.
 *
 * @since 0.1.0
 */
import { spawn as spawnProcess } from "node:child_process"
import { createReadStream, openSync, type ReadStream, writeSync } from "node:fs"
import { Socket } from "node:net"
import { fileURLToPath } from "node:url"
import * as Beater from "./beater.ts"
import * as Runtime from "./detect.ts"
import { lowerPriority, needsTsx, processExitHooks, redirectOutput } from "./node-shared.ts"
import type * as Types from "./types.ts"

/**
 * The error code of a rank ended for going over its memory limit, beside Node's and Deno's
 * `ERR_WORKER_OUT_OF_MEMORY` for a worker past its `resourceLimits`.
 *
 * @since 0.1.0
 * @category processes
 */
export const outOfMemoryCode = "ERR_RANK_OUT_OF_MEMORY"

/** Whether `error` says its rank ran out of memory (a worker's or a process's). @since 0.1.0 @category processes */
export const isOutOfMemory = (error: unknown): boolean => {
  const code = (error as { readonly code?: unknown } | undefined)?.code
  return code === outOfMemoryCode || code === "ERR_WORKER_OUT_OF_MEMORY"
}

const childEnv = "COHORT_CHILD_RANK"
const childDataEnv = "COHORT_CHILD_DATA"
const childHostStderrEnv = "COHORT_CHILD_HOST_STDERR"

/**
 * The file descriptor under which a child process started by `spawnChild` under Node or Bun
 * finds its host's own stderr (stdio entry 4, a copy of the host's fd 2): where the child writes
 * once its host is gone and its own stdout and stderr pipes lead nowhere. Deno 2.9.6 cannot pass
 * a descriptor to a child (an integer stdio entry gives the child a pipe of its own and
 * `/dev/null` as stderr), so a child of a Deno host opens `/proc/<host pid>/fd/2` instead while
 * the host lives (Linux).
 *
 * @since 0.1.0
 * @category processes
 */
export const hostStderrFd = 4

/**
 * The file descriptor of a child process's frame channel: a socket pair set up by `spawnChild`
 * (the child's stdio entry 3), carrying frames both ways. Its stdin is `/dev/null`; its stdout and
 * stderr are the rank's own output.
 *
 * @since 0.1.0
 * @category processes
 */
export const frameFd = 3

/**
 * Splits a byte stream of `u32 LE length` + message records into messages, copying each byte
 * once: a record's body is allocated when its header is read and filled as chunks arrive.
 * A header over `recordBytesMax` calls `oversized(length)` before anything of the record is
 * buffered, and every later byte is ignored.
 */
const reader = (
  deliver: (message: Uint8Array) => void,
  recordBytesMax = Number.POSITIVE_INFINITY,
  oversized: (lengthBytes: number) => void = () => {}
): ((chunk: Uint8Array) => void) => {
  const header = new Uint8Array(4)
  let headerFilled = 0
  let body: Uint8Array | undefined
  let bodyFilled = 0
  let stopped = false
  return (chunk) => {
    let at = 0
    while (!stopped && at < chunk.byteLength) {
      if (body === undefined) {
        const taken = Math.min(4 - headerFilled, chunk.byteLength - at)
        header.set(chunk.subarray(at, at + taken), headerFilled)
        headerFilled += taken
        at += taken
        if (headerFilled < 4) return
        headerFilled = 0
        const length = new DataView(header.buffer).getUint32(0, true)
        if (length > recordBytesMax) {
          stopped = true
          oversized(length)
          return
        }
        body = new Uint8Array(length)
        bodyFilled = 0
      }
      const taken = Math.min(body.byteLength - bodyFilled, chunk.byteLength - at)
      body.set(chunk.subarray(at, at + taken), bodyFilled)
      bodyFilled += taken
      at += taken
      if (bodyFilled === body.byteLength) {
        const message = body
        body = undefined
        deliver(message)
      }
    }
  }
}

const record = (message: Uint8Array): Uint8Array => {
  const out = new Uint8Array(4 + message.byteLength)
  new DataView(out.buffer).setUint32(0, message.byteLength, true)
  out.set(message, 4)
  return out
}

/**
 * How long a child's end waits for its pipes to be read to their end, in ms: a grandchild that
 * kept a copy of one holds it open past the child's exit.
 */
const childDrainMsMax = 2_000

/** Resolves once `stream` ended or closed (at once without one), or after `boundMs`. */
const streamEnded = (stream: NodeJS.ReadableStream | null | undefined, boundMs: number): Promise<void> =>
  new Promise((resolve) => {
    const s = stream as (NodeJS.ReadableStream & { readonly readableEnded?: boolean; readonly destroyed?: boolean }) | null | undefined
    if (s === null || s === undefined || s.readableEnded === true || s.destroyed === true) return resolve()
    const timer = setTimeout(resolve, boundMs)
    const done = (): void => {
      clearTimeout(timer)
      resolve()
    }
    s.once("end", done)
    s.once("close", done)
    s.once("error", done)
  })

/**
 * Starts a child process running the module `entry` (a `file:` URL) on this runtime:
 * `node` (with `--import tsx` for a TypeScript entry), `bun`, or `deno run -A`. Messages travel
 * both ways as `u32 LE length` records on a channel of their own, the child's fd 3 (`frameFd`; a
 * socket pair, the same on Node 20, Bun 1.4.5 and Deno 2.9.6), never on stdout. The child's stdin
 * is `/dev/null`; what it writes to stdout and stderr goes to `handlers.output`. A record whose
 * header announces more than `messageBytesMax` bytes (default unbounded) calls
 * `handlers.oversized` before any of it is buffered, and the channel is read no further.
 * `exit` fires after `close` once the frame channel, stdout and stderr have been read to their
 * end (each waited for at most 2 s), so every message and every line the child wrote comes first. `kill` sends `signal`
 * (default `"SIGKILL"`). `nice` (0–19, default 0): the child process's nice value, set by the
 * parent right after the start.
 *
 * `heapLimitMb` (default none): V8's old-generation limit in MiB, `--max-old-space-size` under
 * Node and `--v8-flags=--max-old-space-size` under Deno (Bun has no such limit and ignores it).
 * V8 aborts a process at its limit (Node: `SIGABRT`, Deno: `SIGTRAP`, after printing its last
 * GCs on stderr); such an end is passed to `handlers.error` as an out-of-memory error (code
 * `outOfMemoryCode`) before `exit`.
 *
 * @since 0.1.0
 * @category processes
 */
export const spawnChild = (
  options: {
    readonly entry: string
    readonly rank: number
    readonly data: unknown
    readonly nice?: number
    readonly heapLimitMb?: number
    readonly messageBytesMax?: number
  },
  handlers: Types.ChildHandlers
): Types.RawChild => {
  const path = fileURLToPath(options.entry)
  const limit = options.heapLimitMb
  const runtime = Runtime.detect()
  const args =
    runtime === "deno"
      ? ["run", "-A", ...(limit === undefined ? [] : [`--v8-flags=--max-old-space-size=${limit}`]), path]
      : runtime === "bun"
        ? [path]
        : [
            ...(limit === undefined ? [] : [`--max-old-space-size=${limit}`]),
            ...(needsTsx(options.entry) ? ["--import", import.meta.resolve("tsx")] : []),
            path
          ]
  // The host's stderr goes along as fd 4 (`hostStderrFd`) where the runtime can pass one.
  const passesFd = runtime !== "deno"
  const child = spawnProcess(process.execPath, args, {
    stdio: passesFd ? ["ignore", "pipe", "pipe", "pipe", 2] : ["ignore", "pipe", "pipe", "pipe"],
    env: {
      ...process.env,
      [childEnv]: String(options.rank),
      [childDataEnv]: JSON.stringify(options.data ?? null),
      [childHostStderrEnv]: passesFd ? String(hostStderrFd) : "proc"
    }
  })
  if (child.pid !== undefined) lowerPriority(child.pid, options.nice ?? 0)
  const frames = child.stdio[3] as NodeJS.ReadWriteStream | null | undefined
  const read = reader(handlers.message, options.messageBytesMax, (length) => handlers.oversized?.(length))
  frames?.on("data", (chunk: Uint8Array) => read(chunk))
  frames?.on("error", () => {})
  // Always read stdout and stderr, so that a child never blocks on a full pipe.
  child.stdout?.on("data", (chunk: Uint8Array) => handlers.output?.("stdout", chunk))
  child.stderr?.on("data", (chunk: Uint8Array) => handlers.output?.("stderr", chunk))
  child.on("error", (error) => handlers.error(error))
  // Node's `close` comes after every pipe's end; Bun's and Deno's may come first, with the child's
  // last frames (its `Crashing`) and lines still unread: `exit` waits for their ends, within a bound.
  const drained = Promise.all([frames, child.stdout, child.stderr].map((stream) => streamEnded(stream, childDrainMsMax)))
  child.on("close", (code, signal) => void drained.then(() => closed(code, signal)))
  const closed = (code: number | null, signal: NodeJS.Signals | null): void => {
    // V8's fatal out-of-memory abort; with a heap limit set, reaching it is what aborts a rank.
    if (limit !== undefined && runtime !== "bun" && (signal === "SIGABRT" || signal === "SIGTRAP")) {
      handlers.error(
        Object.assign(new Error(`out of memory: the rank's process aborted (${signal}) at its heap limit of ${limit} MiB`), {
          code: outOfMemoryCode
        })
      )
    }
    handlers.exit(code, signal)
  }
  return {
    post: (message) => void frames?.write(record(message)),
    kill: (signal) => void child.kill((signal ?? "SIGKILL") as NodeJS.Signals)
  }
}

/**
 * How long a child's write to a full frame channel waits for its host to read, in ms, before the
 * channel counts as broken (`processParent`): 10000 ms, so that a rank whose host stopped reading
 * (stopped, or stuck) neither spins nor waits forever. A host that stops for longer loses the rank.
 *
 * @since 0.1.0
 * @category processes
 */
export const frameWriteBlockedMsMaxDefault = 10_000

// A 1 ms sleep that blocks the thread without spinning (a full channel waits for the host to read).
const sleepCell = new Int32Array(new SharedArrayBuffer(4))
const sleepMs = (ms: number): void => void Atomics.wait(sleepCell, 0, 0, ms)

/** The host's stderr as the child can reach it, opened while the host lives; `undefined` if not. */
const openHostStderr = (): number | undefined => {
  const how = process.env[childHostStderrEnv]
  if (how === String(hostStderrFd)) return hostStderrFd
  if (how !== "proc") return undefined
  try {
    // A new open file description of the host's stderr (a pipe, a terminal or a file, appended to).
    return openSync(`/proc/${process.ppid}/fd/2`, "a")
  } catch {
    // A socket (ENXIO) cannot be opened again through /proc: the child has nowhere to write.
    return undefined
  }
}

/**
 * Inside a child process started by `spawnChild`: the link to the parent over the frame channel
 * (`frameFd`), or `undefined` elsewhere. Writes are synchronous (`writeSync`), so nothing
 * written is lost when the child exits. The child's stdout and stderr stay free for its own
 * output.
 *
 * The host's death is an expected condition, never a thrown error: a write that fails (`EPIPE`,
 * `ECONNRESET`, any error but `EAGAIN`) or that finds the channel full for more than
 * `frameWriteBlockedMsMax` ms (default `frameWriteBlockedMsMaxDefault`; it waits in 1 ms sleeps,
 * never spinning) breaks the link: later posts are dropped and `onClose` callbacks run, once,
 * as they do when the channel reaches its end or fails on read. `detach()` then sends what the
 * child prints to its host's own stderr (`hostStderrFd`), where its pipes led nowhere.
 *
 * @since 0.1.0
 * @category processes
 */
export const processParent = (options?: { readonly frameWriteBlockedMsMax?: number }): Types.ParentLink | undefined => {
  const rank = process.env[childEnv]
  if (rank === undefined) return undefined
  // Ctrl-C in a terminal signals the whole process group, rank processes included: a rank leaves
  // when its coordinator says so (after saving) or when it is gone, never on the terminal's SIGINT.
  process.on("SIGINT", () => {})
  const blockedMsMax = options?.frameWriteBlockedMsMax ?? frameWriteBlockedMsMaxDefault
  const hostStderr = openHostStderr()
  // Reading the fd: under Node a `net.Socket` (event-loop reads; `createReadStream` would block a
  // thread-pool thread in read(2), and Node joins those threads at exit, so `process.exit` hung).
  // Under Bun a `net.Socket` on the fd fails with ECONNRESET and under Deno it takes the fd away
  // from `writeSync`; `createReadStream` works on both and lets them exit. The fd stays open for
  // writes after the end.
  let input: ReadStream | Socket | undefined
  let broken = false
  const closeCallbacks: Array<() => void> = []
  const brokenNow = (): void => {
    if (broken) return
    broken = true
    // Later, not inside the write that failed: the caller may be in the middle of a flush.
    for (const callback of closeCallbacks.splice(0)) queueMicrotask(callback)
  }
  const frames = (): ReadStream | Socket => {
    if (input !== undefined) return input
    input =
      Runtime.detect() === "node"
        ? new Socket({ fd: frameFd, readable: true, writable: false, allowHalfOpen: true })
        : createReadStream("", { fd: frameFd, autoClose: false })
    input.on("end", brokenNow)
    input.on("error", brokenNow)
    return input
  }
  const beater = Beater.make(frameFd, blockedMsMax)
  const write = (bytes: Uint8Array): boolean => {
    let blockedSinceMs: number | undefined
    for (let at = 0; at < bytes.byteLength; ) {
      try {
        at += writeSync(frameFd, bytes, at)
        blockedSinceMs = undefined
      } catch (error) {
        // A full channel (non-blocking): wait for the parent to read, within the bound.
        if ((error as { code?: string }).code === "EAGAIN") {
          const now = Date.now()
          blockedSinceMs ??= now
          if (now - blockedSinceMs <= blockedMsMax) {
            sleepMs(1)
            continue
          }
        }
        return false
      }
    }
    return true
  }
  return {
    rank: Number(rank),
    data: JSON.parse(process.env[childDataEnv] ?? "null") as unknown,
    post: (message) => {
      if (broken) return
      if (beater.broken()) return brokenNow()
      const bytes = record(message)
      // The beater's records go on the same channel: one record at a time, whole.
      beater.lock()
      const written = write(bytes)
      beater.unlock()
      if (!written) brokenNow()
    },
    beatWhile: (message, intervalMs, forMs) => (broken ? () => {} : beater.beatWhile(record(message), intervalMs, forMs)),
    onMessage: (callback) => {
      const read = reader(callback)
      frames().on("data", (chunk: Uint8Array | string) => read(chunk as Uint8Array))
    },
    onClose: (callback) => {
      frames()
      if (broken) queueMicrotask(callback)
      else closeCallbacks.push(callback)
    },
    onExit: processExitHooks(),
    close: () => void frames().destroy(),
    detach: () => {
      const write = (bytes: Uint8Array): void => {
        if (hostStderr === undefined) return
        try {
          writeSync(hostStderr, bytes)
        } catch {
          // The host's stderr is gone too: nobody is left to read it.
        }
      }
      // The pipes to the dead host fail on write: their errors are expected, never thrown.
      process.stdout.on("error", () => {})
      process.stderr.on("error", () => {})
      redirectOutput((_stream, bytes) => write(bytes))
      return (line) => write(new TextEncoder().encode(`${line}\n`))
    }
  }
}
