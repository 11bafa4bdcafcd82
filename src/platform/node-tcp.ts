/**
 * Plain TCP streams on `node:net` (`Types.TcpStream`): Node's listener and client, which Bun and
 * Deno also provide. Every connection has Nagle's algorithm off (a small write goes out at once:
 * ring steps wait on each other) and no idle timeout.
 *
 * @since 0.1.0
 */
import { connect, createServer, type Socket } from "node:net"
import type * as Types from "./types.ts"

/** The `TcpStream` of a `node:net` socket, wired to `handlers`; `close` once, on the socket's `close`. */
const streamOf = (socket: Socket, handlers: () => Types.TcpHandlers | undefined): Types.TcpStream => {
  socket.setNoDelay(true)
  socket.on("data", (chunk: Uint8Array) => handlers()?.data(chunk))
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
 * Listens on `options.host`:`options.port` and hands each connection to `options.open`. Resolves
 * with the bound port once listening; rejects with the bind's error (a port in use).
 *
 * @since 0.1.0
 * @category sockets
 */
export const listenTcp = (options: Types.TcpListenOptions): Promise<Types.RawServer> =>
  new Promise((resolve, reject) => {
    const open = new Set<Socket>()
    const server = createServer((socket) => {
      open.add(socket)
      let handlers: Types.TcpHandlers | undefined
      const stream = streamOf(socket, () => handlers)
      socket.on("close", () => open.delete(socket))
      handlers = options.open(stream)
    })
    server.once("error", reject)
    server.listen(options.port, options.host, () => {
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
    })
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
