/**
 * The WebSocket transport's client: a rank's end (`connect`), which joins with the run token,
 * retries the refusals worth retrying, and with protocol 2 resumes a link that dropped or went
 * silent. The protocol is described in `web-socket.ts`, which re-exports this module.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as DeathReport from "../actor/death-report.ts"
import * as Hub from "./internal/hub.ts"
import * as ResumingLink from "./internal/resuming-link.ts"
import * as Select from "../platform/select.ts"
import type * as RuntimeTypes from "../platform/types.ts"
import * as Transport from "./transport.ts"
import { pieceBytesDefault, pingAfterSendMsDefault, resendBytesMaxDefault } from "./web-socket-protocol.ts"

/**
 * Client options, beside `Transport.Options`:
 *
 * - `url`: the server's `ws://host:port/` (required).
 * - `runToken`: the server's run token (required).
 * - `rank`: the rank to join as (required): an integer, or `"auto"` for the lowest free rank
 *   (`ClientHandle.rank` says which).
 * - `joinTimeoutMs` (integer milliseconds > 0; default `connectJoinTimeoutMsDefault`, 30000): how
 *   long `connect` keeps retrying refusals that say "try again later" (`TryAgainLater` 1013,
 *   `AddressBusy` 4008), with jittered exponential back-off (`joinRetryDelayMsBase` doubling up
 *   to `joinRetryDelayMsMax`, each delay scaled by 0.8–1.2). No retry is scheduled once it has
 *   passed since the first attempt; the last refusal is then the error. An attempt the server
 *   neither welcomes nor refuses in time ends with its `JoinTimeout` (4004), retried the same way
 *   (`isRetryableRefusal`).
 * - `resumable` (default false): join with protocol 2, so that the link survives a cut (see
 *   `internal/resuming-link.ts`): when the socket drops, or nothing arrives for
 *   `reconnectSilenceMs`, the client opens a new connection every `reconnectRetryMs` (each given
 *   up after `reconnectAttemptMs`) and resumes its session, both sides sending again what the
 *   other missed. The link ends when the server refuses the resume (`RankDead` 4011: the
 *   coordinator declared the rank; `ResumeLost` 4030), or when no resume succeeded within
 *   `reconnectWindowMs` of the loss (`Disconnected{1006}`; a function gets the welcome's `run`). A server that refuses protocol 2
 *   (`BadJoin` 4000: an older one) is joined again with protocol 1, without resumes. Messages
 *   travel in pieces of `pieceBytes` at most and wait in a resend buffer of `resendBytesMax`
 *   until acknowledged; the client pings every `pingIntervalMs`, and every piece or ping that
 *   arrives counts as a sign of life (`lastArrivalMs`) on either side.
 *   Defaults: `reconnectSilenceMs` 2000, `reconnectRetryMs` 100, `reconnectAttemptMs` 2000,
 *   `reconnectWindowMs` 30000, `pingIntervalMs` 250, `pieceBytes` 64 KiB, `resendBytesMax` 64 MiB
 *   (all integers > 0; ms or bytes).
 *
 * @since 0.1.0
 * @category options
 */
export interface ClientOptions extends Transport.Options {
  readonly url: string
  readonly runToken: string
  readonly rank: Transport.Peer | "auto"
  readonly joinTimeoutMs?: number
  readonly resumable?: boolean
  readonly reconnectSilenceMs?: number
  readonly reconnectRetryMs?: number
  readonly reconnectAttemptMs?: number
  readonly reconnectWindowMs?: number | ((run: unknown) => number)
  readonly pingIntervalMs?: number
  readonly pieceBytes?: number
  readonly resendBytesMax?: number
  /**
   * How a `wss://` server's certificate is checked (`RuntimeTypes.TlsTrust`); default the
   * system's roots. A server that fails it is `Refused{closeCode: 1015}` (`CloseCode.TlsFailed`),
   * never retried, and nothing was sent to it.
   */
  readonly tls?: RuntimeTypes.TlsTrust | undefined
}

/** Default `ClientOptions.reconnectSilenceMs`: 2000 ms. @since 0.1.0 @category options */
export const reconnectSilenceMsDefault = 2000

/** Default `ClientOptions.reconnectRetryMs`: 100 ms. @since 0.1.0 @category options */
export const reconnectRetryMsDefault = 100

/** Default `ClientOptions.reconnectAttemptMs`: 2000 ms. @since 0.1.0 @category options */
export const reconnectAttemptMsDefault = 2000

/** Default `ClientOptions.reconnectWindowMs`: 30000 ms. @since 0.1.0 @category options */
export const reconnectWindowMsDefault = 30_000

/** Default `ClientOptions.pingIntervalMs`: 250 ms. @since 0.1.0 @category options */
export const clientPingIntervalMsDefault = 250

/** Default client `joinTimeoutMs`: 30000 ms. @since 0.1.0 @category options */
export const connectJoinTimeoutMsDefault = 30_000

/** The first delay before `connect` retries a 1013 or 4008 refusal: 20 ms. @since 0.1.0 @category options */
export const joinRetryDelayMsBase = 20

/** The longest delay between two join attempts of `connect`: 1000 ms. @since 0.1.0 @category options */
export const joinRetryDelayMsMax = 1000

/**
 * Whether `connect` retries a refusal with this close code: the two "try again later" codes,
 * `TryAgainLater` (1013) and `AddressBusy` (4008), and a join timeout (`JoinTimeout`, 4004): this
 * client sends its join as soon as the socket opens, so a server that waited for it in vain lost
 * it to the link (a lossy one retransmits for seconds), not to the client. A wrong token, a rank
 * out of range or taken, or a bad join is final.
 *
 * @since 0.1.0
 * @category model
 */
export const isRetryableRefusal = (closeCode: number): boolean =>
  closeCode === Transport.CloseCode.TryAgainLater ||
  closeCode === Transport.CloseCode.AddressBusy ||
  closeCode === Transport.CloseCode.JoinTimeout

/**
 * A joined rank: its endpoint (peer id = its rank, one peer: `coordinatorPeer`), its `rank` (the
 * one the server assigned for `"auto"`), `run` (the welcome's `run` value, `undefined` without
 * one), `close(code)` to leave with a close handshake, `drop` to cut the connection without one
 * where the runtime can (`ws` under Node; elsewhere it closes with `Dropped`, 4031; a `resumable` link then
 * resumes on a new connection, as after a cut), and `closeCode()`: the link's close code once it
 * ended (`undefined` while open). `resumable`: the server took the join with protocol 2.
 *
 * @since 0.1.0
 * @category model
 */
export interface ClientHandle {
  readonly transport: Transport.TransportShape
  readonly rank: Transport.Peer
  readonly run: unknown
  readonly resumable: boolean
  readonly close: (closeCode?: number) => Effect.Effect<void>
  readonly drop: Effect.Effect<void>
  readonly closeCode: () => number | undefined
  /**
   * How many times the link went on with a coordinator that took the run over after the last
   * one's loss (a recovered welcome, docs/recovery.md): the rank's old assignment and held
   * contribution mean nothing to it. 0 without a recovery.
   */
  readonly recoveries: () => number
  /**
   * A server that hands out beat links (`ServerOptions.beatLinks`): the rank's beat session and
   * key, as the welcome gave them; `undefined` otherwise.
   */
  readonly beat: { readonly session: string; readonly key: string } | undefined
}

interface Welcome {
  readonly rank: Transport.Peer
  readonly run: unknown
  /** Protocol 2: the session to resume and the messages the server received so far. */
  readonly session: string | undefined
  readonly received: number
  /** A server that took the run over: this is a new session, not the one resumed. */
  readonly recovered: boolean
  readonly beat?: { readonly session: string; readonly key: string }
}

const parseWelcome = (data: string): Welcome | undefined => {
  try {
    const value = JSON.parse(data) as {
      welcome?: unknown
      run?: unknown
      v?: unknown
      session?: unknown
      received?: unknown
      recovered?: unknown
      beatSession?: unknown
      beatKey?: unknown
    }
    if (typeof value !== "object" || value === null || typeof value.welcome !== "number" || !Number.isInteger(value.welcome))
      return undefined
    const beat =
      typeof value.beatSession === "string" && typeof value.beatKey === "string"
        ? { beat: { session: value.beatSession, key: value.beatKey } }
        : {}
    if (value.v === undefined || value.v === 1)
      return { rank: value.welcome, run: value.run, session: undefined, received: 0, recovered: false, ...beat }
    if (value.v !== 2 || typeof value.session !== "string" || !Number.isSafeInteger(value.received)) return undefined
    return {
      rank: value.welcome,
      run: value.run,
      session: value.session,
      received: value.received as number,
      recovered: value.recovered === true,
      ...beat
    }
  } catch {
    return undefined
  }
}

type JoinedSocket = RuntimeTypes.RawSocket & { readonly drop: () => void }

/**
 * Connects and joins as `rank`; closing the scope closes the connection with 1000. A refusal
 * with `TryAgainLater` (1013) or `AddressBusy` (4008) is retried (see `ClientOptions`), any
 * other is final. Fails with `TransportError`: `Refused{closeCode}` when the server refuses the
 * join (the last refusal, once retries are spent), `ConnectFailed` when the connection fails first.
 *
 * @since 0.1.0
 * @category constructors
 */
export const connect = (options: ClientOptions): Effect.Effect<ClientHandle, Transport.TransportError, Scope.Scope> =>
  Effect.gen(function* () {
    // Long because it is a factory: the closures it returns share its state, and each is short.
    // An "auto" join learns its rank at the welcome; the endpoint's `self` is set from it.
    let self: Transport.Peer = options.rank === "auto" ? 0 : options.rank
    let run: unknown
    let beat: { readonly session: string; readonly key: string } | undefined
    let closeCode: number | undefined
    let recoveries = 0
    const hub = yield* Hub.make(self, options)
    let link: Hub.Link | undefined
    let resuming: ResumingLink.Resuming | undefined
    // Protocol 2 when resumable, down to 1 once a server refused it as a bad join (an older server).
    let version: 1 | 2 = options.resumable === true ? 2 : 1
    let closed: (() => void) | undefined
    const done = new Promise<void>((resolve) => (closed = resolve))
    const ended = (code: number) => {
      closeCode = code
      closed?.()
    }
    /** The link of a welcomed socket: plain (protocol 1), or one that resumes (protocol 2). */
    const open = (raw: JoinedSocket, welcome: Welcome): void => {
      if (welcome.session === undefined) {
        link = hub.attach(Transport.coordinatorPeer, {
          post: (message) => raw.send(message),
          close: (code) => raw.close(code, "closed by rank")
        })
        return
      }
      let session = welcome.session
      resuming = ResumingLink.start(
        {
          hub,
          url: options.url,
          trust: options.tls,
          sessionId: session,
          resumeJoin: (attempt, received) =>
            JSON.stringify({ v: 2, token: options.runToken, rank: self, resume: { session, received, attempt } }),
          parseWelcome: (text) => {
            const again = parseWelcome(text)
            if (again === undefined || again.rank !== self || again.session === undefined) return undefined
            if (again.session === session) return again.received
            return again.recovered ? { recovered: again.session } : undefined
          },
          recovered: (id) => {
            session = id
            recoveries += 1
          },
          pieceBytes: options.pieceBytes ?? pieceBytesDefault,
          resendBytesMax: options.resendBytesMax ?? resendBytesMaxDefault,
          pingIntervalMs: options.pingIntervalMs ?? clientPingIntervalMsDefault,
          pingAfterSendMs: pingAfterSendMsDefault,
          silenceMs: options.reconnectSilenceMs ?? reconnectSilenceMsDefault,
          retryMs: options.reconnectRetryMs ?? reconnectRetryMsDefault,
          attemptMs: options.reconnectAttemptMs ?? reconnectAttemptMsDefault,
          windowMs:
            typeof options.reconnectWindowMs === "function"
              ? options.reconnectWindowMs(welcome.run)
              : (options.reconnectWindowMs ?? reconnectWindowMsDefault),
          ended
        },
        raw
      )
    }
    // One join attempt: resolves once welcomed; a refusal or failure closes only this attempt's socket.
    const attempt = Effect.callback<JoinedSocket, Transport.TransportError>((resume) => {
      let welcomed = false
      let over = false
      const raw: JoinedSocket = Select.connectWs(
        options.url,
        {
          open: () => raw.send(JSON.stringify({ v: version, token: options.runToken, rank: options.rank })),
          message: (data) => {
            if (resuming !== undefined) return resuming.message(raw, data)
            if (link !== undefined) {
              if (welcomed && typeof data !== "string") link.receive(data)
              return
            }
            if (!welcomed && typeof data === "string") {
              const welcome = parseWelcome(data)
              if (welcome === undefined || (options.rank !== "auto" && welcome.rank !== options.rank)) {
                return raw.close(Transport.CloseCode.BadJoin, "bad welcome")
              }
              welcomed = true
              self = welcome.rank
              run = welcome.run
              beat = welcome.beat
              open(raw, welcome)
              resume(Effect.succeed(raw))
            }
          },
          close: (code, reason) => {
            over = true
            if (welcomed) {
              if (resuming !== undefined) return resuming.closed(raw, code)
              ended(code)
              return link?.end(DeathReport.disconnected(code))
            }
            if (code === Transport.CloseCode.BadJoin && version === 2) version = 1
            resume(
              Effect.fail(
                new Transport.TransportError({
                  reason:
                    code === Transport.CloseCode.Abnormal
                      ? { _tag: "ConnectFailed", detail: `connection to ${options.url} failed` }
                      : { _tag: "Refused", closeCode: code, detail: reason ?? `join refused with ${code}` }
                })
              )
            )
          }
        },
        options.tls
      )
      // Interrupted before the welcome (the scope closed): do not leave the attempt's socket open.
      return Effect.sync(() => {
        if (!welcomed && !over) raw.drop()
      })
    })
    const joinTimeoutMs = options.joinTimeoutMs ?? connectJoinTimeoutMsDefault
    const backOff = Schedule.exponential(Duration.millis(joinRetryDelayMsBase)).pipe(
      Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.millis(joinRetryDelayMsMax)))),
      Schedule.jittered,
      Schedule.upTo({ duration: Duration.millis(joinTimeoutMs) })
    )
    let downgraded = false
    const socket = yield* Effect.retry(attempt, {
      schedule: backOff,
      while: (error) => {
        if (error.reason._tag !== "Refused") return false
        // An older server refused protocol 2: once more with protocol 1.
        if (error.reason.closeCode === Transport.CloseCode.BadJoin && version === 1 && options.resumable === true && !downgraded) {
          downgraded = true
          return true
        }
        return isRetryableRefusal(error.reason.closeCode)
      }
    })
    const close = (closeCode: number = Transport.CloseCode.Normal) =>
      Effect.promise(() => {
        hub.link(Transport.coordinatorPeer)?.close(closeCode)
        return done
      })
    yield* Effect.addFinalizer(() =>
      Effect.andThen(
        close(),
        Effect.sync(() => {
          resuming?.stop()
          hub.shutdown()
        })
      )
    )
    return {
      transport: self === hub.transport.self ? hub.transport : { ...hub.transport, self },
      rank: self,
      run,
      resumable: resuming !== undefined,
      close,
      drop:
        resuming === undefined
          ? Effect.promise(() => {
              socket.drop()
              return done
            })
          : Effect.sync(() => resuming?.drop()),
      closeCode: () => closeCode,
      recoveries: () => recoveries,
      beat
    }
  })
