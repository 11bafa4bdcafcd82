/**
 * The ring all-reduce with packed steps over an in-memory ring: every member ends with the same
 * float32 values, within a quantizer step of the float mean; error feedback makes the sum of
 * rounds' means track the sum of the true means; a step made against another base fails the
 * collective; the relay's check reads packed steps.
 */
import fc from "fast-check"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import { describe, expect, it } from "vitest"
import * as Ring from "../../src/averaging/ring.ts"
import * as RingCompressed from "../../src/averaging/ring-compressed.ts"
import * as RingPacked from "../../src/averaging/ring-packed.ts"

const SEED = 20261204

/** `n` links in a ring, delivered in order at once; `sent` collects every step's data. */
const ringOf = (n: number, sent: Array<Ring.RingMessage>) =>
  Effect.gen(function* () {
    const wires = yield* Effect.forEach(Array.from({ length: n }), () => Queue.unbounded<Ring.RingMessage>())
    return wires.map(
      (_, r): Ring.PeerLink => ({
        send: (message) =>
          Effect.sync(() => {
            sent.push(message)
            Queue.offerUnsafe(wires[(r + 1) % n]!, message)
          }),
        receive: Queue.take(wires[r]!)
      })
    )
  })

const run = (
  vectors: ReadonlyArray<Float32Array>,
  codecs: ReadonlyArray<RingCompressed.Codec>,
  contributes: ReadonlyArray<boolean> = vectors.map(() => true),
  sent: Array<Ring.RingMessage> = []
) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const n = vectors.length
      const links = yield* ringOf(n, sent)
      return yield* Effect.all(
        links.map((link, r) =>
          RingCompressed.allReduce(
            new Ring.RingInbox(link),
            { ringRank: r, ringSize: n, generation: 1, round: 5 },
            vectors[r]!,
            contributes[r]!,
            codecs[r]!
          )
        ),
        { concurrency: "unbounded" }
      )
    })
  )

const meanOf = (vectors: ReadonlyArray<Float32Array>, contributes: ReadonlyArray<boolean>): Float64Array => {
  const out = new Float64Array(vectors[0]!.length)
  const count = contributes.filter(Boolean).length
  vectors.forEach((v, r) => {
    if (contributes[r]) for (let i = 0; i < v.length; i++) out[i]! += v[i]! / count
  })
  return out
}

describe("RingCompressed.allReduce", () => {
  it("every member ends with the same float32 values, within a quantizer step of the mean (fp16 and int8, whole values and changes)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 5 }),
        fc.integer({ min: 1, max: 300 }),
        fc.constantFrom("fp16" as const, "int8" as const),
        fc.boolean(),
        fc.integer(),
        async (n, length, compression, withBase, seed) => {
          let x = seed | 1
          const random = () => ((x = (Math.imul(x, 1103515245) + 12345) | 0) >>> 0) / 2 ** 32 - 0.5
          const base = Float32Array.from({ length }, () => random())
          const vectors = Array.from({ length: n }, () => Float32Array.from(base, (b) => b + 0.01 * random()))
          const contributes = vectors.map((_, r) => r !== 1 || n === 2)
          const codec = { compression, block: 8, base: withBase ? { round: 4, values: base } : undefined, residual: undefined }
          const results = await run(
            vectors,
            vectors.map(() => codec),
            contributes
          )
          for (const { mean } of results) expect(Array.from(mean)).toEqual(Array.from(results[0]!.mean))
          const want = meanOf(vectors, contributes)
          // int8 blocks of 8: half a step of max |v| / 127 per packing, up to n packings of a sum.
          const scale = withBase ? 0.01 : 0.5
          const bound = compression === "int8" ? ((n + 1) * (scale * n)) / 127 : (n + 1) * scale * n * 2 ** -10
          for (let i = 0; i < length; i++) expect(Math.abs(results[0]!.mean[i]! - want[i]!)).toBeLessThanOrEqual(bound)
        }
      ),
      { seed: SEED, numRuns: 60 }
    )
  })

  it("error feedback: over rounds, the sum of the means tracks the sum of the true means (what one round drops, the next adds back)", async () => {
    const n = 3
    const length = 64
    let residuals: Array<Float32Array | undefined> = [undefined, undefined, undefined]
    const sumTrue = new Float64Array(length)
    const sumGot = new Float64Array(length)
    let x = 7
    const random = () => ((x = (Math.imul(x, 1103515245) + 12345) | 0) >>> 0) / 2 ** 32 - 0.5
    let worstOneRound = 0
    for (let round = 0; round < 40; round++) {
      const vectors = Array.from({ length: n }, () => Float32Array.from({ length }, () => random()))
      const results = await run(
        vectors,
        residuals.map((residual) => ({ compression: "int8" as const, block: 64, base: undefined, residual }))
      )
      residuals = results.map((r) => r.residual)
      const want = meanOf(vectors, [true, true, true])
      for (let i = 0; i < length; i++) {
        sumTrue[i]! += want[i]!
        sumGot[i]! += results[0]!.mean[i]!
        worstOneRound = Math.max(worstOneRound, Math.abs(results[0]!.mean[i]! - want[i]!))
      }
    }
    // The drift of the sums stays at about one round's error, never growing with the rounds.
    let drift = 0
    for (let i = 0; i < length; i++) drift = Math.max(drift, Math.abs(sumTrue[i]! - sumGot[i]!))
    expect(worstOneRound).toBeGreaterThan(0)
    expect(drift).toBeLessThan(3 * worstOneRound)
  })

  it("packs every step (reduce-scatter and all-gather), at about a quarter of float32's bytes with int8", async () => {
    const sent: Array<Ring.RingMessage> = []
    const length = 4096
    const vectors = Array.from({ length: 4 }, (_, r) => Float32Array.from({ length }, (_, i) => Math.sin(i + r)))
    const codec = { compression: "int8" as const, base: undefined, residual: undefined }
    await run(
      vectors,
      vectors.map(() => codec),
      undefined,
      sent
    )
    expect(sent.length).toBe(4 * 2 * 3)
    expect(sent.every((m) => m.data instanceof Uint8Array)).toBe(true)
    const bytes = sent.reduce((sum, m) => sum + m.data.byteLength, 0)
    expect(bytes).toBeLessThan((4 * 2 * 3 * (length / 4) * 4) / 3.5)
    for (const m of sent) expect(Ring.checkStep(m, { ringRank: sent.indexOf(m) % 4, ringSize: 4, length })).toBe(undefined)
  })

  it("a member holding another base fails the collective instead of averaging what does not add up", async () => {
    const base = new Float32Array(16)
    const vectors = [new Float32Array(16).fill(1), new Float32Array(16).fill(2)]
    const outcome = run(vectors, [
      { compression: "fp16", base: { round: 4, values: base }, residual: undefined },
      { compression: "fp16", base: undefined, residual: undefined }
    ])
    await expect(outcome).rejects.toThrow(/made against the model of round/)
  })

  it("the relay's check refuses a packed step of the wrong length, count or a value that is not finite", () => {
    const shape = { ringRank: 0, ringSize: 2, length: 10 }
    const good = RingPacked.pack(1, RingPacked.baseNone, new Float32Array(5).fill(1), "int8", 8).bytes
    expect(Ring.checkStep({ generation: 1, round: 1, step: 0, data: good }, shape)).toBe(undefined)
    const short = RingPacked.pack(1, RingPacked.baseNone, new Float32Array(4), "int8", 8).bytes
    expect(Ring.checkStep({ generation: 1, round: 1, step: 0, data: short }, shape)).toMatch(/expected 5|implies|values/)
    const counted = RingPacked.pack(3, RingPacked.baseNone, new Float32Array(5), "int8", 8).bytes
    expect(Ring.checkStep({ generation: 1, round: 1, step: 0, data: counted }, shape)).toMatch(/contribution count of 3/)
    const infinite = RingPacked.pack(1, RingPacked.baseNone, new Float32Array(5).fill(1e6), "fp16").bytes
    expect(Ring.checkStep({ generation: 1, round: 1, step: 0, data: infinite }, shape)).toMatch(/not finite/)
    expect(Ring.checkStep({ generation: 1, round: 1, step: 0, data: new Uint8Array(3) }, shape)).toMatch(/shorter than its 8-byte head/)
  })
})
