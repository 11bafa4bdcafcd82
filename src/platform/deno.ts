/**
 * Deno APIs: the WebSocket server on `Deno.serve` + `Deno.upgradeWebSocket` (TOOLCHAIN.md §3, §6).
 *
 * @since 0.1.0
 */
import type * as Types from "./types.ts"

interface DenoGlobal {
  serve(
    options: { hostname: string; port: number; signal: AbortSignal; onListen(address: { port: number }): void },
    handler: (request: Request) => Response
  ): { finished: Promise<void> }
  upgradeWebSocket(request: Request): { socket: WebSocket; response: Response }
}

/**
 * A WebSocket server on `Deno.serve`. `Deno.upgradeWebSocket` has no payload limit, so a message
 * over `maxPayloadBytes` is checked on arrival and closes the connection with 1009 before it is
 * passed on.
 *
 * @since 0.1.0
 * @category sockets
 */
export const serveWs = (options: Types.ServeOptions): Promise<Types.RawServer> =>
  new Promise((resolve) => {
    const deno = (globalThis as unknown as { Deno: DenoGlobal }).Deno
    const abort = new AbortController()
    const sockets = new Set<WebSocket>()
    const server = deno.serve(
      {
        hostname: options.host,
        port: options.port,
        signal: abort.signal,
        onListen: ({ port }) =>
          resolve({
            port,
            close: async () => {
              for (const socket of sockets) socket.close(1001, "server closing")
              abort.abort()
              await server.finished
            }
          })
      },
      (request) => {
        if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
          return new Response("WebSocket upgrade required", { status: 426 })
        }
        const { response, socket } = deno.upgradeWebSocket(request)
        socket.binaryType = "arraybuffer"
        let handlers: Types.SocketHandlers | undefined
        let closedWith: number | undefined
        socket.onopen = () => {
          sockets.add(socket)
          handlers = options.open({
            send: (data) => socket.send(data as Uint8Array<ArrayBuffer> | string),
            close: (code, reason) => {
              closedWith ??= code
              socket.close(code, reason)
            }
          })
        }
        socket.onmessage = (event: MessageEvent) => {
          if (closedWith !== undefined) return
          const data = typeof event.data === "string" ? event.data : new Uint8Array(event.data as ArrayBuffer)
          const size = typeof data === "string" ? data.length : data.byteLength
          if (size > options.maxPayloadBytes) {
            closedWith = 1009
            socket.close(1009, "message too big")
            return
          }
          handlers?.message(data)
        }
        socket.onclose = (event: CloseEvent) => {
          sockets.delete(socket)
          // Deno reports a connection dropped without a close frame as code 0; the protocol says 1006.
          handlers?.close(closedWith ?? (event.code === 0 || !event.wasClean ? 1006 : event.code))
        }
        return response
      }
    )
  })
