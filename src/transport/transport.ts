/**
 * The Transport contract shared by every transport (docs/design.md §5).
 *
 * A transport is one endpoint: it sends opaque frames (`Uint8Array`, normally CBOR from
 * `src/wire`) to peers and delivers, on one ordered inbox, every frame it receives as
 * `Frame{peer, bytes, arrivedMs}` in the order the peer sent them (but for frames
 * `Options.orderFree` marks, which may come early), then `Ended{peer, cause}` once
 * the peer is gone, after its last frame. Frames queued together go out batched, several per
 * underlying message.
 *
 * @since 0.1.0
 */
import type { JoinRefusal } from "../core/inputs.ts"
import type { Rank } from "../core/messages.ts"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Queue from "effect/Queue"
import type * as Stream from "effect/Stream"
import type * as DeathReport from "../actor/death-report.ts"

/**
 * A transport peer: a rank index in `[0, worldSize)`, or `coordinatorPeer` (-1).
 *
 * @since 0.1.0
 * @category model
 */
export type Peer = Rank

/** The coordinator's peer id, `-1`: ranks send to it; it is never a rank index. @since 0.1.0 @category model */
export const coordinatorPeer: Peer = -1

/**
 * One frame received from `peer`; `arrivedMs` is the transport's clock (integer milliseconds)
 * when the underlying message arrived: the frame's `nowMs` (docs/design.md §3.10). `decoded` is what
 * the inspector decoded from `bytes`, when it returned `Decoded` (so a consumer decodes once).
 * `given` is true when `bytes` are the received message's own memory, which nothing else reads or
 * reuses: the one consumer may keep views on them and change them, once it has read them
 * (`Codec.DecodeOptions.adoptBytes`). Never with `decoded`.
 *
 * @since 0.1.0
 * @category model
 */
export interface Frame {
  readonly _tag: "Frame"
  readonly peer: Peer
  readonly bytes: Uint8Array
  readonly arrivedMs: number
  readonly decoded?: unknown
  readonly given?: boolean
}

/**
 * A frame from `peer` that its inspector rejected (docs/design.md §3.10 "a frame that fails to decode"):
 * it still shows the peer is alive, it is counted in `Stats.badFrames`, and the transport's
 * `badFramePolicy` decides whether the connection stays open. `error` is the inspector's error,
 * normally a `WireError`.
 *
 * @since 0.1.0
 * @category model
 */
export interface BadFrame {
  readonly _tag: "BadFrame"
  readonly peer: Peer
  readonly error: unknown
  readonly arrivedMs: number
}

/**
 * `peer` ended: delivered once, after every frame it sent before it ended.
 *
 * @since 0.1.0
 * @category model
 */
export interface Ended {
  readonly _tag: "Ended"
  readonly peer: Peer
  readonly cause: DeathReport.DeathCause
}

/** Everything a transport delivers, in order per peer. @since 0.1.0 @category model */
export type Event = Frame | BadFrame | Ended

/**
 * Counters of one endpoint, integers >= 0. `messages*` count underlying messages (batches),
 * `frames*` count frames; `framesSent / messagesSent` is the batching factor. `overflows` counts
 * links closed for `InboxOverflow`, `refusedMessages` links closed for `TooManyFrames`,
 * `MessageTooBig` or `BadBatch`.
 *
 * @since 0.1.0
 * @category model
 */
export interface Stats {
  readonly framesSent: number
  readonly messagesSent: number
  readonly framesReceived: number
  readonly messagesReceived: number
  readonly badFrames: number
  readonly overflows: number
  readonly refusedMessages: number
}

/**
 * Why a transport operation failed.
 *
 * - `UnknownPeer`: no link to `peer` was ever made.
 * - `PeerGone`: `peer` ended; nothing more can be sent to it.
 * - `FrameTooLarge`: `bytes` exceeds `frameBytesMax` (bytes).
 * - `Closed`: the endpoint itself was closed.
 * - `ConnectFailed` / `Refused`: a client could not join; `closeCode` is the server's refusal code.
 * - `SpawnFailed`: a worker or process could not be started.
 * - `TokenTooShort`: a WebSocket server was given a `runToken` of `length` characters, under
 *   `runTokenLengthMin` (16): a short token can be guessed.
 *
 * @since 0.1.0
 * @category errors
 */
export type TransportErrorReason =
  | { readonly _tag: "UnknownPeer"; readonly peer: Peer }
  | { readonly _tag: "PeerGone"; readonly peer: Peer }
  | { readonly _tag: "FrameTooLarge"; readonly peer: Peer; readonly bytes: number; readonly frameBytesMax: number }
  | { readonly _tag: "Closed" }
  | { readonly _tag: "ConnectFailed"; readonly detail: string }
  | { readonly _tag: "Refused"; readonly closeCode: number; readonly detail: string }
  | { readonly _tag: "SpawnFailed"; readonly detail: string }
  | { readonly _tag: "TokenTooShort"; readonly length: number; readonly runTokenLengthMin: number }

// The base classes below are named with their types written out so that JSR's fast type check
// (`deno publish`) can read the public API without inferring a call's type.
const TransportErrorBase: new (args: {
  readonly reason: TransportErrorReason
}) => Cause.YieldableError & {
  readonly _tag: "TransportError"
  readonly reason: TransportErrorReason
} = Data.TaggedError("TransportError")

/**
 * An expected transport failure, tagged `TransportError`, with its `reason`.
 *
 * @since 0.1.0
 * @category errors
 */
export class TransportError extends TransportErrorBase {}

/**
 * One endpoint of a transport.
 *
 * - `self`: this endpoint's peer id.
 * - `peers`: peers with an open link now, ascending.
 * - `send(peer, frame)`: queues `frame` for `peer`; it is handed to the channel by the end of the
 *   current microtask, or at once when a batch fills. Fails with `TransportError`
 *   (`UnknownPeer`, `PeerGone`, `FrameTooLarge`, `Closed`).
 * - `sendUnsafe(peer, frame)`: the same, synchronously, returning the `TransportError` instead of
 *   failing (`undefined` when queued); for callers that send thousands of frames in one step.
 * - `flush`: hands every queued frame to its channel now.
 * - `inbox`: received events in order; ends (`Cause.Done`) when the endpoint closes.
 * - `events`: `inbox` as a stream (one consumer).
 * - `stats`: counters.
 * - `lastArrivalMs(peer)`: when the last message from `peer` arrived (the transport's clock, ms),
 *   even if its frames still wait behind other links' (docs/design.md §3.10); `undefined` before any.
 * - `disconnect(peer, closeCode)`: closes the link to `peer` from this side with `closeCode`; its
 *   end is delivered later as usual. Nothing for an unknown or ended peer.
 *
 * @since 0.1.0
 * @category model
 */
export interface TransportShape {
  readonly self: Peer
  readonly peers: Effect.Effect<ReadonlyArray<Peer>>
  readonly send: (peer: Peer, frame: Uint8Array) => Effect.Effect<void, TransportError>
  readonly sendUnsafe: (peer: Peer, frame: Uint8Array) => TransportError | undefined
  readonly flush: Effect.Effect<void>
  readonly inbox: Queue.Dequeue<Event, Cause.Done>
  readonly events: Stream.Stream<Event>
  readonly stats: Effect.Effect<Stats>
  readonly lastArrivalMs: (peer: Peer) => number | undefined
  readonly disconnect: (peer: Peer, closeCode: number) => void
}

/**
 * `TransportShape.send` made from a `sendUnsafe`: the refusal becomes the effect's failure.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sendFromUnsafe =
  (
    sendUnsafe: (peer: Peer, frame: Uint8Array) => TransportError | undefined
  ): ((peer: Peer, frame: Uint8Array) => Effect.Effect<void, TransportError>) =>
  (peer, frame) =>
    Effect.suspend(() => {
      const error = sendUnsafe(peer, frame)
      return error === undefined ? Effect.void : Effect.fail(error)
    })

const TransportService: Context.ServiceClass<Transport, "cohort/transport/Transport", TransportShape> = Context.Service<
  Transport,
  TransportShape
>()("cohort/transport/Transport")

/**
 * The Transport service (docs/design.md §5): provide one of the in-memory, worker-thread,
 * child-process or WebSocket endpoints.
 *
 * @since 0.1.0
 * @category services
 */
export class Transport extends TransportService {}

/**
 * What an inspector says about one received frame:
 *
 * - `undefined`: the frame is good.
 * - `{_tag: "Decoded", value}`: the frame is good and decodes to `value`, delivered with it as
 *   `Frame.decoded`.
 * - `{_tag: "Bad", error, closeCode}`: undecodable or invalid; counted, surfaced as `BadFrame`,
 *   and under `badFramePolicy: "close"` the link closes with `closeCode`.
 * - `{_tag: "Impersonation", claimed}`: the frame says it comes from another rank; never
 *   delivered, and the link always closes with `CloseCode.RankMismatch`.
 *
 * @since 0.1.0
 * @category model
 */
export type Verdict =
  | undefined
  | { readonly _tag: "Decoded"; readonly value: unknown }
  | { readonly _tag: "Bad"; readonly error: unknown; readonly closeCode: number }
  | { readonly _tag: "Impersonation"; readonly claimed: Peer }

/**
 * Inspects a frame from `peer` before it is delivered; must not throw. `given` is true when the
 * frame's bytes are a received message's own memory that nothing else reads or reuses: the
 * inspector may then keep views on them and change them (`Codec.DecodeOptions.adoptBytes`), as
 * long as the delivered frame's length stays right.
 *
 * @since 0.1.0
 * @category model
 */
export type Inspect = (peer: Peer, frame: Uint8Array, given?: boolean) => Verdict

/**
 * Options every transport takes, with defaults:
 *
 * - `messageBytesMax` (default `messageBytesMaxDefault`, 16 MiB): the largest underlying message
 *   (one batch); WebSocket `maxPayload`. A frame may be at most `messageBytesMax - 8` bytes.
 * - `batchFramesMax` (default 1024): frames per batch before it is flushed at once.
 * - `batchBytesMax` (default 256 KiB): bytes per batch before it is flushed at once.
 * - `messageFramesMax` (default 4096): frames in one received message (batch); a message whose
 *   header declares more closes its link with `CloseCode.TooManyFrames` before any frame is built
 *   (a peer's `batchFramesMax` must not exceed it).
 * - `inboxFramesMax` (default 1 Mi frames): received frames not yet taken by the consumer, over all
 *   links; a message that would go past it closes its link with `CloseCode.InboxOverflow`, counted
 *   in `Stats.overflows`.
 * - `linkFramesMax` (default 64 Ki frames): received frames of one link waiting behind other links'
 *   frames; a message that would go past it closes that link with `CloseCode.InboxOverflow`.
 *
 * Received frames wait per link and are handed to the inbox in turns, at most 64 frames of a link
 * per turn, while the inbox holds fewer than 64 frames; each run of turns lasts at most about
 * 4 ms before the event loop gets to run timers and other links' I/O. So one link's backlog delays
 * another link's frames by at most one turn per backlogged link, never by the whole backlog.
 * - `badFramePolicy` (default `"drop"`): `"drop"` counts and surfaces bad frames and keeps the
 *   link; `"close"` also closes the link with the verdict's close code.
 * - `inspect` (default none: frames are opaque): see `Inspect`.
 * - `orderFree(frame)` (default none: every frame keeps its order): frames it returns true for
 *   (a heartbeat: it says only that its sender is alive) may arrive before frames sent earlier.
 *   A link that sends large messages in pieces (a resumable WebSocket link) sends a batch made
 *   only of such frames between two pieces of a large message instead of after all of them, so
 *   that a 1.6 MB `Params` on a slow link does not hold the heartbeats sent after it; every other
 *   link keeps them in order. It must be cheap: it runs on every frame of every batch sent.
 * - `urgent(frame)` (default none): a received message whose last frame it returns true for (a
 *   rank's `Exiting`) puts its link at the front of the links waiting for a turn, as the link's
 *   end does: a leaving rank's last frames and its end do not wait behind the other links'
 *   backlog. Once per link; the link's own frames keep their order. It runs on the last frame of
 *   every received message, so it must be cheap.
 *
 * @since 0.1.0
 * @category options
 */
export interface Options {
  readonly messageBytesMax?: number
  readonly messageFramesMax?: number
  readonly batchFramesMax?: number
  readonly batchBytesMax?: number
  readonly inboxFramesMax?: number
  readonly linkFramesMax?: number
  readonly badFramePolicy?: "drop" | "close"
  readonly inspect?: Inspect
  readonly orderFree?: (frame: Uint8Array) => boolean
  readonly urgent?: (frame: Uint8Array) => boolean
}

/** Default `messageBytesMax`: 16 MiB. @since 0.1.0 @category options */
export const messageBytesMaxDefault = 16 * 1024 * 1024

/** Default `batchFramesMax`: 1024 frames. @since 0.1.0 @category options */
export const batchFramesMaxDefault = 1024

/** Default `batchBytesMax`: 256 KiB. @since 0.1.0 @category options */
export const batchBytesMaxDefault = 256 * 1024

/** Default `inboxFramesMax`: 1,048,576 frames. @since 0.1.0 @category options */
export const inboxFramesMaxDefault = 1024 * 1024

/** Default `messageFramesMax`: 4096 frames per received message. @since 0.1.0 @category options */
export const messageFramesMaxDefault = 4096

/** Default `linkFramesMax`: 65,536 frames waiting per link. @since 0.1.0 @category options */
export const linkFramesMaxDefault = 64 * 1024

/**
 * Close codes a transport uses (WebSocket close codes; worker and process links report them in
 * `Disconnected{closeCode}` when the transport itself closed the link). A bad frame under
 * `badFramePolicy: "close"` closes with its verdict's code instead (with `WireFrames.inspect`:
 * `WireError.closeCode`, 1002 / 1008 / 1009).
 *
 * | code | name | when |
 * |---|---|---|
 * | 1000 | Normal | the endpoint closed the link on purpose |
 * | 1006 | Abnormal | the connection dropped without a close frame |
 * | 1008 | RankMismatch | a frame claimed another rank than the connection's: a policy violation, the code `WireError.closeCodeOf` gives `SenderMismatch` |
 * | 1009 | MessageTooBig | a message over `messageBytesMax` |
 * | 1015 | TlsFailed | a client found the `wss://` server's certificate untrusted (not signed by a root it trusts, another host name, or not the pinned fingerprint): it closed before sending anything (the WebSocket protocol's reserved code, reported by the client only) |
 * | 1013 | TryAgainLater | a WebSocket server already has `pendingJoinsMax` connections waiting to join (a client retries it) |
 * | 4000 | BadJoin | the first message was not a join |
 * | 4001 | WrongToken | the join carried the wrong run token |
 * | 4002 | RankOutOfRange | the join's rank is not in `[0, worldSize)` |
 * | 4003 | DuplicateRank | the rank already joined this server (a live rank, or a dead one: deaths are permanent) |
 * | 4004 | JoinTimeout | no join within `joinTimeoutMs` |
 * | 4005 | InboxOverflow | the receiver held `inboxFramesMax` frames, or `linkFramesMax` of this link |
 * | 4006 | BadBatch | a batch that does not parse |
 * | 4007 | TooManyFrames | a message whose header declares more than `messageFramesMax` frames |
 * | 4008 | AddressBusy | a WebSocket server already has `pendingJoinsPerAddressMax` connections from this IP address waiting to join (a client retries it) |
 * | 4009 | ParamsMismatch | the rank's `Hello` gave another parameter count than the run agreed at formation |
 * | 4010 | RunFormed | a join after the run formed (every rank joined and training started) into a run that cannot grow (`maxRanks` equal to the world size, the default) |
 * | 4011 | RankDead | a join for a rank whose link ended or that the coordinator declared dead (a death is permanent); also the code the coordinator closes a declared-dead rank's socket with |
 * | 4012 | BadRingStep | a ring step (`RingData`) the coordinator was to relay broke the ring protocol (`Ring.checkStep`: a wrong length or step for the sender's place in the ring, a contribution count out of range, a value that is not finite): the sender is closed and declared dead, never its neighbour |
 * | 4013 | JoinFull | a join into a running run that may grow (`maxRanks` above the world size) found no vacant index: every index below `maxRanks` was taken (indices are never reused), or the one asked for is `>= maxRanks` |
 * | 4014 | JoinBadIndex | a join into a growing run asked for an index that is not an integer `>= 0` |
 * | 4015 | JoinDeadIndex | a join into a growing run asked for a dead rank's index (a death is permanent; a run that cannot grow says `RankDead` 4011) |
 * | 4016 | JoinExitedIndex | a join into a growing run asked for the index of a rank that exited cleanly |
 * | 4017 | JoinLiveIndex | a join into a growing run asked for a live rank's index, or one another join is taking |
 * | 4018 | JoinNotStarted | the core was asked to welcome a rank before the run formed (a shell defect; joins before formation go through the formation) |
 * | 4019 | JoinShuttingDown | a join into a growing run while it saves and stops (`ShutdownWithSave` sent, or interrupted) |
 * | 4020 | JoinRunOver | a join into a growing run after it completed |
 * | 4021 | CredentialMismatch | a rank's own credential joined (or resumed) as another index than the one it admits (an "any" credential admits the first index it took) |
 * | 4022 | CredentialRevoked | the join's credential was revoked (`cohort revoke`); also the code the coordinator closes the rank holding it with, mid-run |
 * | 4023 | CredentialExpired | the join's credential is past its expiry |
 * | 4030 | ResumeLost | a resumable link (join protocol 2) cannot go on without losing messages: a resume named a session the server does not hold, or messages its peer still needed were no longer in the resend buffer (`resendBytesMax`), or more than that waited to be sent |
 * | 4031 | Dropped | a client cut its connection as a cut link would, where its runtime cannot end it without a close frame (`WebSocket.ClientHandle.drop`): a server holds a resumable link for its resume, as after 1006 |
 * | 4032 | BeatLinkTaken | a beat link (`ServerOptions.beatLinks`) for a rank that has one open already: at most one a rank |
 * | 4033 | BeatLinkBad | a beat link whose proof does not check under its rank's latest beat key and session (a wrong key, another rank's session, a rank not joined) |
 *
 * @since 0.1.0
 * @category model
 */
export const CloseCode = {
  Normal: 1000,
  Abnormal: 1006,
  RankMismatch: 1008,
  MessageTooBig: 1009,
  TryAgainLater: 1013,
  TlsFailed: 1015,
  BadJoin: 4000,
  WrongToken: 4001,
  RankOutOfRange: 4002,
  DuplicateRank: 4003,
  JoinTimeout: 4004,
  InboxOverflow: 4005,
  BadBatch: 4006,
  TooManyFrames: 4007,
  AddressBusy: 4008,
  ParamsMismatch: 4009,
  RunFormed: 4010,
  RankDead: 4011,
  BadRingStep: 4012,
  JoinFull: 4013,
  JoinBadIndex: 4014,
  JoinDeadIndex: 4015,
  JoinExitedIndex: 4016,
  JoinLiveIndex: 4017,
  JoinNotStarted: 4018,
  JoinShuttingDown: 4019,
  JoinRunOver: 4020,
  CredentialMismatch: 4021,
  CredentialRevoked: 4022,
  CredentialExpired: 4023,
  ResumeLost: 4030,
  Dropped: 4031,
  BeatLinkTaken: 4032,
  BeatLinkBad: 4033
} as const

/**
 * The close code of each reason the core refuses a mid-run join for
 * (`Coordinator.JoinRefusal`): `Full` 4013, `BadIndex` 4014, `DeadIndex` 4015, `ExitedIndex` 4016,
 * `LiveIndex` 4017, `NotStarted` 4018, `ShuttingDown` 4019, `RunOver` 4020.
 *
 * @since 0.1.0
 * @category model
 */
export const joinRefusalCloseCode: Readonly<Record<JoinRefusal, number>> = {
  Full: CloseCode.JoinFull,
  BadIndex: CloseCode.JoinBadIndex,
  DeadIndex: CloseCode.JoinDeadIndex,
  ExitedIndex: CloseCode.JoinExitedIndex,
  LiveIndex: CloseCode.JoinLiveIndex,
  NotStarted: CloseCode.JoinNotStarted,
  ShuttingDown: CloseCode.JoinShuttingDown,
  RunOver: CloseCode.JoinRunOver
}
