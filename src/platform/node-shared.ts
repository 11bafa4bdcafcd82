/**
 * What the worker-thread and child-process halves of the Node adapter share (`node-worker.ts`,
 * `node-child.ts`; `node.ts` re-exports their public names): the bytes of a posted message, whether
 * an entry needs tsx, the redirect of a thread's printed output, lowering a thread's or process's
 * priority, and exit hooks. Internal to `src/platform/`.
 *
 * @since 0.1.0
 */
import { Console } from "node:console"
import { getPriority, setPriority } from "node:os"
import { Writable } from "node:stream"
import * as Runtime from "./detect.ts"

/** The bytes of a posted message (a view on the same memory; empty for anything else). @since 0.1.0 @category internal */
export const bytesOf = (data: unknown): Uint8Array =>
  data instanceof Uint8Array
    ? data
    : data instanceof ArrayBuffer
      ? new Uint8Array(data)
      : ArrayBuffer.isView(data)
        ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
        : new Uint8Array(0)

/**
 * Whether the entry (`file:` URL) needs tsx to load: Node 20 runs TypeScript entries only through
 * tsx; built `.mjs`/`.js` entries load directly, and Bun and Deno load TypeScript themselves.
 *
 * @since 0.1.0
 * @category internal
 */
export const needsTsx = (entry: string): boolean => Runtime.detect() === "node" && /\.[cm]?ts$/.test(new URL(entry).pathname)

const consoleMethods = [
  "log",
  "info",
  "debug",
  "warn",
  "error",
  "trace",
  "dir",
  "dirxml",
  "table",
  "assert",
  "group",
  "groupCollapsed",
  "groupEnd",
  "count",
  "countReset",
  "time",
  "timeEnd",
  "timeLog"
] as const

/**
 * Sends everything the calling thread prints through `console`, `process.stdout` or
 * `process.stderr` to `post(stream, bytes)` (1: stdout, 2: stderr; `bytes` a fresh copy, never
 * empty), synchronously, instead of the thread's stdout and stderr.
 *
 * @since 0.1.0
 * @category internal
 */
export const redirectOutput = (post: (stream: 1 | 2, bytes: Uint8Array) => void): void => {
  const encoder = new TextEncoder()
  const postChunk = (stream: 1 | 2, chunk: unknown): void => {
    const bytes = typeof chunk === "string" ? encoder.encode(chunk) : bytesOf(chunk).slice()
    if (bytes.byteLength > 0) post(stream, bytes)
  }
  const writer =
    (stream: 1 | 2) =>
    (chunk: unknown, encodingOrDone?: unknown, done?: unknown): boolean => {
      postChunk(stream, chunk)
      const callback = typeof encodingOrDone === "function" ? encodingOrDone : done
      if (typeof callback === "function") queueMicrotask(() => (callback as () => void)())
      return true
    }
  process.stdout.write = writer(1) as typeof process.stdout.write
  process.stderr.write = writer(2) as typeof process.stderr.write
  // Console writes synchronously into these (each write is posted at once, never queued).
  const streamOf = (stream: 1 | 2): Writable =>
    new Writable({
      decodeStrings: false,
      write: (chunk: unknown, _encoding, done) => {
        postChunk(stream, chunk)
        done()
      }
    })
  const sink = new Console({ stdout: streamOf(1), stderr: streamOf(2) })
  const target = console as unknown as Record<string, unknown>
  const source = sink as unknown as Record<string, unknown>
  for (const method of consoleMethods) {
    const fn = source[method]
    if (typeof fn === "function") target[method] = (fn as (...args: Array<unknown>) => unknown).bind(sink)
  }
}

/**
 * Lowers the priority of `pid` (0: the calling thread on Linux) to nice value `nice`, never
 * raising it: a nice value already above `nice` (say, the launcher itself ran under `nice`) stays.
 * Raising a nice value needs no privilege; a refusal leaves the priority as it was, which only
 * costs speed.
 *
 * @since 0.1.0
 * @category internal
 */
export const lowerPriority = (pid: number, nice: number): void => {
  if (!(nice > 0)) return
  try {
    const target = Math.min(19, Math.floor(nice))
    if (getPriority(pid) < target) setPriority(pid, target)
  } catch {
    // Not allowed here (a sandbox, an exotic platform): run at the inherited priority.
  }
}

/** `onExit` of a parent link: runs `callback` at the process's (or worker's) exit. @since 0.1.0 @category internal */
export const processExitHooks = (): ((callback: () => void) => void) => (callback) => {
  process.on("exit", callback)
}
