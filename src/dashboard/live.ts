/**
 * The live dashboard (`--dashboard [PORT]` on `cohort demo`, `run` and `serve`): a small HTTP
 * server in the coordinator's process that serves the run page (`page.ts`, `mode: "live"`) and
 * streams the run's journal events to it as server-sent events, as they happen.
 *
 * The coordinator pays little for it: `onEvent` only files the event (an array push, or the
 * rank's latest progress replacing the one before); a timer every `flushIntervalMs` sends what
 * was filed as one message to every page, with each rank's progress at most once per
 * `progressIntervalMs`, and the server's clock once a second. A page that opens late first gets
 * every event shown so far (at most `replayEventsMax`) and each rank's latest progress.
 *
 * Requests: `GET /` the page; `GET /events` the stream; `POST /kill?rank=N` (only with `kill`,
 * `--dashboard-faults`) asks the run to kill rank N, and must carry the page's key in its
 * `x-cohort-dashboard` header (another site's page cannot read it, so it cannot kill a rank).
 * With `token`, every request must carry `?token=<token>` (403 otherwise). On a loopback address
 * every request must name a loopback host in its `Host` header (a DNS-rebinding page cannot).
 *
 * @since 0.1.0
 */
import * as Select from "../platform/select.ts"
import type * as Types from "../platform/types.ts"
import * as Build from "./build.ts"
import * as Model from "./model.ts"

/**
 * Defaults of `LiveOptions`: `progressIntervalMs` 1000 (a rank's progress reaches a page at most
 * once a second), `flushIntervalMs` 200, `clientsMax` 16 (pages open at once; one more is answered
 * 503), `replayEventsMax` 100000 (events kept for pages that open late; past it the oldest are
 * dropped, and a late page sees the run from a later point).
 *
 * @since 0.1.0
 * @category live
 */
export const liveDefaults = { progressIntervalMs: 1000, flushIntervalMs: 200, clientsMax: 16, replayEventsMax: 100_000 } as const

/**
 * Options of `start`. `host` and `port` to listen on (port 0: a free one); `title` of the page;
 * `token` (every request must carry `?token=`; give it whenever `host` is not loopback; a
 * function is read at each request, and while it gives `undefined` every request is answered 503:
 * `cohort serve` learns a made token only once it listens); `kill`
 * (shows a kill button per rank and accepts `POST /kill?rank=N`; `worldSize` bounds N); the
 * bounds of `liveDefaults`.
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
}

/**
 * A listening dashboard: its `url` (without the token), the bound `port`,
 * `onEvent` for every run event (the launcher's `onEvent`), and `close`, which sends what is
 * still filed and ends every page's stream.
 *
 * @since 0.1.0
 * @category live
 */
export interface Live {
  readonly url: string
  readonly port: number
  readonly onEvent: (event: unknown) => void
  readonly close: () => Promise<void>
}

/** True for an address only this machine reaches. @since 0.1.0 @category live */
export const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host)

const text = (status: number, body: string): Types.HttpResponse => ({ status, headers: { "content-type": "text/plain; charset=utf-8" }, body })

/** Equal strings, compared in time that does not depend on where they differ. */
const sameSecret = (given: string, secret: string): boolean => {
  let diff = given.length ^ secret.length
  for (let i = 0; i < secret.length; i++) diff |= (given.charCodeAt(i % Math.max(1, given.length)) ^ secret.charCodeAt(i))
  return diff === 0
}

const newKey = (): string => {
  const bytes = new Uint8Array(16)
  crypto.getRandomValues(bytes)
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")
}

/** The host name of a `Host` header (`127.0.0.1:8080`, `[::1]:80`). */
const hostName = (header: string): string => (header.startsWith("[") ? header.slice(0, header.indexOf("]") + 1) : header.replace(/:\d+$/, ""))

/**
 * Starts the dashboard: builds the page, listens, and returns at once. Rejects when the page does
 * not build (`BrowserBundleError`) or the address cannot be bound (the runtime's error, e.g.
 * `EADDRINUSE`).
 *
 * @since 0.1.0
 * @category live
 */
export const start = async (options: LiveOptions): Promise<Live> => {
  const progressIntervalMs = options.progressIntervalMs ?? liveDefaults.progressIntervalMs
  const clientsMax = options.clientsMax ?? liveDefaults.clientsMax
  const replayEventsMax = options.replayEventsMax ?? liveDefaults.replayEventsMax
  const key = newKey()
  const page = await Build.pageHtml({ mode: "live", title: options.title, faults: options.kill !== undefined, key })
  const loopback = isLoopback(options.host)

  const replay: Array<unknown> = []
  const pending: Array<unknown> = []
  const latestProgress = new Map<number, { readonly event: unknown; sent: boolean; sentAtMs: number }>()
  const clients = new Set<Types.HttpSink>()
  let worldSize = 0
  // Journal ms = wall ms - offset, from the latest event: the clock the pages show between events.
  let offsetMs: number | undefined

  const onEvent = (event: unknown): void => {
    if (typeof event !== "object" || event === null) return
    const e = event as { readonly type?: unknown; readonly ms?: unknown; readonly rank?: unknown; readonly worldSize?: unknown }
    if (typeof e.ms === "number") offsetMs = Date.now() - e.ms
    if (e.type === "progress" && typeof e.rank === "number") {
      const known = latestProgress.get(e.rank)
      latestProgress.set(e.rank, { event, sent: false, sentAtMs: known?.sentAtMs ?? 0 })
      return
    }
    if (!Model.isShown(event)) return
    if (e.type === "started" && typeof e.worldSize === "number") worldSize = e.worldSize
    replay.push(event)
    if (replay.length > replayEventsMax) replay.splice(0, replay.length - replayEventsMax)
    pending.push(event)
  }

  const send = (batch: ReadonlyArray<unknown>): void => {
    if (batch.length === 0 || clients.size === 0) return
    const message = `data: ${JSON.stringify(batch)}\n\n`
    for (const client of clients) client.write(message)
  }
  let lastClockMs = 0
  const flush = (final: boolean): void => {
    const now = Date.now()
    const batch = pending.splice(0)
    // Progress before the events filed after it would be wrong only by a flush interval; a death
    // or the end still reads last, so a rank never comes back to life on the page.
    const due: Array<unknown> = []
    for (const entry of latestProgress.values()) {
      if (entry.sent || (!final && now - entry.sentAtMs < progressIntervalMs)) continue
      entry.sent = true
      entry.sentAtMs = now
      due.push(entry.event)
    }
    const clock = offsetMs !== undefined && now - lastClockMs >= 1000 ? [{ type: "clock", ms: now - offsetMs }] : []
    if (clock.length > 0) lastClockMs = now
    send([...due, ...batch, ...clock])
    // The run ended: every page has its last event; their streams end (a page that opens later
    // still gets the whole run).
    if (batch.some((event) => (event as { readonly type?: unknown }).type === "ended")) {
      for (const client of [...clients]) client.end()
      clients.clear()
    }
  }
  const timer = setInterval(() => flush(false), options.flushIntervalMs ?? liveDefaults.flushIntervalMs)

  const events = (): Types.HttpStreamResponse => ({
    status: 200,
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" },
    stream: (sink) => {
      // What is filed goes to the pages already open first: the replay holds it too.
      flush(false)
      sink.write("retry: 1000\n\n")
      const progress = [...latestProgress.values()].map((entry) => entry.event)
      sink.write(`data: ${JSON.stringify([...replay, ...progress])}\n\n`)
      clients.add(sink)
      return () => clients.delete(sink)
    }
  })

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
    if (loopback && !isLoopback(hostName(request.header?.("host") ?? ""))) return text(403, "this dashboard answers only to a loopback host name")
    const token = typeof options.token === "function" ? options.token() : options.token
    if (typeof options.token === "function" && token === undefined) return text(503, "the run token is not known yet; try again once the run listens")
    if (token !== undefined && !sameSecret(new URLSearchParams(request.query).get("token") ?? "", token)) {
      return text(403, "missing or wrong ?token= (the run token)")
    }
    switch (request.path) {
      case "/":
        if (request.method !== "GET" && request.method !== "HEAD") return text(405, "GET /")
        return { status: 200, headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" }, body: page }
      case "/events":
        if (clients.size >= clientsMax) return text(503, `too many dashboard pages open (at most ${clientsMax})`)
        return events()
      case "/kill":
        return kill(request)
      default:
        return text(404, "not found")
    }
  }

  const server = await Select.serveHttp({ host: options.host, port: options.port, http }).catch((error: unknown) => {
    clearInterval(timer)
    throw error
  })
  const shownHost = options.host.includes(":") && !options.host.startsWith("[") ? `[${options.host}]` : options.host
  const url = `http://${shownHost}:${server.port}/`
  let closed = false
  return {
    url,
    port: server.port,
    onEvent,
    close: async () => {
      if (closed) return
      closed = true
      clearInterval(timer)
      flush(true)
      for (const client of [...clients]) client.end()
      clients.clear()
      await server.close()
    }
  }
}
