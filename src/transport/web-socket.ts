/**
 * The WebSocket transport: the coordinator serves, ranks connect (docs/design.md §5).
 *
 * The server is `ws` on Node, `Bun.serve` under Bun and `Deno.serve` under Deno; the client is
 * `ws` on Node and the global `WebSocket` elsewhere (all in `src/platform/`).
 *
 * The join handshake, protocol version `joinProtocolVersion` (1): a client joins with one text
 * message `{"v": 1, "token", "rank"}` where `rank` is an integer or `"auto"` (the lowest rank not
 * yet joined, dead or alive); `v` may be absent (read as 1). The server answers
 * `{"v": 1, "welcome": rank, "run"?: value}` (`rank` the one assigned; `run` what
 * `ServerOptions.welcome` gives for it, absent without it) or closes with a refusal code
 * (`Transport.CloseCode`): `BadJoin` 4000 (not a join, or a `v` other than 1), `WrongToken` 4001,
 * `RankOutOfRange` 4002, `RankDead` 4011 (the rank's link ended or it was ended from outside: a
 * dead rank never comes back), `RunFormed` 4010 (after `markFormed`, in a run that cannot grow; one
 * that can has `ServerOptions.admit` decide instead: its refusals are 4013-4020,
 * `Transport.joinRefusalCloseCode`), `DuplicateRank` 4003 (a live
 * rank's second connection; `"auto"` with every rank taken), `JoinTimeout` 4004, `TryAgainLater` 1013 past `pendingJoinsMax` and
 * `AddressBusy` 4008 past `pendingJoinsPerAddressMax` (and, in a run that may grow, before
 * `markFormed`: `TryAgainLater` for a join the formation cannot take, `"auto"` with every formation
 * rank taken or an index `>= worldSize`); the first message decides at once, so a
 * connection without the token holds a pending-join slot no longer than its first message.
 * `connect` retries 1013 and 4008 with jittered exponential back-off; every other refusal is
 * final. A joined rank's frame that names another sender (with `WireFrames.inspect`) closes with 1008 and is not
 * delivered. Nothing reaches the inbox before a join is accepted. After the join, frames travel as
 * binary batches; a message over `messageBytesMax` closes with 1009. A connection's end is `Ended{rank, Disconnected{closeCode}}`, after its last frame.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as DeathReport from "../actor/death-report.ts"
import type { JoinRefusal } from "../core/inputs.ts"
import * as Hub from "./internal/hub.ts"
import * as Select from "../platform/select.ts"
import type * as RuntimeTypes from "../platform/types.ts"
import * as Transport from "./transport.ts"

/**
 * Server options, beside `Transport.Options`:
 *
 * - `runToken`: the secret every join must carry (required), at least `runTokenLengthMin` (16)
 *   characters; a shorter one fails `serve` with `TransportError` `TokenTooShort`. Compared in
 *   constant time.
 * - `worldSize`: ranks accepted are `[0, worldSize)` (required).
 * - `host`: the address to bind; default `"127.0.0.1"` (loopback only).
 * - `port`: default `0` (any free port; read it from `ServerHandle.port`).
 * - `joinTimeoutMs`: milliseconds a connection may take to join; default `joinTimeoutMsDefault` (5000).
 * - `pendingJoinsMax`: connections open but not yet joined; one more is refused with
 *   `CloseCode.TryAgainLater` (1013); default `pendingJoinsMaxDefault` (64).
 * - `pendingJoinsPerAddressMax` (integer >= 0; default `pendingJoinsPerAddressMaxDefault`, 16):
 *   connections open but not yet joined from one IP address (an IPv4 peer of a dual-stack
 *   listener counts as its IPv4 address); one more from that address is refused with
 *   `CloseCode.AddressBusy` (4008), so that one host flooding the server with connections that
 *   never join holds at most this many of the `pendingJoinsMax` slots and ranks on other hosts
 *   still join. A code of its own rather than 1013, so that `refusals` tells a busy address from
 *   a full server; `connect` retries both.
 * - `welcome(rank)`: a JSON value sent in the welcome as `run` (what a joining rank needs to
 *   know of the run: its seed, batch size...); default none.
 * - `endCause(rank, closeCode)`: the death cause of a joined rank's link that closed with
 *   `closeCode`, when its supervisor knows better than the socket (the rank's process was killed);
 *   `undefined` (default): `Disconnected{closeCode}`.
 * - `onJoined(rank, remoteAddress)` and `onRefused(closeCode, reason, remoteAddress)`: observers
 *   of each accepted and each refused join, called synchronously; they must not throw.
 * - `admit(asked, taken)` (a run that may grow): decides each join after `markFormed`
 *   instead of the `RunFormed` (4010) refusal, synchronously: `asked` is the index the join asked
 *   for (any JSON value; `"auto"` for the lowest vacant one), `taken(r)` whether index `r` already
 *   had a link on this server (live, ended, or joining). It returns `{rank}` (the join takes that
 *   index: any integer `>= 0`, beyond `worldSize` too) or `{closeCode, reason}` (refused). Default
 *   none: a run that cannot grow. With it, before `markFormed`, a join the formation cannot take
 *   (`"auto"` with every formation rank taken, or an index `>= worldSize`) is refused with
 *   `TryAgainLater` (1013), which `connect` retries, not for good: it joins the running run.
 *
 * @since 0.1.0
 * @category options
 */
export interface ServerOptions extends Transport.Options {
  readonly runToken: string
  readonly worldSize: number
  readonly host?: string
  readonly port?: number
  readonly joinTimeoutMs?: number
  readonly pendingJoinsMax?: number
  readonly pendingJoinsPerAddressMax?: number
  readonly welcome?: (rank: Transport.Peer) => unknown
  readonly endCause?: (rank: Transport.Peer, closeCode: number) => DeathReport.DeathCause | undefined
  readonly onJoined?: (rank: Transport.Peer, remoteAddress: string) => void
  readonly onRefused?: (closeCode: number, reason: string, remoteAddress: string) => void
  readonly admit?: (asked: unknown, taken: (rank: Transport.Peer) => boolean) => Admission
  /**
   * Answers plain HTTP requests on the server's port (`cohort serve --serve-browser` serves its
   * page this way); default: 426 to each.
   */
  readonly http?: RuntimeTypes.HttpHandler
}

/**
 * `ServerOptions.admit`'s answer for a join into a running run: the index it takes, or the
 * refusal's close code and reason.
 *
 * @since 0.1.0
 * @category options
 */
export type Admission = { readonly rank: Transport.Peer } | { readonly closeCode: number; readonly reason: string }

/**
 * An `admit` answer from a core's join decision: `asked` as the join gave it (`"auto"`,
 * or an index), `decide` the core's verdict for it (`Coordinator.joinVerdict`: the index the join
 * takes, or `[reason, detail]`). A refusal closes with `Transport.joinRefusalCloseCode[reason]`;
 * an `asked` that is neither `"auto"` nor a number is `JoinBadIndex` (4014).
 *
 * @since 0.1.0
 * @category options
 */
export const admission = (
  asked: unknown,
  decide: (asked: Transport.Peer | undefined) => Transport.Peer | readonly [JoinRefusal, string]
): Admission => {
  if (asked !== "auto" && typeof asked !== "number") {
    return { closeCode: Transport.CloseCode.JoinBadIndex, reason: `rank index ${JSON.stringify(asked)} is not an integer >= 0` }
  }
  const verdict = decide(asked === "auto" ? undefined : asked)
  return typeof verdict === "number" ? { rank: verdict } : { closeCode: Transport.joinRefusalCloseCode[verdict[0]], reason: verdict[1] }
}

/** The join handshake's protocol version: 1. @since 0.1.0 @category model */
export const joinProtocolVersion = 1

/** Default `joinTimeoutMs`: 5000 ms. @since 0.1.0 @category options */
export const joinTimeoutMsDefault = 5000

/** Default `pendingJoinsMax`: 64 connections. @since 0.1.0 @category options */
export const pendingJoinsMaxDefault = 64

/** Default `pendingJoinsPerAddressMax`: 16 connections from one IP address. @since 0.1.0 @category options */
export const pendingJoinsPerAddressMaxDefault = 16

/** The shortest `runToken` `serve` accepts: 16 characters. @since 0.1.0 @category options */
export const runTokenLengthMin = 16

/** Default bind address: loopback. @since 0.1.0 @category options */
export const hostDefault = "127.0.0.1"

/**
 * A listening server: its endpoint (peer id `coordinatorPeer`), bound `host` and `port`, `url`
 * (`ws://host:port/`, an IPv6 host in brackets) and counters of refused joins by close code.
 *
 * - `markFormed()`: the run formed; every later join is refused with `RunFormed` (4010), or
 *   `RankDead` (4011) for a dead rank.
 * - `connected(rank)`: whether `rank` joined and its link has not ended.
 * - `end(rank, cause)`: ends `rank` from outside (its supervisor saw its process end): its
 *   `Ended{rank, cause}` is delivered after the frames already received, unless its link already
 *   ended (the first end wins); a rank that never joined gets its `Ended` too, and can no longer join.
 *
 * @since 0.1.0
 * @category model
 */
export interface ServerHandle {
  readonly transport: Transport.TransportShape
  readonly host: string
  readonly port: number
  readonly url: string
  readonly refusals: Effect.Effect<Readonly<Record<number, number>>>
  readonly markFormed: () => void
  readonly connected: (rank: Transport.Peer) => boolean
  readonly end: (rank: Transport.Peer, cause: DeathReport.DeathCause) => void
}

const encoder = new TextEncoder()

// Compares without an early exit so that the time taken does not reveal the matching prefix.
const sameToken = (a: string, b: string): boolean => {
  const x = encoder.encode(a)
  const y = encoder.encode(b)
  let diff = x.length ^ y.length
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0)
  return diff === 0
}

// A v4-mapped IPv6 address ("::ffff:127.0.0.1") is the same peer as its IPv4 address.
const addressKey = (remoteAddress: string): string =>
  remoteAddress.toLowerCase().startsWith("::ffff:") && remoteAddress.includes(".") ? remoteAddress.slice(7) : remoteAddress

const parseJoin = (data: Uint8Array | string): { readonly token: string; readonly rank: unknown } | undefined => {
  if (typeof data !== "string" || data.length > 4096) return undefined
  try {
    const value = JSON.parse(data) as { token?: unknown; rank?: unknown; v?: unknown }
    return typeof value === "object" && value !== null && typeof value.token === "string" &&
        (value.v === undefined || value.v === joinProtocolVersion)
      ? { token: value.token, rank: value.rank }
      : undefined
  } catch {
    return undefined
  }
}

/**
 * Starts a server in the current scope; closing the scope closes every connection and the
 * listener. Fails with `TransportError`: `TokenTooShort` for a `runToken` under
 * `runTokenLengthMin` characters, `ConnectFailed` when it cannot bind.
 *
 * @since 0.1.0
 * @category constructors
 */
export const serve = (options: ServerOptions): Effect.Effect<ServerHandle, Transport.TransportError, Scope.Scope> =>
  Effect.gen(function*() {
    if (options.runToken.length < runTokenLengthMin) {
      return yield* new Transport.TransportError({
        reason: { _tag: "TokenTooShort", length: options.runToken.length, runTokenLengthMin }
      })
    }
    const hub = yield* Hub.make(Transport.coordinatorPeer, options)
    const host = options.host ?? hostDefault
    const joinTimeoutMs = options.joinTimeoutMs ?? joinTimeoutMsDefault
    const pendingJoinsMax = options.pendingJoinsMax ?? pendingJoinsMaxDefault
    const pendingJoinsPerAddressMax = options.pendingJoinsPerAddressMax ?? pendingJoinsPerAddressMaxDefault
    let pending = 0
    const pendingByAddress = new Map<string, number>()
    const joined = new Set<Transport.Peer>()
    const ended = new Set<Transport.Peer>()
    let formed = false
    const refusals: Record<number, number> = {}
    const timers = new Set<ReturnType<typeof setTimeout>>()

    // Before `markFormed`: whether the formation can take a join for `asked` (a free formation
    // index for "auto", or any index below `worldSize`; the checks below refuse the rest).
    const isFormationIndex = (asked: unknown): boolean =>
      asked === "auto"
        ? joined.size < options.worldSize
        : !(typeof asked === "number" && Number.isSafeInteger(asked) && asked >= options.worldSize)

    const open = (socket: RuntimeTypes.RawSocket, remoteAddress: string): RuntimeTypes.SocketHandlers => {
      const address = addressKey(remoteAddress)
      let link: Hub.Link | undefined
      let linkRank: Transport.Peer | undefined
      let refused = false
      const refuse = (code: number, reason: string) => {
        if (refused) return
        refused = true
        refusals[code] = (refusals[code] ?? 0) + 1
        socket.close(code, reason)
        try {
          options.onRefused?.(code, reason, remoteAddress)
        } catch {
          // an observer only watches
        }
      }
      if (pending >= pendingJoinsMax) {
        refuse(Transport.CloseCode.TryAgainLater, "too many pending joins")
        return { message: () => {}, close: () => {} }
      }
      const fromAddress = pendingByAddress.get(address) ?? 0
      if (fromAddress >= pendingJoinsPerAddressMax) {
        refuse(Transport.CloseCode.AddressBusy, "too many pending joins from this address")
        return { message: () => {}, close: () => {} }
      }
      pending += 1
      pendingByAddress.set(address, fromAddress + 1)
      // A timed-out connection frees its slot at once, not when its close completes.
      const timer = setTimeout(() => {
        settle()
        refuse(Transport.CloseCode.JoinTimeout, "join timeout")
      }, joinTimeoutMs)
      timers.add(timer)
      let settled = false
      const settle = () => {
        if (settled) return
        settled = true
        pending -= 1
        const left = (pendingByAddress.get(address) ?? 1) - 1
        if (left === 0) pendingByAddress.delete(address)
        else pendingByAddress.set(address, left)
        clearTimeout(timer)
        timers.delete(timer)
      }
      // The join is in: its link opens and the welcome goes out.
      const accept = (joinedRank: Transport.Peer): void => {
        joined.add(joinedRank)
        link = hub.attach(joinedRank, {
          post: (message) => socket.send(message),
          close: (code) => socket.close(code, "closed by coordinator")
        })
        const run = options.welcome?.(joinedRank)
        socket.send(JSON.stringify({ v: joinProtocolVersion, welcome: joinedRank, ...(run === undefined ? {} : { run }) }))
        linkRank = joinedRank
        try {
          options.onJoined?.(joinedRank, remoteAddress)
        } catch {
          // an observer only watches
        }
      }
      return {
        message: (data) => {
          if (link !== undefined) {
            if (typeof data === "string") return link.close(Transport.CloseCode.BadBatch)
            return link.receive(data)
          }
          if (refused) return
          settle()
          const join = parseJoin(data)
          if (join === undefined) return refuse(Transport.CloseCode.BadJoin, "bad join")
          if (!sameToken(join.token, options.runToken)) return refuse(Transport.CloseCode.WrongToken, "wrong token")
          let rank = join.rank
          if (formed && options.admit !== undefined) {
            // A run that may grow: its shell decides, from the core's state.
            let admission: Admission
            try {
              admission = options.admit(rank, (r) => joined.has(r))
            } catch (error) {
              admission = { closeCode: Transport.CloseCode.BadJoin, reason: DeathReport.errorMessage(error) }
            }
            if ("closeCode" in admission) return refuse(admission.closeCode, admission.reason)
            if (joined.has(admission.rank)) return refuse(Transport.CloseCode.DuplicateRank, "duplicate rank")
            return accept(admission.rank)
          }
          if (options.admit !== undefined && !isFormationIndex(rank)) {
            // A run that may grow, still forming: a join the formation cannot take
            // (every formation index taken, or one beyond them) is one for the running run, so it
            // is asked to come back (`connect` retries 1013) instead of refused for good.
            return refuse(Transport.CloseCode.TryAgainLater, "the run is forming: join again once it formed")
          }
          if (rank === "auto") {
            if (formed) return refuse(Transport.CloseCode.RunFormed, "the run already formed")
            const free = Array.from({ length: options.worldSize }, (_, r) => r).find((r) => !joined.has(r))
            if (free === undefined) return refuse(Transport.CloseCode.DuplicateRank, "every rank is taken")
            rank = free
          }
          if (typeof rank !== "number" || !Number.isInteger(rank) || rank < 0 || rank >= options.worldSize) {
            return refuse(Transport.CloseCode.RankOutOfRange, "rank out of range")
          }
          if (ended.has(rank)) return refuse(Transport.CloseCode.RankDead, "the rank is dead")
          if (formed) return refuse(Transport.CloseCode.RunFormed, "the run already formed")
          if (joined.has(rank)) return refuse(Transport.CloseCode.DuplicateRank, "duplicate rank")
          return accept(rank)
        },
        close: (code) => {
          settle()
          if (link === undefined || linkRank === undefined) return
          ended.add(linkRank)
          link.end(options.endCause?.(linkRank, code) ?? DeathReport.disconnected(code))
        }
      }
    }

    const server = yield* Effect.tryPromise({
      try: () => Select.serveWs({ host, port: options.port ?? 0, maxPayloadBytes: hub.options.messageBytesMax, open, ...(options.http === undefined ? {} : { http: options.http }) }),
      catch: (error) =>
        new Transport.TransportError({ reason: { _tag: "ConnectFailed", detail: DeathReport.errorMessage(error) } })
    })
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        for (const timer of timers) clearTimeout(timer)
        hub.flushAll()
        await server.close()
        hub.shutdown()
      })
    )
    return {
      transport: hub.transport,
      host,
      port: server.port,
      url: `ws://${host.includes(":") ? `[${host}]` : host}:${server.port}/`,
      refusals: Effect.sync(() => ({ ...refusals })),
      markFormed: () => {
        formed = true
      },
      connected: (rank) => joined.has(rank) && !ended.has(rank),
      end: (rank, cause) => {
        if (ended.has(rank)) return
        ended.add(rank)
        // A rank that never joined still gets its end, through a link of its own that carries nothing.
        const link = joined.has(rank) ? hub.link(rank) : hub.attach(rank, { post: () => {}, close: () => {} })
        joined.add(rank)
        link?.end(cause)
      }
    }
  })

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
 *   neither welcomes nor refuses ends with the server's `JoinTimeout` (4004), which is final.
 *
 * @since 0.1.0
 * @category options
 */
export interface ClientOptions extends Transport.Options {
  readonly url: string
  readonly runToken: string
  readonly rank: Transport.Peer | "auto"
  readonly joinTimeoutMs?: number
}

/** Default client `joinTimeoutMs`: 30000 ms. @since 0.1.0 @category options */
export const connectJoinTimeoutMsDefault = 30_000

/** The first delay before `connect` retries a 1013 or 4008 refusal: 20 ms. @since 0.1.0 @category options */
export const joinRetryDelayMsBase = 20

/** The longest delay between two join attempts of `connect`: 1000 ms. @since 0.1.0 @category options */
export const joinRetryDelayMsMax = 1000

/**
 * Whether `connect` retries a refusal with this close code: only the two "try again later"
 * codes, `TryAgainLater` (1013) and `AddressBusy` (4008). A wrong token, a rank out of range or
 * taken, a bad join or a join timeout is final.
 *
 * @since 0.1.0
 * @category model
 */
export const isRetryableRefusal = (closeCode: number): boolean =>
  closeCode === Transport.CloseCode.TryAgainLater || closeCode === Transport.CloseCode.AddressBusy

/**
 * A joined rank: its endpoint (peer id = its rank, one peer: `coordinatorPeer`), its `rank` (the
 * one the server assigned for `"auto"`), `run` (the welcome's `run` value, `undefined` without
 * one), `close(code)` to leave with a close handshake, `drop` to cut the connection without one
 * where the runtime can (`ws` under Node; elsewhere it closes with 1000), and `closeCode()`: the
 * connection's close code once it closed (`undefined` while open).
 *
 * @since 0.1.0
 * @category model
 */
export interface ClientHandle {
  readonly transport: Transport.TransportShape
  readonly rank: Transport.Peer
  readonly run: unknown
  readonly close: (closeCode?: number) => Effect.Effect<void>
  readonly drop: Effect.Effect<void>
  readonly closeCode: () => number | undefined
}

const parseWelcome = (data: string): { readonly rank: Transport.Peer; readonly run: unknown } | undefined => {
  try {
    const value = JSON.parse(data) as { welcome?: unknown; run?: unknown; v?: unknown }
    return typeof value === "object" && value !== null && typeof value.welcome === "number" && Number.isInteger(value.welcome) &&
        (value.v === undefined || value.v === joinProtocolVersion)
      ? { rank: value.welcome, run: value.run }
      : undefined
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
  Effect.gen(function*() {
    // An "auto" join learns its rank at the welcome; the endpoint's `self` is set from it.
    let self: Transport.Peer = options.rank === "auto" ? 0 : options.rank
    let run: unknown
    let closeCode: number | undefined
    const hub = yield* Hub.make(self, options)
    let link: Hub.Link | undefined
    let closed: (() => void) | undefined
    const done = new Promise<void>((resolve) => (closed = resolve))
    // One join attempt: resolves once welcomed; a refusal or failure closes only this attempt's socket.
    const attempt = Effect.callback<JoinedSocket, Transport.TransportError>((resume) => {
      let welcomed = false
      let ended = false
      const raw = Select.connectWs(options.url, {
        open: () => raw.send(JSON.stringify({ token: options.runToken, rank: options.rank })),
        message: (data) => {
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
            link = hub.attach(Transport.coordinatorPeer, {
              post: (message) => raw.send(message),
              close: (code) => raw.close(code, "closed by rank")
            })
            resume(Effect.succeed(raw))
          }
        },
        close: (code) => {
          ended = true
          if (welcomed) {
            closeCode = code
            closed?.()
            return link?.end(DeathReport.disconnected(code))
          }
          resume(Effect.fail(
            new Transport.TransportError({
              reason: code === Transport.CloseCode.Abnormal
                ? { _tag: "ConnectFailed", detail: `connection to ${options.url} failed` }
                : { _tag: "Refused", closeCode: code, detail: `join refused with ${code}` }
            })
          ))
        }
      })
      // Interrupted before the welcome (the scope closed): do not leave the attempt's socket open.
      return Effect.sync(() => {
        if (!welcomed && !ended) raw.drop()
      })
    })
    const joinTimeoutMs = options.joinTimeoutMs ?? connectJoinTimeoutMsDefault
    const backOff = Schedule.exponential(Duration.millis(joinRetryDelayMsBase)).pipe(
      Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.millis(joinRetryDelayMsMax)))),
      Schedule.jittered,
      Schedule.upTo({ duration: Duration.millis(joinTimeoutMs) })
    )
    const socket = yield* Effect.retry(attempt, {
      schedule: backOff,
      while: (error) => error.reason._tag === "Refused" && isRetryableRefusal(error.reason.closeCode)
    })
    const close = (closeCode: number = Transport.CloseCode.Normal) =>
      Effect.promise(() => {
        link?.close(closeCode)
        return done
      })
    yield* Effect.addFinalizer(() => Effect.andThen(close(), Effect.sync(() => hub.shutdown())))
    return {
      transport: self === hub.transport.self ? hub.transport : { ...hub.transport, self },
      rank: self,
      run,
      close,
      drop: Effect.promise(() => {
        socket.drop()
        return done
      }),
      closeCode: () => closeCode
    }
  })
