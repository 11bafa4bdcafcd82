/**
 * The WebSocket server's options, their defaults and the answers its hooks give (`admission`,
 * `beatProof`); `web-socket-server.ts` re-exports them.
 *
 * @since 0.1.0
 */
import * as DeathReport from "../actor/death-report.ts"
import type { JoinRefusal } from "../core/inputs.ts"
import * as Hmac from "../platform/hmac.ts"
import type * as RuntimeTypes from "../platform/types.ts"
import * as Transport from "./transport.ts"
import { beatProofText } from "./web-socket-protocol.ts"

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
 * - `onJoined(rank, remoteAddress, credentialId)` and `onRefused(closeCode, reason, remoteAddress)`:
 *   observers of each accepted and each refused join, called synchronously; they must not throw.
 *   `credentialId` is the id of the rank's credential, `undefined` when it joined with `runToken`.
 * - `credential(token)`: reads a join's token that is not `runToken` as a rank's own credential
 *   (`Credential`; the launcher's are HMACs of the run token, `src/transport/credentials.ts`):
 *   `undefined` when it is none (`WrongToken` 4001), or the refusal's close code (revoked,
 *   expired). A credential for index `r` joins as `r` when it asks for `"auto"`; asking for
 *   another index, or resuming as another rank, is `CredentialMismatch` (4021), and so is an
 *   `"any"` credential's second index. Default none: only `runToken` joins.
 * - `onResumed(rank, remoteAddress, silentMs)`: likewise, each resumed link (protocol 2), with the
 *   milliseconds since anything of the rank had arrived before its resume.
 * - `admit(asked, taken)` (a run that may grow): decides each join after `markFormed`
 *   instead of the `RunFormed` (4010) refusal, synchronously: `asked` is the index the join asked
 *   for (any JSON value; `"auto"` for the lowest vacant one), `taken(r)` whether index `r` already
 *   had a link on this server (live, ended, or joining). It returns `{rank}` (the join takes that
 *   index: any integer `>= 0`, beyond `worldSize` too) or `{closeCode, reason}` (refused). Default
 *   none: a run that cannot grow. With it, before `markFormed`, a join the formation cannot take
 *   (`"auto"` with every formation rank taken, or an index `>= worldSize`) is refused with
 *   `TryAgainLater` (1013), which `connect` retries, not for good: it joins the running run.
 *
 * For ranks that join with protocol 2 (resumable links, `ClientOptions.resumable`):
 *
 * - `resumeWindowMs` (integer ms > 0; default `resumeWindowMsDefault`, 2000): how long the link of
 *   a rank whose socket dropped (closed without a close frame: 1006, 1005, 1001, 4031) is held for
 *   the rank to resume before it ends as `Disconnected{code}`. A socket seen closing is most often
 *   a rank process that ended (its host closed the connection), or a rank that cut its own socket
 *   and is already resuming; a cut link is usually not seen closing at all, and the coordinator's
 *   heartbeat timeout decides, as for any silent rank. A close read just after a stall of the
 *   coordinator's process (or a stall during the hold) is held for this plus the stall's length.
 * - `pieceBytes` (integer > 0; default `pieceBytesDefault`, 64 KiB): the largest piece a message
 *   travels in (both ways; see `internal/session.ts`).
 * - `resendBytesMax` (integer > 0; default `resendBytesMaxDefault`, 64 MiB): bytes per link kept
 *   until the rank acknowledged them; a resume that needs more than was kept, or more than this
 *   waiting to go out, ends the link with `ResumeLost` (4030).
 * - `pingIntervalMs` (integer ms > 0; default `serverPingIntervalMsDefault`, 500): how often the
 *   server sends each such rank a ping carrying its acknowledgement.
 *
 * The listener's own resources:
 *
 * - `connectionsMax` (integer > 0; default `connectionsMaxOf(worldSize, pendingJoinsMax)`):
 *   connections the listener holds at once, joined or not (ranks, their resumes, pending joins,
 *   plain HTTP requests); one more is closed as it arrives, before any join, and told to
 *   `onResource` as `ConnectionRefused`. So connections to the rank port, however many, hold at
 *   most this many of the coordinator process's file descriptors (its files and worker ranks need
 *   the rest), and a rank already joined keeps its link. Enforced under Node; `Bun.serve` and
 *   `Deno.serve` count no connections.
 * - `onResource(event)`: the listener's resource events (`ConnectionRefused` at the cap,
 *   `AcceptFailed`, code `EMFILE` when the process is out of descriptors), the coordinator's
 *   problem and never a rank's; called synchronously, must not throw; default ignored.
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
  readonly onJoined?: (rank: Transport.Peer, remoteAddress: string, credentialId?: string) => void
  readonly onRefused?: (closeCode: number, reason: string, remoteAddress: string) => void
  readonly onResumed?: (rank: Transport.Peer, remoteAddress: string, silentMs: number) => void
  /**
   * A server that took a run over after its coordinator's process was lost (docs/recovery.md):
   * a protocol-2 resume naming a session this process does not hold, for a rank in
   * `[0, worldSize)` that has not joined here, is a *recovered* join: it is accepted as a join with
   * a new session, and its welcome says `recovered: true` (the rank then drops what the old
   * session still held and says `Hello` again), until the run formed (`markFormed`: a rank back
   * later was declared). Default false: such a resume is refused with `ResumeLost`, as one after
   * the formation is. A rank beyond `worldSize` (one that joined the running run) is asked to try
   * again later (`TryAgainLater`) until the run formed, then admitted as a join (`admit`) and
   * welcomed as recovered; without `admit`, or refused by it, it is refused.
   */
  readonly recovering?: boolean
  readonly admit?: (asked: unknown, taken: (rank: Transport.Peer) => boolean) => Admission
  readonly resumeWindowMs?: number
  readonly pieceBytes?: number
  readonly resendBytesMax?: number
  readonly pingIntervalMs?: number
  readonly connectionsMax?: number
  readonly onResource?: (event: RuntimeTypes.ResourceEvent) => void
  /**
   * Answers plain HTTP requests on the server's port (`cohort serve --serve-browser` serves its
   * page this way); default: 426 to each.
   */
  readonly http?: RuntimeTypes.HttpHandler
  readonly credential?: (token: string) => Credential | { readonly closeCode: number; readonly reason: string } | undefined
  /** Serve `wss://` with this certificate and key (PEM text); default plain `ws://`. */
  readonly tls?: RuntimeTypes.TlsIdentity | undefined
  /**
   * Beat links (default false): a welcome carries `beatSession` and `beatKey` (a secret, new at
   * each join), and the rank may open one more connection that joins with `{v: 2, beat: rank,
   * session: beatSession, proof}`, `proof` the HMAC-SHA256 of `beatProofText(rank, beatSession)`
   * under the key
   * (`beatProof`). Every binary message on it is a sighting of that rank (`Link.touch`), nothing
   * more. At most one beat link a rank: another closes with `BeatLinkTaken` (4032); a bad proof,
   * or a session that is not the rank's latest join's, with `BeatLinkBad` (4033). `onBeatLink(rank, open)` is
   * told when a rank's beat link opens and when it closes.
   */
  readonly beatLinks?: boolean
  readonly onBeatLink?: (rank: Transport.Peer, open: boolean) => void
}

/**
 * The proof a beat link of `rank` in `session` joins with, under the welcome's `beatKey`.
 *
 * @since 0.1.0
 * @category options
 */
export const beatProof = (beatKey: string, rank: Transport.Peer, session: string): string =>
  Hmac.hmacSha256(beatKey, beatProofText(rank, session))

/**
 * A credential of one rank (`ServerOptions.credential`): its `id` (named in the journal and by
 * revocations, never secret) and the `rank` index it admits, or `"any"`: the first index it
 * joins as, and that one only.
 *
 * @since 0.1.0
 * @category options
 */
export interface Credential {
  readonly id: string
  readonly rank: Transport.Peer | "any"
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

/** Default `ServerOptions.resumeWindowMs`: 2000 ms. @since 0.1.0 @category options */
export const resumeWindowMsDefault = 2000

/** Default `ServerOptions.pingIntervalMs`: 500 ms. @since 0.1.0 @category options */
export const serverPingIntervalMsDefault = 500

/** Default `joinTimeoutMs`: 5000 ms. @since 0.1.0 @category options */
export const joinTimeoutMsDefault = 5000

/** Default `pendingJoinsMax`: 64 connections. @since 0.1.0 @category options */
export const pendingJoinsMaxDefault = 64

/**
 * Default `ServerOptions.connectionsMax` for `ranks` ranks (the largest index a join may take,
 * plus one) and `pendingJoinsMax`: two connections a rank (its link and a resume that replaces
 * it), every pending join, and `connectionsSpare` (64) more for plain HTTP requests and
 * connections closing.
 *
 * @since 0.1.0
 * @category options
 */
export const connectionsMaxOf = (ranks: number, pendingJoinsMax: number = pendingJoinsMaxDefault): number =>
  2 * ranks + pendingJoinsMax + connectionsSpare

/** The connections `connectionsMaxOf` adds beyond ranks and pending joins: 64. @since 0.1.0 @category options */
export const connectionsSpare = 64

/** Default `pendingJoinsPerAddressMax`: 16 connections from one IP address. @since 0.1.0 @category options */
export const pendingJoinsPerAddressMaxDefault = 16

/** The shortest `runToken` `serve` accepts: 16 characters. @since 0.1.0 @category options */
export const runTokenLengthMin = 16

/** Default bind address: loopback. @since 0.1.0 @category options */
export const hostDefault = "127.0.0.1"
