/**
 * Deno APIs: the WebSocket server on `Deno.serve` + `Deno.upgradeWebSocket` (TOOLCHAIN.md §3, §6).
 *
 * @since 0.1.0
 */
import * as Http from "./http.ts"
import type * as Types from "./types.ts"

interface DenoGlobal {
  serve(
    options: {
      hostname: string
      port: number
      signal: AbortSignal
      onListen(address: { port: number }): void
      cert?: string
      key?: string
    },
    handler: (request: Request, info: { readonly remoteAddr: { readonly hostname: string } }) => Response | Promise<Response>
  ): { finished: Promise<void> }
  upgradeWebSocket(request: Request): { socket: WebSocket; response: Response }
}

/**
 * Milliseconds a Deno server socket waits, after deciding to close, for the peer to stop sending
 * before it sends its close frame; every message that arrives meanwhile is dropped and restarts
 * the wait. See `closeLingerMsMax`. Well above Linux's 40 ms delayed ACK: a client without
 * TCP_NODELAY (Deno's) that sends frames right behind its first one holds them back until the
 * first is acknowledged, so they arrive about 40 ms later (measured in one Deno process: with a
 * 50 ms wait 10 of 200 such clients saw their close code lost; with 100 ms, none).
 *
 * @since 0.1.0
 * @category sockets
 */
export const closeQuietMs = 150

// A quiet-period timer firing later than this (ms) shows a stalled event loop.
const closeStallMs = 10

/**
 * Milliseconds at most between a Deno server socket's decision to close and its close frame,
 * however busy the peer: a peer that never stops sending is closed then, and may see 1006.
 *
 * @since 0.1.0
 * @category sockets
 */
export const closeLingerMsMax = 1000

/**
 * How long a peer has to answer the server's close frame (ms) before the connection counts as
 * ended, with the code the server closed with.
 *
 * @since 0.1.0
 * @category sockets
 */
export const closeAnswerMs = 1000

/**
 * A WebSocket server on `Deno.serve` (`wss://` with `options.tls`). `Deno.upgradeWebSocket` has no payload limit, so a message
 * over `maxPayloadBytes` is checked on arrival and closes the connection with 1009 before it is
 * passed on.
 *
 * Closing waits for the peer to go quiet: Deno's socket tears the TCP connection down (a reset,
 * when unread frames are queued) as soon as a data frame arrives after its close frame, and the
 * peer then loses the close frame and reports 1006 (Node, Bun) or 0 (Deno) instead of the code
 * (Deno 2.9.6; a client sending frames right behind a refused join hit it in about 40 of 100 tries
 * from another process). So the close frame goes out once no message has arrived for
 * `closeQuietMs` (timed by a timer that fired on time, so that a stalled event loop does not count as
 * quiet), or `closeLingerMsMax` after the decision at the latest; the connection's
 * `close` handler still gets the decided code, and nothing arriving in between is passed on. A
 * peer that never answers the close frame ends the connection for the server `closeAnswerMs`
 * after it went out.
 *
 * @since 0.1.0
 * @category sockets
 */
export const serveWs = (options: Types.ServeOptions): Promise<Types.RawServer> =>
  new Promise((resolve) => {
    const deno = (globalThis as unknown as { Deno: DenoGlobal }).Deno
    const abort = new AbortController()
    const sockets = new Set<WebSocket>()
    const lingering = new Set<() => void>()
    const server = deno.serve(
      {
        hostname: options.host,
        port: options.port,
        signal: abort.signal,
        ...(options.tls === undefined ? {} : { cert: options.tls.cert, key: options.tls.key }),
        onListen: ({ port }) =>
          resolve({
            port,
            close: async () => {
              for (const flush of [...lingering]) flush()
              for (const socket of sockets) socket.close(1001, "server closing")
              abort.abort()
              await server.finished
            }
          })
      },
      (request, info) => {
        if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
          return Http.answer(options.http, request.method, request.url, (name) => request.headers.get(name) ?? undefined).then(
            Http.toWebResponse
          )
        }
        // Read now: `info.remoteAddr` throws once the upgrade has closed the request.
        const remoteAddress = info.remoteAddr.hostname
        const { response, socket } = deno.upgradeWebSocket(request)
        socket.binaryType = "arraybuffer"
        let handlers: Types.SocketHandlers | undefined
        let closedWith: number | undefined
        // The connection's end is reported once: by `onclose`, or `closeAnswerMs` after the close
        // frame went out when the peer never answers it (Deno's socket then never closes).
        let reported = false
        let answerTimer: ReturnType<typeof setTimeout> | undefined
        const report = (code: number) => {
          if (reported) return
          reported = true
          clearTimeout(answerTimer)
          handlers?.close(code)
        }
        // Set while the close frame waits for the peer to go quiet.
        let linger: { readonly poke: () => void; readonly cancel: () => void } | undefined
        const closeWhenQuiet = (code: number, reason: string) => {
          const startedMs = performance.now()
          let timer: ReturnType<typeof setTimeout> | undefined
          let dueMs = 0
          const cancel = () => {
            clearTimeout(timer)
            linger = undefined
            lingering.delete(flush)
          }
          const flush = () => {
            cancel()
            socket.close(code, reason)
            answerTimer = setTimeout(() => report(code), closeAnswerMs)
          }
          const poke = () => {
            clearTimeout(timer)
            const nowMs = performance.now()
            const leftMs = closeLingerMsMax - (nowMs - startedMs)
            if (leftMs <= 0) return flush()
            const delayMs = Math.min(closeQuietMs, leftMs)
            dueMs = nowMs + delayMs
            timer = setTimeout(expire, delayMs)
          }
          // A timer that fires late means the event loop stalled: frames that arrived meanwhile
          // may not have been read yet, so the quiet period starts again.
          const expire = () => (performance.now() - dueMs > closeStallMs ? poke() : flush())
          linger = { poke, cancel }
          lingering.add(flush)
          poke()
        }
        socket.onopen = () => {
          sockets.add(socket)
          handlers = options.open(
            {
              send: (data) => {
                if (closedWith === undefined) socket.send(data as Uint8Array<ArrayBuffer> | string)
              },
              close: (code, reason) => {
                if (closedWith !== undefined) return
                closedWith = code
                closeWhenQuiet(code, reason)
              },
              bufferedBytes: () => socket.bufferedAmount
            },
            remoteAddress
          )
        }
        socket.onmessage = (event: MessageEvent) => {
          if (closedWith !== undefined) return linger?.poke()
          const data = typeof event.data === "string" ? event.data : new Uint8Array(event.data as ArrayBuffer)
          const size = typeof data === "string" ? data.length : data.byteLength
          if (size > options.maxPayloadBytes) {
            closedWith = 1009
            closeWhenQuiet(1009, "message too big")
            return
          }
          handlers?.message(data)
        }
        socket.onclose = (event: CloseEvent) => {
          sockets.delete(socket)
          // The peer left first: no close frame is waiting any more.
          linger?.cancel()
          // Deno reports a connection dropped without a close frame as code 0; the protocol says 1006.
          report(closedWith ?? (event.code === 0 || !event.wasClean ? 1006 : event.code))
        }
        return response
      }
    )
  })

/**
 * A plain HTTP server on `Deno.serve` (`serveHttp`); `close` ends open streamed responses too.
 *
 * @since 0.1.0
 * @category http
 */
export const serveHttp = (options: Types.HttpServeOptions): Promise<Types.RawServer> =>
  new Promise((resolve) => {
    const deno = (globalThis as unknown as { Deno: DenoGlobal }).Deno
    const abort = new AbortController()
    const server = deno.serve(
      {
        hostname: options.host,
        port: options.port,
        signal: abort.signal,
        ...(options.tls === undefined ? {} : { cert: options.tls.cert, key: options.tls.key }),
        onListen: ({ port }) =>
          resolve({
            port,
            close: async () => {
              abort.abort()
              await server.finished
            }
          })
      },
      (request) =>
        Http.answer(options.http, request.method, request.url, (name) => request.headers.get(name) ?? undefined).then(Http.toWebResponse)
    )
  })
