/**
 * The runtime-neutral shapes of the raw channels that `node.ts`, `bun.ts` and `deno.ts` provide:
 * worker threads, child processes and WebSocket servers and clients. Transports in
 * `src/transport` build on these; nothing here touches a runtime global.
 *
 * @since 0.1.0
 */

/**
 * Callbacks of a raw worker or child process, as seen by its parent. `exit` comes last, after
 * every message the child posted before it ended has been passed to `message`, with one known
 * exception: Deno fires a terminated worker's `exit` inside `terminate()`, and one message it was
 * already reading can come after the drain and is lost (the rank is being killed; the samples it
 * reported there are simply trained again by the survivors).
 * `signal` is set when a process was killed by a signal.
 *
 * `closed` (optional; worker threads only) comes as soon as the child's end of the channel is
 * gone, if that is before `exit`: every message the child posted has already been passed to
 * `message`, and no more will come; `exit` still follows. Under Node and Bun a terminated
 * worker's channel usually closes 1–5 ms after `terminate()`, while its `exit` event follows
 * 5–400 ms later on a loaded machine. When `exit` comes first (Deno for an idle worker, Node now
 * and then under load), there is no `closed`.
 *
 * @since 0.1.0
 * @category model
 */
export interface ChildHandlers {
  readonly message: (message: Uint8Array) => void
  readonly error: (error: unknown) => void
  readonly closed?: () => void
  readonly exit: (code: number | null, signal: string | null) => void
  /**
   * Raw bytes the child wrote to its stdout or stderr, in order per stream; never frames. Every
   * chunk comes before `exit`.
   */
  readonly output?: (stream: "stdout" | "stderr", chunk: Uint8Array) => void
  /**
   * A child process's record header announced `lengthBytes`, over the `messageBytesMax` it was
   * started with: nothing of that record was buffered and nothing more is read from its frame
   * channel. The handler decides (the host closes the link with `CloseCode.MessageTooBig`).
   */
  readonly oversized?: (lengthBytes: number) => void
}

/** A raw worker or child process: `post` one message; `kill` it (`terminate()` or a signal). @since 0.1.0 @category model */
export interface RawChild {
  readonly post: (message: Uint8Array) => void
  readonly kill: (signal?: string) => void
  /**
   * Workers only: hands the worker its two ring links of `generation`, transferred on
   * its frame port (so they arrive in order with its frames): `next` sends to its next ring
   * neighbour, `prev` receives from the previous one. Both are ends made by `ringChannel`.
   * `sharedSlots`: slots of the shared-memory segment each sending side makes (0: steps stay on
   * the ports; `SharedRingLink`).
   */
  readonly postRing?: (generation: number, next: RingEnd, prev: RingEnd, sharedSlots: number, area?: RingArea) => void
}

/**
 * A ring generation's shared all-reduce area as one member gets it
 * (`SharedAllReduce`): the `buffer` every member of the generation shares, this member's
 * `ringRank`, the `ringSize`, the parameter `length`, and the shared WebAssembly `memory` it lies in, if any. @since 0.1.0 @category model
 */
export interface RingArea {
  readonly buffer: SharedArrayBuffer
  readonly ringRank: number
  readonly ringSize: number
  readonly length: number
  /** The shared `WebAssembly.Memory` whose buffer `buffer` is, when the area lies in one (posted with it). */
  readonly memory?: { readonly buffer: SharedArrayBuffer } | undefined
}

/**
 * One end of a direct ring link between two worker threads (a `MessagePort`, opaque outside
 * `src/platform`). @since 0.1.0 @category model
 */
export interface RingEnd {
  readonly _RingEnd: unique symbol
}

/**
 * One ring step as it travels on a direct link: the data's buffer is transferred, not copied.
 * `Uint8Array`: a packed step (`--compress`), only on links between processes; worker threads'
 * links carry floats.
 * @since 0.1.0 @category model
 */
export interface RingWire {
  readonly generation: number
  readonly round: number
  readonly step: number
  readonly data: Float64Array | Float32Array | Uint8Array
}

/**
 * A worker's direct ring links of one `generation`: `send` to the next ring rank,
 * `onMessage` from the previous one, `close` both (when a newer generation supersedes them).
 * @since 0.1.0 @category model
 */
export interface RingPorts {
  readonly generation: number
  /** The generation's shared all-reduce area, when the host made one. */
  readonly area?: RingArea | undefined
  readonly send: (message: RingWire) => void
  readonly onMessage: (callback: (message: RingWire) => void) => void
  readonly close: () => void
}

/**
 * Worker limits passed to `new Worker`, in MiB; Bun ignores them (TOOLCHAIN.md §7).
 *
 * @since 0.1.0
 * @category model
 */
export interface ResourceLimits {
  readonly maxOldGenerationSizeMb?: number
  readonly maxYoungGenerationSizeMb?: number
}

/**
 * The child's side of a worker or process link: its rank and data from the parent, `post` to the
 * parent, and callbacks. `onExit` hooks run synchronously when the child calls
 * `process.exit` so that queued frames still go out.
 *
 * @since 0.1.0
 * @category model
 */
export interface ParentLink {
  readonly rank: number
  readonly data: unknown
  readonly post: (message: Uint8Array) => void
  readonly onMessage: (callback: (message: Uint8Array) => void) => void
  readonly onClose: (callback: () => void) => void
  readonly onExit: (callback: () => void) => void
  readonly close: () => void
  /** Workers only: the ring links the host hands over, one `RingPorts` per generation (`RawChild.postRing`). */
  readonly onRingPorts?: (callback: (ports: RingPorts) => void) => void
  /**
   * Child processes only: called once the parent is gone (its channel closed or went silent).
   * From then on what the child prints goes to the parent's own stderr, where the pipes that
   * carried it to the parent lead nowhere; the returned function writes one line there. Write
   * errors are swallowed: nobody may be left to read.
   */
  readonly detach?: () => (line: string) => void
  /**
   * Child processes only: posts `message` every `intervalMs` from a thread of the child's own,
   * for up to `forMs` ms, until the returned function is called, so that a call that blocks the
   * child's thread (a synchronous save) does not silence it (`beater.ts`). Nothing is posted when
   * the thread cannot start or the message is over `Beater.beatBytesMax` bytes.
   */
  readonly beatWhile?: (message: Uint8Array, intervalMs: number, forMs: number) => () => void
}

/** One raw server-side WebSocket connection. @since 0.1.0 @category model */
export interface RawSocket {
  readonly send: (data: Uint8Array | string) => void
  /**
   * Sends one binary message made of `parts` back to back, in fragments (RFC 6455 §5.4), so that
   * no part is copied into the message; the peer receives the same message as from `send` of the
   * parts joined. Absent where the runtime cannot send fragments.
   */
  readonly sendParts?: (parts: ReadonlyArray<Uint8Array>) => void
  readonly close: (code: number, reason: string) => void
  /** Bytes sent but not yet taken by the network (the socket's `bufferedAmount`); absent where the runtime cannot say. */
  readonly bufferedBytes?: () => number
  /**
   * True where every binary message given to `SocketHandlers.message` is memory of its own that
   * the runtime neither reads nor reuses afterwards, so its receiver may keep views on it and
   * change it. Absent (false) where that is not known.
   */
  readonly givesMessages?: boolean
}

/**
 * Callbacks of one WebSocket connection. `message` gets binary data as `Uint8Array` and text as
 * `string`; `close` comes last with the close code (1006 when the connection dropped).
 *
 * @since 0.1.0
 * @category model
 */
export interface SocketHandlers {
  readonly message: (data: Uint8Array | string) => void
  /** `reason`: words for a client whose TLS check failed (code 1015), else absent. */
  readonly close: (code: number, reason?: string) => void
}

/**
 * A server's TLS identity: its certificate chain and private key, PEM text (the leaf first).
 *
 * @since 0.1.0
 * @category model
 */
export interface TlsIdentity {
  readonly cert: string
  readonly key: string
}

/**
 * How a client checks a `wss://` server's certificate: `ca` (PEM text) trusts the certificates
 * it holds instead of the system's roots (the host name is still checked); `fingerprint256` (the
 * SHA-256 of the server's leaf certificate, hex, colons optional) accepts that certificate alone,
 * whoever signed it and whatever names it carries. Neither: the system's roots and the host name.
 *
 * @since 0.1.0
 * @category model
 */
export interface TlsTrust {
  readonly ca?: string | undefined
  readonly fingerprint256?: string | undefined
}

/**
 * What a raw WebSocket server needs: bind `host:port` (0 = any free port), refuse messages over
 * `maxPayloadBytes` with close code 1009, and call `open` for each new connection with the peer's
 * IP address as the runtime reports it (`"127.0.0.1"`, `"::1"`, or `"::ffff:127.0.0.1"` for an
 * IPv4 peer of a dual-stack listener; `""` when unknown).
 *
 * A server closes a connection with the close handshake: the peer receives the close code even
 * when it was still sending (under Deno the close frame waits until the peer goes quiet; see
 * `deno.ts`).
 *
 * @since 0.1.0
 * @category model
 */
export interface ServeOptions {
  readonly host: string
  readonly port: number
  readonly maxPayloadBytes: number
  readonly open: (socket: RawSocket, remoteAddress: string) => SocketHandlers
  /** Serve `wss://` (and `https://` for plain requests) with this identity; default plain `ws://`. */
  readonly tls?: TlsIdentity | undefined
  /**
   * Answers plain HTTP requests on the same port (every request that is not a WebSocket
   * upgrade); default: each is answered 426 "WebSocket upgrade required". A handler that rejects
   * is answered 500.
   */
  readonly http?: HttpHandler
  /** As `HttpServeOptions.connectionsMax` (Node only). Default: no cap. */
  readonly connectionsMax?: number
  /** As `HttpServeOptions.onResource`. Default: ignored. */
  readonly onResource?: (event: ResourceEvent) => void
}

/**
 * A plain HTTP request as a WebSocket server's `http` handler sees it: the `method` (`"GET"`...)
 * and the request target's `path` (URL-decoded pathname, e.g. `"/cohort-rank.js"`) and `query`
 * (`"?token=..."` or `""`).
 *
 * @since 0.1.0
 * @category model
 */
export interface HttpRequest {
  readonly method: string
  readonly path: string
  readonly query: string
  /** A request header's value by its name (any case); `undefined` when absent (or not given, in tests). */
  readonly header?: (name: string) => string | undefined
}

/** An HTTP answer: `status`, headers (lower-case names) and the whole `body`. @since 0.1.0 @category model */
export interface HttpResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array | string
}

/**
 * An HTTP answer that stays open (server-sent events): `stream` is called once the headers are
 * sent, writes through the `HttpSink` it gets, and returns what to do when the client goes away or
 * the server closes (called once, never after the sink's `end`).
 *
 * @since 0.1.0
 * @category model
 */
export interface HttpStreamResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly stream: (sink: HttpSink) => () => void
}

/**
 * The open end of a streamed response: `write` sends text at once (UTF-8), `end` finishes the
 * response (after what is buffered), `drop` closes it at once and discards what is buffered (a
 * client that does not read). `bufferedBytes` is what was written but not yet taken by the
 * network (bytes; under Node text not yet encoded counts its UTF-16 code units), for
 * backpressure. `write`, `end` and `drop` do nothing once the response ended or the client went
 * away.
 *
 * @since 0.1.0
 * @category model
 */
export interface HttpSink {
  readonly write: (text: string) => void
  readonly end: () => void
  readonly drop: () => void
  readonly bufferedBytes: () => number
}

/**
 * What a plain HTTP server needs (`serveHttp`): bind `host:port` (0 = any free port) and answer
 * every request with `http`.
 *
 * @since 0.1.0
 * @category model
 */
export interface HttpServeOptions {
  readonly host: string
  readonly port: number
  readonly http: (request: HttpRequest) => Promise<HttpResponse | HttpStreamResponse>
  /** Serve `https://` with this identity; default plain `http://`. */
  readonly tls?: TlsIdentity | undefined
  /**
   * At most this many connections open at once; more are closed as they arrive, each reported
   * to `onResource` as `ConnectionRefused`. Enforced under Node (`node:http`'s `maxConnections`);
   * `Bun.serve` and `Deno.serve` count no connections. Default: no cap.
   */
  readonly connectionsMax?: number
  /** The listener's own resource events once it listens (`ResourceEvent`). Default: ignored. */
  readonly onResource?: (event: ResourceEvent) => void
}

/**
 * What a listener reports of its own resources: a connection refused at its `connectionsMax`, or
 * an error accepting one (`code` `EMFILE`/`ENFILE` when the process ran out of file descriptors:
 * the runtime closes the pending connection and goes on).
 *
 * @since 0.1.0
 * @category model
 */
export type ResourceEvent =
  | { readonly _tag: "ConnectionRefused"; readonly connectionsMax: number }
  | { readonly _tag: "AcceptFailed"; readonly code: string; readonly message: string }

/** Answers one plain HTTP request. @since 0.1.0 @category model */
export type HttpHandler = (request: HttpRequest) => Promise<HttpResponse>

/** A listening raw WebSocket server: its bound port and how to stop it. @since 0.1.0 @category model */
export interface RawServer {
  readonly port: number
  readonly close: () => Promise<void>
}

/**
 * A raw WebSocket client; `open` fires once connected, then messages, then `close` once.
 *
 * @since 0.1.0
 * @category model
 */
export interface ClientHandlers extends SocketHandlers {
  readonly open: () => void
}

/**
 * One plain TCP connection (`listenTcp`, `connectTcp`): a byte stream with no framing of its own.
 * `write` queues `parts` in order as one write (the stream may keep a reference to them until
 * they are sent: the caller must not change them afterwards); `sent`, when given, is called once
 * the stream holds them no more (handed to the system), and never for a stream that closed
 * first; `end` sends what is queued, then closes; `destroy` closes at once, dropping what is
 * queued.
 *
 * @since 0.1.0
 * @category model
 */
export interface TcpStream {
  readonly write: (parts: ReadonlyArray<Uint8Array>, sent?: () => void) => void
  readonly end: () => void
  readonly destroy: () => void
}

/**
 * Callbacks of a `TcpStream`: `data` gets the bytes as they arrive, in order (a `chunk` is only
 * valid during the call: keep a copy of what is needed later); `close` comes once, last, however
 * the connection ended (closed by either side, reset, refused).
 *
 * `readInto` and `filled`, when given, let the stream read straight into the caller's memory
 * where the runtime can (an accepted connection on Node and Deno): before each read the stream
 * asks `readInto` where the next bytes go, and a read into that region (at most its length) is
 * reported as `filled(bytes)` instead of `data`; `undefined` means the stream's own buffer and
 * `data`. Elsewhere they are never called and every read comes to `data`.
 *
 * @since 0.1.0
 * @category model
 */
export interface TcpHandlers {
  readonly data: (chunk: Uint8Array) => void
  readonly close: () => void
  readonly readInto?: () => Uint8Array | undefined
  readonly filled?: (bytes: number) => void
}

/**
 * Options of `listenTcp`: the address (`host`, `port`; 0 for any free one), or instead a Unix
 * socket `path` on this machine (a stale socket left there is replaced), and what to do with each
 * accepted connection (`open` returns its handlers).
 *
 * @since 0.1.0
 * @category model
 */
export interface TcpListenOptions {
  readonly host: string
  readonly port: number
  readonly path?: string | undefined
  readonly open: (stream: TcpStream) => TcpHandlers
}
