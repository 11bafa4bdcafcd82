/**
 * The live dashboard (`--dashboard [PORT]` on `cohort demo`, `run`, `serve` and `resume`): a small
 * HTTP server in the coordinator's process that serves the run page (`page.ts`, `mode: "live"`)
 * and streams the run's journal events to it as server-sent events, as they happen.
 *
 * The coordinator pays little for it: `onEvent` only files the event (an array push, or the
 * rank's latest progress replacing the one before). A timer every `flushIntervalMs` serialises
 * what was filed, once per event (the lines are kept for pages that open late, never serialised
 * again), and sends each page what it has not had, with each rank's progress at most once per
 * `progressIntervalMs` and the server's clock once a second.
 *
 * Pages are fed by what they take: a page that opens late gets the events shown so far (at most
 * `replayEventsMax`) in pieces, at most `pageSendBytesMax` per page per flush and only while what
 * it was sent before is taken, then each rank's latest progress, then the stream. A page that
 * caught up and whose unsent bytes pass `pageBufferedBytesMax` (it stopped reading) is dropped; it
 * reconnects on its own when it reads again. When `clientsMax` pages are open, a new page takes
 * the place of the open page with the most unsent bytes, if any has some; otherwise it is
 * answered 503.
 *
 * The listener holds at most `connectionsMax` connections (under Node; `Bun.serve` and
 * `Deno.serve` count none): past it each new one is closed as it arrives, so that idle
 * connections never take the coordinator's file descriptors, which its worker ranks and its
 * journal share. Refusals, and connections it could not accept (`EMFILE`: the process is out of
 * descriptors), reach `onResource` as one line at most once a second, saying how many.
 *
 * Requests: `GET /` the page; `GET /events` the stream; `POST /kill?rank=N` (only with `kill`,
 * `--dashboard-faults`) asks the run to kill rank N, and must carry the page's key in its
 * `x-cohort-dashboard` header (another site's page cannot read it, so it cannot kill a rank).
 * With `token`, every request must carry `?token=<token>` (403 otherwise). On a loopback address
 * every request must name a loopback host in its `Host` header (a DNS-rebinding page cannot):
 * exactly a host and an optional port, nothing after them.
 *
 * @since 0.1.0
 */
import * as Select from "../platform/select.ts"
import type * as Types from "../platform/types.ts"
import * as Build from "./build.ts"
import * as Model from "./model.ts"

/**
 * Defaults of `LiveOptions`: `progressIntervalMs` 1000 (a rank's progress reaches a page at most
 * once a second), `flushIntervalMs` 200, `clientsMax` 16 (pages open at once), `replayEventsMax`
 * 100000 (events kept for pages that open late; past it the oldest are dropped, up to 1024 at a
 * time, and a late page sees the run from a later point), `pageBufferedBytesMax` 4 MiB (a page
 * with more unsent bytes is dropped), `pageSendBytesMax` 1 MiB (what a page that catches up is
 * sent per flush at most), `connectionsMax` 256 (connections the listener holds at once).
 *
 * @since 0.1.0
 * @category live
 */
export const liveDefaults = {
  progressIntervalMs: 1000,
  flushIntervalMs: 200,
  clientsMax: 16,
  replayEventsMax: 100_000,
  pageBufferedBytesMax: 4 * 1024 * 1024,
  pageSendBytesMax: 1024 * 1024,
  connectionsMax: 256
} as const

/**
 * Options of `start`. `host` and `port` to listen on (port 0: a free one); `title` of the page;
 * `token` (every request must carry `?token=`; give it whenever `host` is not loopback; a
 * function is read at each request, and while it gives `undefined` every request is answered 503:
 * `cohort serve` learns a made token only once it listens); `kill`
 * (shows a kill button per rank and accepts `POST /kill?rank=N`; `worldSize` bounds N); the
 * bounds of `liveDefaults` (`pageBufferedBytesMax` and `pageSendBytesMax` in bytes);
 * `onResource`, told in one line when the listener refused connections at `connectionsMax` or
 * could not accept one (at most once a second; the CLI makes it a `CoordinatorResource` alert).
 *
 * @since 0.1.0
 * @category live
 */
export interface LiveOptions {
  readonly host: string
  readonly port: number
  readonly title: string
  readonly token?: string | (() => string | undefined) | undefined
  readonly kill?: ((rank: number) => void) | undefined
  readonly progressIntervalMs?: number
  readonly flushIntervalMs?: number
  readonly clientsMax?: number
  readonly replayEventsMax?: number
  readonly pageBufferedBytesMax?: number
  readonly pageSendBytesMax?: number
  readonly connectionsMax?: number
  readonly onResource?: ((detail: string) => void) | undefined
  /** Serve `https://` with this certificate and key (PEM text; `cohort serve --tls-cert`); default `http://`. */
  readonly tls?: Types.TlsIdentity | undefined
}

/**
 * A listening dashboard: its `url` (without the token), the bound `port`,
 * `onEvent` for every run event (the launcher's `onEvent`), `pages` (how many pages follow it, how
 * many were dropped for not reading, how many connections the listener refused at its cap), and
 * `close`, which sends what is still filed and ends every page's stream.
 *
 * @since 0.1.0
 * @category live
 */
export interface Live {
  readonly url: string
  readonly port: number
  readonly onEvent: (event: unknown) => void
  readonly pages: () => { readonly open: number; readonly dropped: number; readonly refused: number }
  readonly close: () => Promise<void>
}

/** True for an address only this machine reaches. @since 0.1.0 @category live */
export const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host)

const text = (status: number, body: string): Types.HttpResponse => ({
  status,
  headers: { "content-type": "text/plain; charset=utf-8" },
  body
})

/** Equal strings, compared in time that does not depend on where they differ. */
const sameSecret = (given: string, secret: string): boolean => {
  let diff = given.length ^ secret.length
  for (let i = 0; i < secret.length; i++) diff |= given.charCodeAt(i % Math.max(1, given.length)) ^ secret.charCodeAt(i)
  return diff === 0
}

const newKey = (): string => {
  const bytes = new Uint8Array(16)
  crypto.getRandomValues(bytes)
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")
}

/**
 * The host name of a `Host` header (`127.0.0.1:8080`, `[::1]:80`, `localhost`): a bracketed IPv6
 * address or a name without colons, then at most a port; anything else (`[::1]x`) gives `""`.
 *
 * @since 0.1.0
 * @category live
 */
export const hostName = (header: string): string => /^(\[[0-9A-Fa-f:.]+\]|[^:[\]]*)(?::\d{1,5})?$/.exec(header)?.[1] ?? ""

/**
 * An open page: its sink, the index of the next log line it needs, whether it caught up, and the
 * progress event it last had of each rank (so that none is sent twice).
 */
interface Page {
  readonly sink: Types.HttpSink
  cursor: number
  caughtUp: boolean
  readonly had: Map<number, unknown>
}

interface LatestProgress {
  readonly rank: number
  readonly event: unknown
  line: string | undefined
  sent: boolean
  sentAtMs: number
}

const messageOf = (parts: ReadonlyArray<string>): string => `data: [${parts.join(",")}]\n\n`

/**
 * Starts the dashboard: builds the page, listens, and returns at once. Rejects when the page does
 * not build (`BrowserBundleError`) or the address cannot be bound (the runtime's error, e.g.
 * `EADDRINUSE`).
 *
 * @since 0.1.0
 * @category live
 */
export const start = async (options: LiveOptions): Promise<Live> => {
  // Long because it is a factory: the closures it returns share its state, and each is short.
  const progressIntervalMs = options.progressIntervalMs ?? liveDefaults.progressIntervalMs
  const clientsMax = options.clientsMax ?? liveDefaults.clientsMax
  const replayEventsMax = options.replayEventsMax ?? liveDefaults.replayEventsMax
  const pageBufferedBytesMax = options.pageBufferedBytesMax ?? liveDefaults.pageBufferedBytesMax
  const pageSendBytesMax = options.pageSendBytesMax ?? liveDefaults.pageSendBytesMax
  const key = newKey()
  const page = await Build.pageHtml({ mode: "live", title: options.title, faults: options.kill !== undefined, key })
  const loopback = isLoopback(options.host)

  // The log: every shown event as its JSON line, `lines[i]` being event `base + i` of the run.
  const filed: Array<unknown> = []
  const lines: Array<string> = []
  let base = 0
  let endedAt: number | undefined
  const latestProgress = new Map<number, LatestProgress>()
  const pages = new Set<Page>()
  let dropped = 0
  let worldSize = 0
  // Journal ms = wall ms - offset, from the latest event: the clock the pages show between events.
  let offsetMs: number | undefined

  const onEvent = (event: unknown): void => {
    if (typeof event !== "object" || event === null) return
    const e = event as { readonly type?: unknown; readonly ms?: unknown; readonly rank?: unknown; readonly worldSize?: unknown }
    if (typeof e.ms === "number") offsetMs = Date.now() - e.ms
    if (e.type === "progress" && typeof e.rank === "number") {
      const known = latestProgress.get(e.rank)
      latestProgress.set(e.rank, { rank: e.rank, event, line: undefined, sent: false, sentAtMs: known?.sentAtMs ?? 0 })
      return
    }
    if (!Model.isShown(event)) return
    if (e.type === "started" && typeof e.worldSize === "number") worldSize = e.worldSize
    filed.push(event)
  }

  /** Serialises what was filed (each event once) and trims the log to `replayEventsMax`. */
  const serialiseFiled = (): void => {
    for (const event of filed) {
      const type = (event as { readonly type?: unknown }).type
      if (type === "ended" || type === "failed") endedAt = base + lines.length
      lines.push(JSON.stringify(event))
    }
    filed.length = 0
    if (lines.length > replayEventsMax + 1024) {
      const drop = lines.length - replayEventsMax
      lines.splice(0, drop)
      base += drop
    }
  }
  const progressLine = (entry: LatestProgress): string => (entry.line ??= JSON.stringify(entry.event))
  /** The progress in `entries` that `target` has not had, as lines; from now on it has had it. */
  const progressFor = (target: Page, entries: Iterable<LatestProgress>): Array<string> => {
    const parts: Array<string> = []
    for (const entry of entries) {
      if (target.had.get(entry.rank) === entry.event) continue
      target.had.set(entry.rank, entry.event)
      parts.push(progressLine(entry))
    }
    return parts
  }

  const drop = (target: Page): void => {
    pages.delete(target)
    dropped += 1
    target.sink.drop()
  }

  /**
   * Sends `target` what it lacks: log lines from its cursor (a page catching up: pieces of at most
   * `pageSendBytesMax` in all, only while what it was sent before is taken), then once caught up
   * the latest progress of every rank; a page caught up before gets `due` and `clock`. Ends it
   * once it has the `ended` event; drops it when its unsent bytes pass the bound.
   */
  const feed = (target: Page, due: ReadonlyArray<LatestProgress>, clock: ReadonlyArray<string>): void => {
    const end = base + lines.length
    if (target.cursor < base) target.cursor = base
    if (target.caughtUp) {
      const parts = [...progressFor(target, due), ...lines.slice(target.cursor - base), ...clock]
      target.cursor = end
      if (parts.length > 0) target.sink.write(messageOf(parts))
    } else {
      let budget = pageSendBytesMax
      while (target.cursor < end && budget > 0 && target.sink.bufferedBytes() < pageSendBytesMax) {
        const parts: Array<string> = []
        let size = 0
        while (target.cursor < end && size < budget) {
          const line = lines[target.cursor - base]!
          parts.push(line)
          size += line.length + 1
          target.cursor += 1
        }
        budget -= size
        target.sink.write(messageOf(parts))
      }
      if (target.cursor === end) {
        target.caughtUp = true
        const progress = progressFor(target, latestProgress.values())
        if (progress.length > 0) target.sink.write(messageOf(progress))
      }
    }
    // The run ended and this page has its last event: its stream ends (one opened later still
    // gets the whole run).
    if (endedAt !== undefined && target.cursor > endedAt) {
      pages.delete(target)
      target.sink.end()
    } else if (target.caughtUp && target.sink.bufferedBytes() > pageBufferedBytesMax) {
      // (A page catching up holds at most about `pageSendBytesMax` unsent: it is sent only what it takes.)
      drop(target)
    }
  }

  // The listener's own resources, told to `onResource` at most once a second.
  const connectionsMax = options.connectionsMax ?? liveDefaults.connectionsMax
  let refused = 0
  let refusedTold = 0
  const acceptFailures = new Map<string, { count: number; told: number; message: string }>()
  let lastToldMs = 0
  const onResource = (event: Types.ResourceEvent): void => {
    if (event._tag === "ConnectionRefused") refused += 1
    else {
      const known = acceptFailures.get(event.code) ?? { count: 0, told: 0, message: event.message }
      known.count += 1
      acceptFailures.set(event.code, known)
    }
  }
  const tellResources = (now: number): void => {
    if (options.onResource === undefined || now - lastToldMs < 1000) return
    if (refused > refusedTold) {
      options.onResource(
        `the dashboard refused ${refused - refusedTold} connection${refused - refusedTold === 1 ? "" : "s"} at its cap, connectionsMax ${connectionsMax} (${refused} in all); the run goes on`
      )
      refusedTold = refused
      lastToldMs = now
    }
    for (const [code, failure] of acceptFailures) {
      if (failure.count === failure.told) continue
      const why = code === "EMFILE" || code === "ENFILE" ? "the coordinator's process is out of file descriptors" : "the listener's error"
      options.onResource(
        `the dashboard could not accept ${failure.count - failure.told} connection${failure.count - failure.told === 1 ? "" : "s"}: ${failure.message} (${why}; ${failure.count} in all); the run goes on`
      )
      failure.told = failure.count
      lastToldMs = now
    }
  }

  let lastClockMs = 0
  const flush = (final: boolean): void => {
    const now = Date.now()
    tellResources(now)
    serialiseFiled()
    // Progress first: a death or the end still reads after it, so a rank never comes back to
    // life on the page (and the page's model keeps a dead rank's samples from before its death).
    const due: Array<LatestProgress> = []
    for (const entry of latestProgress.values()) {
      if (entry.sent || (!final && now - entry.sentAtMs < progressIntervalMs)) continue
      entry.sent = true
      entry.sentAtMs = now
      due.push(entry)
    }
    const clock = offsetMs !== undefined && now - lastClockMs >= 1000 ? [JSON.stringify({ type: "clock", ms: now - offsetMs })] : []
    if (clock.length > 0) lastClockMs = now
    for (const target of [...pages]) feed(target, due, clock)
  }
  const timer = setInterval(() => flush(false), options.flushIntervalMs ?? liveDefaults.flushIntervalMs)

  const events = (): Types.HttpStreamResponse => ({
    status: 200,
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" },
    stream: (sink) => {
      // What is filed goes to the pages already open first (the progress that is due included:
      // its interval then counts from now for every page).
      flush(false)
      sink.write("retry: 1000\n\n")
      const opened: Page = { sink, cursor: base, caughtUp: false, had: new Map() }
      pages.add(opened)
      feed(opened, [], [])
      return () => pages.delete(opened)
    }
  })

  /** Room for one more page: the open page with the most unsent bytes gives its place, if any has some. */
  const makeRoom = (): boolean => {
    if (pages.size < clientsMax) return true
    let slowest: Page | undefined
    let most = 0
    for (const open of pages) {
      const buffered = open.sink.bufferedBytes()
      if (buffered > most) [slowest, most] = [open, buffered]
    }
    if (slowest === undefined) return false
    drop(slowest)
    return true
  }

  const kill = (request: Types.HttpRequest): Types.HttpResponse => {
    if (options.kill === undefined) return text(404, "kill buttons are off (start the run with --dashboard-faults)")
    if (request.method !== "POST") return text(405, "POST /kill?rank=N")
    if (!sameSecret(request.header?.("x-cohort-dashboard") ?? "", key)) return text(403, "missing or wrong x-cohort-dashboard key")
    const raw = new URLSearchParams(request.query).get("rank") ?? ""
    const rank = /^\d{1,9}$/.test(raw) ? Number(raw) : -1
    if (rank < 0 || rank >= worldSize) return text(400, `rank must be an integer from 0 to ${worldSize - 1}, got '${raw.slice(0, 20)}'`)
    options.kill(rank)
    return text(202, `kill of rank ${rank} requested`)
  }

  const http = async (request: Types.HttpRequest): Promise<Types.HttpResponse | Types.HttpStreamResponse> => {
    if (loopback && !isLoopback(hostName(request.header?.("host") ?? "")))
      return text(403, "this dashboard answers only to a loopback host name")
    const token = typeof options.token === "function" ? options.token() : options.token
    if (typeof options.token === "function" && token === undefined)
      return text(503, "the run token is not known yet; try again once the run listens")
    if (token !== undefined && !sameSecret(new URLSearchParams(request.query).get("token") ?? "", token)) {
      return text(403, "missing or wrong ?token= (the run token)")
    }
    switch (request.path) {
      case "/":
        if (request.method !== "GET" && request.method !== "HEAD") return text(405, "GET /")
        return { status: 200, headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" }, body: page }
      case "/events":
        if (!makeRoom()) return text(503, `too many dashboard pages open (at most ${clientsMax}), and every one keeps up`)
        return events()
      case "/kill":
        return kill(request)
      default:
        return text(404, "not found")
    }
  }

  const server = await Select.serveHttp({
    host: options.host,
    port: options.port,
    http,
    connectionsMax,
    onResource,
    ...(options.tls === undefined ? {} : { tls: options.tls })
  }).catch((error: unknown) => {
    clearInterval(timer)
    throw error
  })
  const shownHost = options.host.includes(":") && !options.host.startsWith("[") ? `[${options.host}]` : options.host
  const url = `${options.tls === undefined ? "http" : "https"}://${shownHost}:${server.port}/`
  let closed = false
  return {
    url,
    port: server.port,
    onEvent,
    pages: () => ({ open: pages.size, dropped, refused }),
    close: async () => {
      if (closed) return
      closed = true
      clearInterval(timer)
      flush(true)
      for (const open of [...pages]) open.sink.end()
      pages.clear()
      await server.close()
    }
  }
}
