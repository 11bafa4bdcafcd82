/**
 * Plain TCP streams on `node:net` (`Types.TcpStream`): Node's listener and client, which Deno
 * also provides (Bun's own sockets serve Bun, `bun-tcp.ts`). Every connection has Nagle's
 * algorithm off (a small write goes out at once: ring steps wait on each other) and no idle
 * timeout. An accepted connection reads into one buffer of its own (`readBufferBytes`), reused
 * for every read (`ownBuffer`).
 *
 * @since 0.1.0
 */
import { lstatSync, unlinkSync } from "node:fs"
import { connect, createServer, type Server, Socket } from "node:net"
import type * as Types from "./types.ts"

/**
 * Bytes an accepted connection reads at most at once into its own buffer (`ownBuffer`): a ring
 * step of a few hundred kilobytes in a few reads.
 */
const readBufferBytes = 1 << 20

/**
 * `accepted` (from a server made with `pauseOnConnect`, not reading yet) as a socket that reads
 * into one buffer of its own, handing each read's bytes to `data` (valid during the call only,
 * as `TcpHandlers.data` says). Node otherwise allocates a new 64 KiB buffer for every read of the
 * socket, which the collector frees again: for ring steps, which flow towards the listener,
 * that cost about a sixth of the CPU of a direct ring round. Node offers `onread` only on the
 * sockets it connects, so the accepted connection's handle is wrapped in a new socket with it
 * (the `handle` option the server itself uses), which counts towards `server`'s connections in
 * place of `accepted` (never used again). Deno's `node:net` works the same way. `undefined`
 * where sockets do not look like that (Bun's `node:net`): the caller resumes `accepted` and reads
 * its `data` events.
 *
 * Before each read the socket asks `handlers()`'s `readInto` where the bytes go (`TcpHandlers`):
 * a ring step's values are then read straight into the step's own buffer, not copied out of this
 * one (about 4 MB a rank a round at 8 × 407,050).
 */
const ownBuffer = (server: Server, accepted: Socket, handlers: () => Types.TcpHandlers | undefined): Socket | undefined => {
  const internals = accepted as unknown as { _handle?: { readonly useUserBuffer?: unknown } | null }
  const handle = internals._handle
  if (handle === undefined || handle === null || typeof handle.useUserBuffer !== "function") return undefined
  const buffer = new Uint8Array(readBufferBytes)
  // The region the next read goes to, when it is the handlers' (`readInto`), else this buffer.
  let into: Uint8Array | undefined
  const next = (): Uint8Array => {
    into = handlers()?.readInto?.()
    if (into !== undefined && into.length === 0) into = undefined
    return into ?? buffer
  }
  const read = (bytes: number): void => {
    const target = into
    if (target === undefined) handlers()?.data(buffer.subarray(0, bytes))
    else handlers()?.filled?.(bytes)
  }
  internals._handle = null
  const socket = new Socket({
    handle,
    readable: true,
    writable: true,
    onread: { buffer: next, callback: read }
  } as ConstructorParameters<typeof Socket>[0])
  // A socket ending takes itself off its server's count, which `close` waits to reach zero.
  ;(socket as unknown as { _server: Server })._server = server
  return socket
}

/** The `TcpStream` of a `node:net` socket, wired to `handlers`; `close` once, on the socket's `close`. */
const streamOf = (socket: Socket, handlers: () => Types.TcpHandlers | undefined, ownReads = false): Types.TcpStream => {
  socket.setNoDelay(true)
  if (!ownReads) socket.on("data", (chunk: Uint8Array) => handlers()?.data(chunk))
  // An error is always followed by `close`, which reports it.
  socket.on("error", () => {})
  socket.on("close", () => handlers()?.close())
  return {
    write: (parts, sent) => {
      if (socket.destroyed || socket.writableEnded) return
      // Node calls a write's callback once it is done with the bytes, with an error when it failed.
      const done = sent === undefined ? undefined : (error?: Error | null) => (error ? undefined : sent())
      if (parts.length === 1) return void socket.write(parts[0]!, done)
      // Corked, the parts leave in one `writev`.
      socket.cork()
      for (let i = 0; i < parts.length; i++) socket.write(parts[i]!, i === parts.length - 1 ? done : undefined)
      socket.uncork()
    },
    end: () => void socket.end(),
    destroy: () => void socket.destroy()
  }
}

/**
 * Removes what `path` holds when it is a socket (one a process that died left): else leaves it.
 *
 * @since 0.1.0
 * @category sockets
 */
export const removeStaleSocket = (path: string): void => {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path)
  } catch {
    // Nothing there, or not ours to remove: the bind says which.
  }
}

/**
 * Listens on `options.host`:`options.port`, or on the Unix socket `options.path` when given, and
 * hands each connection to `options.open`. Resolves with the bound port (`options.port` for a
 * path) once listening; rejects with the bind's error (a port in use).
 *
 * @since 0.1.0
 * @category sockets
 */
export const listenTcp = (options: Types.TcpListenOptions): Promise<Types.RawServer> =>
  new Promise((resolve, reject) => {
    const open = new Set<Socket>()
    const server: Server = createServer({ pauseOnConnect: true }, (accepted) => {
      let handlers: Types.TcpHandlers | undefined
      const own = ownBuffer(server, accepted, () => handlers)
      const socket = own ?? accepted
      open.add(socket)
      const stream = streamOf(socket, () => handlers, own !== undefined)
      socket.on("close", () => open.delete(socket))
      handlers = options.open(stream)
      if (own === undefined) accepted.resume()
    })
    server.once("error", reject)
    const listening = () => {
      server.off("error", reject)
      server.on("error", () => {})
      const address = server.address()
      resolve({
        port: typeof address === "object" && address !== null ? address.port : options.port,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of open) socket.destroy()
            server.close(() => done())
          })
      })
    }
    if (options.path === undefined) server.listen(options.port, options.host, listening)
    else {
      removeStaleSocket(options.path)
      server.listen(options.path, listening)
    }
  })

/**
 * Connects to `host`:`port`; `handlers.open` fires once connected, then `data`, then `close` once
 * (also for a connection that was refused or never made).
 *
 * @since 0.1.0
 * @category sockets
 */
export const connectTcp = (host: string, port: number, handlers: Types.TcpHandlers & { readonly open: () => void }): Types.TcpStream => {
  const socket = connect({ host, port })
  socket.once("connect", () => handlers.open())
  return streamOf(socket, () => handlers)
}

/**
 * `connectTcp` to the Unix socket at `path` (`listenTcp`'s `path`): the same stream, without TCP's
 * own work in the kernel (a third of a ring step's system time on loopback, docs/benchmarks.md).
 *
 * @since 0.1.0
 * @category sockets
 */
export const connectPath = (path: string, handlers: Types.TcpHandlers & { readonly open: () => void }): Types.TcpStream => {
  const socket = connect({ path })
  socket.once("connect", () => handlers.open())
  return streamOf(socket, () => handlers)
}
