/**
 * Node APIs: worker threads and child processes (which Bun and Deno also provide, so all three
 * runtimes use this file for them) and the `ws` WebSocket server and client (Node only).
 *
 * @since 0.1.0
 */
import { spawn as spawnProcess } from "node:child_process"
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

/**
 * Starts a worker thread running the TypeScript module `entry` (a `file:` URL) with a dedicated
 * message port. Under Node 20 the entry loads through `worker-bootstrap.mjs` (tsx); Bun and Deno
 * load it directly. On exit, messages still queued on the port are drained synchronously before
 * `handlers.exit`, so no frame posted before the end is lost (Deno delivers some only this way).
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
  },
  handlers: Types.ChildHandlers
): Types.RawChild => {
  const { port1, port2 } = new MessageChannel()
  const node = Runtime.detect() === "node"
  const url = node ? new URL("./worker-bootstrap.mjs", import.meta.url) : new URL(options.entry)
  const worker = new Worker(url, {
    workerData: { cohortEntry: options.entry, cohortRank: options.rank, cohortData: options.data, cohortPort: port2 },
    transferList: [port2],
    ...(options.resourceLimits === undefined ? {} : { resourceLimits: { ...options.resourceLimits } })
  })
  port1.on("message", (data: unknown) => handlers.message(bytesOf(data)))
  worker.on("error", (error) => handlers.error(error))
  worker.on("exit", (code) => {
    for (let next = receiveMessageOnPort(port1); next !== undefined; next = receiveMessageOnPort(port1)) {
      handlers.message(bytesOf(next.message))
    }
    port1.close()
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
    server.on("connection", (socket) => {
      let tooBig = false
      const handlers = options.open({
        send: (data) => socket.send(data),
        close: (code, reason) => socket.close(code, reason)
      })
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
