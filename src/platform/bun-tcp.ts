/**
 * Plain TCP streams (`Types.TcpStream`) on Bun's own sockets (`Bun.listen`, `Bun.connect`), which
 * `node:net` wraps on Bun. Through that wrapper a ring step's bytes were copied twice on their way
 * out: queued writes joined into one buffer (`_writev`), and what the kernel did not take at once
 * copied again into the socket's own buffer. Here a write hands the kernel what it takes and keeps
 * the rest as views of the caller's parts, sent from where they are once the socket drains. Every
 * connection has Nagle's algorithm off, as on `node:net` (`node-tcp.ts`).
 *
 * @since 0.1.0
 */
import { removeStaleSocket } from "./node-tcp.ts"
import type * as Types from "./types.ts"

/** Bun's socket, as far as this module uses it. */
interface BunSocket {
  /** Bytes the kernel took (fewer than given when its buffer is full; then `drain` follows). */
  write(data: Uint8Array): number
  end(): void
  terminate(): void
  setNoDelay(noDelay: boolean): boolean
  data: Connection | undefined
}

interface BunSocketHandlers {
  open(socket: BunSocket): void
  data(socket: BunSocket, chunk: Uint8Array): void
  drain(socket: BunSocket): void
  close(socket: BunSocket, error?: Error): void
  error(socket: BunSocket, error: Error): void
  connectError?(socket: BunSocket, error: Error): void
}

interface BunListener {
  readonly port?: number
  stop(closeActiveConnections?: boolean): void
}

interface BunSockets {
  listen(options: ({ hostname: string; port: number } | { unix: string }) & { socket: BunSocketHandlers }): BunListener
  connect(options: ({ hostname: string; port: number } | { unix: string }) & { socket: BunSocketHandlers }): Promise<BunSocket>
}

const bun = (): BunSockets => (globalThis as unknown as { Bun: BunSockets }).Bun

/** The part of a write the kernel has not taken yet, and what to call once it has. */
interface Pending {
  bytes: Uint8Array
  readonly sent: (() => void) | undefined
}

/** One connection: its stream, and the writes waiting for the socket to drain. */
class Connection {
  socket: BunSocket | undefined
  handlers: Types.TcpHandlers | undefined
  private readonly pending: Array<Pending> = []
  private ending = false
  private gone = false

  readonly stream: Types.TcpStream = {
    write: (parts, sent) => this.write(parts, sent),
    end: () => this.end(),
    destroy: () => this.destroy()
  }

  /** The socket is connected: writes made before go out now. */
  opened(socket: BunSocket): void {
    this.socket = socket
    socket.data = this
    socket.setNoDelay(true)
    if (this.gone) return socket.terminate()
    this.drain()
  }

  private write(parts: ReadonlyArray<Uint8Array>, sent: (() => void) | undefined): void {
    if (this.gone || this.ending) return
    for (let i = 0; i < parts.length; i++) {
      const last = i === parts.length - 1
      const part = parts[i]!
      // In order: while older bytes wait, new ones wait behind them.
      const taken = this.pending.length === 0 && this.socket !== undefined ? Math.max(0, this.socket.write(part)) : 0
      if (taken < part.length || (last && this.pending.length > 0)) {
        this.pending.push({ bytes: part.subarray(taken), sent: last ? sent : undefined })
      } else if (last && sent !== undefined) queueMicrotask(sent)
    }
  }

  /** Sends what waits, as far as the kernel takes it; ends the socket after the last when asked to. */
  drain(): void {
    const socket = this.socket
    if (socket === undefined || this.gone) return
    while (this.pending.length > 0) {
      const first = this.pending[0]!
      const taken = first.bytes.length === 0 ? 0 : Math.max(0, socket.write(first.bytes))
      if (taken < first.bytes.length) {
        first.bytes = first.bytes.subarray(taken)
        return
      }
      this.pending.shift()
      first.sent?.()
    }
    if (this.ending) socket.end()
  }

  private end(): void {
    if (this.gone || this.ending) return
    this.ending = true
    if (this.pending.length === 0) this.socket?.end()
  }

  private destroy(): void {
    if (this.gone) return
    this.gone = true
    this.pending.length = 0
    this.socket?.terminate()
    // Not connected yet: no socket will report a close.
    if (this.socket === undefined) this.closed()
  }

  /** Reports the end, once, whichever way it came. */
  closed(): void {
    const first = this.handlers !== undefined
    const handlers = this.handlers
    this.handlers = undefined
    this.gone = true
    this.pending.length = 0
    if (first) handlers!.close()
  }
}

/** Socket callbacks shared by the listener and the client: each socket's `data` is its `Connection`. */
const socketHandlers = (open: (socket: BunSocket) => void): BunSocketHandlers => ({
  open,
  data: (socket, chunk) => socket.data?.handlers?.data(chunk),
  drain: (socket) => socket.data?.drain(),
  close: (socket) => socket.data?.closed(),
  // A close always follows.
  error: () => {},
  connectError: (socket) => socket.data?.closed()
})

/**
 * Listens on `options.host`:`options.port`, or on the Unix socket `options.path` (a stale socket
 * there is replaced), and hands each connection to `options.open`; `node-tcp.ts`'s `listenTcp` on
 * Bun's sockets. Rejects with the bind's error.
 *
 * @since 0.1.0
 * @category sockets
 */
export const listenTcp = async (options: Types.TcpListenOptions): Promise<Types.RawServer> => {
  const open = new Set<Connection>()
  const handlers = socketHandlers((socket) => {
    const connection = new Connection()
    open.add(connection)
    socket.data = connection
    const accepted = options.open(connection.stream)
    connection.handlers = {
      ...accepted,
      close: () => {
        open.delete(connection)
        accepted.close()
      }
    }
    connection.opened(socket)
  })
  if (options.path !== undefined) removeStaleSocket(options.path)
  const listener = bun().listen(
    options.path === undefined ? { hostname: options.host, port: options.port, socket: handlers } : { unix: options.path, socket: handlers }
  )
  return {
    port: options.path === undefined ? (listener.port ?? options.port) : options.port,
    close: async () => {
      for (const connection of open) connection.stream.destroy()
      // Takes the socket file away, as Node's server does.
      listener.stop(true)
    }
  }
}

/** A connection to `address`: `handlers.open` once connected, then `data`, then `close` once (also when refused). */
const connectTo = (
  address: { hostname: string; port: number } | { unix: string },
  handlers: Types.TcpHandlers & { readonly open: () => void }
): Types.TcpStream => {
  const connection = new Connection()
  connection.handlers = handlers
  const socket = socketHandlers((socket) => {
    connection.opened(socket)
    if (connection.handlers !== undefined) handlers.open()
  })
  // `connectError` reports a refusal; the promise's rejection says the same.
  bun()
    .connect({ ...address, socket: { ...socket, connectError: () => connection.closed() } })
    .catch(() => connection.closed())
  return connection.stream
}

/** `connectTcp` on Bun's sockets (`node-tcp.ts`). @since 0.1.0 @category sockets */
export const connectTcp = (host: string, port: number, handlers: Types.TcpHandlers & { readonly open: () => void }): Types.TcpStream =>
  connectTo({ hostname: host, port }, handlers)

/** `connectPath` on Bun's sockets (`node-tcp.ts`). @since 0.1.0 @category sockets */
export const connectPath = (path: string, handlers: Types.TcpHandlers & { readonly open: () => void }): Types.TcpStream =>
  connectTo({ unix: path }, handlers)
