/**
 * One instance of every message of docs/design.md §4, each in a frame, for the golden vectors and the
 * hand-written tests. Values are chosen to exercise every CBOR width the encoder uses: 1-, 2-, 3-,
 * 5- and 9-byte integers, float64, UTF-8 text of 1 to 4 bytes per code point, and Float32Array
 * bit patterns (NaN, -0, infinities, a subnormal) built from bits, not from arithmetic, so that every
 * runtime holds the same bytes.
 */
import type * as Messages from "../../src/core/messages.ts"
import * as Frame from "../../src/wire/frame.ts"

const float32FromBits = (bits: ReadonlyArray<number>): Float32Array => new Float32Array(new Uint32Array(bits).buffer)

/** 1, -2.5, NaN (quiet, payload 1), -0, +Infinity, -Infinity, the smallest subnormal, 3.4e38. */
export const params = float32FromBits([0x3f800000, 0xc0200000, 0x7fc00001, 0x80000000, 0x7f800000, 0xff800000, 0x00000001, 0x7f7fc99e])

/** 1, NaN (quiet, payload 1), -0, the smallest subnormal, as float64 bit patterns (little-endian words). */
export const ringSums = new Float64Array(new Uint32Array([0, 0x3ff00000, 1, 0x7ff80000, 0, 0x80000000, 1, 0]).buffer)

/** Every message type, keyed by `_tag`, in a frame from its usual sender. */
export const frames: { readonly [Tag in Messages.ToCoordinator["_tag"] | Messages.ToRank["_tag"]]: Frame.Frame } = {
  Hello: Frame.fromRank(0, { _tag: "Hello", paramsLength: 407_050 }),
  Heartbeat: Frame.fromRank(17, { _tag: "Heartbeat" }),
  Progress: Frame.fromRank(3, { _tag: "Progress", epoch: 2, samplesDone: 4096, msPerBatch: 12.375 }),
  ChunkDone: Frame.fromRank(255, { _tag: "ChunkDone", epoch: 1, offset: 65_535, size: 128 }),
  Params: Frame.fromRank(1, { _tag: "Params", epoch: 3, round: 41, samplesDone: 70_000, params }),
  Exiting: Frame.fromRank(256, { _tag: "Exiting" }),
  CheckpointResult: Frame.fromRank(2, {
    _tag: "CheckpointResult",
    version: 5,
    ok: false,
    detail: "disk full: é ✓ 𝄞"
  }),
  EvalResult: Frame.fromRank(4, { _tag: "EvalResult", epoch: 9, accuracy: 0.9375, loss: 0.1 }),
  RingReady: Frame.fromRank(65_536, { _tag: "RingReady", generation: 3 }),
  Crashing: Frame.fromRank(5, {
    _tag: "Crashing",
    error: "trainBatch always fails: é ✓ 𝄞",
    stack: "Error: trainBatch always fails\n    at Object.trainBatch (file:///trainer.ts:9:13)"
  }),
  RoundDone: Frame.fromRank(6, { _tag: "RoundDone", epoch: 2, round: 300, generation: 1, samplesDone: 70_000 }),
  RingData: Frame.fromRank(7, { _tag: "RingData", generation: 2, round: 300, step: 5, data: ringSums }),
  StartEpoch: Frame.fromCoordinator({ _tag: "StartEpoch", epoch: 0, offset: 0, size: 0 }),
  ExtendPartition: Frame.fromCoordinator({ _tag: "ExtendPartition", epoch: 7, offset: 123_456_789, size: 4096 }),
  AssignChunk: Frame.fromCoordinator({ _tag: "AssignChunk", epoch: 2, offset: 2 ** 40 + 3, size: 256 }),
  RequestParams: Frame.fromCoordinator({ _tag: "RequestParams", round: 24 }),
  Update: Frame.fromCoordinator({ _tag: "Update", round: 41, params: new Float32Array(0) }),
  SetRoles: Frame.fromCoordinator({ _tag: "SetRoles", checkpoint: 0, eval: 1, epochFn: 23 }),
  Checkpoint: Frame.fromCoordinator({ _tag: "Checkpoint", version: 5 }),
  Eval: Frame.fromCoordinator({ _tag: "Eval", epoch: 9 }),
  DeclareDead: Frame.fromCoordinator({ _tag: "DeclareDead", rank: 1_000_000 }),
  FormRing: Frame.fromCoordinator({ _tag: "FormRing", generation: 4, ringRank: 1, ringSize: 3, peers: [0, 2, 1000] }),
  ShutdownWithSave: Frame.fromCoordinator({ _tag: "ShutdownWithSave", reason: "FailureLimitReached" }),
  Shutdown: Frame.fromCoordinator({ _tag: "Shutdown" }),
  CoordHeartbeat: Frame.fromCoordinator({ _tag: "CoordHeartbeat" }),
  RoundCommitted: Frame.fromCoordinator({ _tag: "RoundCommitted", round: 300, generation: 2 })
}

/** A ring step relayed by the coordinator: float32 finished segment (the other typed-array tag). */
export const relayedRingData: Frame.Frame = Frame.fromCoordinator({ _tag: "RingData", generation: 2, round: 300, step: 6, data: params })

/** Contributions with their optional training `loss` (structures version 4): `<tag>-loss.cbor`. */
export const withLoss: { readonly Params: Frame.Frame; readonly RoundDone: Frame.Frame } = {
  Params: Frame.fromRank(1, { _tag: "Params", epoch: 3, round: 41, samplesDone: 70_000, params, loss: 0.3125 }),
  RoundDone: Frame.fromRank(6, { _tag: "RoundDone", epoch: 2, round: 300, generation: 1, samplesDone: 70_000, loss: 2.25 })
}

/**
 * Direct-link bytes (structures version 8): `RoundDone-links.cbor` without a loss and
 * `RoundDone-loss-links.cbor` with one, the two structures of `RoundDone`'s `later` group.
 */
export const withLinkBytes: { readonly "RoundDone-links": Frame.Frame; readonly "RoundDone-loss-links": Frame.Frame } = {
  "RoundDone-links": Frame.fromRank(6, {
    _tag: "RoundDone",
    epoch: 2,
    round: 300,
    generation: 1,
    samplesDone: 70_000,
    linkSentBytes: 1_221_180,
    linkReceivedBytes: 1_221_180
  }),
  "RoundDone-loss-links": Frame.fromRank(6, {
    _tag: "RoundDone",
    epoch: 2,
    round: 300,
    generation: 1,
    samplesDone: 70_000,
    loss: 2.25,
    linkSentBytes: 4_294_967_296,
    linkReceivedBytes: 0
  })
}

/**
 * Ring addresses (structures version 6): `<tag>-ring.cbor`, a `Hello` with the rank's listener and
 * a `FormRing` that names only the neighbours, the next one's listener and the generation's secret.
 */
export const withRingAddresses: { readonly Hello: Frame.Frame; readonly FormRing: Frame.Frame } = {
  Hello: Frame.fromRank(2, { _tag: "Hello", paramsLength: 407_050, ringAddress: "ws://10.213.0.3:40123/" }),
  FormRing: Frame.fromCoordinator({
    _tag: "FormRing",
    generation: 4,
    ringRank: 1,
    ringSize: 3,
    peers: [],
    prev: 0,
    next: 1000,
    nextAddress: "ws://[fd00::7]:7071/",
    ringSecret: "Zr4yq0xW2n9sTbVc8kLpM1aQeHdJ6uFo"
  })
}

/**
 * Packed parameters (structures version 5): `<name>.cbor` is the frame encoded with the packed
 * vector of `values` in place of its `params`; it decodes to the frame with `unpacked`.
 * Every value is exact in half floats; in int8 blocks of 8 the first block's largest magnitude is
 * 127, so its scale is exactly 1 and its integers come back exact; the second block's scale is
 * float32(1.5 / 127).
 */
export const packedValues = new Float32Array([1, -2, 5, 0, 127, -3, 64, 2, 1.5, -1])
const secondScale = Math.fround(1.5 / 127)
export const packed: {
  readonly [name: string]: { readonly frame: Frame.Frame; readonly compression: "fp16" | "int8"; readonly unpacked: Float32Array }
} = {
  "Params-fp16": {
    frame: Frame.fromRank(1, { _tag: "Params", epoch: 3, round: 41, samplesDone: 70_000, params: new Float32Array(0), loss: 0.3125 }),
    compression: "fp16",
    unpacked: packedValues
  },
  "Update-int8": {
    frame: Frame.fromCoordinator({ _tag: "Update", round: 41, params: new Float32Array(0) }),
    compression: "int8",
    // Block 1 (1.5, -1): 1.5 is 127 steps of its scale, -1 the nearest, -85.
    unpacked: new Float32Array([1, -2, 5, 0, 127, -3, 64, 2, 127 * secondScale, -85 * secondScale])
  },
  // Structures version 7: a packed change to the model of round 40.
  "Update-change": {
    frame: Frame.fromCoordinator({ _tag: "Update", round: 41, params: new Float32Array(0), base: 40 }),
    compression: "int8",
    unpacked: new Float32Array([1, -2, 5, 0, 127, -3, 64, 2, 127 * secondScale, -85 * secondScale])
  }
}

/** A packed ring step (structures version 7): its bytes travel as they are (tag 64 in `data`). */
export const packedRingData: Frame.Frame = Frame.fromRank(7, {
  _tag: "RingData",
  generation: 2,
  round: 300,
  step: 1,
  data: new Uint8Array([2, 0, 0, 0, 255, 255, 255, 255, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0])
})
