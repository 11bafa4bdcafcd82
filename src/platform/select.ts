/**
 * Picks this runtime's implementation of each raw channel (docs/design.md §5): the WebSocket server
 * is `ws` on Node, `Bun.serve` under Bun and `Deno.serve` under Deno.
 *
 * @since 0.1.0
 */
import * as Bun from "./bun.ts"
import * as Deno from "./deno.ts"
import * as Runtime from "./detect.ts"
import * as Node from "./node.ts"
import type * as Types from "./types.ts"

/** Starts this runtime's WebSocket server. @since 0.1.0 @category sockets */
export const serveWs = (options: Types.ServeOptions): Promise<Types.RawServer> => {
  switch (Runtime.detect()) {
    case "bun":
      return Bun.serveWs(options)
    case "deno":
      return Deno.serveWs(options)
    default:
      return Node.serveWs(options)
  }
}

/** Starts this runtime's plain HTTP server (`node:http`, `Bun.serve`, `Deno.serve`). @since 0.1.0 @category http */
export const serveHttp = (options: Types.HttpServeOptions): Promise<Types.RawServer> => {
  switch (Runtime.detect()) {
    case "bun":
      return Bun.serveHttp(options)
    case "deno":
      return Deno.serveHttp(options)
    default:
      return Node.serveHttp(options)
  }
}

/**
 * Opens a WebSocket client to `url` with this runtime's constructor; binary messages arrive as
 * `Uint8Array`, text as `string`; `close` gets 1006 for a connection that ended without a close
 * frame on every runtime. `drop` ends the connection without a close handshake where the
 * runtime allows it (`ws`'s `terminate`), else closes with 4031 (`Dropped`: a server of
 * resumable links holds the link for a resume, as after a drop; a browser's WebSocket accepts
 * no code below 3000 but 1000). `options.unmasked`: see below (links between ranks only).
 *
 * @since 0.1.0
 * @category sockets
 */
export const connectWs = (
  url: string,
  handlers: Types.ClientHandlers,
  options?: { readonly unmasked?: boolean }
): Types.RawSocket & { readonly drop: () => void } => {
  const Ctor = Node.webSocketClass()
  // `unmasked`: with `ws` (Node) the client sends frames with an all-zero mask, which `ws` neither
  // applies nor undoes: without its native addon it masks in a JavaScript loop over every byte,
  // most of the cost of a large message. Masking only shields proxies from a browser's
  // traffic; a link between two ranks has none. Bun's and Deno's own clients mask natively.
  const socket = options?.unmasked === true && Runtime.detect() === "node"
    ? new (Ctor as unknown as new(url: string, protocols: undefined, options: { generateMask: (mask: Uint8Array) => void }) => WebSocket)(url, undefined, {
      generateMask: (mask) => void mask.fill(0)
    })
    : new Ctor(url)
  socket.binaryType = "arraybuffer"
  let closed = false
  socket.onopen = () => handlers.open()
  socket.onmessage = (event: MessageEvent) =>
    handlers.message(typeof event.data === "string" ? event.data : new Uint8Array(event.data as ArrayBuffer))
  socket.onerror = () => {}
  socket.onclose = (event: CloseEvent) => {
    if (closed) return
    closed = true
    // Deno's client reports a connection reset before the close frame as code 0; the protocol says 1006.
    handlers.close(event.code === 0 ? 1006 : event.code)
  }
  return {
    send: (data) => socket.send(data as Uint8Array<ArrayBuffer> | string),
    close: (code, reason) => socket.close(code, reason),
    bufferedBytes: () => socket.bufferedAmount,
    drop: () => {
      const terminate = (socket as unknown as { terminate?: () => void }).terminate
      if (typeof terminate === "function") terminate.call(socket)
      else socket.close(4031, "dropped")
    }
  }
}
