/**
 * One `Schema` per message of docs/design.md §4, and one union per direction.
 *
 * The schemas mirror `src/core/messages.ts` exactly (same `_tag`s, same fields); the type-level
 * checks at the end of this file fail to compile if they drift apart. Every frame is validated
 * against its message's schema after CBOR decoding (`Codec.decode`).
 *
 * Field rules: ranks, epochs, rounds, versions, generations, offsets, sizes and sample counts are
 * non-negative safe integers; `msPerBatch` and `loss` are finite floats; `accuracy` is a float in
 * `[0, 1]`; `params` is a `Float32Array` (CBOR typed-array tag 85 on the wire, never a number list);
 * a ring step's `data` a `Float64Array` (tag 86) or `Float32Array` (tag 85).
 *
 * The ring backend's protocol (structures version 3): rank to coordinator
 * `RoundDone{epoch, round, generation, samplesDone}` after the rank's all-reduce of a round
 * completed; coordinator to rank `RoundCommitted{round, generation}` once every ring member
 * reported (then, and only then, may a rank apply its mean); `RingData{generation, round, step,
 * data}` in both directions for ranks whose steps are relayed through the coordinator (child
 * processes, sockets); worker threads exchange the same steps over direct `MessageChannel`s.
 *
 * @since 0.1.0
 */
import type * as Messages from "../core/messages.ts"
import { Schema } from "effect"

/**
 * A non-negative safe integer (`0 <= n <= Number.MAX_SAFE_INTEGER`): ranks, epochs, offsets, sizes.
 *
 * @since 0.1.0
 * @category fields
 */
export const Count = Schema.Natural

/**
 * A finite float (no `NaN`, no infinities), e.g. `msPerBatch` in milliseconds.
 *
 * @since 0.1.0
 * @category fields
 */
export const Finite = Schema.Finite

/**
 * Model parameters: a `Float32Array` of any length (empty with the ring backend). A number list is
 * rejected.
 *
 * @since 0.1.0
 * @category fields
 */
export const Params = Schema.declare((input: unknown): input is Float32Array => input instanceof Float32Array, {
  expected: "Float32Array"
})

/**
 * A ring step's data: a `Float64Array` (CBOR tag 86, partial sums) or a `Float32Array`
 * (tag 85, finished segments); bounded like `params` by `paramsLengthMax` values (one more for
 * float64 sums, which end with their contribution count). A number list is
 * rejected. Or a packed ring step (`--compress`, structures version 7): a `Uint8Array` (tag 64)
 * that `RingPacked` reads; bounded in bytes like a packed `params`.
 *
 * @since 0.1.0
 * @category fields
 */
export const RingValues = Schema.declare(
  (input: unknown): input is Float64Array | Float32Array | Uint8Array =>
    input instanceof Float64Array || input instanceof Float32Array || input instanceof Uint8Array,
  { expected: "Float64Array, Float32Array or a packed ring step (Uint8Array)" }
)

/**
 * A save reason (docs/design.md §1): one of `Messages.saveReasons`.
 *
 * @since 0.1.0
 * @category fields
 */
export const SaveReason = Schema.Literals([
  "GracefulShutdown",
  "FailureLimitReached",
  "SingleSurvivor",
  "AllRanksLost",
  "ReduceStall",
  "TrainerFault"
])

// ---------------------------------------------------------------------------------------------
// Rank to coordinator
// ---------------------------------------------------------------------------------------------

/**
 * Where a rank's ring listener is reached, on `Hello` and a `FormRing` (structures version 6): a
 * `ws://host:port/` URL of at most 300 characters; the empty string on a `FormRing` whose
 * neighbour has none.
 *
 * @since 0.1.0
 * @category fields
 */
export const RingAddress = Schema.String.check(Schema.isMaxLength(300), Schema.isPattern(/^(ws:\/\/[^\s/?#]+\/)?$/))

/**
 * `Hello{paramsLength, ringAddress?}`: a rank's first frame, once its trainer is ready;
 * `paramsLength` is its parameter count, agreed at formation (docs/design.md §4); `ringAddress`
 * where its neighbours reach its ring listener (a rank that joined from another host and listens;
 * docs/ring.md). @since 0.1.0 @category rank-to-coordinator
 */
export const Hello = Schema.TaggedStruct("Hello", { paramsLength: Count, ringAddress: Schema.optionalKey(RingAddress) })

/** `Heartbeat`: fills the gaps between frames (docs/design.md §3.1). @since 0.1.0 @category rank-to-coordinator */
export const Heartbeat = Schema.TaggedStruct("Heartbeat", {})

/** `Progress{epoch, samplesDone, msPerBatch}`; `msPerBatch` finite, `<= 0` means no measurement. @since 0.1.0 @category rank-to-coordinator */
export const Progress = Schema.TaggedStruct("Progress", { epoch: Count, samplesDone: Count, msPerBatch: Finite })

/** `ChunkDone{epoch, offset, size}`: a progressive-mode chunk was trained (docs/design.md §3.7). @since 0.1.0 @category rank-to-coordinator */
export const ChunkDone = Schema.TaggedStruct("ChunkDone", { epoch: Count, offset: Count, size: Count })

/**
 * A rank's mean training loss since its last contribution, on `Params` and `RoundDone` (optional:
 * a frame without it stays valid, structures version 4): a finite float of magnitude at most
 * `1e12` (the model's own unit), so one rank cannot put a number the journal and the charts
 * cannot hold.
 *
 * @since 0.1.0
 * @category fields
 */
export const TrainLoss = Finite.check(Schema.isBetween({ minimum: -1e12, maximum: 1e12 }))

/**
 * `Params{epoch, round, samplesDone, params, loss?}`: an averaging contribution (docs/design.md §3.3);
 * `params` is a `Float32Array`; `loss` a `TrainLoss`.
 *
 * @since 0.1.0
 * @category rank-to-coordinator
 */
export const ParamsMessage = Schema.TaggedStruct("Params", {
  epoch: Count,
  round: Count,
  samplesDone: Count,
  params: Params,
  loss: Schema.optionalKey(TrainLoss)
})

/** `Exiting`: a clean exit, never a failure. @since 0.1.0 @category rank-to-coordinator */
export const Exiting = Schema.TaggedStruct("Exiting", {})

/** `CheckpointResult{version, ok, detail}`; `detail` is free text. @since 0.1.0 @category rank-to-coordinator */
export const CheckpointResult = Schema.TaggedStruct("CheckpointResult", {
  version: Count,
  ok: Schema.Boolean,
  detail: Schema.String
})

/** `EvalResult{epoch, accuracy, loss}`: `accuracy` in `[0, 1]`, `loss` finite. @since 0.1.0 @category rank-to-coordinator */
export const EvalResult = Schema.TaggedStruct("EvalResult", {
  epoch: Count,
  accuracy: Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })),
  loss: Finite
})

/** `RingReady{generation}` (ring backend). @since 0.1.0 @category rank-to-coordinator */
export const RingReady = Schema.TaggedStruct("RingReady", { generation: Count })

/**
 * `Crashing{error, stack}`: a rank's last frame before it exits on an uncaught error; both free
 * text (`stack` is `""` when the error had none), bounded by the frame limit.
 *
 * @since 0.1.0
 * @category rank-to-coordinator
 */
export const Crashing = Schema.TaggedStruct("Crashing", { error: Schema.String, stack: Schema.String })

/**
 * `RoundDone{epoch, round, generation, samplesDone, loss?, linkSentBytes?, linkReceivedBytes?}`:
 * the rank finished ring round `round` in `generation`; committed only when the round closes (ring
 * backend); `loss` a `TrainLoss`; the link bytes (structures version 8, both or neither) are the
 * bytes of the round's ring steps the rank sent and received over direct links, each a `Count`.
 *
 * @since 0.1.0
 * @category rank-to-coordinator
 */
export const RoundDone = Schema.TaggedStruct("RoundDone", {
  epoch: Count,
  round: Count,
  generation: Count,
  samplesDone: Count,
  loss: Schema.optionalKey(TrainLoss),
  linkSentBytes: Schema.optionalKey(Count),
  linkReceivedBytes: Schema.optionalKey(Count)
})

/**
 * `RingData{generation, round, step, data}`: one relayed ring step, in both directions;
 * `data` a `Float64Array` (a reduce-scatter step: the segment's partial sums, then the number of
 * contributions folded into them) or a `Float32Array` (an all-gather step: a finished segment);
 * `Ring.allReduce` checks the layout.
 *
 * @since 0.1.0
 * @category ring
 */
export const RingData = Schema.TaggedStruct("RingData", { generation: Count, round: Count, step: Count, data: RingValues })

/**
 * Every message a rank sends to the coordinator.
 *
 * @since 0.1.0
 * @category rank-to-coordinator
 */
export const ToCoordinator = Schema.Union([
  Hello,
  Heartbeat,
  Progress,
  ChunkDone,
  ParamsMessage,
  Exiting,
  CheckpointResult,
  EvalResult,
  RingReady,
  Crashing,
  RoundDone,
  RingData
])

// ---------------------------------------------------------------------------------------------
// Coordinator to rank
// ---------------------------------------------------------------------------------------------

/** `StartEpoch{epoch, offset, size}`: the rank's partition; `size` may be 0 (docs/design.md §3.10). @since 0.1.0 @category coordinator-to-rank */
export const StartEpoch = Schema.TaggedStruct("StartEpoch", { epoch: Count, offset: Count, size: Count })

/** `ExtendPartition{epoch, offset, size}`: a slice of a dead rank's remainder (docs/design.md §3.4). @since 0.1.0 @category coordinator-to-rank */
export const ExtendPartition = Schema.TaggedStruct("ExtendPartition", { epoch: Count, offset: Count, size: Count })

/** `AssignChunk{epoch, offset, size}` (progressive mode, docs/design.md §3.7). @since 0.1.0 @category coordinator-to-rank */
export const AssignChunk = Schema.TaggedStruct("AssignChunk", { epoch: Count, offset: Count, size: Count })

/** `RequestParams{round}`: a rank's parameters of `round` (ring joiners' model). @since 0.1.0 @category coordinator-to-rank */
export const RequestParams = Schema.TaggedStruct("RequestParams", { round: Count })

/**
 * `Update{round, params, base?}`: averaged parameters as a `Float32Array`; with `base` (structures
 * version 7), the change to add to the model of round `base` the rank holds.
 *
 * @since 0.1.0
 * @category coordinator-to-rank
 */
export const Update = Schema.TaggedStruct("Update", { round: Count, params: Params, base: Schema.optionalKey(Count) })

/** `SetRoles{checkpoint, eval, epochFn}`: the rank of each callback role (docs/design.md §3.5). @since 0.1.0 @category coordinator-to-rank */
export const SetRoles = Schema.TaggedStruct("SetRoles", { checkpoint: Count, eval: Count, epochFn: Count })

/** `Checkpoint{version}`. @since 0.1.0 @category coordinator-to-rank */
export const Checkpoint = Schema.TaggedStruct("Checkpoint", { version: Count })

/** `Eval{epoch}`. @since 0.1.0 @category coordinator-to-rank */
export const Eval = Schema.TaggedStruct("Eval", { epoch: Count })

/** `DeclareDead{rank}` (ring backend, docs/design.md §3.2). @since 0.1.0 @category coordinator-to-rank */
export const DeclareDead = Schema.TaggedStruct("DeclareDead", { rank: Count })

/**
 * `FormRing{generation, ringRank, ringSize, peers, prev?, next?, nextAddress?, ringSecret?}`
 * (docs/design.md §3.10 "Ring re-rendezvous"). Beyond the field rules: `peers.length ===
 * ringSize` (or `0` when `prev` and `next` name the neighbours, structures version 6),
 * `ringRank < ringSize`, and `peers` is strictly ascending (ring order is ascending rank order).
 * `nextAddress` is the next neighbour's `RingAddress` (empty: none), `ringSecret` the generation's
 * secret for direct links (empty: none; at most 128 characters).
 *
 * @since 0.1.0
 * @category coordinator-to-rank
 */
export const FormRing = Schema.TaggedStruct("FormRing", {
  generation: Count,
  ringRank: Count,
  ringSize: Count,
  peers: Schema.Array(Count),
  prev: Schema.optionalKey(Count),
  next: Schema.optionalKey(Count),
  nextAddress: Schema.optionalKey(RingAddress),
  ringSecret: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(128)))
}).check(
  Schema.makeFilter((ring) => {
    const neighbours = ring.prev !== undefined && ring.next !== undefined
    if (ring.peers.length !== ring.ringSize && !(neighbours && ring.peers.length === 0)) {
      return { path: ["peers"], issue: `expected ringSize (${ring.ringSize}) ranks, got ${ring.peers.length}` }
    }
    if (ring.ringRank >= ring.ringSize) {
      return { path: ["ringRank"], issue: `expected a ringRank below ringSize (${ring.ringSize}), got ${ring.ringRank}` }
    }
    for (let i = 1; i < ring.peers.length; i++) {
      if (ring.peers[i]! <= ring.peers[i - 1]!) {
        return { path: ["peers", i], issue: "expected peers in strictly ascending rank order" }
      }
    }
    return undefined
  })
)

/** `ShutdownWithSave{reason}` (docs/design.md §3.6). @since 0.1.0 @category coordinator-to-rank */
export const ShutdownWithSave = Schema.TaggedStruct("ShutdownWithSave", { reason: SaveReason })

/** `Shutdown`: the run is over. @since 0.1.0 @category coordinator-to-rank */
export const Shutdown = Schema.TaggedStruct("Shutdown", {})

/** `CoordHeartbeat`: the coordinator's liveness beacon. @since 0.1.0 @category coordinator-to-rank */
export const CoordHeartbeat = Schema.TaggedStruct("CoordHeartbeat", {})

/** `RoundCommitted{round, generation}`: ring round closed and committed. @since 0.1.0 @category coordinator-to-rank */
export const RoundCommitted = Schema.TaggedStruct("RoundCommitted", { round: Count, generation: Count })

/**
 * Every message the coordinator sends to a rank.
 *
 * @since 0.1.0
 * @category coordinator-to-rank
 */
export const ToRank = Schema.Union([
  StartEpoch,
  ExtendPartition,
  AssignChunk,
  RequestParams,
  Update,
  SetRoles,
  Checkpoint,
  Eval,
  DeclareDead,
  FormRing,
  ShutdownWithSave,
  Shutdown,
  CoordHeartbeat,
  RoundCommitted,
  RingData
])

/** A message schema: a struct whose `_tag` field is one literal. */
type Tagged = { readonly fields: { readonly _tag: { readonly schema: { readonly literal: string } } } }

/** The members of a union keyed by their `_tag`, each under its own type. */
type ByTag<Members extends ReadonlyArray<Tagged>> = { readonly [M in Members[number] as M["fields"]["_tag"]["schema"]["literal"]]: M }

const indexByTag = <const Members extends ReadonlyArray<Tagged>>(members: Members): ByTag<Members> =>
  // `fromEntries` cannot say that each key is its member's tag; the mapped type above does.
  Object.fromEntries(members.map((member) => [member.fields._tag.schema.literal, member])) as ByTag<Members>

/**
 * Each message's schema by `_tag`, for decoding a frame whose tag is already known.
 *
 * @since 0.1.0
 * @category registry
 */
export const byTag = { ...indexByTag(ToCoordinator.members), ...indexByTag(ToRank.members) }

/**
 * Any message's `_tag`, in either direction.
 *
 * @since 0.1.0
 * @category registry
 */
export type Tag = keyof typeof byTag

// ---------------------------------------------------------------------------------------------
// Type-level checks: decoded values are exactly the core's message types, and back.
// ---------------------------------------------------------------------------------------------

type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false

const toCoordinatorMatchesCore: Equals<typeof ToCoordinator.Type, Messages.ToCoordinator> = true
const toRankMatchesCore: Equals<typeof ToRank.Type, Messages.ToRank> = true
const tagsMatchCore: Equals<Tag, Messages.ToCoordinator["_tag"] | Messages.ToRank["_tag"]> = true
const saveReasonMatchesCore: Equals<typeof SaveReason.Type, Messages.SaveReason> = true
void [toCoordinatorMatchesCore, toRankMatchesCore, tagsMatchCore, saveReasonMatchesCore]
