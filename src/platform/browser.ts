/**
 * The browser adapter: what a rank needs from its runtime when it runs in a Web Worker of a
 * browser tab. `cohort bundle` (`bundle.ts`, `bundleBrowser`) builds the rank
 * with this file standing in for `node.ts`, `bun.ts`, `deno.ts`, `files.ts` and `schedule.ts`, so
 * it exports the names of all five that the rank, the WebSocket client and the bundled trainer
 * use, with a browser's meaning:
 *
 * - **Sockets.** The client is the standard `WebSocket` global; a browser serves nothing
 *   (`serveWs` and `serveHttp` reject).
 * - **Files.** A tab has no file system. `resolvePackageFile("mnist/src/digits/3.json")` gives the
 *   URL `<origin>/cohort/package/mnist/src/digits/3.json`, where `cohort serve --serve-browser`
 *   serves the coordinator's copy of that package file, and `readFile` of an `http(s):` URL
 *   fetches it: the bundled MNIST trainer's data comes from the coordinator, unchanged. Writes
 *   (`mkdir`, `writeFile`: model saves, the emergency record) reject with an `Error` whose `code`
 *   is `ENOSYS`: a browser rank's saves fail, which the rank reports and survives.
 * - **Memory.** `engineMemoryBytes` is Chromium's `performance.memory.usedJSHeapSize` (0 where
 *   the browser has none); `collectGarbage` does nothing.
 * - **The page.** `pageLink` is the worker's side of its page: the join parameters the page sends
 *   first (`BrowserJoin`), and the statuses and the end the worker sends back (`BrowserStatus`).
 *
 * Nothing here is imported by Node, Bun or Deno code; it touches browser globals only.
 *
 * @since 0.1.0
 */

/** The path under which a page's origin serves package files to a browser rank. @since 0.1.0 @category files */
export const packagePathPrefix = "/cohort/package/"

// ---------------------------------------------------------------------------------------------
// node.ts / bun.ts / deno.ts stand-ins
// ---------------------------------------------------------------------------------------------

/** The same code as `node.ts`'s: a rank over its own memory limit. @since 0.1.0 @category processes */
export const outOfMemoryCode = "ERR_RANK_OUT_OF_MEMORY"

/**
 * The JavaScript heap in use, in bytes: Chromium's non-standard `performance.memory`, 0 in
 * browsers without it (a `heapCheckMb` then never fires).
 *
 * @since 0.1.0
 * @category processes
 */
export const engineMemoryBytes = (): number =>
  (globalThis.performance as unknown as { memory?: { usedJSHeapSize?: number } } | undefined)?.memory?.usedJSHeapSize ?? 0

/** Does nothing: a page cannot force a collection. @since 0.1.0 @category memory */
export const collectGarbage = (): void => {}

/** Does nothing: a page cannot tune its engine's heap (a tab serves no run). @since 0.1.0 @category processes */
export const setHeapGrowthPercent = (_percent: number): void => {}

/** The browser's own `WebSocket` constructor. @since 0.1.0 @category sockets */
export const webSocketClass = (): typeof globalThis.WebSocket => globalThis.WebSocket

/**
 * A WebSocket to `url` with the browser's own client, which checks a `wss://` server against
 * the browser's roots; a browser takes no other `trust` (`ca`, a pinned fingerprint): throws.
 *
 * @since 0.1.0
 * @category sockets
 */
export const openWebSocket = (
  url: string,
  trust?: { readonly ca?: string | undefined; readonly fingerprint256?: string | undefined }
): WebSocket => {
  if (trust?.ca !== undefined || trust?.fingerprint256 !== undefined)
    throw new Error("a browser checks certificates against its own roots only")
  return new WebSocket(url)
}

/** `undefined`: a browser shows no peer certificate. @since 0.1.0 @category sockets */
export const peerFingerprint = (_socket: WebSocket): string | undefined => undefined

/** Rejects: a browser tab serves no WebSocket. @since 0.1.0 @category sockets */
export const serveWs = (): Promise<never> => Promise.reject(new Error("a browser cannot serve WebSockets"))

/** Rejects: a browser tab serves no HTTP. @since 0.1.0 @category http */
export const serveHttp = (): Promise<never> => Promise.reject(new Error("a browser cannot serve HTTP"))

/** Rejects: a browser tab listens on no TCP port. @since 0.1.0 @category sockets */
export const listenTcp = (): Promise<never> => Promise.reject(new Error("a browser cannot listen on TCP"))

/** A stream that is closed at once: a browser tab opens no plain TCP connection. @since 0.1.0 @category sockets */
export const connectTcp = (_host: string, _port: number, handlers: { readonly close: () => void }) => {
  queueMicrotask(() => handlers.close())
  return { write: () => {}, end: () => {}, destroy: () => {} }
}

/** A stream that is closed at once: a browser tab opens no Unix socket. @since 0.1.0 @category sockets */
export const connectPath = (_path: string, handlers: { readonly close: () => void }) => {
  queueMicrotask(() => handlers.close())
  return { write: () => {}, end: () => {}, destroy: () => {} }
}

// ---------------------------------------------------------------------------------------------
// schedule.ts stand-ins
// ---------------------------------------------------------------------------------------------

// A message to itself is a macrotask without the 4 ms clamp that nested timers get in browsers.
const pendingAfterIo: Array<() => void> = []
let macrotask: MessagePort | undefined
const postMacrotask = (): void => {
  if (macrotask === undefined) {
    const channel = new MessageChannel()
    channel.port1.onmessage = () => pendingAfterIo.shift()?.()
    macrotask = channel.port2
  }
  macrotask.postMessage(0)
}

/** Runs `f` as a macrotask, after pending events (as `setImmediate` does). @since 0.1.0 @category scheduling */
export const afterIo = (f: () => void): void => {
  pendingAfterIo.push(f)
  postMacrotask()
}

/** Runs `f` after `ms` milliseconds (integer >= 0). @since 0.1.0 @category scheduling */
export const after = (ms: number, f: () => void): void => {
  setTimeout(f, ms)
}

// ---------------------------------------------------------------------------------------------
// files.ts stand-ins
// ---------------------------------------------------------------------------------------------

const noFileSystem = (what: string, path: string): Error =>
  Object.assign(new Error(`a browser rank has no file system: cannot ${what} ${path}`), { code: "ENOSYS" })

const origin = (): string => (globalThis as unknown as { location?: { origin?: string } }).location?.origin ?? ""

/**
 * The URL where the page's origin serves the package file `specifier`
 * (`<origin>/cohort/package/<specifier>`); `fromUrl` is not used.
 *
 * @since 0.1.0
 * @category files
 */
export const resolvePackageFile = (specifier: string, _fromUrl?: string): string => `${origin()}${packagePathPrefix}${specifier}`

/**
 * Fetches an `http:` or `https:` URL as bytes. Rejects with an `Error` for a status other than
 * 200, and with `code` `ENOSYS` for anything else (a path: there is no file system).
 *
 * @since 0.1.0
 * @category files
 */
export const readFile = async (path: string): Promise<Uint8Array> => {
  if (!/^https?:/.test(path)) throw noFileSystem("read", path)
  const response = await fetch(path)
  if (response.status !== 200) throw new Error(`GET ${path}: HTTP ${response.status}`)
  return new Uint8Array(await response.arrayBuffer())
}

/** Rejects with `code` `ENOSYS`: nothing is written from a browser. @since 0.1.0 @category files */
export const mkdir = (path: string): Promise<void> => Promise.reject(noFileSystem("create", path))

/** Rejects with `code` `ENOSYS`: nothing is written from a browser. @since 0.1.0 @category files */
export const writeFile = (path: string, _data?: Uint8Array | string): Promise<void> => Promise.reject(noFileSystem("write", path))

/** Rejects with `code` `ENOSYS`: nothing is written from a browser. @since 0.1.0 @category files */
export const writeFileAtomic = (path: string, _data?: Uint8Array | string): Promise<void> => Promise.reject(noFileSystem("write", path))

/** Throws `code` `ENOSYS`: a browser rank has no area file (`AreaFile`). @since 0.1.0 @category files */
export const createAreaFile = (path: string, _bytes?: number): number => {
  throw noFileSystem("create", path)
}

/** Throws `code` `ENOSYS`: a browser rank has no area file. @since 0.1.0 @category files */
export const openAreaFile = (path: string): number => {
  throw noFileSystem("open", path)
}

/** Throws `code` `ENOSYS`: a browser rank has no area file. @since 0.1.0 @category files */
export const writeAt = (_fd: number, _data?: ArrayBufferView, _position?: number): void => {
  throw noFileSystem("write", "an area file")
}

/** Throws `code` `ENOSYS`: a browser rank has no area file. @since 0.1.0 @category files */
export const readAt = (_fd: number, _into?: ArrayBufferView, _position?: number): void => {
  throw noFileSystem("read", "an area file")
}

/** Does nothing: a browser opens no file. @since 0.1.0 @category files */
export const closeFile = (_fd: number): void => {}

/** Does nothing: a browser makes no file. @since 0.1.0 @category files */
export const removeFile = (_path: string): void => {}

/** The empty string: a browser has no folder. @since 0.1.0 @category files */
export const memoryFolder = (): string => ""

/** Does nothing: a browser writes no file, so there is no folder to sync. @since 0.1.0 @category files */
export const syncDir = (_path: string): Promise<void> => Promise.resolve()

/**
 * Rejects with `code` `ENOSYS`: a browser has no file to open (a save folder's model, read by
 * `SavedModel.read`, is never read in a browser). @since 0.1.0 @category files
 */
export const readRegularFile = (path: string, _bytesMax?: number): Promise<never> => Promise.reject(noFileSystem("read", path))

// ---------------------------------------------------------------------------------------------
// The worker's side of its page
// ---------------------------------------------------------------------------------------------

/**
 * What the page sends its rank worker first: the WebSocket `url` of the coordinator
 * (`ws://host:port/`, from the page's own address), the run `token` (the page's `?token=`), and
 * the `rank` to join as (`"auto"`: the coordinator assigns the lowest free rank; a number from the
 * page's `?rank=`).
 *
 * @since 0.1.0
 * @category page
 */
export interface BrowserJoin {
  readonly url: string
  readonly token: string
  readonly rank: number | "auto"
}

/**
 * What the worker tells its page: `joined` once the coordinator welcomed it (its `rank`),
 * `training` at most every `progressIntervalMs` (the epoch and the samples this rank trained in it,
 * and in all), and `ended` once (the exit code a process would have had, and a line saying why).
 *
 * @since 0.1.0
 * @category page
 */
export type BrowserStatus =
  | { readonly _tag: "joined"; readonly rank: number }
  | {
      readonly _tag: "training"
      readonly rank: number
      readonly epoch: number
      readonly samplesDone: number
      readonly samplesTotal: number
    }
  | { readonly _tag: "ended"; readonly code: number; readonly detail: string }

/**
 * The worker's link to its page: `join` resolves with the page's first message, `post` sends a
 * status. Only inside a dedicated Web Worker.
 *
 * @since 0.1.0
 * @category page
 */
export const pageLink = (): { readonly join: Promise<BrowserJoin>; readonly post: (status: BrowserStatus) => void } => {
  const scope = globalThis as unknown as {
    postMessage: (message: unknown) => void
    addEventListener: (type: "message", listener: (event: MessageEvent) => void, options?: { once?: boolean }) => void
  }
  const join = new Promise<BrowserJoin>((resolve) =>
    scope.addEventListener("message", (event) => resolve(event.data as BrowserJoin), { once: true })
  )
  return { join, post: (status) => scope.postMessage(status) }
}

/** Ends the worker (`self.close()`): a rank's `process.exit` in a tab. @since 0.1.0 @category page */
export const closeWorker = (): void => {
  ;(globalThis as unknown as { close?: () => void }).close?.()
}
