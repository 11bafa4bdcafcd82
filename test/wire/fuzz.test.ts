import { Result } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Codec from "../../src/wire/codec.ts"
import * as WireError from "../../src/wire/wire-error.ts"
import * as Arb from "./arbitraries.ts"
import * as Fixtures from "./fixtures.ts"

const seed = 0xc0407
const reasons = new Set(["FrameTooLarge", "Truncated", "MalformedCbor", "UnknownTag", "SchemaMismatch", "VersionMismatch"])

/**
 * Decoding never throws (fast-check reports a throw as a failure), and every failure is a WireError
 * with a known reason and close code. Plain checks, not `expect`, to keep 10,000 runs fast.
 */
const checkFailure = (result: Result.Result<unknown, WireError.WireError>, seen?: Set<string>): void => {
  if (Result.isSuccess(result)) return
  const error = result.failure
  if (!(error instanceof WireError.WireError)) throw new Error(`not a WireError: ${String(error)}`)
  if (!reasons.has(error.reason._tag)) throw new Error(`unexpected reason ${error.reason._tag}`)
  if (![1002, 1008, 1009].includes(WireError.closeCode(error))) throw new Error("unexpected close code")
  seen?.add(error.reason._tag)
}

describe("Codec: arbitrary bytes never throw", () => {
  it("10,000 random byte strings each give a WireError", () => {
    const seen = new Set<string>()
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 96 }), (bytes) => {
        const result = Codec.decode(bytes)
        if (Result.isSuccess(result)) throw new Error("random bytes decoded to a frame")
        checkFailure(result, seen)
      }),
      { seed, numRuns: 10_000 }
    )
    // Pure noise rarely gets past the envelope, so it reaches these reasons; the next test goes deeper.
    expect([...seen].sort()).toEqual(["MalformedCbor", "SchemaMismatch", "Truncated", "VersionMismatch"])
  })

  it("random bytes after a valid frame header reach the record and field checks without throwing", () => {
    const headers = Object.values(Fixtures.frames).map((frame) => Codec.encode(frame).subarray(0, 8))
    const seen = new Set<string>()
    fc.assert(
      fc.property(fc.constantFrom(...headers), fc.uint8Array({ maxLength: 48 }), (header, tail) => {
        const bytes = new Uint8Array(header.length + tail.length)
        bytes.set(header)
        bytes.set(tail, header.length)
        checkFailure(Codec.decode(bytes), seen)
      }),
      { seed, numRuns: 5_000 }
    )
    expect([...seen].sort()).toEqual(["MalformedCbor", "SchemaMismatch", "Truncated", "UnknownTag"])
  })

  it("valid frames with bytes flipped, inserted or cut never throw, and the intact frame still decodes", () => {
    fc.assert(
      fc.property(Arb.frame, fc.nat(), fc.integer({ min: 1, max: 255 }), (frame, at, flip) => {
        const bytes = Codec.encode(frame)
        const mutated = bytes.slice()
        const index = at % mutated.length
        mutated[index] = mutated[index]! ^ flip
        checkFailure(Codec.decode(mutated))
        checkFailure(Codec.decode(bytes.subarray(0, index)))
        expect(Codec.decode(bytes)).toEqual(Result.succeed(frame))
      }),
      { seed, numRuns: 2_000 }
    )
  })

  it("with adoptBytes too: valid frames with a byte flipped, or at any offset of their buffer, decode as without it", () => {
    fc.assert(
      fc.property(Arb.frame, fc.nat(), fc.integer({ min: 1, max: 255 }), fc.nat(7), (frame, at, flip, offset) => {
        const bytes = Codec.encode(frame)
        const mutated = bytes.slice()
        const index = at % mutated.length
        mutated[index] = mutated[index]! ^ flip
        checkFailure(Codec.decode(mutated.slice(), { adoptBytes: true }))
        const placed = new Uint8Array(offset + bytes.length)
        placed.set(bytes, offset)
        expect(Codec.decode(placed.subarray(offset), { adoptBytes: true })).toEqual(Result.succeed(frame))
      }),
      { seed, numRuns: 2_000 }
    )
  })
})
