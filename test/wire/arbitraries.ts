/**
 * fast-check arbitraries for valid messages and frames (docs/design.md §4 field rules).
 *
 * Floats never include -0: cbor-x writes integral numbers as integers, so -0 arrives as 0 (a unit
 * test pins that). Float32Array contents are arbitrary bit patterns and survive exactly.
 */
import fc from "fast-check"
import type * as Messages from "../../src/core/messages.ts"
import * as Frame from "../../src/wire/frame.ts"

const noNegativeZero = (value: number): number => (Object.is(value, -0) ? 0 : value)

export const count = fc.maxSafeNat()
export const finite = fc.double({ noNaN: true, noDefaultInfinity: true }).map(noNegativeZero)
export const unit = fc.double({ min: 0, max: 1, noNaN: true }).map(noNegativeZero)
export const params = fc
  .array(fc.integer({ min: 0, max: 0xffffffff }), { maxLength: 64 })
  .map((bits) => new Float32Array(new Uint32Array(bits).buffer))
/** Ring step data: float64 partial sums or float32 segments, arbitrary bit patterns. */
export const ringValues = fc.oneof(
  params,
  fc
    .array(fc.integer({ min: 0, max: 0xffffffff }), { maxLength: 64 })
    .map((bits) => new Float64Array(new Uint32Array(bits.length % 2 === 0 ? bits : [...bits, 0]).buffer))
)
const ringData = fc.record({ _tag: fc.constant("RingData" as const), generation: count, round: count, step: count, data: ringValues })
const saveReason = fc.constantFrom<Messages.SaveReason>(
  "GracefulShutdown",
  "FailureLimitReached",
  "SingleSurvivor",
  "AllRanksLost",
  "ReduceStall",
  "TrainerFault"
)
const range = { epoch: count, offset: count, size: count }

/** Every rank-to-coordinator message, by `_tag`. */
export const toCoordinator: { readonly [Tag in Messages.ToCoordinator["_tag"]]: fc.Arbitrary<Messages.ToCoordinator> } = {
  Hello: fc.record({ _tag: fc.constant("Hello"), paramsLength: count }),
  Heartbeat: fc.constant({ _tag: "Heartbeat" }),
  Progress: fc.record({ _tag: fc.constant("Progress"), epoch: count, samplesDone: count, msPerBatch: finite }),
  ChunkDone: fc.record({ _tag: fc.constant("ChunkDone"), ...range }),
  Params: fc.record({ _tag: fc.constant("Params"), epoch: count, round: count, samplesDone: count, params }),
  Exiting: fc.constant({ _tag: "Exiting" }),
  CheckpointResult: fc.record({
    _tag: fc.constant("CheckpointResult"),
    version: count,
    ok: fc.boolean(),
    detail: fc.string({ unit: "binary", maxLength: 40 })
  }),
  EvalResult: fc.record({ _tag: fc.constant("EvalResult"), epoch: count, accuracy: unit, loss: finite }),
  RingReady: fc.record({ _tag: fc.constant("RingReady"), generation: count }),
  Crashing: fc.record({
    _tag: fc.constant("Crashing"),
    error: fc.string({ unit: "binary", maxLength: 40 }),
    stack: fc.string({ unit: "binary", maxLength: 80 })
  }),
  RoundDone: fc.record({ _tag: fc.constant("RoundDone"), epoch: count, round: count, generation: count, samplesDone: count }),
  RingData: ringData
}

const formRing = fc.uniqueArray(count, { minLength: 1, maxLength: 16 }).chain((ranks) => {
  const peers = [...ranks].sort((a, b) => a - b)
  return fc.record({
    _tag: fc.constant("FormRing" as const),
    generation: count,
    ringRank: fc.nat({ max: peers.length - 1 }),
    ringSize: fc.constant(peers.length),
    peers: fc.constant(peers)
  })
})

/** Every coordinator-to-rank message, by `_tag`. */
export const toRank: { readonly [Tag in Messages.ToRank["_tag"]]: fc.Arbitrary<Messages.ToRank> } = {
  StartEpoch: fc.record({ _tag: fc.constant("StartEpoch"), ...range }),
  ExtendPartition: fc.record({ _tag: fc.constant("ExtendPartition"), ...range }),
  AssignChunk: fc.record({ _tag: fc.constant("AssignChunk"), ...range }),
  RequestParams: fc.record({ _tag: fc.constant("RequestParams"), round: count }),
  Update: fc.record({ _tag: fc.constant("Update"), round: count, params }),
  SetRoles: fc.record({ _tag: fc.constant("SetRoles"), checkpoint: count, eval: count, epochFn: count }),
  Checkpoint: fc.record({ _tag: fc.constant("Checkpoint"), version: count }),
  Eval: fc.record({ _tag: fc.constant("Eval"), epoch: count }),
  DeclareDead: fc.record({ _tag: fc.constant("DeclareDead"), rank: count }),
  FormRing: formRing,
  ShutdownWithSave: fc.record({ _tag: fc.constant("ShutdownWithSave"), reason: saveReason }),
  Shutdown: fc.constant({ _tag: "Shutdown" }),
  CoordHeartbeat: fc.constant({ _tag: "CoordHeartbeat" }),
  RoundCommitted: fc.record({ _tag: fc.constant("RoundCommitted"), round: count, generation: count }),
  RingData: ringData
}

/** A frame carrying `message` from a random rank. */
export const rankFrame = (message: fc.Arbitrary<Messages.ToCoordinator>): fc.Arbitrary<Frame.Frame> =>
  fc.tuple(count, message).map(([from, m]) => Frame.fromRank(from, m))

/** A frame carrying `message` from the coordinator. */
export const coordinatorFrame = (message: fc.Arbitrary<Messages.ToRank>): fc.Arbitrary<Frame.Frame> =>
  message.map((m) => Frame.fromCoordinator(m))

/** Any valid frame. */
export const frame: fc.Arbitrary<Frame.Frame> = fc.oneof(
  ...Object.values(toCoordinator).map(rankFrame),
  ...Object.values(toRank).map(coordinatorFrame)
)
