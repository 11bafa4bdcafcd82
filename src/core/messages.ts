/**
 * The messages exchanged between ranks and the coordinator, as plain data (docs/design.md §4).
 *
 * These are the core's view of the protocol: `src/wire` gives each one a schema and a CBOR
 * encoding, and must keep these names and fields. Every number is a non-negative safe integer
 * unless its docstring says otherwise; offsets and sizes count samples of the epoch's permutation.
 *
 * @since 0.1.0
 */

/**
 * A rank index in `[0, worldSize)`, fixed for the whole run.
 *
 * @since 0.1.0
 * @category model
 */
export type Rank = number

/**
 * Why the coordinator told the survivors to save and stop (docs/design.md §1, §3.6). `TrainerFault`:
 * two ranks crashed with the same error (same message and top stack frame), a bug in the trainer
 * that redistribution would only spread to the survivors (`Config.onRepeatedCrash`).
 *
 * @since 0.1.0
 * @category model
 */
export type SaveReason = "GracefulShutdown" | "FailureLimitReached" | "SingleSurvivor" | "AllRanksLost" | "ReduceStall" | "TrainerFault"

/**
 * All save reasons, in wire order.
 *
 * @since 0.1.0
 * @category model
 */
export const saveReasons: ReadonlyArray<SaveReason> = [
  "GracefulShutdown",
  "FailureLimitReached",
  "SingleSurvivor",
  "AllRanksLost",
  "ReduceStall",
  "TrainerFault"
]

// ---------------------------------------------------------------------------------------------
// Rank to coordinator
// ---------------------------------------------------------------------------------------------

/**
 * First frame of a rank, once its trainer is ready. `paramsLength`: its parameter count (values in
 * `getParams()`); the coordinator agrees one count for the run at formation and refuses a rank
 * whose count differs (docs/design.md §4). @since 0.1.0 @category rank-to-coordinator
 */
export interface Hello {
  readonly _tag: "Hello"
  readonly paramsLength: number
  /** Where its ring neighbours reach this rank's listener (`ws://host:port/`), when it listens (docs/ring.md). */
  readonly ringAddress?: string
}

/** Fills the gaps between other frames so that liveness stays fresh. @since 0.1.0 @category rank-to-coordinator */
export interface Heartbeat {
  readonly _tag: "Heartbeat"
}

/**
 * Training progress. Never commits anything (docs/design.md §3.3).
 *
 * - `samplesDone`: samples of the rank's static assignment list trained so far in `epoch`.
 * - `msPerBatch`: the rank's latest wall time per batch in milliseconds (a finite float); `0` or
 *   less means "no measurement" and does not calibrate the rank.
 *
 * @since 0.1.0
 * @category rank-to-coordinator
 */
export interface Progress {
  readonly _tag: "Progress"
  readonly epoch: number
  readonly samplesDone: number
  readonly msPerBatch: number
}

/** A progressive-mode chunk `[offset, offset + size)` of `epoch` was trained. @since 0.1.0 @category rank-to-coordinator */
export interface ChunkDone {
  readonly _tag: "ChunkDone"
  readonly epoch: number
  readonly offset: number
  readonly size: number
}

/**
 * An averaging contribution: commits the rank's static list up to `samplesDone` (static mode) or
 * every chunk it completed so far (progressive mode) when the coordinator receives it.
 *
 * `params` is the rank's model parameters (`Float32Array`). The `cpu` backend only: with the ring
 * backend a rank reports `RoundDone` instead, and a `Params` is the answer to a `RequestParams`:
 * the model of `round` for a joiner (`samplesDone` 0; commits nothing; `epoch` is not
 * read); one nobody asked for is ignored and counted. `loss`
 * (optional, finite; structures version 4) is the rank's mean training loss over the batches it
 * trained since its last contribution, for the run's journal; the core does not read it.
 *
 * @since 0.1.0
 * @category rank-to-coordinator
 */
export interface Params {
  readonly _tag: "Params"
  readonly epoch: number
  readonly round: number
  readonly samplesDone: number
  readonly params: Float32Array
  readonly loss?: number
}

/** The rank is leaving cleanly; never counted as a failure. @since 0.1.0 @category rank-to-coordinator */
export interface Exiting {
  readonly _tag: "Exiting"
}

/** Outcome of a `Checkpoint{version}`; `detail` explains a failure. @since 0.1.0 @category rank-to-coordinator */
export interface CheckpointResult {
  readonly _tag: "CheckpointResult"
  readonly version: number
  readonly ok: boolean
  readonly detail: string
}

/** Outcome of an `Eval{epoch}`: `accuracy` in `[0, 1]` and `loss` (finite floats). @since 0.1.0 @category rank-to-coordinator */
export interface EvalResult {
  readonly _tag: "EvalResult"
  readonly epoch: number
  readonly accuracy: number
  readonly loss: number
}

/** The rank joined ring `generation` and is ready to reduce. @since 0.1.0 @category rank-to-coordinator */
export interface RingReady {
  readonly _tag: "RingReady"
  readonly generation: number
}

/**
 * The rank finished the ring all-reduce of `round` in ring `generation` (ring backend).
 * It commits nothing by itself: the coordinator commits every reporter's `samplesDone` (static
 * list) or completed chunks (progressive) only when every ring member of the generation reported
 * the round, and answers `RoundCommitted` (docs/design.md §3.3: a sample counts once its parameters
 * were folded into a completed round). A death or exit first discards the round's reports; the
 * new generation redoes the round. `loss` as `Params`'s (optional; the core does not read it).
 * `linkSentBytes` and `linkReceivedBytes` (both or neither; the core does not read them): the
 * bytes of the round's ring steps this rank sent and received over its direct links since its last
 * report, which the coordinator never sees (for the journal's round line).
 *
 * @since 0.1.0
 * @category rank-to-coordinator
 */
export interface RoundDone {
  readonly _tag: "RoundDone"
  readonly epoch: number
  readonly round: number
  readonly generation: number
  readonly samplesDone: number
  readonly loss?: number
  readonly linkSentBytes?: number
  readonly linkReceivedBytes?: number
}

/**
 * One step of a ring collective relayed through the coordinator (ring backend): a rank
 * sends it to the coordinator, which forwards it unchanged to the rank's next ring neighbour in
 * `generation` (and drops it for an older generation). `data` is a float64 partial sum
 * (reduce-scatter) or a float32 finished segment (all-gather); see `Ring.RingMessage`. Sent in
 * both directions; worker-thread ranks use direct `MessageChannel` links instead.
 *
 * @since 0.1.0
 * @category ring
 */
export interface RingData {
  readonly _tag: "RingData"
  readonly generation: number
  readonly round: number
  readonly step: number
  /** With `--compress`: a packed ring step (`RingPacked`) instead. */
  readonly data: Float64Array | Float32Array | Uint8Array
}

/**
 * The rank is ending because of an uncaught error: its last frame before it exits.
 * `error` is the error's message, `stack` its stack trace as the rank's runtime printed it (`""`
 * when it has none). Informative only: the coordinator actor folds it into the rank's death report
 * (`Crashed{error, stack}`), which is what the coordinator declares; a process cannot report its
 * error any other way (docs/design.md §5).
 *
 * @since 0.1.0
 * @category rank-to-coordinator
 */
export interface Crashing {
  readonly _tag: "Crashing"
  readonly error: string
  readonly stack: string
}

/**
 * Every message a rank sends to the coordinator.
 *
 * @since 0.1.0
 * @category rank-to-coordinator
 */
export type ToCoordinator =
  | Hello
  | Heartbeat
  | Progress
  | ChunkDone
  | Params
  | Exiting
  | CheckpointResult
  | EvalResult
  | RingReady
  | Crashing
  | RoundDone
  | RingData

// ---------------------------------------------------------------------------------------------
// Coordinator to rank
// ---------------------------------------------------------------------------------------------

/** The rank's partition `[offset, offset + size)` of `epoch` (static mode); `size` may be 0. @since 0.1.0 @category coordinator-to-rank */
export interface StartEpoch {
  readonly _tag: "StartEpoch"
  readonly epoch: number
  readonly offset: number
  readonly size: number
}

/** Append `[offset, offset + size)` of `epoch` to the rank's list; ignored for another epoch. @since 0.1.0 @category coordinator-to-rank */
export interface ExtendPartition {
  readonly _tag: "ExtendPartition"
  readonly epoch: number
  readonly offset: number
  readonly size: number
}

/** A progressive-mode chunk `[offset, offset + size)` of `epoch`. @since 0.1.0 @category coordinator-to-rank */
export interface AssignChunk {
  readonly _tag: "AssignChunk"
  readonly epoch: number
  readonly offset: number
  readonly size: number
}

/**
 * Asks a rank for its parameters as of `round` (the mean it applied when `round` committed): with
 * the ring backend, the model a joiner enters the ring with; the rank answers `Params`.
 *
 * @since 0.1.0
 * @category coordinator-to-rank
 */
export interface RequestParams {
  readonly _tag: "RequestParams"
  readonly round: number
}

/**
 * The averaged parameters of a closed `round` (empty with the ring backend). With `base`, `params`
 * is the change to add to the model of round `base`, which the rank holds (`--compress`: the
 * coordinator packs changes, not whole models).
 *
 * @since 0.1.0
 * @category coordinator-to-rank
 */
export interface Update {
  readonly _tag: "Update"
  readonly round: number
  readonly params: Float32Array
  readonly base?: number
}

/** Which rank holds each callback role (docs/design.md §3.5). @since 0.1.0 @category coordinator-to-rank */
export interface SetRoles {
  readonly _tag: "SetRoles"
  readonly checkpoint: Rank
  readonly eval: Rank
  readonly epochFn: Rank
}

/** Save checkpoint `version` (the index of the epoch just ended). @since 0.1.0 @category coordinator-to-rank */
export interface Checkpoint {
  readonly _tag: "Checkpoint"
  readonly version: number
}

/** Evaluate the model after `epoch`. @since 0.1.0 @category coordinator-to-rank */
export interface Eval {
  readonly _tag: "Eval"
  readonly epoch: number
}

/** `rank` is dead: abort any collective that involves it (ring backend). @since 0.1.0 @category coordinator-to-rank */
export interface DeclareDead {
  readonly _tag: "DeclareDead"
  readonly rank: Rank
}

/**
 * Join ring `generation` as `ringRank` of `ringSize`; `peers` lists the ring's ranks in ring order
 * (ascending rank order), so `peers[ringRank]` is the receiver. The core sends the whole list; the
 * coordinator's shell sends each rank only its neighbours instead (`prev`, `next`, `peers` empty),
 * with the next one's listener (`nextAddress`, empty: none) and the generation's secret for direct
 * links (`ringSecret`, empty: none).
 *
 * @since 0.1.0
 * @category coordinator-to-rank
 */
export interface FormRing {
  readonly _tag: "FormRing"
  readonly generation: number
  readonly ringRank: number
  readonly ringSize: number
  readonly peers: ReadonlyArray<Rank>
  readonly prev?: Rank
  readonly next?: Rank
  readonly nextAddress?: string
  readonly ringSecret?: string
}

/**
 * Round `round` of ring `generation` closed: every ring member reported `RoundDone`, their samples
 * are committed, and each may apply the mean its collective computed (ring backend). A
 * rank holding a mean for another `(round, generation)` ignores it.
 *
 * @since 0.1.0
 * @category coordinator-to-rank
 */
export interface RoundCommitted {
  readonly _tag: "RoundCommitted"
  readonly round: number
  readonly generation: number
}

/** Save through the user's save callback, then exit cleanly. @since 0.1.0 @category coordinator-to-rank */
export interface ShutdownWithSave {
  readonly _tag: "ShutdownWithSave"
  readonly reason: SaveReason
}

/** The run is over: exit cleanly. @since 0.1.0 @category coordinator-to-rank */
export interface Shutdown {
  readonly _tag: "Shutdown"
}

/** The coordinator's own liveness beacon. @since 0.1.0 @category coordinator-to-rank */
export interface CoordHeartbeat {
  readonly _tag: "CoordHeartbeat"
}

/**
 * Every message the coordinator sends to a rank.
 *
 * @since 0.1.0
 * @category coordinator-to-rank
 */
export type ToRank =
  | StartEpoch
  | ExtendPartition
  | AssignChunk
  | RequestParams
  | Update
  | SetRoles
  | Checkpoint
  | Eval
  | DeclareDead
  | FormRing
  | ShutdownWithSave
  | Shutdown
  | CoordHeartbeat
  | RoundCommitted
  | RingData
