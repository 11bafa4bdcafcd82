/**
 * The WebSocket transport's server: the coordinator's end (`serve`), which checks each join,
 * admits or refuses it, and holds the links of ranks that may resume. The protocol is described in
 * `web-socket.ts`, which re-exports this module.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as DeathReport from "../actor/death-report.ts"
import * as BeatLinks from "./internal/beat-links.ts"
import * as HeldLink from "./internal/held-link.ts"
import * as JoinMessage from "./internal/join-message.ts"
import * as Hub from "./internal/hub.ts"
import * as Select from "../platform/select.ts"
import type * as RuntimeTypes from "../platform/types.ts"
import * as Transport from "./transport.ts"
import { sameToken } from "./internal/same-token.ts"
import { pieceBytesDefault, resendBytesMaxDefault } from "./web-socket-protocol.ts"
import type { Admission, Credential, ServerOptions } from "./web-socket-server-options.ts"
import {
  connectionsMaxOf,
  hostDefault,
  joinTimeoutMsDefault,
  pendingJoinsMaxDefault,
  pendingJoinsPerAddressMaxDefault,
  resumeWindowMsDefault,
  runTokenLengthMin,
  serverPingIntervalMsDefault
} from "./web-socket-server-options.ts"

export * from "./web-socket-server-options.ts"

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
 * - `vacate(rank)`: before `markFormed`, frees the index of a rank whose link ended (a joiner
 *   that left a served run before it formed): a later join may take it. Nothing once formed.
 *   The caller calls it once the rank's `Ended` was taken from the inbox, so that a new link on
 *   the index never has its frames ahead of the old one's end.
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
  readonly vacate: (rank: Transport.Peer) => void
}

// A v4-mapped IPv6 address ("::ffff:127.0.0.1") is the same peer as its IPv4 address.
const addressKey = (remoteAddress: string): string =>
  remoteAddress.toLowerCase().startsWith("::ffff:") && remoteAddress.includes(".") ? remoteAddress.slice(7) : remoteAddress

/**
 * Starts a server in the current scope; closing the scope closes every connection and the
 * listener. Fails with `TransportError`: `TokenTooShort` for a `runToken` under
 * `runTokenLengthMin` characters, `ConnectFailed` when it cannot bind.
 *
 * @since 0.1.0
 * @category constructors
 */
export const serve = (options: ServerOptions): Effect.Effect<ServerHandle, Transport.TransportError, Scope.Scope> =>
  Effect.gen(function* () {
    // Long because it is a factory: the closures it returns share its state, and each is short.
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
    // The index each credential joined as: a credential for "any" index takes one, once.
    const credentialRank = new Map<string, Transport.Peer>()
    const credentialMisbound = (credential: Credential | undefined, rank: Transport.Peer): string | undefined => {
      if (credential === undefined) return undefined
      const bound = credentialRank.get(credential.id) ?? (credential.rank === "any" ? rank : credential.rank)
      return bound === rank ? undefined : `credential ${credential.id} is for rank ${bound}, not ${rank}`
    }
    const refusals: Record<number, number> = {}
    const timers = new Set<ReturnType<typeof setTimeout>>()
    /** Links of ranks that joined with protocol 2: they outlive their sockets. */
    const helds = new Map<Transport.Peer, HeldLink.Held>()
    const beats = BeatLinks.make(options.beatLinks === true, options.onBeatLink)
    const holdOptions = {
      hub,
      pieceBytes: options.pieceBytes ?? pieceBytesDefault,
      resendBytesMax: options.resendBytesMax ?? resendBytesMaxDefault,
      resumeWindowMs: options.resumeWindowMs ?? resumeWindowMsDefault,
      pingIntervalMs: options.pingIntervalMs ?? serverPingIntervalMsDefault,
      // The coordinator pings as long as its process runs: it stops sending heartbeats once the
      // run saves and stops, and its ranks must not take that for a cut.
      pingAfterSendMs: Number.POSITIVE_INFINITY
    }

    // Before `markFormed`: whether the formation can take a join for `asked` (a free formation
    // index for "auto", or any index below `worldSize`; the checks below refuse the rest).
    const isFormationIndex = (asked: unknown): boolean =>
      asked === "auto"
        ? joined.size < options.worldSize
        : !(typeof asked === "number" && Number.isSafeInteger(asked) && asked >= options.worldSize)

    const open = (socket: RuntimeTypes.RawSocket, remoteAddress: string): RuntimeTypes.SocketHandlers => {
      // Long because it is a factory: the closures it returns share its state, and each is short.
      const address = addressKey(remoteAddress)
      let link: Hub.Link | undefined
      let linkRank: Transport.Peer | undefined
      /** The held link this socket carries (protocol 2), once welcomed or resumed. */
      let held: HeldLink.Held | undefined
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
      const accept = (joinedRank: Transport.Peer, version: 1 | 2, credential?: Credential, recovered = false): void => {
        const misbound = credentialMisbound(credential, joinedRank)
        if (misbound !== undefined) return refuse(Transport.CloseCode.CredentialMismatch, misbound)
        if (credential !== undefined) credentialRank.set(credential.id, joinedRank)
        joined.add(joinedRank)
        const run = options.welcome?.(joinedRank)
        const runField = run === undefined ? {} : { run }
        if (version === 2) {
          held = HeldLink.hold(
            {
              ...holdOptions,
              rank: joinedRank,
              endCause: (code) => options.endCause?.(joinedRank, code) ?? DeathReport.disconnected(code),
              ended: () => {
                ended.add(joinedRank)
                beats.end(joinedRank)
              }
            },
            socket,
            (session) => {
              const beat = beats.welcomeFields(joinedRank)
              socket.send(
                JSON.stringify({
                  v: 2,
                  welcome: joinedRank,
                  session,
                  received: 0,
                  ...runField,
                  ...(recovered ? { recovered } : {}),
                  ...beat
                })
              )
            }
          )
          helds.set(joinedRank, held)
        } else {
          link = hub.attach(joinedRank, {
            post: (message) => socket.send(message),
            ...(socket.sendParts === undefined ? {} : { postParts: socket.sendParts }),
            close: (code) => socket.close(code, "closed by coordinator"),
            // Every runtime's WebSocket send copies or only reads the bytes.
            sharesMessages: true,
            givesMessages: socket.givesMessages === true
          })
          socket.send(JSON.stringify({ v: 1, welcome: joinedRank, ...runField, ...beats.welcomeFields(joinedRank) }))
        }
        linkRank = joinedRank
        try {
          options.onJoined?.(joinedRank, remoteAddress, credential?.id)
        } catch {
          // an observer only watches
        }
      }
      // A rank of protocol 2 comes back on a new socket: the held link goes on there.
      const resume = (rank: unknown, asked: JoinMessage.Resume, credential: Credential | undefined): void => {
        const found = typeof rank === "number" ? helds.get(rank) : undefined
        const recoverable =
          options.recovering === true && typeof rank === "number" && Number.isSafeInteger(rank) && rank >= 0 && rank < options.worldSize
        // Until the run formed again: a rank back after that was declared (it did not return in time).
        if (found === undefined && recoverable && !formed && !joined.has(rank) && !ended.has(rank)) return accept(rank, 2, credential, true)
        // A rank that joined the running run (beyond `worldSize`): back once the run formed again, as
        // a join the shell admits (`admit`); asked to come back meanwhile (`TryAgainLater` is retried).
        const joiner =
          options.recovering === true &&
          options.admit !== undefined &&
          found === undefined &&
          typeof rank === "number" &&
          Number.isSafeInteger(rank) &&
          rank >= options.worldSize &&
          !joined.has(rank) &&
          !ended.has(rank)
        if (joiner && !formed)
          return refuse(Transport.CloseCode.TryAgainLater, "the run is forming again: a joiner comes back once it formed")
        if (joiner) {
          let admission: Admission
          try {
            admission = options.admit!(rank, (r) => joined.has(r))
          } catch (error) {
            admission = { closeCode: Transport.CloseCode.BadJoin, reason: DeathReport.errorMessage(error) }
          }
          if ("closeCode" in admission) return refuse(admission.closeCode, admission.reason)
          if (admission.rank === rank) return accept(rank, 2, credential, true)
          return refuse(Transport.CloseCode.ResumeLost, "no such session")
        }
        if (found === undefined || found.id !== asked.session) {
          return typeof rank === "number" && ended.has(rank)
            ? refuse(Transport.CloseCode.RankDead, "the rank is dead")
            : refuse(Transport.CloseCode.ResumeLost, "no such session")
        }
        const refusal = found.resume(socket, asked.received, asked.attempt, (received, silentMs) => {
          socket.send(JSON.stringify({ v: 2, welcome: rank, session: found.id, received }))
          try {
            options.onResumed?.(rank as Transport.Peer, remoteAddress, silentMs)
          } catch {
            // an observer only watches
          }
        })
        if (refusal !== undefined) return refuse(refusal.closeCode, refusal.reason)
        held = found
      }
      // A beat link (`ServerOptions.beatLinks`): proved with its session's key, one a rank.
      let beatRank: Transport.Peer | undefined
      const beatJoin = (beat: BeatLinks.BeatJoin): void => {
        const taken = beats.join(socket, beat)
        if (taken._tag === "Refused") return refuse(taken.closeCode, taken.reason)
        beatRank = beat.rank
      }
      return {
        message: (data) => {
          if (beatRank !== undefined) {
            if (typeof data !== "string") hub.link(beatRank)?.touch()
            return
          }
          if (held !== undefined) {
            if (typeof data === "string") return socket.close(Transport.CloseCode.BadBatch, "text after the join")
            return held.receive(socket, data)
          }
          if (link !== undefined) {
            if (typeof data === "string") return link.close(Transport.CloseCode.BadBatch)
            return link.receive(data)
          }
          if (refused) return
          settle()
          const beat = options.beatLinks === true ? BeatLinks.parseJoin(data) : undefined
          if (beat !== undefined) return beatJoin(beat)
          const join = JoinMessage.parseJoin(data)
          if (join === undefined) return refuse(Transport.CloseCode.BadJoin, "bad join")
          // Not the run token: a credential of one rank (`ServerOptions.credential`), or wrong.
          const isRunToken = sameToken(join.token, options.runToken)
          const checked = isRunToken ? undefined : options.credential?.(join.token)
          if (!isRunToken && checked === undefined) return refuse(Transport.CloseCode.WrongToken, "wrong token")
          if (checked !== undefined && "closeCode" in checked) return refuse(checked.closeCode, checked.reason)
          const credential = checked
          if (join.resume !== undefined) {
            const misbound = typeof join.rank === "number" ? credentialMisbound(credential, join.rank) : "a resume names its rank"
            return misbound === undefined
              ? resume(join.rank, join.resume, credential)
              : refuse(Transport.CloseCode.CredentialMismatch, misbound)
          }
          // A credential for one index joins as that index when asked for "auto".
          let rank = join.rank === "auto" && typeof credential?.rank === "number" ? credential.rank : join.rank
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
            return accept(admission.rank, join.version, credential)
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
          return accept(rank, join.version, credential)
        },
        close: (code) => {
          settle()
          if (beatRank !== undefined) return beats.closed(beatRank, socket)
          if (held !== undefined) return held.closed(socket, code)
          if (link === undefined || linkRank === undefined) return
          ended.add(linkRank)
          beats.end(linkRank)
          link.end(options.endCause?.(linkRank, code) ?? DeathReport.disconnected(code))
        }
      }
    }

    const server = yield* Effect.tryPromise({
      try: () =>
        Select.serveWs({
          host,
          port: options.port ?? 0,
          maxPayloadBytes: hub.options.messageBytesMax,
          open,
          connectionsMax: options.connectionsMax ?? connectionsMaxOf(options.worldSize, pendingJoinsMax),
          ...(options.onResource === undefined ? {} : { onResource: options.onResource }),
          ...(options.http === undefined ? {} : { http: options.http }),
          ...(options.tls === undefined ? {} : { tls: options.tls })
        }),
      catch: (error) => new Transport.TransportError({ reason: { _tag: "ConnectFailed", detail: DeathReport.errorMessage(error) } })
    })
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        for (const timer of timers) clearTimeout(timer)
        for (const held of helds.values()) held.stop()
        hub.flushAll()
        await server.close()
        hub.shutdown()
      })
    )
    return {
      transport: hub.transport,
      host,
      port: server.port,
      url: `${options.tls === undefined ? "ws" : "wss"}://${host.includes(":") ? `[${host}]` : host}:${server.port}/`,
      refusals: Effect.sync(() => ({ ...refusals })),
      markFormed: () => {
        formed = true
      },
      connected: (rank) => joined.has(rank) && !ended.has(rank),
      end: (rank, cause) => {
        if (ended.has(rank)) return
        ended.add(rank)
        const held = helds.get(rank)
        if (held !== undefined) return held.end(cause)
        // A rank that never joined still gets its end, through a link of its own that carries nothing.
        const link = joined.has(rank) ? hub.link(rank) : hub.attach(rank, { post: () => {}, close: () => {} })
        joined.add(rank)
        link?.end(cause)
      },
      vacate: (rank) => {
        if (formed || !ended.has(rank)) return
        joined.delete(rank)
        ended.delete(rank)
        helds.delete(rank)
        for (const [id, bound] of credentialRank) if (bound === rank) credentialRank.delete(id)
      }
    }
  })
