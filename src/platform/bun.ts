/**
 * Bun APIs: the WebSocket server on `Bun.serve` (TOOLCHAIN.md §3, §6).
 *
 * @since 0.1.0
 */
import * as Http from "./http.ts"
import type * as Types from "./types.ts"

interface BunSocket {
  data: { remoteAddress: string; handlers?: Types.SocketHandlers }
  send(data: Uint8Array | string): void
  close(code?: number, reason?: string): void
  getBufferedAmount(): number
}

interface BunServer {
  readonly port: number
  upgrade(request: Request, options: { data: unknown }): boolean
  requestIP(request: Request): { readonly address: string } | null
  stop(closeActive?: boolean): Promise<void> | void
}

interface BunGlobal {
  serve(options: {
    hostname: string
    port: number
    fetch(request: Request, server: BunServer): Promise<Response | undefined> | Response | undefined
    idleTimeout?: number
    tls?: Types.TlsIdentity
    websocket?: {
      maxPayloadLength: number
      open(ws: BunSocket): void
      message(ws: BunSocket, message: string | Uint8Array): void
      close(ws: BunSocket, code: number, reason: string): void
    }
  }): BunServer
}

/**
 * Runs Bun's garbage collector to completion (`Bun.gc(true)`) so that a heap measurement that
 * follows counts live objects only; does nothing on other runtimes.
 *
 * @since 0.1.0
 * @category memory
 */
export const collectGarbage = (): void => {
  const bun = (globalThis as unknown as { Bun?: { gc?: (force: boolean) => void } }).Bun
  bun?.gc?.(true)
}

/**
 * A WebSocket server on `Bun.serve` (`wss://` with `options.tls`); Bun closes a connection whose message exceeds
 * `maxPayloadBytes` with 1009, reported to `close` as 1009.
 *
 * @since 0.1.0
 * @category sockets
 */
export const serveWs = async (options: Types.ServeOptions): Promise<Types.RawServer> => {
  const bun = (globalThis as unknown as { Bun: BunGlobal }).Bun
  const server = bun.serve({
    hostname: options.host,
    port: options.port,
    ...(options.tls === undefined ? {} : { tls: options.tls }),
    // An upgrade is answered synchronously, as before; only plain requests wait for the handler.
    fetch: (request, server) =>
      request.headers.get("upgrade")?.toLowerCase() === "websocket"
        ? server.upgrade(request, { data: { remoteAddress: server.requestIP(request)?.address ?? "" } })
          ? undefined
          : new Response("WebSocket upgrade failed", { status: 400 })
        : Http.answer(options.http, request.method, request.url, (name) => request.headers.get(name) ?? undefined).then(Http.toWebResponse),
    websocket: {
      maxPayloadLength: options.maxPayloadBytes,
      open: (ws) => {
        ws.data.handlers = options.open(
          { send: (data) => ws.send(data), close: (code, reason) => ws.close(code, reason), bufferedBytes: () => ws.getBufferedAmount() },
          ws.data.remoteAddress
        )
      },
      message: (ws, message) =>
        ws.data.handlers?.message(
          typeof message === "string" ? message : new Uint8Array(message.buffer, message.byteOffset, message.byteLength)
        ),
      // Bun sends 1009 to the client but reports 1006 to the server, with this reason, when a
      // message exceeds maxPayloadLength (Bun 1.4.5).
      close: (ws, code, reason) => ws.data.handlers?.close(reason === "Received too big message" ? 1009 : code)
    }
  })
  return { port: server.port, close: async () => void (await server.stop(true)) }
}

/**
 * A plain HTTP server on `Bun.serve` (`serveHttp`); streamed responses stay open (no idle
 * timeout: a page's event stream may be quiet for a while).
 *
 * @since 0.1.0
 * @category http
 */
export const serveHttp = async (options: Types.HttpServeOptions): Promise<Types.RawServer> => {
  const bun = (globalThis as unknown as { Bun: BunGlobal }).Bun
  const server = bun.serve({
    hostname: options.host,
    port: options.port,
    idleTimeout: 0,
    ...(options.tls === undefined ? {} : { tls: options.tls }),
    fetch: (request) =>
      Http.answer(options.http, request.method, request.url, (name) => request.headers.get(name) ?? undefined).then(Http.toWebResponse)
  })
  return { port: server.port, close: async () => void (await server.stop(true)) }
}
