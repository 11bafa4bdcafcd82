/**
 * The ring collective's WebAssembly SIMD loops (`RingSimd`) against the JavaScript ones: the same
 * sums bit for bit, the same stored values, the same finite verdicts, on random vectors with NaN,
 * infinities and -0, at odd lengths and across the scratch memory's chunks; and `Ring.allReduce`
 * gives the same means and the same errors with SIMD on and off.
 */
import fc from "fast-check"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { afterEach, describe, expect, it } from "vitest"
import * as Ring from "../../src/averaging/ring.ts"
import * as RingSimd from "../../src/averaging/ring-simd.ts"

const SEED = 20261204

afterEach(() => {
  RingSimd.setEnabled(true)
})

/** Values that are mostly ordinary, sometimes -0, NaN, an infinity or the largest float32. */
const valueOf = (random: () => number, oddsOfBad: number): number => {
  const pick = random()
  if (pick < oddsOfBad / 4) return Number.NaN
  if (pick < oddsOfBad / 2) return random() < 0.5 ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY
  if (pick < oddsOfBad) return random() < 0.5 ? -0 : 3.4028234663852886e38
  return (random() - 0.5) * 10 ** Math.floor(random() * 12 - 6)
}

const randomOf = (seed: number) => {
  let state = seed
  return () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32
}

/** How many values of `a` and `b` differ (`Object.is`: -0 is not 0, every NaN is NaN); one count, not an assertion a value. */
const differing = (a: Float64Array, b: Float64Array): number => {
  let count = a.length === b.length ? 0 : 1
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (!Object.is(a[i], b[i])) count += 1
  return count
}

const lengths = fc.oneof(fc.integer({ min: 0, max: 70 }), fc.integer({ min: RingSimd.chunkValues - 3, max: 2 * RingSimd.chunkValues + 5 }))

describe("RingSimd", () => {
  it("runs here (Node, Bun and Deno all have WebAssembly SIMD)", () => {
    expect(RingSimd.available).toBe(true)
    expect(RingSimd.isEnabled()).toBe(true)
  })

  it("addOwnFinite: each sum is the float64 sum of the widened float32 value, bit for bit, and false exactly when one is not finite", () => {
    fc.assert(
      fc.property(
        lengths,
        fc.integer({ min: 0, max: 7 }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.boolean(),
        (count, start, seed, bad) => {
          const random = randomOf(seed)
          const odds = bad ? 0.3 / Math.max(1, count) : 0
          const params = Float32Array.from({ length: start + count + 3 }, () => Math.fround(valueOf(random, odds)))
          const data = Float64Array.from({ length: count + 1 }, () => valueOf(random, odds))
          const expected = Float64Array.from(data)
          for (let i = 0; i < count; i++) expected[i] = data[i]! + params[start + i]!
          const finite = expected.subarray(0, count).every((v) => Number.isFinite(v))
          const got = Float64Array.from(data)
          expect(RingSimd.addOwnFinite(got, params, start, start + count)).toBe(finite)
          for (let i = 0; i <= count; i++) expect(Object.is(got[i], expected[i])).toBe(true)
        }
      ),
      { seed: SEED, numRuns: 300 }
    )
  })

  it("storeFinite: stores the bytes as they came, leaves the rest of out alone, and is false exactly when one value is not finite", () => {
    fc.assert(
      fc.property(
        lengths,
        fc.integer({ min: 0, max: 7 }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.boolean(),
        (count, start, seed, bad) => {
          const random = randomOf(seed)
          const odds = bad ? 0.3 / Math.max(1, count) : 0
          const data = Float32Array.from({ length: count }, () => valueOf(random, odds))
          const out = Float32Array.from({ length: start + count + 5 }, () => valueOf(random, 0.5))
          const expected = Uint32Array.from(new Uint32Array(out.buffer))
          expected.set(new Uint32Array(data.buffer), start)
          const finite = Array.from(data).every((v) => Number.isFinite(v))
          expect(RingSimd.storeFinite(out, start, data)).toBe(finite)
          expect(Array.from(new Uint32Array(out.buffer))).toEqual(Array.from(expected))
        }
      ),
      { seed: SEED, numRuns: 300 }
    )
  })

  it("divideInto: each mean is the float64 quotient rounded once to float32, bit for bit; widen is exact; both leave the rest alone", () => {
    fc.assert(
      fc.property(
        lengths,
        fc.integer({ min: 0, max: 7 }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.integer({ min: 1, max: 9 }),
        (count, start, seed, n) => {
          const random = randomOf(seed)
          const sums = Float64Array.from({ length: count + 1 }, () => (random() - 0.5) * 10 ** Math.floor(random() * 80 - 40))
          const out = Float32Array.from({ length: start + count + 3 }, () => valueOf(random, 0.5))
          const expected = Float32Array.from(out)
          for (let i = 0; i < count; i++) expected[start + i] = sums[i]! / n
          RingSimd.divideInto(out, sums, start, start + count, n)
          expect(Array.from(new Uint32Array(out.buffer))).toEqual(Array.from(new Uint32Array(expected.buffer)))
          const params = Float32Array.from({ length: start + count + 2 }, () => valueOf(random, 0.2))
          const into = Float64Array.from({ length: count + 1 }, () => random())
          const widened = Float64Array.from(into)
          for (let i = 0; i < count; i++) widened[i] = params[start + i]!
          RingSimd.widen(into, params, start, start + count)
          for (let i = 0; i <= count; i++) expect(Object.is(into[i], widened[i])).toBe(true)
        }
      ),
      { seed: SEED, numRuns: 300 }
    )
  })

  it("the InPlace calls on a step in a stepBuffer give the copying calls' bits and verdicts; elsewhere they do nothing", () => {
    const capacityBytes = 8 * (2 * RingSimd.chunkValues + 6)
    const step = RingSimd.stepBuffer(capacityBytes)
    fc.assert(
      fc.property(
        lengths,
        fc.integer({ min: 0, max: 7 }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.boolean(),
        fc.integer({ min: 1, max: 9 }),
        (count, start, seed, bad, n) => {
          const random = randomOf(seed)
          const odds = bad ? 0.3 / Math.max(1, count) : 0
          const params = Float32Array.from({ length: start + count + 3 }, () => Math.fround(valueOf(random, odds)))
          const values = Float64Array.from({ length: count + 1 }, () => valueOf(random, odds))
          // Stale bytes past the step, as a reused buffer holds: the calls must not read them.
          new Float64Array(step, 0, capacityBytes / 8).fill(Number.NaN)
          const inStep = new Float64Array(step, 0, count + 1)
          inStep.set(values)
          const copied = Float64Array.from(values)
          expect(RingSimd.addOwnInPlace(inStep, params, start, start + count)).toBe(
            RingSimd.addOwnFinite(copied, params, start, start + count)
          )
          expect(differing(inStep, copied)).toBe(0)

          const segment = new Float32Array(step, 0, count)
          segment.set(params.subarray(start, start + count))
          const out = Float32Array.from({ length: start + count + 5 }, () => valueOf(random, 0.5))
          const outCopied = Float32Array.from(out)
          expect(RingSimd.storeInPlace(out, start, segment)).toBe(RingSimd.storeFinite(outCopied, start, segment.slice()))
          expect(Array.from(new Uint32Array(out.buffer))).toEqual(Array.from(new Uint32Array(outCopied.buffer)))

          const sums = Float64Array.from({ length: count + 1 }, () => (random() - 0.5) * 10 ** Math.floor(random() * 80 - 40))
          new Float64Array(step, 0, count + 1).set(sums)
          const means = Float32Array.from(out)
          RingSimd.divideInPlace(means, new Float64Array(step, 0, count + 1), start, start + count, n)
          RingSimd.divideInto(out, sums, start, start + count, n)
          expect(Array.from(new Uint32Array(means.buffer))).toEqual(Array.from(new Uint32Array(out.buffer)))

          const into = new Float64Array(step, 0, count + 1)
          const intoCopied = Float64Array.from(into)
          RingSimd.widenInPlace(into, params, start, start + count)
          RingSimd.widen(intoCopied, params, start, start + count)
          expect(differing(into, intoCopied)).toBe(0)
        }
      ),
      { seed: SEED, numRuns: 300 }
    )
    // Not in a step buffer, or reaching past its capacity into its scratch: nothing done.
    const plain = new Float64Array(4)
    expect(RingSimd.addOwnInPlace(plain, new Float32Array(4), 0, 3)).toBeUndefined()
    const whole = new Float64Array(step)
    whole.fill(1)
    expect(RingSimd.addOwnInPlace(whole, new Float32Array(whole.length), 0, whole.length - 1)).toBeUndefined()
    expect(RingSimd.storeInPlace(new Float32Array(8), 0, new Float32Array(step, step.byteLength - 16, 4))).toBeUndefined()
    expect(whole.every((v) => v === 1)).toBe(true)
  })

  it("setEnabled(false) turns the SIMD loops off until turned on again", () => {
    expect(RingSimd.setEnabled(false)).toBe(false)
    expect(RingSimd.isEnabled()).toBe(false)
    expect(RingSimd.setEnabled(true)).toBe(RingSimd.available)
  })
})

/**
 * Every rank's `allReduce` of `vectors` over in-memory links delivered in order at once; with
 * `inSteps`, each step arrives in a `RingSimd.stepBuffer`, as direct links deliver it.
 */
const reduceAll = (vectors: ReadonlyArray<Float32Array>, contributes: ReadonlyArray<boolean>, inSteps = false) => {
  const n = vectors.length
  const inboxes: Array<Ring.BufferedLink> = []
  const deliver = inSteps ? copyIntoStep : copyOf
  for (let r = 0; r < n; r++)
    inboxes.push(new Ring.BufferedLink((message) => Effect.sync(() => inboxes[(r + 1) % n]!.push(deliver(message)))))
  return Effect.runPromise(
    Effect.forEach(
      inboxes,
      (link, r) =>
        Ring.allReduce(new Ring.RingInbox(link), { ringRank: r, ringSize: n, generation: 0, round: 0 }, vectors[r]!, contributes[r]),
      { concurrency: "unbounded" }
    )
  )
}

const copyOf = (message: Ring.RingMessage): Ring.RingMessage => ({ ...message, data: message.data.slice() })

const copyIntoStep = (message: Ring.RingMessage): Ring.RingMessage => {
  const { data } = message
  const bytes = new Uint8Array(RingSimd.stepBuffer(data.byteLength), 0, data.byteLength)
  bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength))
  const copy =
    data instanceof Float64Array ? new Float64Array(bytes.buffer, 0, data.length) : new Float32Array(bytes.buffer, 0, data.length)
  return { ...message, data: copy }
}

describe("Ring.allReduce with SIMD on and off", () => {
  it("gives every rank the same mean, bit for bit, either way and with steps in step buffers (odd lengths, -0, idle ranks)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 5 }),
        fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 2 * RingSimd.chunkValues, max: 3 * RingSimd.chunkValues + 7 })),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
        async (n, length, seed, idle) => {
          const random = randomOf(seed)
          const vectors = Array.from({ length: n }, () => Float32Array.from({ length }, () => valueOf(random, 0.05) || -0))
          for (const v of vectors) for (let i = 0; i < length; i++) if (!Number.isFinite(v[i]!)) v[i] = -0
          const contributes = Array.from({ length: n }, (_, r) => !idle[r])
          RingSimd.setEnabled(true)
          const simd = await reduceAll(vectors, contributes)
          const inSteps = await reduceAll(vectors, contributes, true)
          RingSimd.setEnabled(false)
          const js = await reduceAll(vectors, contributes)
          for (let r = 0; r < n; r++) {
            const bits = Array.from(new Uint32Array(js[r]!.buffer, js[r]!.byteOffset, length))
            expect(Array.from(new Uint32Array(simd[r]!.buffer, simd[r]!.byteOffset, length))).toEqual(bits)
            expect(Array.from(new Uint32Array(inSteps[r]!.buffer, inSteps[r]!.byteOffset, length))).toEqual(bits)
          }
        }
      ),
      { seed: SEED, numRuns: 60 }
    )
  })

  it("fails with the same RingLinkError either way when a neighbour sends a NaN or an infinity, in either phase", async () => {
    const run = (step: number, data: Float64Array | Float32Array) => {
      const link: Ring.PeerLink = { send: () => Effect.void, receive: Effect.succeed({ generation: 0, round: 0, step, data }) }
      const inbox = new Ring.RingInbox(link)
      return Effect.runPromiseExit(Ring.allReduce(inbox, { ringRank: 0, ringSize: 2, generation: 0, round: 0 }, new Float32Array(9)))
    }
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 1e308 * 10]) {
      for (const at of [0, 1, 3]) {
        for (const on of [true, false]) {
          RingSimd.setEnabled(on)
          const sums = new Float64Array(5)
          sums[at] = bad
          sums[4] = 1
          const exit = await run(0, sums)
          expect(Exit.isFailure(exit) && String(exit.cause)).toContain("step 0 carried a value that is not finite")
        }
      }
    }
    // The all-gather: a finished segment with a NaN or an infinity in it.
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      for (const at of [0, 2, 4]) {
        for (const on of [true, false]) {
          RingSimd.setEnabled(on)
          const link = new Ring.BufferedLink(() => Effect.void)
          link.push({ generation: 0, round: 0, step: 0, data: Float64Array.from([1, 2, 3, 4, 1]) })
          const segment = Float32Array.from([1, 2, 3, 4, 5])
          segment[at] = bad
          link.push({ generation: 0, round: 0, step: 1, data: segment })
          const exit = await Effect.runPromiseExit(
            Ring.allReduce(new Ring.RingInbox(link), { ringRank: 0, ringSize: 2, generation: 0, round: 0 }, new Float32Array(9))
          )
          expect(Exit.isFailure(exit) && String(exit.cause)).toContain("step 1 carried a value that is not finite")
        }
      }
    }
  })
})
