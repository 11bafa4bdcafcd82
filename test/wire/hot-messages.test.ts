import { Result, Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as HotMessages from "../../src/wire/internal/hot-messages.ts"
import * as MessageSchema from "../../src/wire/schema.ts"

const seed = 0x407ac
const tags = ["Params", "ChunkDone", "Progress", "Heartbeat"] as const

/** Values near every rule's edges: counts, floats, the loss bound, non-numbers. */
const value = fc.oneof(
  fc.constantFrom(0, -0, 1, -1, 0.5, 2 ** 53 - 1, 2 ** 53, 1e12, -1e12, 1e12 + 1, Number.NaN, Infinity, -Infinity, undefined, null),
  fc.integer({ min: -5, max: 5 }),
  fc.double(),
  fc.string({ maxLength: 2 }),
  fc.constant(new Float32Array(3)),
  fc.constant(new Float64Array(3)),
  fc.constant([1, 2])
)

/** A record as cbor-x gives it: the tag's fields, some missing, some extra, any values. */
const record = fc.record(
  {
    _tag: fc.constantFrom(...tags),
    epoch: value,
    round: value,
    samplesDone: value,
    offset: value,
    size: value,
    msPerBatch: value,
    params: value,
    loss: value,
    extra: value
  },
  { requiredKeys: ["_tag"] }
)

describe("HotMessages: the plain checks agree with the schemas", () => {
  it("they accept exactly what the schema accepts, and give the same decoded message (its fields, in order)", () => {
    let accepted = 0
    fc.assert(
      fc.property(record, (input) => {
        const hot = HotMessages.decode(input)
        const schema = Schema.decodeUnknownResult(MessageSchema.byTag[input._tag])(input)
        if (hot === undefined) {
          if (Result.isSuccess(schema)) throw new Error(`refused what the schema accepts: ${JSON.stringify(Object.keys(input))}`)
          return
        }
        accepted += 1
        if (Result.isFailure(schema)) throw new Error("accepted what the schema refuses")
        expect(Object.keys(hot)).toEqual(Object.keys(schema.success))
        for (const key of Object.keys(hot)) expect(Object.is((hot as never)[key], (schema.success as never)[key])).toBe(true)
      }),
      { seed, numRuns: 20_000 }
    )
    expect(accepted).toBeGreaterThan(100)
  })

  it("a message of another tag goes to the schema", () => {
    expect(HotMessages.decode({ _tag: "Hello", paramsLength: 3 })).toBeUndefined()
  })
})
