/**
 * Node APIs: worker threads and child processes (which Bun and Deno also provide, so all three
 * runtimes use this file for them) and the `ws` WebSocket server and client (Node only).
 *
 * @since 0.1.0
 */
import { spawn as spawnProcess } from "node:child_process"
import { writeSync } from "node:fs"
import { getPriority, setPriority } from "node:os"
import { fileURLToPath } from "node:url"
import { MessageChannel, MessagePort, receiveMessageOnPort, Worker, workerData } from "node:worker_threads"
import { WebSocket as WsClient, WebSocketServer } from "ws"
import * as Runtime from "./detect.ts"
import type * as Types from "./types.ts"

const bytesOf = (data: unknown): Uint8Array =>
  data instanceof Uint8Array
    ? data
    : data instanceof ArrayBuffer
    ? new Uint8Array(data)
    : ArrayBuffer.isView(data)
    ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    : new Uint8Array(0)

// Node 20 runs TypeScript entries only through tsx; built `.mjs`/`.js` entries load directly.
const needsTsx = (entry: string): boolean => Runtime.detect() === "node" && /\.[cm]?ts$/.test(new URL(entry).pathname)

/**
 * Starts a worker thread running the module `entry` (a `file:` URL; TypeScript, or JavaScript
 * such as an esbuild bundle) with a dedicated message port. Under Node 20 a TypeScript entry
 * loads through `worker-bootstrap.mjs` (tsx); Bun and Deno load it directly, as every runtime
 * does a JavaScript entry. `handlers.closed` fires when the port closes (the worker's side is
 * gone and every message it posted was delivered). If `exit` comes first, messages still queued
 * on the port are drained synchronously before `handlers.exit`, so no frame posted before the
 * end is lost (but see `ChildHandlers` for Deno's `terminate()`).
 *
 * `nice` (0–19, default 0): the worker thread lowers its own scheduling priority to this nice
 * value when it connects (`workerParent`), so that the coordinator's thread wins a busy CPU.
 * Linux only, where a nice value is per thread (elsewhere it would lower the whole process,
 * coordinator included).
 *
 * @since 0.1.0
 * @category workers
 */
export const spawnWorker = (
  options: {
    readonly entry: string
    readonly rank: number
    readonly data: unknown
    readonly resourceLimits?: Types.ResourceLimits
    readonly nice?: number
  },
  handlers: Types.ChildHandlers
): Types.RawChild => {
  const { port1, port2 } = new MessageChannel()
  const url = needsTsx(options.entry) ? new URL("./worker-bootstrap.mjs", import.meta.url) : new URL(options.entry)
  const worker = new Worker(url, {
    workerData: {
      cohortEntry: options.entry,
      cohortRank: options.rank,
      cohortData: options.data,
      cohortPort: port2,
      cohortNice: options.nice ?? 0
    },
    transferList: [port2],
    ...(options.resourceLimits === undefined ? {} : { resourceLimits: { ...options.resourceLimits } })
  })
  // The runtime closes our port once the worker's port is gone; every message the worker posted
  // is queued ahead of that close, so 'close' comes after the last 'message' (checked under the
  // three runtimes with workers killed, crashing and exiting mid-burst). The port must not be
  // read from inside its own 'close' handler: `receiveMessageOnPort` there crashed Node 20.
  let closed = false
  let exited = false
  port1.on("message", (data: unknown) => handlers.message(bytesOf(data)))
  port1.on("close", () => {
    // After `exit` the port closes because we closed it: nothing to tell.
    if (exited) return
    closed = true
    handlers.closed?.()
  })
  worker.on("error", (error) => handlers.error(error))
  worker.on("exit", (code) => {
    exited = true
    if (!closed) {
      for (let next = receiveMessageOnPort(port1); next !== undefined; next = receiveMessageOnPort(port1)) {
        handlers.message(bytesOf(next.message))
      }
      port1.close()
    }
    handlers.exit(code, null)
  })
  return {
    post: (message) => port1.postMessage(message, [message.buffer as ArrayBuffer]),
    kill: () => void worker.terminate()
  }
}

interface CohortWorkerData {
  readonly cohortRank: number
  readonly cohortData: unknown
  readonly cohortPort: MessagePort
  readonly cohortNice: number
}

/**
 * Lowers the priority of `pid` (0: the calling thread on Linux) to nice value `nice`, never
 * raising it: a nice value already above `nice` (say, the launcher itself ran under `nice`) stays.
 * Raising a nice value needs no privilege; a refusal leaves the priority as it was, which only
 * costs speed.
 */
const lowerPriority = (pid: number, nice: number): void => {
  if (!(nice > 0)) return
  try {
    const target = Math.min(19, Math.floor(nice))
    if (getPriority(pid) < target) setPriority(pid, target)
  } catch {
    // Not allowed here (a sandbox, an exotic platform): run at the inherited priority.
  }
}

const processExitHooks = (): ((callback: () => void) => void) => (callback) => {
  process.on("exit", callback)
}

/**
 * Inside a worker started by `spawnWorker`: the link to the parent, or `undefined` elsewhere.
 *
 * @since 0.1.0
 * @category workers
 */
export const workerParent = (): Types.ParentLink | undefined => {
  const data = workerData as Partial<CohortWorkerData> | null
  const port = data?.cohortPort
  if (data === null || port === undefined) return undefined
  if (process.platform === "linux") lowerPriority(0, data.cohortNice ?? 0)
  return {
    rank: data.cohortRank ?? -1,
    data: data.cohortData,
    post: (message) => port.postMessage(message, [message.buffer as ArrayBuffer]),
    onMessage: (callback) => void port.on("message", (m: unknown) => callback(bytesOf(m))),
    onClose: (callback) => void port.on("close", callback),
    onExit: processExitHooks(),
    close: () => port.close()
  }
}

/**
 * A `ws` WebSocket server on `host:port` (Node). Messages over `maxPayloadBytes` close the
 * connection with 1009, reported to `close` as 1009.
 *
 * @since 0.1.0
 * @category sockets
 */
export const serveWs = (options: Types.ServeOptions): Promise<Types.RawServer> =>
  new Promise((resolve, reject) => {
    const server = new WebSocketServer({ host: options.host, port: options.port, maxPayload: options.maxPayloadBytes })
    server.on("error", reject)
    server.on("connection", (socket, request) => {
      let tooBig = false
      const handlers = options.open({
        send: (data) => socket.send(data),
        close: (code, reason) => socket.close(code, reason)
      }, request.socket.remoteAddress ?? "")
      socket.on("error", (error: Error & { code?: string }) => {
        if (error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") tooBig = true
      })
      socket.on("message", (data, isBinary) =>
        handlers.message(isBinary ? bytesOf(Array.isArray(data) ? Buffer.concat(data) : data) : String(data)))
      socket.on("close", (code) => handlers.close(tooBig ? 1009 : code))
    })
    server.on("listening", () => {
      const address = server.address()
      resolve({
        port: typeof address === "object" && address !== null ? address.port : options.port,
        close: () =>
          new Promise<void>((done) => {
            for (const client of server.clients) client.terminate()
            server.close(() => done())
          })
      })
    })
  })

/**
 * The WebSocket client constructor for this runtime: `ws` under Node, the global one under Bun
 * and Deno (TOOLCHAIN.md §3).
 *
 * @since 0.1.0
 * @category sockets
 */
export const webSocketClass = (): typeof globalThis.WebSocket =>
  (Runtime.detect() === "node" ? WsClient : globalThis.WebSocket) as unknown as typeof globalThis.WebSocket

const childEnv = "COHORT_CHILD_RANK"
const childDataEnv = "COHORT_CHILD_DATA"

/** Splits a byte stream of `u32 LE length` + message records into messages. */
const reader = (deliver: (message: Uint8Array) => void): ((chunk: Uint8Array) => void) => {
  let pending = new Uint8Array(0)
  return (chunk) => {
    let buffer = pending.byteLength === 0 ? chunk : concat(pending, chunk)
    let at = 0
    while (buffer.byteLength - at >= 4) {
      const length = new DataView(buffer.buffer, buffer.byteOffset + at, 4).getUint32(0, true)
      if (buffer.byteLength - at - 4 < length) break
      deliver(buffer.slice(at + 4, at + 4 + length))
      at += 4 + length
    }
    pending = buffer.slice(at)
    buffer = pending
  }
}

const concat = (a: Uint8Array, b: Uint8Array): Uint8Array => {
  const out = new Uint8Array(a.byteLength + b.byteLength)
  out.set(a, 0)
  out.set(b, a.byteLength)
  return out
}

const record = (message: Uint8Array): Uint8Array => {
  const out = new Uint8Array(4 + message.byteLength)
  new DataView(out.buffer).setUint32(0, message.byteLength, true)
  out.set(message, 4)
  return out
}

/**
 * Starts a child process running the module `entry` (a `file:` URL) on this runtime:
 * `node` (with `--import tsx` for a TypeScript entry), `bun`, or `deno run -A`. Messages travel over the child's stdin/stdout
 * as `u32 LE length` records; stderr is inherited. `exit` fires on `close`, after stdout has been
 * read to its end, so every message the child wrote comes first. `kill` sends `signal`
 * (default `"SIGKILL"`). `nice` (0–19, default 0): the child process's nice value, set by the
 * parent right after the start.
 *
 * @since 0.1.0
 * @category processes
 */
export const spawnChild = (
  options: { readonly entry: string; readonly rank: number; readonly data: unknown; readonly nice?: number },
  handlers: Types.ChildHandlers
): Types.RawChild => {
  const path = fileURLToPath(options.entry)
  const args = Runtime.detect() === "deno"
    ? ["run", "-A", path]
    : Runtime.detect() === "bun"
    ? [path]
    : needsTsx(options.entry)
    ? ["--import", import.meta.resolve("tsx"), path]
    : [path]
  const child = spawnProcess(process.execPath, args, {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, [childEnv]: String(options.rank), [childDataEnv]: JSON.stringify(options.data ?? null) }
  })
  if (child.pid !== undefined) lowerPriority(child.pid, options.nice ?? 0)
  const read = reader(handlers.message)
  child.stdout?.on("data", (chunk: Uint8Array) => read(chunk))
  child.stdin?.on("error", () => {})
  child.on("error", (error) => handlers.error(error))
  child.on("close", (code, signal) => handlers.exit(code, signal))
  return {
    post: (message) => void child.stdin?.write(record(message)),
    kill: (signal) => void child.kill((signal ?? "SIGKILL") as NodeJS.Signals)
  }
}

/**
 * Inside a child process started by `spawnChild`: the link to the parent over stdin/stdout, or
 * `undefined` elsewhere. Writes are synchronous (`writeSync` on fd 1), so nothing written is
 * lost when the child exits.
 *
 * @since 0.1.0
 * @category processes
 */
export const processParent = (): Types.ParentLink | undefined => {
  const rank = process.env[childEnv]
  if (rank === undefined) return undefined
  return {
    rank: Number(rank),
    data: JSON.parse(process.env[childDataEnv] ?? "null") as unknown,
    post: (message) => {
      const bytes = record(message)
      for (let at = 0; at < bytes.byteLength;) {
        try {
          at += writeSync(1, bytes, at)
        } catch (error) {
          // A non-blocking stdout pipe that is full: wait for the parent to read.
          if ((error as { code?: string }).code !== "EAGAIN") throw error
        }
      }
    },
    onMessage: (callback) => {
      const read = reader(callback)
      process.stdin.on("data", (chunk: Uint8Array) => read(chunk))
    },
    onClose: (callback) => void process.stdin.on("end", callback),
    onExit: processExitHooks(),
    close: () => process.stdin.destroy()
  }
}
