/**
 * Free TCP ports on a host address, for listeners a parent hands its children before they start
 * (a child process's direct ring links). `node:net` is there on Node, Bun and Deno alike.
 *
 * @since 0.1.0
 */
import { mkdtemp, rm } from "node:fs/promises"
import { createServer, type Server } from "node:net"
import { join } from "node:path"
import * as AreaFile from "./area-file.ts"

/**
 * `count` distinct ports the system handed out on `host` just now, each bound and released: free
 * when returned, but another process may take one before its user binds it (the user then does
 * without it and says so). Fails with the bind's error.
 *
 * @since 0.1.0
 * @category sockets
 */
export const freePorts = async (host: string, count: number): Promise<ReadonlyArray<number>> => {
  const servers: Array<Server> = []
  try {
    // All held at once, so that the system hands out distinct ports.
    for (let i = 0; i < count; i++) {
      const server = createServer()
      servers.push(server)
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject)
        server.listen(0, host, () => resolve())
      })
    }
    return servers.map((server) => (server.address() as { readonly port: number }).port)
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
  }
}

/**
 * A new folder of this user's own (mode 0700) in memory (`AreaFile.memoryFolder`: `/dev/shm`
 * where it is writable, else the system's temporary folder), for the Unix sockets of a run's child
 * processes and their all-reduce area files (`FileAllReduce`): short enough for a socket's path,
 * and outside the run's folder, which users copy (a socket file cannot be copied). Resolves
 * `undefined` where none can be made.
 *
 * @since 0.1.0
 * @category sockets
 */
export const socketFolder = (): Promise<string | undefined> => mkdtemp(join(AreaFile.memoryFolder(), "cohort-")).catch(() => undefined)

/**
 * Removes a folder made by `socketFolder` with what is in it; never fails.
 *
 * @since 0.1.0
 * @category sockets
 */
export const removeSocketFolder = (path: string): Promise<void> => rm(path, { recursive: true, force: true }).catch(() => undefined)
