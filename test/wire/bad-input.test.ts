import { Buffer } from "node:buffer"
import { Result } from "effect"
import { describe, expect, it } from "vitest"
import * as Codec from "../../src/wire/codec.ts"
import * as Packed from "../../src/wire/packed.ts"
import * as Frame from "../../src/wire/frame.ts"
import * as Structures from "../../src/wire/structures.ts"
import * as WireError from "../../src/wire/wire-error.ts"
import * as C from "./cbor-bytes.ts"
import * as Fixtures from "./fixtures.ts"

/** The reason and rank of a failed decode; fails the test on a success. */
const failure = (
  result: Result.Result<Frame.Frame, WireError.WireError>
): { readonly reason: WireError.Reason; readonly rank: number | undefined } => {
  if (Result.isSuccess(result)) throw new Error(`expected a WireError, decoded ${JSON.stringify(result.success)}`)
  expect(result.failure).toBeInstanceOf(WireError.WireError)
  return { reason: result.failure.reason, rank: result.failure.rank }
}

const reasonOf = (bytes: Uint8Array, options?: Codec.DecodeOptions): WireError.Reason => failure(Codec.decode(bytes, options)).reason

const id = (tag: string): number => Structures.idOf.get(tag as never)!
const structure = (tag: string): number => Structures.structureOf[id(tag)]!
const range = (tag: string, epoch: ReadonlyArray<number>, offset: ReadonlyArray<number>, size: ReadonlyArray<number>) =>
  C.record(structure(tag), id(tag), epoch, offset, size)
const coordinator = C.nint(-1)

describe("Codec: bad input gives a WireError with the exact reason", () => {
  it("the hand CBOR writer agrees with the codec on a valid frame", () => {
    const bytes = C.frame(coordinator, range("ExtendPartition", C.uint(7), C.uint(123_456_789), C.uint(4096)))
    expect(bytes).toEqual(Codec.encode(Fixtures.frames.ExtendPartition))
  })

  describe("Truncated", () => {
    it("every strict prefix of every golden frame is Truncated at its own length", () => {
      for (const frame of Object.values(Fixtures.frames)) {
        const bytes = Codec.encode(frame)
        for (let length = 0; length < bytes.length; length++) {
          const reason = reasonOf(bytes.subarray(0, length))
          expect(reason._tag).toBe("Truncated")
          if (reason._tag !== "Truncated") continue
          expect(reason.bytes).toBe(length)
          expect(reason.bytesNeeded).toBeGreaterThan(length)
          expect(reason.bytesNeeded).toBeLessThanOrEqual(bytes.length)
        }
      }
    })

    it("reports the bytes an item needs, from its declared length", () => {
      expect(reasonOf(new Uint8Array(0))).toEqual({ _tag: "Truncated", bytes: 0, bytesNeeded: 1 })
      const params = Codec.encode(Fixtures.frames.Params)
      // The 32-byte string starts at 21, after its 2-byte head at 19: it needs 53 bytes in all.
      expect(reasonOf(params.subarray(0, 30))).toEqual({ _tag: "Truncated", bytes: 30, bytesNeeded: 53 })
    })

    it("bounds declared lengths and counts by the bytes present, before allocating", () => {
      const hugeString = C.frame(C.uint(1), [
        ...C.tag(0xe000 + structure("CheckpointResult"), [0x84, ...C.uint(id("CheckpointResult")), ...C.uint(1), 0xf5]),
        ...C.head(3, 0xffffffff)
      ])
      expect(reasonOf(hugeString)).toEqual({ _tag: "Truncated", bytes: 16, bytesNeeded: 16 + 0xffffffff })
      const hugePeers = C.frame(coordinator, [
        ...C.tag(0xe000 + structure("FormRing"), [0x85, ...C.uint(id("FormRing")), ...C.uint(1), ...C.uint(0), ...C.uint(1)]),
        0x9b,
        0xff,
        0xff,
        0xff,
        0xff,
        0xff,
        0xff,
        0xff,
        0xff
      ])
      expect(reasonOf(hugePeers)).toEqual({ _tag: "Truncated", bytes: 21, bytesNeeded: Number.MAX_SAFE_INTEGER })
      const hugeParams = C.frame(
        C.uint(1),
        C.record(structure("Params"), id("Params"), C.uint(0), C.uint(0), C.uint(0), C.tag(85, C.head(2, 0x7ffffff0)))
      )
      expect(reasonOf(hugeParams)).toEqual({ _tag: "Truncated", bytes: 19, bytesNeeded: 19 + 0x7ffffff0 })
    })
  })

  describe("FrameTooLarge", () => {
    it("rejects a message of messageBytesMax + 1 bytes before reading it", () => {
      const bytesMax = 64
      expect(reasonOf(new Uint8Array(bytesMax + 1), { messageBytesMax: bytesMax })).toEqual({
        _tag: "FrameTooLarge",
        bytes: 65,
        bytesMax: 64
      })
    })

    it("defaults messageBytesMax to 16 MiB and accepts a frame of exactly that size", () => {
      expect(reasonOf(new Uint8Array(16 * 1024 * 1024 + 1))).toEqual({
        _tag: "FrameTooLarge",
        bytes: 16_777_217,
        bytesMax: 16_777_216
      })
      const frame = Frame.fromRank(0, { _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params: new Float32Array(1000) })
      const bytes = Codec.encode(frame)
      expect(Codec.decode(bytes, { messageBytesMax: bytes.length })).toEqual(Result.succeed(frame))
      expect(reasonOf(bytes, { messageBytesMax: bytes.length - 1 })).toEqual({
        _tag: "FrameTooLarge",
        bytes: bytes.length,
        bytesMax: bytes.length - 1
      })
    })
  })

  describe("UnknownTag", () => {
    it("a record tag beyond the structures table", () => {
      const tag = 0xe000 + Structures.structures.length
      expect(reasonOf(C.frame(C.uint(1), C.tag(tag, C.array(C.uint(0)))))).toEqual({ _tag: "UnknownTag", kind: "cbor", tag: 0xe000 + 27 })
    })

    it("a message id beyond the message table", () => {
      const bytes = C.frame(C.uint(1), C.record(structure("Heartbeat"), Structures.messages.length))
      expect(reasonOf(bytes)).toEqual({ _tag: "UnknownTag", kind: "message", tag: 26 })
    })

    it("a cbor-x record definition, so a peer can never redefine the shared structures", () => {
      const definition = C.tag(0xdfff, C.array(C.uint(0xe000), C.array(C.text("_tag")), C.uint(1)))
      expect(reasonOf(C.frame(C.uint(1), definition))).toEqual({ _tag: "UnknownTag", kind: "cbor", tag: 0xdfff })
      // The shared table is intact afterwards.
      expect(Codec.decode(Codec.encode(Fixtures.frames.Heartbeat))).toEqual(Result.succeed(Fixtures.frames.Heartbeat))
    })

    it("any other CBOR tag inside a field (a date); a Float64Array where params need a Float32Array is a schema mismatch", () => {
      const date = C.frame(C.uint(1), C.record(structure("RingReady"), id("RingReady"), C.tag(1, C.uint(0))))
      expect(reasonOf(date)).toEqual({ _tag: "UnknownTag", kind: "cbor", tag: 1 })
      const float64 = C.frame(C.uint(1), [
        ...C.record(structure("Params"), id("Params"), C.uint(0), C.uint(0), C.uint(0), C.tag(86, C.bytes(new Array(8).fill(0))))
      ])
      expect(reasonOf(float64)).toEqual({ _tag: "SchemaMismatch", path: ["params"], message: "Expected Float32Array" })
    })
  })

  describe("VersionMismatch", () => {
    it("another protocol version", () => {
      const bytes = C.frame(C.uint(1), C.record(structure("Heartbeat"), id("Heartbeat")), { protocol: 2 })
      expect(reasonOf(bytes)).toEqual({ _tag: "VersionMismatch", field: "protocol", got: 2, want: 1 })
    })

    it("another structures table", () => {
      const bytes = C.frame(C.uint(1), C.record(structure("Heartbeat"), id("Heartbeat")), { structures: 9 })
      expect(reasonOf(bytes)).toEqual({ _tag: "VersionMismatch", field: "structures", got: 9, want: 8 })
      // Version 3 frames (before the optional loss), 4 (before packed parameters), 5 (before ring
      // addresses), 6 (before changes and packed ring steps) and 7 (before direct-link bytes) are
      // read: their layout is the same.
      for (const structures of [3, 4, 5, 6, 7]) {
        const old = C.frame(C.uint(1), C.record(structure("Heartbeat"), id("Heartbeat")), { structures })
        expect(Codec.decode(old)).toEqual(Result.succeed(Frame.fromRank(1, { _tag: "Heartbeat" })))
      }
    })

    it("a packed vector (tag 64) that is bad, too long, or outside params and ring data", () => {
      const withParams = (params: ReadonlyArray<number>) =>
        C.frame(coordinator, C.record(structure("Update"), id("Update"), C.uint(1), params))
      const good = Packed.pack(new Float32Array([1, 2, 3]), "fp16")
      expect(Codec.decode(withParams(C.tag(Structures.uint8Tag, C.bytes([...good]))), { from: "coordinator" })).toEqual(
        Result.succeed(Frame.fromCoordinator({ _tag: "Update", round: 1, params: new Float32Array([1, 2, 3]) }))
      )
      // One byte short of what its header says: never read past the bytes given.
      expect(reasonOf(withParams(C.tag(Structures.uint8Tag, C.bytes([...good.subarray(0, good.length - 1)]))))).toEqual({
        _tag: "SchemaMismatch",
        path: ["params"],
        message: "a packed vector of 13 bytes, its header implies 14"
      })
      expect(reasonOf(withParams(C.tag(Structures.uint8Tag, C.bytes([9, 0, 0, 0, 0, 0, 0, 0]))))).toMatchObject({
        _tag: "SchemaMismatch",
        path: ["params"]
      })
      expect(reasonOf(withParams(C.tag(Structures.uint8Tag, C.uint(3))))).toMatchObject({ _tag: "SchemaMismatch", path: ["params"] })
      // More values than the run agreed: the field's bound, as for a Float32Array.
      const long = Packed.pack(new Float32Array(100), "int8")
      expect(Codec.decode(withParams(C.tag(Structures.uint8Tag, C.bytes([...long]))), { paramsLengthMax: 99 })).toMatchObject({
        failure: { reason: { _tag: "FieldTooLarge", field: "params" } }
      })
      // Exactly the bound passes in either form.
      for (const compression of ["fp16", "int8"] as const) {
        const full = Packed.pack(new Float32Array(99), compression, 8)
        expect(Result.isSuccess(Codec.decode(withParams(C.tag(Structures.uint8Tag, C.bytes([...full]))), { paramsLengthMax: 99 }))).toBe(
          true
        )
      }
      // A model of 1 to 7 parameters: int8's block scale makes it the larger form.
      for (const length of [1, 2, 7])
        for (const compression of ["fp16", "int8"] as const) {
          const tiny = Packed.pack(new Float32Array(length), compression)
          const decoded = Codec.decode(withParams(C.tag(Structures.uint8Tag, C.bytes([...tiny]))), { paramsLengthMax: length })
          expect(Result.isSuccess(decoded), `${length} ${compression}`).toBe(true)
        }
      const huge = Packed.pack(new Float32Array(1000), "fp16")
      expect(Codec.decode(withParams(C.tag(Structures.uint8Tag, C.bytes([...huge]))), { paramsLengthMax: 10 })).toMatchObject({
        failure: { reason: { _tag: "FieldTooLarge", field: "params" } }
      })
      const ring = C.frame(
        C.uint(7),
        C.record(structure("RingData"), id("RingData"), C.uint(0), C.uint(0), C.uint(0), C.tag(Structures.uint8Tag, C.bytes([...good])))
      )
      // A packed ring step (structures version 7) travels as its bytes: the ring reads them. A
      // Buffer (what a runtime may hand back) is sent as tag 64 too.
      const fromBuffer = Codec.encode(Frame.fromRank(7, { _tag: "RingData", generation: 0, round: 0, step: 0, data: Buffer.from(good) }))
      expect(Array.from(fromBuffer)).toEqual(Array.from(ring))
      expect(Codec.decode(ring)).toEqual(
        Result.succeed(Frame.fromRank(7, { _tag: "RingData", generation: 0, round: 0, step: 0, data: new Uint8Array(good) }))
      )
      const progress = C.frame(
        C.uint(7),
        C.record(structure("Progress"), id("Progress"), C.uint(0), C.uint(0), C.tag(Structures.uint8Tag, C.bytes([...good])))
      )
      expect(reasonOf(progress)).toEqual({
        _tag: "SchemaMismatch",
        path: ["msPerBatch"],
        message: "a packed vector (tag 64) is only allowed in params and data"
      })
    })

    it("an optional loss that is not a finite number of magnitude at most 1e12, or on a message without it", () => {
      const params = C.tag(Structures.float32Tag, C.bytes([0, 0, 0, 0]))
      const withLoss = (loss: ReadonlyArray<number>) =>
        C.frame(
          C.uint(1),
          C.tag(
            0xe000 + Structures.fullStructureOf[id("Params")]!,
            C.array(C.uint(id("Params")), C.uint(0), C.uint(0), C.uint(0), params, loss)
          )
        )
      expect(reasonOf(withLoss(C.f64(Number.NaN)))).toMatchObject({ _tag: "SchemaMismatch", path: ["loss"] })
      expect(reasonOf(withLoss(C.f64(2e12)))).toMatchObject({ _tag: "SchemaMismatch", path: ["loss"] })
      expect(reasonOf(withLoss(C.text("0.5")))).toMatchObject({ _tag: "SchemaMismatch", path: ["loss"] })
      expect(Result.isSuccess(Codec.decode(withLoss(C.f64(-0.5))))).toBe(true)
      // Heartbeat's id under Params' structure with a loss: the message is not sent that way.
      const wrong = C.frame(
        C.uint(1),
        C.tag(
          0xe000 + Structures.fullStructureOf[id("Params")]!,
          C.array(C.uint(id("Heartbeat")), C.uint(0), C.uint(0), C.uint(0), params, C.f64(1))
        )
      )
      expect(reasonOf(wrong)).toEqual({ _tag: "SchemaMismatch", path: ["_tag"], message: "Heartbeat is not sent as structure 20" })
    })

    it("is found first, whatever a later version puts after the versions", () => {
      const future = new Uint8Array([...C.head(4, 6), ...C.uint(3), ...C.uint(1), 0xbf, 0xff, 0x9f])
      expect(reasonOf(future)).toEqual({ _tag: "VersionMismatch", field: "protocol", got: 3, want: 1 })
    })

    it("maps to close code 1008", () => {
      const result = Codec.decode(C.frame(C.uint(1), C.record(structure("Heartbeat"), id("Heartbeat")), { protocol: 2 }))
      expect(Result.isFailure(result) && WireError.closeCode(result.failure)).toBe(1008)
    })
  })

  describe("SchemaMismatch", () => {
    it("a negative rank as sender", () => {
      expect(reasonOf(C.frame(C.nint(-2), C.record(structure("Heartbeat"), id("Heartbeat"))))).toEqual({
        _tag: "SchemaMismatch",
        path: ["from"],
        message: "expected a rank (a non-negative safe integer) or -1 for the coordinator"
      })
    })

    it("a fractional rank as sender", () => {
      expect(reasonOf(C.frame(C.f64(1.5), C.record(structure("Heartbeat"), id("Heartbeat"))))).toEqual({
        _tag: "SchemaMismatch",
        path: ["from"],
        message: "expected a rank (a non-negative safe integer) or -1 for the coordinator"
      })
    })

    it("a negative or fractional rank in a message", () => {
      const negative = C.frame(coordinator, C.record(structure("DeclareDead"), id("DeclareDead"), C.nint(-1)))
      expect(reasonOf(negative)).toEqual({
        _tag: "SchemaMismatch",
        path: ["rank"],
        message: "Expected a value greater than or equal to 0"
      })
      const fractional = C.frame(coordinator, C.record(structure("SetRoles"), id("SetRoles"), C.uint(0), C.f64(1.5), C.uint(2)))
      expect(reasonOf(fractional)).toEqual({ _tag: "SchemaMismatch", path: ["eval"], message: "Expected an integer" })
    })

    it("direct-link bytes that are negative, fractional or past the safe integers, and a RoundDone sent as another's structure", () => {
      const linked = (sent: ReadonlyArray<number>, received: ReadonlyArray<number>) =>
        C.frame(
          C.uint(2),
          C.record(
            Structures.laterStructuresOf[id("RoundDone")]![0]!,
            id("RoundDone"),
            C.uint(0),
            C.uint(1),
            C.uint(0),
            C.uint(8),
            sent,
            received
          )
        )
      expect(Codec.decode(linked(C.uint(4096), C.uint(0)))).toEqual(
        Result.succeed(
          Frame.fromRank(2, {
            _tag: "RoundDone",
            epoch: 0,
            round: 1,
            generation: 0,
            samplesDone: 8,
            linkSentBytes: 4096,
            linkReceivedBytes: 0
          })
        )
      )
      expect(reasonOf(linked(C.nint(-1), C.uint(0)))).toMatchObject({ _tag: "SchemaMismatch", path: ["linkSentBytes"] })
      expect(reasonOf(linked(C.uint(1), C.f64(0.5)))).toEqual({
        _tag: "SchemaMismatch",
        path: ["linkReceivedBytes"],
        message: "Expected an integer"
      })
      expect(reasonOf(linked(C.uint(2 ** 60), C.uint(0)))).toMatchObject({ _tag: "SchemaMismatch", path: ["linkSentBytes"] })
      // Only RoundDone has the group: a Params record in RoundDone's link structure is refused.
      const wrong = C.frame(
        C.uint(2),
        C.record(
          Structures.laterStructuresOf[id("RoundDone")]![0]!,
          id("Progress"),
          C.uint(0),
          C.uint(1),
          C.uint(0),
          C.uint(8),
          C.uint(0),
          C.uint(0)
        )
      )
      expect(reasonOf(wrong)).toMatchObject({ _tag: "SchemaMismatch", path: ["_tag"] })
    })

    it("a NaN offset", () => {
      const bytes = C.frame(coordinator, range("ExtendPartition", C.uint(1), C.f64(Number.NaN), C.uint(3)))
      expect(reasonOf(bytes)).toEqual({ _tag: "SchemaMismatch", path: ["offset"], message: "Expected an integer" })
    })

    it("an offset beyond the safe integers", () => {
      const bytes = C.frame(coordinator, range("AssignChunk", C.uint(1), C.uint(2 ** 60), C.uint(3)))
      expect(reasonOf(bytes)).toEqual({
        _tag: "SchemaMismatch",
        path: ["offset"],
        message: "Expected an integer"
      })
    })

    it("params as a list of numbers", () => {
      const bytes = C.frame(
        C.uint(1),
        C.record(structure("Params"), id("Params"), C.uint(0), C.uint(0), C.uint(0), C.array(C.f64(1), C.f64(2)))
      )
      expect(reasonOf(bytes)).toEqual({ _tag: "SchemaMismatch", path: ["params"], message: "Expected Float32Array" })
    })

    it("params as a typed array whose bytes are not whole floats", () => {
      const bytes = C.frame(
        C.uint(1),
        C.record(structure("Params"), id("Params"), C.uint(0), C.uint(0), C.uint(0), C.tag(85, C.bytes([1, 2, 3])))
      )
      expect(reasonOf(bytes)).toEqual({
        _tag: "SchemaMismatch",
        path: ["params"],
        message: "expected a Float32Array: tag 85 over a byte string of 4-byte floats"
      })
    })

    it("a NaN msPerBatch, an accuracy above 1, an unknown save reason", () => {
      const progress = C.frame(C.uint(1), C.record(structure("Progress"), id("Progress"), C.uint(0), C.uint(0), C.f64(Number.NaN)))
      expect(reasonOf(progress)).toEqual({ _tag: "SchemaMismatch", path: ["msPerBatch"], message: "Expected a finite number" })
      const evalResult = C.frame(C.uint(1), C.record(structure("EvalResult"), id("EvalResult"), C.uint(0), C.f64(1.5), C.f64(0)))
      expect(reasonOf(evalResult)).toEqual({
        _tag: "SchemaMismatch",
        path: ["accuracy"],
        message: "Expected a value between 0 and 1"
      })
      const save = C.frame(coordinator, C.record(structure("ShutdownWithSave"), id("ShutdownWithSave"), C.text("Bored")))
      expect(reasonOf(save)).toEqual({
        _tag: "SchemaMismatch",
        path: ["reason"],
        message: 'Expected "GracefulShutdown" | "FailureLimitReached" | "SingleSurvivor" | "AllRanksLost" | "ReduceStall" | "TrainerFault"'
      })
    })

    it("a FormRing whose peers disagree with ringSize, ringRank or ring order", () => {
      const ring = (ringRank: number, ringSize: number, peers: ReadonlyArray<number>) =>
        reasonOf(
          C.frame(
            coordinator,
            C.record(structure("FormRing"), id("FormRing"), C.uint(1), C.uint(ringRank), C.uint(ringSize), C.array(...peers.map(C.uint)))
          )
        )
      expect(ring(0, 3, [0, 1])).toEqual({ _tag: "SchemaMismatch", path: ["peers"], message: "expected ringSize (3) ranks, got 2" })
      expect(ring(2, 2, [0, 1])).toEqual({
        _tag: "SchemaMismatch",
        path: ["ringRank"],
        message: "expected a ringRank below ringSize (2), got 2"
      })
      expect(ring(0, 3, [0, 4, 4])).toEqual({
        _tag: "SchemaMismatch",
        path: ["peers", 2],
        message: "expected peers in strictly ascending rank order"
      })
    })

    it("a FormRing that names its neighbours (structures version 6): peers empty; a bad address or an overlong secret", () => {
      const full = Structures.fullStructureOf[id("FormRing")]!
      const ring = (peers: ReadonlyArray<number>, address: string, secret: string) =>
        Codec.decode(
          C.frame(
            coordinator,
            C.record(
              full,
              id("FormRing"),
              C.uint(1),
              C.uint(0),
              C.uint(3),
              C.array(...peers.map(C.uint)),
              C.uint(2),
              C.uint(1),
              C.text(address),
              C.text(secret)
            )
          )
        )
      expect(ring([], "ws://10.0.0.1:7300/", "s")).toEqual(
        Result.succeed(
          Frame.fromCoordinator({
            _tag: "FormRing",
            generation: 1,
            ringRank: 0,
            ringSize: 3,
            peers: [],
            prev: 2,
            next: 1,
            nextAddress: "ws://10.0.0.1:7300/",
            ringSecret: "s"
          })
        )
      )
      expect(Result.isSuccess(ring([0, 1, 2], "", ""))).toBe(true)
      expect(
        reasonOf(C.frame(coordinator, C.record(structure("FormRing"), id("FormRing"), C.uint(1), C.uint(0), C.uint(3), C.array())))
      ).toEqual({
        _tag: "SchemaMismatch",
        path: ["peers"],
        message: "expected ringSize (3) ranks, got 0"
      })
      for (const address of ["http://10.0.0.1:7300/", "ws://10.0.0.1:7300/x", "ws:// 1/"])
        expect(Result.isFailure(ring([], address, "s")), address).toBe(true)
      expect(Result.isFailure(ring([], "", "s".repeat(129)))).toBe(true)
    })

    it("a message sent in the wrong direction", () => {
      expect(reasonOf(C.frame(coordinator, C.record(structure("Heartbeat"), id("Heartbeat"))))).toEqual({
        _tag: "SchemaMismatch",
        path: ["_tag"],
        message: "Heartbeat is not sent by the coordinator"
      })
      expect(reasonOf(C.frame(C.uint(4), C.record(structure("Shutdown"), id("Shutdown"))))).toEqual({
        _tag: "SchemaMismatch",
        path: ["_tag"],
        message: "Shutdown is not sent by a rank"
      })
    })

    it("a message id under another message's structure", () => {
      const bytes = C.frame(coordinator, C.record(structure("DeclareDead"), id("Eval"), C.uint(1)))
      expect(reasonOf(bytes)).toEqual({ _tag: "SchemaMismatch", path: ["_tag"], message: "Eval is not sent as structure 13" })
    })

    it("a record with the wrong number of values, a map, a nested array, not a frame at all", () => {
      const short = C.frame(coordinator, C.tag(0xe000 + structure("Eval"), C.array(C.uint(id("Eval")))))
      expect(reasonOf(short)).toEqual({
        _tag: "SchemaMismatch",
        path: ["message"],
        message: "expected structure 12 as an array of 2 values"
      })
      const map = C.frame(coordinator, C.record(structure("Eval"), id("Eval"), [0xa1, ...C.text("a"), ...C.uint(1)]))
      expect(reasonOf(map)).toEqual({
        _tag: "SchemaMismatch",
        path: ["epoch"],
        message: "expected a number, text, boolean, Float32Array or array of numbers, got a map"
      })
      const nested = C.frame(
        coordinator,
        C.record(structure("FormRing"), id("FormRing"), C.uint(1), C.uint(0), C.uint(1), C.array(C.array(C.uint(0))))
      )
      expect(reasonOf(nested)).toEqual({ _tag: "SchemaMismatch", path: ["peers", 0], message: "expected a number" })
      expect(reasonOf(new Uint8Array(C.text("hello")))).toEqual({
        _tag: "SchemaMismatch",
        path: [],
        message: "expected a frame: an array [protocolVersion, structuresVersion, from, message]"
      })
      expect(reasonOf(new Uint8Array([...C.head(4, 3), ...C.uint(1), ...C.uint(3), ...C.uint(0)]))).toEqual({
        _tag: "SchemaMismatch",
        path: [],
        message: "expected a frame of 4 items, got 3"
      })
    })
  })

  describe("MalformedCbor", () => {
    it("indefinite lengths, reserved heads, a stray break, unassigned simple values", () => {
      expect(reasonOf(new Uint8Array([0x9f, 0x01, 0xff]))).toEqual({
        _tag: "MalformedCbor",
        offset: 0,
        detail: "indefinite-length items are not used by this protocol"
      })
      expect(reasonOf(new Uint8Array([0x1c]))).toEqual({ _tag: "MalformedCbor", offset: 0, detail: "reserved additional information 28" })
      expect(reasonOf(new Uint8Array([0xff]))).toEqual({
        _tag: "MalformedCbor",
        offset: 0,
        detail: "break outside an indefinite-length item"
      })
      const simple = C.frame(C.uint(1), C.record(structure("RingReady"), id("RingReady"), [0xf0]))
      expect(reasonOf(simple)).toEqual({ _tag: "MalformedCbor", offset: 9, detail: "unsupported simple value 16" })
    })

    it("invalid UTF-8 in a text field", () => {
      const field = [...C.head(3, 2), 0xc3, 0x28]
      const bytes = C.frame(C.uint(1), C.record(structure("CheckpointResult"), id("CheckpointResult"), C.uint(1), C.bool(false), field))
      expect(reasonOf(bytes)).toEqual({ _tag: "MalformedCbor", offset: 12, detail: "invalid UTF-8 in a text string" })
      const surrogate = [...C.head(3, 3), 0xed, 0xa0, 0x80]
      const bad = C.frame(C.uint(1), C.record(structure("CheckpointResult"), id("CheckpointResult"), C.uint(1), C.bool(false), surrogate))
      expect(reasonOf(bad)._tag).toBe("MalformedCbor")
    })

    it("bytes after the frame given to decode", () => {
      const hello = Codec.encode(Fixtures.frames.Hello)
      const bytes = new Uint8Array(2 * hello.length)
      bytes.set(hello)
      bytes.set(hello, hello.length)
      expect(reasonOf(bytes)).toEqual({ _tag: "MalformedCbor", offset: 14, detail: "bytes after the frame" })
    })
  })

  describe("SenderMismatch", () => {
    it("a frame that names another sender than the connection's", () => {
      const bytes = Codec.encode(Frame.fromRank(3, { _tag: "Heartbeat" }))
      expect(failure(Codec.decode(bytes, { from: 2 }))).toEqual({
        reason: { _tag: "SenderMismatch", got: 3, want: 2 },
        rank: 2
      })
      expect(failure(Codec.decode(bytes, { from: "coordinator" }))).toEqual({
        reason: { _tag: "SenderMismatch", got: 3, want: -1 },
        rank: undefined
      })
    })
  })

  describe("the rank in errors and the close codes", () => {
    it("takes the rank from the connection, else from the header, else none", () => {
      const bytes = Codec.encode(Frame.fromRank(3, { _tag: "Heartbeat" })).subarray(0, 6)
      expect(failure(Codec.decode(bytes, { from: 3 })).rank).toBe(3)
      expect(failure(Codec.decode(bytes)).rank).toBe(3)
      expect(failure(Codec.decode(bytes.subarray(0, 3))).rank).toBe(undefined)
      const down = Codec.encode(Fixtures.frames.Eval).subarray(0, 6)
      expect(failure(Codec.decode(down)).rank).toBe(undefined)
    })

    it("maps every reason to its close code", () => {
      const reasons: ReadonlyArray<readonly [WireError.Reason, WireError.CloseCode]> = [
        [{ _tag: "FrameTooLarge", bytes: 2, bytesMax: 1 }, 1009],
        [{ _tag: "Truncated", bytes: 0, bytesNeeded: 1 }, 1002],
        [{ _tag: "MalformedCbor", offset: 0, detail: "x" }, 1002],
        [{ _tag: "UnknownTag", kind: "cbor", tag: 1 }, 1002],
        [{ _tag: "SchemaMismatch", path: [], message: "x" }, 1002],
        [{ _tag: "VersionMismatch", field: "protocol", got: 2, want: 1 }, 1008],
        [{ _tag: "SenderMismatch", got: 2, want: 1 }, 1008]
      ]
      for (const [reason, code] of reasons) {
        expect(WireError.closeCode(new WireError.WireError({ reason, rank: 1 }))).toBe(code)
      }
    })

    it("prints the reason and the rank in the error message", () => {
      const error = new WireError.WireError({ reason: { _tag: "FrameTooLarge", bytes: 9, bytesMax: 8 }, rank: 4 })
      expect(error.message).toBe('FrameTooLarge {"bytes":9,"bytesMax":8} from rank 4')
      expect(error._tag).toBe("WireError")
    })
  })
})
