/**
 * Node APIs: worker threads and child processes (which Bun and Deno also provide, so all three
 * runtimes use this file for them) and the `ws` WebSocket server and client (Node only).
 *
 * @since 0.1.0
 */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http"
import { createServer as createHttpsServer } from "node:https"
import { createRequire } from "node:module"
import type { Server as NetServer } from "node:net"
import { dirname } from "node:path"
import { getHeapStatistics, setFlagsFromString } from "node:v8"
import { WebSocket as WsClient, WebSocketServer } from "ws"
import * as Http from "./http.ts"
import * as Runtime from "./detect.ts"
import { bytesOf } from "./node-shared.ts"
import type * as Types from "./types.ts"

// Worker threads and child processes live in files of their own; callers import them from here
// (a browser bundle replaces this file, and with it both, by `browser.ts`).
export { redirectWorkerOutput, ringChannel, sharedRingLinks, spawnWorker, workerParent } from "./node-worker.ts"
export {
  frameFd,
  frameWriteBlockedMsMaxDefault,
  hostStderrFd,
  isOutOfMemory,
  outOfMemoryCode,
  processParent,
  spawnChild
} from "./node-child.ts"
export { connectPath, connectTcp, listenTcp } from "./node-tcp.ts"

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
      },
      drop: () => {
        if (!open) return
        open = false
        response.destroy()
      },
      bufferedBytes: () => (open ? response.writableLength : 0)
    })
    response.on("close", () => {
      if (!open) return
      open = false
      cleanup()
    })
  })
}

/**
 * Caps a listening server's connections at `connectionsMax` (Node closes each one past it and
 * emits `drop`) and reports refusals and accept errors to `onResource`: an error once listening
 * (`EMFILE` when the process is out of descriptors) is the listener's, never the process's end.
 */
const watchResources = (server: NetServer, options: Pick<Types.HttpServeOptions, "connectionsMax" | "onResource">): void => {
  const connectionsMax = options.connectionsMax
  if (connectionsMax !== undefined) server.maxConnections = connectionsMax
  server.on("drop", () => options.onResource?.({ _tag: "ConnectionRefused", connectionsMax: connectionsMax ?? Infinity }))
  server.on("error", (error: Error & { code?: string }) => {
    if (server.listening) options.onResource?.({ _tag: "AcceptFailed", code: error.code ?? "", message: error.message })
  })
}

/** A `node:http` server, or a `node:https` one with `tls` (same events, same `listen`). */
const listener = (tls: Types.TlsIdentity | undefined, answer: (request: IncomingMessage, response: ServerResponse) => void) =>
  tls === undefined ? createHttpServer(answer) : createHttpsServer({ cert: tls.cert, key: tls.key }, answer)

/**
 * A plain HTTP server on `node:http` (`serveHttp`), or `node:https` with `tls`; `close` ends open streamed responses too.
 * `connectionsMax` and `onResource` as in `HttpServeOptions`.
 *
 * @since 0.1.0
 * @category http
 */
export const serveHttp = (options: Types.HttpServeOptions): Promise<Types.RawServer> =>
  new Promise((resolve, reject) => {
    const http = listener(options.tls, (request, response) => answerNode(options.http, request, response))
    watchResources(http, options)
    http.on("error", (error) => {
      if (!http.listening) reject(error)
    })
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

/** How long a peer has to answer the close of a connection `ws` closed for a protocol error (ms). */
const closeAnswerMs = 1000

/**
 * A `ws` WebSocket server on `host:port` (Node), on a `node:http` server that answers plain
 * requests with `options.http` (426 without it). Messages over `maxPayloadBytes` close the
 * connection with 1009, reported to `close` as 1009; a peer that does not answer a close for a
 * protocol error within 1 s has its connection ended then.
 *
 * @since 0.1.0
 * @category sockets
 */
export const serveWs = (options: Types.ServeOptions): Promise<Types.RawServer> =>
  new Promise((resolve, reject) => {
    const http = listener(options.tls, (request, response) => answerNode(options.http, request, response))
    const server = new WebSocketServer({ server: http, maxPayload: options.maxPayloadBytes })
    watchResources(http, options)
    // `ws` re-emits its HTTP server's errors (a port in use) on itself: both reject.
    http.on("error", reject)
    server.on("error", reject)
    server.on("connection", (socket, request) => {
      let tooBig = false
      const handlers = options.open(
        {
          send: (data) => socket.send(data),
          // One fragment a part, the last one final: `ws` sends nothing else in between (the
          // calls follow one another in one turn) and copies no part. Corked, the fragments
          // leave in one write, as the whole message did.
          sendParts: (parts) => {
            request.socket.cork()
            for (let i = 0; i < parts.length; i++) socket.send(parts[i]!, { fin: i === parts.length - 1 })
            request.socket.uncork()
          },
          close: (code, reason) => socket.close(code, reason),
          bufferedBytes: () => socket.bufferedAmount,
          // `ws` hands each message over as a view on the socket's read buffer (each read a new
          // one), or as a new buffer when it spans reads or fragments, and then moves past it.
          givesMessages: true
        },
        request.socket.remoteAddress ?? ""
      )
      let closeTimer: ReturnType<typeof setTimeout> | undefined
      socket.on("error", (error: Error & { code?: string }) => {
        if (error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") tooBig = true
        // ws has sent its close frame (1009, 1002) and waits up to 30 s for the peer's: a peer that
        // never answers would keep the link open that long (the rank then looks stale, not closed).
        closeTimer ??= setTimeout(() => socket.terminate(), closeAnswerMs)
      })
      socket.on("message", (data, isBinary) =>
        handlers.message(isBinary ? bytesOf(Array.isArray(data) ? Buffer.concat(data) : data) : String(data))
      )
      socket.on("close", (code) => {
        if (closeTimer !== undefined) clearTimeout(closeTimer)
        handlers.close(tooBig ? 1009 : code)
      })
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
 * The `ws` package's client on every runtime. Bun resolves `import "ws"` to a client of its own
 * that shows no peer certificate and takes no `ca` check of the host name's chain the same way,
 * so under Bun the package's own file is loaded by its path.
 */
const wsPackageClient = (): typeof WsClient => {
  if (Runtime.detect() !== "bun") return WsClient
  const require = createRequire(import.meta.url)
  return require(`${dirname(require.resolve("ws/package.json"))}/lib/websocket.js`) as typeof WsClient
}

/**
 * Opens a WebSocket to `url`, checking a `wss://` server's certificate as `trust` says
 * (`TlsTrust`): without `trust`, this runtime's client (`webSocketClass`) and the system's roots;
 * with `ca`, the `ws` package's client trusting those certificates (host name checked); with
 * `fingerprint256`, the `ws` package's client taking any certificate, which the caller must
 * compare (`peerFingerprint`) before it sends anything.
 *
 * @since 0.1.0
 * @category sockets
 */
export const openWebSocket = (url: string, trust: Types.TlsTrust | undefined): globalThis.WebSocket => {
  if (trust === undefined || (trust.ca === undefined && trust.fingerprint256 === undefined)) return new (webSocketClass())(url)
  const Client = wsPackageClient()
  const options = trust.fingerprint256 !== undefined ? { rejectUnauthorized: false } : { ca: trust.ca }
  return new Client(url, options) as unknown as globalThis.WebSocket
}

/**
 * The SHA-256 fingerprint of the certificate the server of an open `openWebSocket` socket showed
 * (`AB:CD:...`, upper case), or `undefined` when the socket cannot say (not the `ws` package's, or
 * not TLS).
 *
 * @since 0.1.0
 * @category sockets
 */
export const peerFingerprint = (socket: globalThis.WebSocket): string | undefined => {
  const raw = (socket as unknown as { _socket?: { getPeerCertificate?: () => { fingerprint256?: string } } })._socket
  try {
    return raw?.getPeerCertificate?.().fingerprint256
  } catch {
    return undefined
  }
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
  // Not `process.memoryUsage()`: it also reads the process's resident size, which opens a file
  // (`uv_resident_set_memory`) and so fails with EMFILE when the process is out of descriptors:
  // a worker rank would die of its coordinator's descriptors.
  const heap = getHeapStatistics()
  return Runtime.detect() === "bun" ? heap.used_heap_size : heap.used_heap_size + heap.external_memory
}

/**
 * Sets V8's old-generation growing factor for the rest of this process's life to
 * `1 + percent / 100` (`--heap-growing-percent`, which V8 reads at each full collection); `percent`
 * 0 gives V8 its own choice back. Node only: Bun and Deno are left as they are.
 *
 * Why: a coordinator receives each rank's `Params` every round into a socket read buffer of its own
 * (an `ArrayBuffer` that Node allocates for the read), about 10 MB a round at 256 ranks of 10,000
 * parameters, and V8 counts the `ArrayBuffer` memory allocated since its last full collection with
 * the old generation: with its own factor a full collection came about once a round, each for
 * young garbage (docs/benchmarks.md).
 *
 * @since 0.1.0
 * @category processes
 */
export const setHeapGrowthPercent = (percent: number): void => {
  if (Runtime.detect() !== "node") return
  setFlagsFromString(`--heap-growing-percent=${percent}`)
}
