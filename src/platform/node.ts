/**
 * Node APIs: worker threads and child processes (which Bun and Deno also provide, so all three
 * runtimes use this file for them) and the `ws` WebSocket server and client (Node only).
 *
 * @since 0.1.0
 */
import { spawn as spawnProcess } from "node:child_process"
import { Console } from "node:console"
import { createReadStream, openSync, type ReadStream, writeSync } from "node:fs"
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http"
import { Socket } from "node:net"
import { Writable } from "node:stream"
import { getPriority, setPriority } from "node:os"
import { fileURLToPath } from "node:url"
import { MessageChannel, MessagePort, receiveMessageOnPort, Worker, workerData } from "node:worker_threads"
import { WebSocket as WsClient, WebSocketServer } from "ws"
import * as Http from "./http.ts"
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
 * What the worker prints (`console.*`, `process.stdout.write`, `process.stderr.write`) travels on
 * a second port of its own to `handlers.output`, never to this process's stdout: the worker
 * redirects it when it connects (`workerParent`), or earlier through `redirectWorkerOutput`.
 * Node and Bun would forward a worker's stdio with `new Worker(url, {stdout: true})`, but Deno
 * 2.9.6 sends `console.log` of a worker straight to the real stdout, so one redirect serves all
 * three runtimes. Output still queued when the worker exits is drained before `handlers.exit`.
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
  const output = new MessageChannel()
  const url = needsTsx(options.entry) ? new URL("./worker-bootstrap.mjs", import.meta.url) : new URL(options.entry)
  const worker = new Worker(url, {
    workerData: {
      cohortEntry: options.entry,
      cohortRank: options.rank,
      cohortData: options.data,
      cohortPort: port2,
      cohortOutput: output.port2,
      cohortNice: options.nice ?? 0
    },
    transferList: [port2, output.port2],
    ...(options.resourceLimits === undefined ? {} : { resourceLimits: { ...options.resourceLimits } })
  })
  // The runtime closes our port once the worker's port is gone; every message the worker posted
  // is queued ahead of that close, so 'close' comes after the last 'message' (checked under the
  // three runtimes with workers killed, crashing and exiting mid-burst). The port must not be
  // read from inside its own 'close' handler: `receiveMessageOnPort` there crashed Node 20.
  let closed = false
  let exited = false
  port1.on("message", (data: unknown) => handlers.message(bytesOf(data)))
  const printed = (data: unknown): void => {
    const [stream, bytes] = data as [number, Uint8Array]
    handlers.output?.(stream === 2 ? "stderr" : "stdout", bytesOf(bytes))
  }
  output.port1.on("message", printed)
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
    for (let next = receiveMessageOnPort(output.port1); next !== undefined; next = receiveMessageOnPort(output.port1)) {
      printed(next.message)
    }
    output.port1.close()
    handlers.exit(code, null)
  })
  return {
    post: (message) => port1.postMessage(message, [message.buffer as ArrayBuffer]),
    kill: () => void worker.terminate(),
    postRing: (generation, next, prev) => {
      const ports = [next as unknown as MessagePort, prev as unknown as MessagePort]
      port1.postMessage({ cohortRing: { generation, next: ports[0], prev: ports[1] } }, ports)
    }
  }
}

/**
 * A direct ring link between two workers (issue 15): a `MessageChannel` whose `sender` end goes
 * to one worker (its `next`) and `receiver` end to its neighbour (its `prev`), through
 * `RawChild.postRing`. Node, Bun and Deno all transfer ports between workers.
 *
 * @since 0.1.0
 * @category workers
 */
export const ringChannel = (): { readonly sender: Types.RingEnd; readonly receiver: Types.RingEnd } => {
  const { port1, port2 } = new MessageChannel()
  return { sender: port1 as unknown as Types.RingEnd, receiver: port2 as unknown as Types.RingEnd }
}

interface RingHandover {
  readonly cohortRing: { readonly generation: number; readonly next: MessagePort; readonly prev: MessagePort }
}

const isRingHandover = (data: unknown): data is RingHandover =>
  typeof data === "object" && data !== null && !ArrayBuffer.isView(data) && "cohortRing" in data

const ringPortsOf = ({ cohortRing: { generation, next, prev } }: RingHandover): Types.RingPorts => ({
  generation,
  // The data is a fresh copy made for this step: transfer its buffer instead of cloning it.
  send: (message) => next.postMessage(message, [message.data.buffer as ArrayBuffer]),
  onMessage: (callback) => void prev.on("message", (m: Types.RingWire) => callback(m)),
  close: () => {
    next.close()
    prev.close()
  }
})

interface CohortWorkerData {
  readonly cohortRank: number
  readonly cohortData: unknown
  readonly cohortPort: MessagePort
  readonly cohortOutput: MessagePort
  readonly cohortNice: number
}

const consoleMethods = [
  "log", "info", "debug", "warn", "error", "trace", "dir", "dirxml", "table", "assert",
  "group", "groupCollapsed", "groupEnd", "count", "countReset", "time", "timeEnd", "timeLog"
] as const
let outputRedirected = false

/**
 * Inside a worker started by `spawnWorker`: sends everything the worker prints through
 * `console` or `process.stdout` / `process.stderr` to the parent's `handlers.output` instead of
 * the process's stdout and stderr. Idempotent; does nothing outside such a worker. Rank entries
 * call it before the trainer module loads so that its top-level prints are caught too;
 * `workerParent` calls it as well.
 *
 * @since 0.1.0
 * @category workers
 */
export const redirectWorkerOutput = (): void => {
  const port = (workerData as Partial<CohortWorkerData> | null)?.cohortOutput
  if (outputRedirected || port === undefined) return
  outputRedirected = true
  redirectOutput((stream, bytes) => port.postMessage([stream, bytes], [bytes.buffer as ArrayBuffer]))
}

/**
 * Sends everything the calling thread prints through `console`, `process.stdout` or
 * `process.stderr` to `post(stream, bytes)` (1: stdout, 2: stderr; `bytes` a fresh copy, never
 * empty), synchronously, instead of the thread's stdout and stderr.
 */
const redirectOutput = (post: (stream: 1 | 2, bytes: Uint8Array) => void): void => {
  const encoder = new TextEncoder()
  const postChunk = (stream: 1 | 2, chunk: unknown): void => {
    const bytes = typeof chunk === "string" ? encoder.encode(chunk) : bytesOf(chunk).slice()
    if (bytes.byteLength > 0) post(stream, bytes)
  }
  const writer = (stream: 1 | 2) => (chunk: unknown, encodingOrDone?: unknown, done?: unknown): boolean => {
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
  // Ring links that arrive before the rank asked for them wait here.
  let ringCallback: ((ports: Types.RingPorts) => void) | undefined
  const ringWaiting: Array<Types.RingPorts> = []
  const ringHandover = (ports: Types.RingPorts): void => {
    if (ringCallback === undefined) ringWaiting.push(ports)
    else ringCallback(ports)
  }
  const data = workerData as Partial<CohortWorkerData> | null
  const port = data?.cohortPort
  if (data === null || port === undefined) return undefined
  redirectWorkerOutput()
  if (process.platform === "linux") lowerPriority(0, data.cohortNice ?? 0)
  return {
    rank: data.cohortRank ?? -1,
    data: data.cohortData,
    post: (message) => port.postMessage(message, [message.buffer as ArrayBuffer]),
    onMessage: (callback) =>
      void port.on("message", (m: unknown) => {
        if (isRingHandover(m)) ringHandover(ringPortsOf(m))
        else callback(bytesOf(m))
      }),
    onRingPorts: (callback) => {
      ringCallback = callback
      for (const ports of ringWaiting.splice(0)) callback(ports)
    },
    onClose: (callback) => void port.on("close", callback),
    onExit: processExitHooks(),
    close: () => port.close()
  }
}

/** Answers one `node:http` request with `handler` (`http.ts` `answer`), whole or streamed. */
const answerNode = (handler: Types.HttpServeOptions["http"] | undefined, request: IncomingMessage, response: ServerResponse): void => {
  const header = (name: string): string | undefined => {
    const value = request.headers[name.toLowerCase()]
    return Array.isArray(value) ? value.join(", ") : value
  }
  void Http.answer(handler, request.method ?? "GET", request.url ?? "/", header).then((answer) => {
    response.writeHead(answer.status, answer.headers)
    if ("body" in answer) {
      response.end(answer.body)
      return
    }
    response.flushHeaders()
    let open = true
    const cleanup = answer.stream({
      write: (text) => {
        if (open) response.write(text)
      },
      end: () => {
        if (!open) return
        open = false
        response.end()
      }
    })
    response.on("close", () => {
      if (!open) return
      open = false
      cleanup()
    })
  })
}

/**
 * A plain HTTP server on `node:http` (`serveHttp`); `close` ends open streamed responses too.
 *
 * @since 0.1.0
 * @category http
 */
export const serveHttp = (options: Types.HttpServeOptions): Promise<Types.RawServer> =>
  new Promise((resolve, reject) => {
    const http = createHttpServer((request, response) => answerNode(options.http, request, response))
    http.on("error", reject)
    http.listen(options.port, options.host, () => {
      const address = http.address()
      resolve({
        port: typeof address === "object" && address !== null ? address.port : options.port,
        close: () =>
          new Promise<void>((done) => {
            http.close(() => done())
            http.closeAllConnections()
          })
      })
    })
  })

/**
 * A `ws` WebSocket server on `host:port` (Node), on a `node:http` server that answers plain
 * requests with `options.http` (426 without it). Messages over `maxPayloadBytes` close the
 * connection with 1009, reported to `close` as 1009.
 *
 * @since 0.1.0
 * @category sockets
 */
export const serveWs = (options: Types.ServeOptions): Promise<Types.RawServer> =>
  new Promise((resolve, reject) => {
    const http = createHttpServer((request, response) => answerNode(options.http, request, response))
    const server = new WebSocketServer({ server: http, maxPayload: options.maxPayloadBytes })
    // `ws` re-emits its HTTP server's errors (a port in use) on itself: both reject.
    http.on("error", reject)
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
    http.listen(options.port, options.host, () => {
      const address = http.address()
      resolve({
        port: typeof address === "object" && address !== null ? address.port : options.port,
        close: () =>
          new Promise<void>((done) => {
            for (const client of server.clients) client.terminate()
            server.close(() => {
              http.close(() => done())
              // Browsers keep idle HTTP connections open; they would hold the close back.
              http.closeAllConnections()
            })
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

/**
 * The error code of a rank ended for going over its memory limit, beside Node's and Deno's
 * `ERR_WORKER_OUT_OF_MEMORY` for a worker past its `resourceLimits` (issue C3).
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

/**
 * The memory the calling thread's JavaScript engine holds for it, in bytes, per worker thread
 * (each has its own heap) or per process: the heap in use plus the memory outside it
 * (`ArrayBuffer`s and typed arrays, which V8's heap limit does not count) under Node and Deno;
 * the heap in use under Bun, whose figure already counts them.
 *
 * @since 0.1.0
 * @category processes
 */
export const engineMemoryBytes = (): number => {
  const usage = process.memoryUsage()
  return Runtime.detect() === "bun" ? usage.heapUsed : usage.heapUsed + usage.external
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
 * Starts a child process running the module `entry` (a `file:` URL) on this runtime:
 * `node` (with `--import tsx` for a TypeScript entry), `bun`, or `deno run -A`. Messages travel
 * both ways as `u32 LE length` records on a channel of their own, the child's fd 3 (`frameFd`; a
 * socket pair, the same on Node 20, Bun 1.4.5 and Deno 2.9.6), never on stdout. The child's stdin
 * is `/dev/null`; what it writes to stdout and stderr goes to `handlers.output`. A record whose
 * header announces more than `messageBytesMax` bytes (default unbounded) calls
 * `handlers.oversized` before any of it is buffered, and the channel is read no further.
 * `exit` fires on `close`, after the frame channel, stdout and stderr have been read to their
 * end, so every message and every line the child wrote comes first. `kill` sends `signal`
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
  const args = runtime === "deno"
    ? ["run", "-A", ...(limit === undefined ? [] : [`--v8-flags=--max-old-space-size=${limit}`]), path]
    : runtime === "bun"
    ? [path]
    : [...(limit === undefined ? [] : [`--max-old-space-size=${limit}`]), ...(needsTsx(options.entry) ? ["--import", import.meta.resolve("tsx")] : []), path]
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
  child.on("close", (code, signal) => {
    // V8's fatal out-of-memory abort; with a heap limit set, reaching it is what aborts a rank.
    if (limit !== undefined && runtime !== "bun" && (signal === "SIGABRT" || signal === "SIGTRAP")) {
      handlers.error(Object.assign(new Error(`out of memory: the rank's process aborted (${signal}) at its heap limit of ${limit} MiB`), { code: outOfMemoryCode }))
    }
    handlers.exit(code, signal)
  })
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
    input = Runtime.detect() === "node"
      ? new Socket({ fd: frameFd, readable: true, writable: false, allowHalfOpen: true })
      : createReadStream("", { fd: frameFd, autoClose: false })
    input.on("end", brokenNow)
    input.on("error", brokenNow)
    return input
  }
  return {
    rank: Number(rank),
    data: JSON.parse(process.env[childDataEnv] ?? "null") as unknown,
    post: (message) => {
      if (broken) return
      const bytes = record(message)
      let blockedSinceMs: number | undefined
      for (let at = 0; at < bytes.byteLength;) {
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
          return brokenNow()
        }
      }
    },
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
