/**
 * The server's beat links (`ServerOptions.beatLinks` in `web-socket-server.ts`): each joined
 * rank's beat session and key, sent in its welcome and new at each join, and the one extra
 * connection a rank may open with them, whose binary messages are sightings of the rank and
 * nothing more. Internal to `src/transport`.
 *
 * @since 0.1.0
 */
import * as Hmac from "../../platform/hmac.ts"
import type * as RuntimeTypes from "../../platform/types.ts"
import * as Transport from "../transport.ts"
import { beatProofText } from "../web-socket-protocol.ts"
import * as HeldLink from "./held-link.ts"
import { sameToken } from "./same-token.ts"

/** A connection's beat join: `{v: 2, beat: rank, session, proof}`. */
export interface BeatJoin {
  readonly rank: number
  readonly session: string
  readonly proof: string
}

/** A connection's first message as a beat join, or `undefined` when it is not one. */
export const parseJoin = (data: Uint8Array | string): BeatJoin | undefined => {
  if (typeof data !== "string" || data.length > 1024 || !data.includes('"beat"')) return undefined
  try {
    const value = JSON.parse(data) as { v?: unknown; beat?: unknown; session?: unknown; proof?: unknown }
    if (typeof value !== "object" || value === null || value.v !== 2) return undefined
    const { beat, session, proof } = value
    return typeof beat === "number" && Number.isSafeInteger(beat) && typeof session === "string" && typeof proof === "string"
      ? { rank: beat, session, proof }
      : undefined
  } catch {
    return undefined
  }
}

/** The beat links of one server. */
export interface BeatLinks {
  /** The welcome's `beatSession` and `beatKey` for `rank`, new at each join; none when beat links are off. */
  readonly welcomeFields: (rank: Transport.Peer) => { beatSession: string; beatKey: string } | Record<string, never>
  /** The rank ended: its key is forgotten and its beat link, if open, closed with `RankDead`. */
  readonly end: (rank: Transport.Peer) => void
  /**
   * A beat join on `socket`: proved with the rank's latest session and key, it becomes the rank's
   * one beat link (answered `{v: 2, beating: rank}`); else the refusal to close it with
   * (`BeatLinkBad`, `BeatLinkTaken`).
   */
  readonly join: (
    socket: RuntimeTypes.RawSocket,
    beat: BeatJoin
  ) => { readonly _tag: "Beating" } | { readonly _tag: "Refused"; readonly closeCode: number; readonly reason: string }
  /** The beat link `socket` of `rank` closed (a link replaced since is left alone). */
  readonly closed: (rank: Transport.Peer, socket: RuntimeTypes.RawSocket) => void
}

/** Beat links, on when `enabled`; `onBeatLink(rank, open)` is told when a rank's beat link opens and closes. */
export const make = (enabled: boolean, onBeatLink: ((rank: Transport.Peer, open: boolean) => void) | undefined): BeatLinks => {
  /** Each protocol 2 rank's session and beat key, and its one beat link. */
  const beatKeys = new Map<Transport.Peer, { readonly session: string; readonly key: string }>()
  const beatSockets = new Map<Transport.Peer, RuntimeTypes.RawSocket>()
  const tell = (rank: Transport.Peer, open: boolean): void => {
    try {
      onBeatLink?.(rank, open)
    } catch {
      // an observer only watches
    }
  }
  return {
    // A joined rank's beat session (its own, not its link's session id) and key, in its welcome.
    welcomeFields: (rank) => {
      if (!enabled) return {}
      const beat = { session: HeldLink.sessionId(), key: HeldLink.sessionId() }
      beatKeys.set(rank, beat)
      return { beatSession: beat.session, beatKey: beat.key }
    },
    end: (rank) => {
      beatKeys.delete(rank)
      const socket = beatSockets.get(rank)
      if (socket === undefined) return
      beatSockets.delete(rank)
      socket.close(Transport.CloseCode.RankDead, "the rank ended")
      tell(rank, false)
    },
    join: (socket, beat) => {
      const known = beatKeys.get(beat.rank)
      const proof = known === undefined ? "" : Hmac.hmacSha256(known.key, beatProofText(beat.rank, known.session))
      if (known === undefined || !sameToken(beat.session, known.session) || !sameToken(beat.proof, proof)) {
        return { _tag: "Refused", closeCode: Transport.CloseCode.BeatLinkBad, reason: "bad beat link" }
      }
      if (beatSockets.has(beat.rank))
        return { _tag: "Refused", closeCode: Transport.CloseCode.BeatLinkTaken, reason: "the rank has a beat link" }
      beatSockets.set(beat.rank, socket)
      socket.send(JSON.stringify({ v: 2, beating: beat.rank }))
      tell(beat.rank, true)
      return { _tag: "Beating" }
    },
    closed: (rank, socket) => {
      if (beatSockets.get(rank) !== socket) return
      beatSockets.delete(rank)
      tell(rank, false)
    }
  }
}
