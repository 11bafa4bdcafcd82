import { Decoder, Encoder } from "cbor-x"
import { Effect, Exit, Result } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import * as Packed from "../../src/wire/packed.ts"
import * as Arb from "./arbitraries.ts"

const seed = 0x5eed4

const roundTrip = (frame: Frame.Frame): void => {
  const bytes = Codec.encode(frame)
  expect(Codec.decode(bytes)).toEqual(Result.succeed(frame))
}

describe("Codec: decode(encode(frame)) equals the frame", () => {
  for (const [tag, message] of Object.entries(Arb.toCoordinator)) {
    it(`round trips ${tag} from any rank`, () => {
      fc.assert(fc.property(Arb.rankFrame(message), roundTrip), { seed, numRuns: 60 })
    })
  }
  for (const [tag, message] of Object.entries(Arb.toRank)) {
    it(`round trips ${tag} from the coordinator`, () => {
      fc.assert(fc.property(Arb.coordinatorFrame(message), roundTrip), { seed, numRuns: 60 })
    })
  }

  it("carries params as a Float32Array with every bit pattern intact, in its own buffer", () => {
    const bits = new Uint32Array([0x7fc00001, 0xffffffff, 0x80000000, 0x00000001, 0x3f800000])
    const frame = Frame.fromRank(2, { _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params: new Float32Array(bits.buffer) })
    const bytes = Codec.encode(frame)
    const decoded = Result.getOrThrow(Codec.decode(bytes))
    expect(decoded.message._tag).toBe("Params")
    const params = decoded.message._tag === "Params" ? decoded.message.params : new Float32Array(0)
    expect(params).toBeInstanceOf(Float32Array)
    expect([...new Uint32Array(params.buffer, params.byteOffset, params.length)]).toEqual([...bits])
    expect(params.buffer).not.toBe(bytes.buffer)
    expect(params.byteLength).toBe(params.buffer.byteLength)
  })

  it("leaves another cbor-x decoder's typed arrays copies of their own (its bytes are its caller's)", () => {
    const values = Float32Array.from({ length: 64 }, (_, i) => i + 0.5)
    // Strings of 0 to 3 characters before it: the vector lands at every alignment of the bytes.
    for (const pad of ["", "a", "ab", "abc"]) {
      const bytes = new Encoder().encode([pad, values])
      const decoded = (new Decoder().decode(bytes) as [string, Float32Array])[1]
      expect(decoded).toBeInstanceOf(Float32Array)
      expect(decoded.buffer).not.toBe(bytes.buffer)
      bytes.fill(0)
      expect([...decoded]).toEqual([...values])
    }
  })

  it("decodes float vectors at any offset of the bytes into memory of their own, which a later change of the bytes leaves alone", () => {
    const params = Float32Array.from({ length: 1001 }, (_, i) => i * 0.5 - 7)
    const data = Float64Array.from({ length: 33 }, (_, i) => i / 3)
    const frames = [
      Frame.fromRank(2, { _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params }),
      Frame.fromRank(2, { _tag: "RingData", generation: 1, round: 0, step: 3, data })
    ]
    for (const frame of frames) {
      const encoded = Codec.encode(frame)
      for (let offset = 0; offset < 8; offset++) {
        const backing = new Uint8Array(offset + encoded.length + 3)
        backing.set(encoded, offset)
        const bytes = backing.subarray(offset, offset + encoded.length)
        const decoded = Result.getOrThrow(Codec.decode(bytes))
        backing.fill(0xff)
        expect(decoded).toEqual(frame)
        const values = decoded.message._tag === "Params" ? decoded.message.params : (decoded.message as { data: Float64Array }).data
        expect(values.buffer).not.toBe(backing.buffer)
      }
    }
  })

  it("with adoptBytes, gives a Params' values as a view on the given bytes at every offset, equal to a copying decode", () => {
    const params = Float32Array.from({ length: 1001 }, (_, i) => i * 0.5 - 7)
    for (const loss of [undefined, 0.25]) {
      const frame = Frame.fromRank(300, {
        _tag: "Params",
        epoch: 2,
        round: 70_000,
        samplesDone: 123_456,
        params,
        ...(loss === undefined ? {} : { loss })
      })
      const encoded = Codec.encode(frame)
      for (let offset = 0; offset < 8; offset++) {
        const backing = new Uint8Array(offset + encoded.length + 3).fill(0xee)
        backing.set(encoded, offset)
        const bytes = backing.subarray(offset, offset + encoded.length)
        const decoded = Result.getOrThrow(Codec.decode(bytes, { adoptBytes: true }))
        expect(decoded).toEqual(frame)
        const values = decoded.message._tag === "Params" ? decoded.message.params : new Float32Array(0)
        expect(values.buffer).toBe(backing.buffer)
        expect(values.byteOffset % 4).toBe(0)
        expect(new Uint8Array(values.buffer, values.byteOffset, values.byteLength)).toEqual(new Uint8Array(params.buffer))
        // Only the frame's own bytes moved: the memory around it is as it was.
        expect([...backing.subarray(0, offset)].every((b) => b === 0xee)).toBe(true)
        expect([...backing.subarray(offset + encoded.length)]).toEqual([0xee, 0xee, 0xee])
      }
    }
  })

  it("with adoptBytes, unpacks a packed Params (int8, fp16) into values of its own, as without it", () => {
    const params = Float32Array.from({ length: 1001 }, (_, i) => Math.sin(i))
    const frame = Frame.fromRank(5, { _tag: "Params", epoch: 0, round: 3, samplesDone: 64, params })
    for (const compression of ["int8", "fp16"] as const) {
      const encoded = Codec.encodePacked(frame, Packed.pack(params, compression))
      const copied = Result.getOrThrow(Codec.decode(encoded.slice()))
      for (let offset = 0; offset < 4; offset++) {
        const backing = new Uint8Array(offset + encoded.length)
        backing.set(encoded, offset)
        const adopted = Result.getOrThrow(Codec.decode(backing.subarray(offset), { adoptBytes: true }))
        expect(adopted).toEqual(copied)
        const values = adopted.message._tag === "Params" ? adopted.message.params : new Float32Array(0)
        expect(values.buffer).not.toBe(backing.buffer)
      }
    }
  })

  it("with adoptBytes, decodes messages other than Params as without it, leaving their bytes unchanged", () => {
    const data = Float64Array.from({ length: 33 }, (_, i) => i / 3)
    const frame = Frame.fromRank(2, { _tag: "RingData", generation: 1, round: 0, step: 3, data })
    const encoded = Codec.encode(frame)
    for (let offset = 0; offset < 8; offset++) {
      const backing = new Uint8Array(offset + encoded.length)
      backing.set(encoded, offset)
      const bytes = backing.subarray(offset)
      const decoded = Result.getOrThrow(Codec.decode(bytes, { adoptBytes: true }))
      expect(bytes).toEqual(encoded)
      expect((decoded.message as { data: Float64Array }).data.buffer).not.toBe(backing.buffer)
      expect(decoded).toEqual(frame)
    }
  })

  it("gives -0 back as 0 (cbor-x writes integral numbers as integers)", () => {
    const frame = Frame.fromRank(0, { _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: -0 })
    const decoded = Result.getOrThrow(Codec.decode(Codec.encode(frame)))
    expect(decoded.message).toEqual({ _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: 0 })
  })

  it("encodes fields in table order whatever order the caller built them in", () => {
    const ordered = Frame.fromCoordinator({ _tag: "ExtendPartition", epoch: 1, offset: 2, size: 3 })
    const shuffled = Frame.fromCoordinator({ size: 3, offset: 2, _tag: "ExtendPartition", epoch: 1 })
    expect(Codec.encode(shuffled)).toEqual(Codec.encode(ordered))
  })

  it("drops fields that are not part of the message", () => {
    const message = { _tag: "Eval", epoch: 4, secret: "not sent" } as const
    const bytes = Codec.encode(Frame.fromCoordinator(message))
    expect(Codec.decode(bytes)).toEqual(Result.succeed(Frame.fromCoordinator({ _tag: "Eval", epoch: 4 })))
  })

  it("returns a fresh, exactly sized buffer for every encode", () => {
    const a = Codec.encode(Frame.fromRank(1, { _tag: "Heartbeat" }))
    const b = Codec.encode(Frame.fromRank(1, { _tag: "Heartbeat" }))
    expect(a.buffer).not.toBe(b.buffer)
    expect(a.buffer.byteLength).toBe(9)
    expect(Object.getPrototypeOf(a)).toBe(Uint8Array.prototype)
  })

  it("accepts a frame from the sender the connection is bound to", () => {
    const bytes = Codec.encode(Frame.fromRank(6, { _tag: "Hello", paramsLength: 2 }))
    expect(Codec.decode(bytes, { from: 6 })).toEqual(Result.succeed(Frame.fromRank(6, { _tag: "Hello", paramsLength: 2 })))
    const down = Codec.encode(Frame.fromCoordinator({ _tag: "Shutdown" }))
    expect(Codec.decode(down, { from: "coordinator" })).toEqual(Result.succeed(Frame.fromCoordinator({ _tag: "Shutdown" })))
  })

  it("decodeEffect succeeds with the frame and fails with the WireError", () => {
    const good = Codec.encode(Frame.fromRank(3, { _tag: "Exiting" }))
    expect(Effect.runSync(Codec.decodeEffect(good))).toEqual(Frame.fromRank(3, { _tag: "Exiting" }))
    const exit = Effect.runSyncExit(
      Codec.decodeEffect(good.subarray(0, 4)).pipe(Effect.catchTag("WireError", (error) => Effect.succeed(error.reason)))
    )
    expect(exit).toEqual(Exit.succeed({ _tag: "Truncated", bytes: 4, bytesNeeded: 5 }))
  })
})

describe("Codec.reframeFromCoordinator: the relay forwards a rank's ring step without encoding it again", () => {
  it("gives exactly the bytes encode writes for the same RingData from the coordinator, for small and large rank indices and both data kinds", () => {
    for (const rank of [0, 1, 23, 24, 255, 256, 70_000]) {
      for (const data of [Float64Array.from([1.5, -2, 3, 2]), Float32Array.from([0.25, 7, -1e-3])]) {
        const message = { _tag: "RingData", generation: 2, round: 31, step: 1, data } as const
        const reframed = Codec.reframeFromCoordinator(Codec.encode(Frame.fromRank(rank, message)), rank)
        expect(reframed).toEqual(Codec.encode(Frame.fromCoordinator(message)))
        const decoded = Codec.decode(reframed!, { from: "coordinator" })
        expect(Result.isSuccess(decoded) && decoded.success.message).toEqual(message)
      }
    }
  })

  it("gives undefined for bytes whose header is not the one encode writes for that rank", () => {
    const message = { _tag: "RingData", generation: 0, round: 0, step: 0, data: Float64Array.from([1, 1]) } as const
    const bytes = Codec.encode(Frame.fromRank(3, message))
    expect(Codec.reframeFromCoordinator(bytes, 4)).toBeUndefined()
    expect(Codec.reframeFromCoordinator(bytes.subarray(0, 3), 3)).toBeUndefined()
    expect(Codec.reframeFromCoordinator(new Uint8Array([0x83, 1, 3, 3, 0]), 3)).toBeUndefined()
  })
})
