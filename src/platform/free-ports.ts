/**
 * Free TCP ports on a host address, for listeners a parent hands its children before they start
 * (a child process's direct ring links). `node:net` is there on Node, Bun and Deno alike.
 *
 * @since 0.1.0
 */
import { lstat, mkdtemp, readdir, rm } from "node:fs/promises"
import { connect, createServer, type Server } from "node:net"
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
 * The folder holds a listening socket of this process's (`alive.sock`, unreferenced) for as long
 * as the folder is in use: the kernel closes it when this process dies, even by SIGKILL, so a later
 * launch that cannot connect to it knows the folder's owner is gone (`sweepStaleSocketFolders`,
 * run first here). A listener rather than a pid in the name: a pid says nothing across PID
 * namespaces (a launcher that ran as PID 1 of a container sharing this `/dev/shm`).
 *
 * @since 0.1.0
 * @category sockets
 */
export const socketFolder = (): Promise<string | undefined> => socketFolderIn(AreaFile.memoryFolder())

/**
 * `socketFolder` in folder `root`.
 *
 * @since 0.1.0
 * @category sockets
 */
export const socketFolderIn = async (root: string): Promise<string | undefined> => {
  await sweepStaleSocketFolders(root)
  const path = await mkdtemp(join(root, socketFolderPrefix)).catch(() => undefined)
  if (path === undefined) return undefined
  // Without user ids (Windows) nothing is swept, and a path is no socket's address there.
  if (process.getuid === undefined) return path
  const server = await listenAlive(join(path, aliveSocketName))
  // A folder without its listener would look abandoned to another launch a minute on.
  if (server === undefined)
    return rm(path, { recursive: true, force: true }).then(
      () => undefined,
      () => undefined
    )
  aliveServers.set(path, server)
  return path
}

/** Names of the folders `socketFolder` makes start with this. */
const socketFolderPrefix = "cohort-"
/** The socket whose listener says a folder's owner lives. */
const aliveSocketName = "alive.sock"
/** A folder younger than this without a live listener may be one being made now: left alone. */
const youngFolderMs = 60_000
/** How long a connection to a folder's listener may take before it counts as live. */
const connectWaitMs = 2_000
/** The listeners of the folders this process made, closed when each is removed. */
const aliveServers = new Map<string, Server>()

/** A listener on Unix socket `path` that keeps no process alive; `undefined` where none can be made. */
const listenAlive = (path: string): Promise<Server | undefined> =>
  new Promise((resolve) => {
    const server = createServer((socket) => socket.destroy())
    server.once("error", () => resolve(undefined))
    server.listen(path, () => {
      server.unref()
      resolve(server)
    })
  })

/**
 * Removes the folders of this user's that `socketFolder` made in `root` (`cohort-*`, real
 * folders, not links) whose owner is gone: their `alive.sock` refuses connections (nothing listens)
 * and they are older than a minute. A folder of another user, one without `alive.sock` (an older
 * Cohort's, or one being made), one whose listener answers or takes long to, and anything not
 * named so, are left alone. Where
 * the system has no user ids (Windows), does nothing. Never fails.
 *
 * @since 0.1.0
 * @category sockets
 */
export const sweepStaleSocketFolders = async (root: string): Promise<ReadonlyArray<string>> => {
  const uid = process.getuid?.()
  if (uid === undefined) return []
  const names = await readdir(root).catch(() => [] as Array<string>)
  const removed: Array<string> = []
  for (const name of names) {
    if (!name.startsWith(socketFolderPrefix)) continue
    const path = join(root, name)
    if (aliveServers.has(path) || !(await isStale(path, uid))) continue
    await removeSocketFolder(path)
    removed.push(path)
  }
  return removed
}

const isStale = async (path: string, uid: number): Promise<boolean> => {
  const info = await lstat(path).catch(() => undefined)
  if (info === undefined || !info.isDirectory() || info.uid !== uid) return false
  if (Date.now() - info.mtimeMs < youngFolderMs) return false
  // Only a socket: connecting to any other file is refused too, and says nothing of an owner.
  const alive = join(path, aliveSocketName)
  const socket = await lstat(alive).catch(() => undefined)
  if (socket === undefined || !socket.isSocket()) return false
  return !(await answers(alive))
}

/**
 * Whether something listens on Unix socket `path`: anything but a refusal counts as yes. A
 * missing socket file too: a folder of an older Cohort's, which made none, may be in use.
 */
const answers = (path: string): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect(path)
    const done = (live: boolean): void => {
      clearTimeout(timer)
      socket.destroy()
      resolve(live)
    }
    const timer = setTimeout(() => done(true), connectWaitMs)
    socket.once("connect", () => done(true))
    socket.once("error", (error: NodeJS.ErrnoException) => done(error.code !== "ECONNREFUSED"))
  })

/**
 * Removes a folder made by `socketFolder` with what is in it, and closes its listener; never fails.
 *
 * @since 0.1.0
 * @category sockets
 */
export const removeSocketFolder = (path: string): Promise<void> => {
  aliveServers.get(path)?.close()
  aliveServers.delete(path)
  return rm(path, { recursive: true, force: true }).catch(() => undefined)
}
