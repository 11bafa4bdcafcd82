import { Result } from "effect"
import { describe, expect, it } from "vitest"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import * as WireError from "../../src/wire/wire-error.ts"

const reasonOf = (bytes: Uint8Array, options?: Codec.DecodeOptions): WireError.Reason | undefined => {
  const result = Codec.decode(bytes, options)
  return Result.isFailure(result) ? result.failure.reason : undefined
}

const crashing = (stackBytes: number) => Codec.encode(Frame.fromRank(3, { _tag: "Crashing", error: "x", stack: "y".repeat(stackBytes) }))

describe("field limits: a field longer than its bound is refused from its declared length (docs/security.md)", () => {
  it("a text field of textBytesMax bytes passes; one byte more is FieldTooLarge, close code 1009", () => {
    expect(reasonOf(crashing(65_536))).toBeUndefined()
    const reason = reasonOf(crashing(65_537))
    expect(reason).toEqual({ _tag: "FieldTooLarge", field: "stack", bytes: 65_537, bytesMax: 65_536 })
    expect(WireError.closeCodeOf(reason!)).toBe(1009)
    expect(reasonOf(crashing(100), { textBytesMax: 99 })).toEqual({ _tag: "FieldTooLarge", field: "stack", bytes: 100, bytesMax: 99 })
  })

  it("a 15 MiB stack under the 16 MiB message bound is refused without being read", () => {
    expect(reasonOf(crashing(15 * 1024 * 1024))).toEqual({
      _tag: "FieldTooLarge",
      field: "stack",
      bytes: 15 * 1024 * 1024,
      bytesMax: 65_536
    })
  })

  it("params over paramsLengthMax values are FieldTooLarge; at the bound they decode", () => {
    const params = (n: number) =>
      Codec.encode(Frame.fromRank(1, { _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params: new Float32Array(n) }))
    expect(reasonOf(params(4), { paramsLengthMax: 4 })).toBeUndefined()
    expect(reasonOf(params(5), { paramsLengthMax: 4 })).toEqual({ _tag: "FieldTooLarge", field: "params", bytes: 5, bytesMax: 4 })
    expect(reasonOf(params(3_900_000))).toBeUndefined()
  })

  it("ring data over paramsLengthMax values is FieldTooLarge in both widths (float64 sums one value more: their count; float32 segments); a tag 86 byte string not a multiple of 8 is refused", () => {
    const ring = (data: Float64Array | Float32Array) =>
      Codec.encode(Frame.fromRank(1, { _tag: "RingData", generation: 0, round: 0, step: 0, data }))
    expect(reasonOf(ring(new Float64Array(5)), { paramsLengthMax: 4 })).toBeUndefined()
    expect(reasonOf(ring(new Float64Array(6)), { paramsLengthMax: 4 })).toEqual({
      _tag: "FieldTooLarge",
      field: "data",
      bytes: 6,
      bytesMax: 5
    })
    // A 1-parameter model: a ring of 2 sends its one-value segment and the count.
    expect(reasonOf(ring(new Float64Array(2)), { paramsLengthMax: 1 })).toBeUndefined()
    expect(reasonOf(ring(new Float32Array(4)), { paramsLengthMax: 4 })).toBeUndefined()
    expect(reasonOf(ring(new Float32Array(5)), { paramsLengthMax: 4 })).toEqual({
      _tag: "FieldTooLarge",
      field: "data",
      bytes: 5,
      bytesMax: 4
    })
    const decoded = Codec.decode(ring(new Float64Array([0.1, -2])))
    expect(
      Result.isSuccess(decoded) && decoded.success.message._tag === "RingData" ? Array.from(decoded.success.message.data) : undefined
    ).toEqual([0.1, -2])
    expect(
      Result.isSuccess(decoded) && decoded.success.message._tag === "RingData" && decoded.success.message.data instanceof Float64Array
    ).toBe(true)
    // Tag 86 over 12 bytes: patch a float64 frame's byte-string length (0x48 = 8 bytes) to 12 bytes.
    const bytes = ring(new Float64Array(1))
    const at = bytes.findIndex((b, i) => b === 0xd8 && bytes[i + 1] === 0x56)
    const bad = new Uint8Array([...bytes.subarray(0, at + 2), 0x4c, ...new Uint8Array(12)])
    expect(reasonOf(bad)).toEqual({
      _tag: "SchemaMismatch",
      path: ["data"],
      message: "expected a Float64Array: tag 86 over a byte string of 8-byte floats"
    })
  })

  it("RingData travels both ways: from a rank and from the coordinator", () => {
    const data = new Float32Array([1.5])
    const up = Codec.decode(Codec.encode(Frame.fromRank(2, { _tag: "RingData", generation: 1, round: 2, step: 3, data })), { from: 2 })
    const down = Codec.decode(Codec.encode(Frame.fromCoordinator({ _tag: "RingData", generation: 1, round: 2, step: 3, data })), {
      from: "coordinator"
    })
    expect([Result.isSuccess(up), Result.isSuccess(down)]).toEqual([true, true])
  })
})
