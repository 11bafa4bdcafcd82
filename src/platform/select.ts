/**
 * Picks this runtime's implementation of each raw channel (docs/design.md §5): the WebSocket server
 * is `ws` on Node, `Bun.serve` under Bun and `Deno.serve` under Deno.
 *
 * @since 0.1.0
 */
import * as Bun from "./bun.ts"
import * as BunTcp from "./bun-tcp.ts"
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

/**
 * Listens for plain TCP streams (`Types.TcpStream`): Bun's own sockets under Bun (`bun-tcp.ts`
 * says why), `node:net` on Node and Deno. Rejects with the bind's error.
 *
 * @since 0.1.0
 * @category sockets
 */
export const listenTcp = (options: Types.TcpListenOptions): Promise<Types.RawServer> =>
  Runtime.detect() === "bun" ? BunTcp.listenTcp(options) : Node.listenTcp(options)

/**
 * Opens a plain TCP stream to `host`:`port` (`listenTcp`); a refused connection ends in `close`
 * without `open`.
 *
 * @since 0.1.0
 * @category sockets
 */
export const connectTcp = (host: string, port: number, handlers: Types.TcpHandlers & { readonly open: () => void }): Types.TcpStream =>
  Runtime.detect() === "bun" ? BunTcp.connectTcp(host, port, handlers) : Node.connectTcp(host, port, handlers)

/**
 * Opens the same stream to a Unix socket `path` on this machine (`listenTcp`'s `path`).
 *
 * @since 0.1.0
 * @category sockets
 */
export const connectPath = (path: string, handlers: Types.TcpHandlers & { readonly open: () => void }): Types.TcpStream =>
  Runtime.detect() === "bun" ? BunTcp.connectPath(path, handlers) : Node.connectPath(path, handlers)

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
 * The close code `connectWs` reports when a `wss://` server's certificate failed the check
 * (`TlsTrust`): 1015, the WebSocket protocol's reserved "TLS handshake failure", with words
 * saying why as the close's `reason`.
 *
 * @since 0.1.0
 * @category sockets
 */
export const tlsFailedCloseCode = 1015

/** `AB:CD:...` upper case, from hex with or without colons (or a `sha256:` prefix). */
export const normalFingerprint = (text: string): string =>
  (
    text
      .replace(/^sha256:/i, "")
      .replace(/[^0-9A-Fa-f]/g, "")
      .toUpperCase()
      .match(/../g) ?? []
  ).join(":")

/**
 * The SHA-256 fingerprint (`AB:CD:...`, upper case) of the first certificate in `pem` (a chain's
 * leaf), as clients see it (`peerFingerprint`) and `openssl x509 -fingerprint -sha256` prints it;
 * `undefined` when `pem` holds no certificate block.
 *
 * @since 0.1.0
 * @category sockets
 */
export const certificateFingerprint = async (pem: string): Promise<string | undefined> => {
  const body = /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE-----/.exec(pem)?.[1]
  if (body === undefined) return undefined
  const der = Uint8Array.from(atob(body.replace(/\s/g, "")), (c) => c.charCodeAt(0))
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", der))
  return [...digest].map((b) => b.toString(16).padStart(2, "0").toUpperCase()).join(":")
}

// What the runtimes say when a certificate fails its check (OpenSSL's codes under Node and Bun,
// rustls's words under Deno).
const certificateFailure = /certificate|TLS handshake|self[- ]signed|altname|issuer|CERT_|UNABLE_TO_VERIFY/i

/**
 * Opens a WebSocket client to `url` with this runtime's constructor; binary messages arrive as
 * `Uint8Array`, text as `string`; `close` gets 1006 for a connection that ended without a close
 * frame on every runtime. `drop` ends the connection without a close handshake where the
 * runtime allows it (`ws`'s `terminate`), else closes with 4031 (`Dropped`: a server of
 * resumable links holds the link for a resume, as after a drop; a browser's WebSocket accepts
 * no code below 3000 but 1000). `options.unmasked`: see below (links between ranks only).
 *
 * A `wss://` server's certificate is checked as `trust` says (`TlsTrust`; default the system's
 * roots): one that fails, or whose fingerprint differs from the pinned one, ends the connection
 * before `open` with `close(tlsFailedCloseCode, words)`, so nothing was sent to that server.
 *
 * @since 0.1.0
 * @category sockets
 */
export const connectWs = (
  url: string,
  handlers: Types.ClientHandlers,
  trust?: Types.TlsTrust,
  options?: { readonly unmasked?: boolean }
): Types.RawSocket & { readonly drop: () => void } => {
  // `unmasked`: with `ws` (Node) the client sends frames with an all-zero mask, which `ws` neither
  // applies nor undoes: without its native addon it masks in a JavaScript loop over every byte,
  // most of the cost of a large message. Masking only shields proxies from a browser's
  // traffic; a link between two ranks has none. Bun's and Deno's own clients mask natively.
  const socket =
    options?.unmasked === true && trust === undefined && Runtime.detect() === "node"
      ? new (
          Node.webSocketClass() as unknown as new (
            url: string,
            protocols: undefined,
            options: { generateMask: (mask: Uint8Array) => void }
          ) => WebSocket
        )(url, undefined, {
          generateMask: (mask) => void mask.fill(0)
        })
      : Node.openWebSocket(url, trust)
  socket.binaryType = "arraybuffer"
  let closed = false
  let opened = false
  let failure: string | undefined
  const terminate = () => {
    const end = (socket as unknown as { terminate?: () => void }).terminate
    if (typeof end === "function") end.call(socket)
    else socket.close(4031, "dropped")
  }
  const untrusted = (words: string) => {
    if (closed) return
    closed = true
    terminate()
    handlers.close(tlsFailedCloseCode, words)
  }
  socket.onopen = () => {
    const pinned = trust?.fingerprint256
    if (pinned !== undefined) {
      const seen = Node.peerFingerprint(socket)
      if (seen === undefined || normalFingerprint(seen) !== normalFingerprint(pinned)) {
        return untrusted(
          `it has fingerprint ${seen === undefined ? "(none shown)" : normalFingerprint(seen)}, not the pinned ${normalFingerprint(pinned)}`
        )
      }
    }
    opened = true
    handlers.open()
  }
  socket.onmessage = (event: MessageEvent) =>
    handlers.message(typeof event.data === "string" ? event.data : new Uint8Array(event.data as ArrayBuffer))
  socket.onerror = (event: Event) => {
    const error = (event as { error?: { code?: unknown; message?: unknown } }).error
    const words = `${String(error?.code ?? "")} ${String(error?.message ?? (event as { message?: unknown }).message ?? "")}`.trim()
    if (!opened && url.startsWith("wss:") && certificateFailure.test(words)) failure = words
  }
  socket.onclose = (event: CloseEvent) => {
    if (failure !== undefined) return untrusted(`not trusted: ${failure}`)
    if (closed) return
    closed = true
    // Deno's client reports a connection reset before the close frame as code 0; the protocol says 1006.
    handlers.close(event.code === 0 ? 1006 : event.code)
  }
  return {
    send: (data) => socket.send(data as Uint8Array<ArrayBuffer> | string),
    close: (code, reason) => socket.close(code, reason),
    bufferedBytes: () => socket.bufferedAmount,
    drop: terminate
  }
}

/** V8's old-generation growing factor of this process (`Node.setHeapGrowthPercent`); Node only. @since 0.1.0 @category processes */
export const setHeapGrowthPercent = (percent: number): void => Node.setHeapGrowthPercent(percent)
