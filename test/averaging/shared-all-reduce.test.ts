/**
 * The shared all-reduce area (docs/ring.md) with its members as fibers of one thread sharing one
 * `SharedArrayBuffer`: random sizes, values, contributions and orders of arrival; a death at a
 * random barrier; several rounds in one area. Float32 rounding stated here: a completed round's
 * result is exactly the float32 rounding of the float64 sum of the contributions taken in
 * ring-rank order, divided by their number (`expectedMean`), and within one float32 unit in the
 * last place of `Cpu.mean` of the same vectors.
 */
import fc from "fast-check"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { afterEach, describe, expect, it } from "vitest"
import { ulpDistance } from "./float32.ts"
import * as Cpu from "../../src/averaging/cpu.ts"
import * as Finite from "../../src/averaging/finite.ts"
import * as Ring from "../../src/averaging/ring.ts"
import * as RingSimd from "../../src/averaging/ring-simd.ts"
import * as SharedAllReduce from "../../src/averaging/shared-all-reduce.ts"

const SEED = 20261202

/** The members of one area of `n` ranks and `length` parameters. */
const membersOf = (n: number, length: number): Array<SharedAllReduce.Area> => {
  const buffer = SharedAllReduce.make(n, length)
  return Array.from({ length: n }, (_, r) => new SharedAllReduce.Area({ buffer, ringRank: r, ringSize: n, length }))
}

/** Float32 rounding of the float64 sum, in ring-rank order, of the contributing vectors, divided by their number. */
const expectedMean = (vectors: ReadonlyArray<Float32Array>, contributes: ReadonlyArray<boolean>): Float32Array => {
  const length = vectors[0]!.length
  const out = new Float32Array(length)
  const count = contributes.filter(Boolean).length
  for (let i = 0; i < length; i++) {
    let sum = 0
    vectors.forEach((v, r) => {
      if (contributes[r]) sum += v[i]!
    })
    out[i] = sum / count
  }
  return out
}

/** Sleeps 0 to 2 ms (a member scheduled late). */
const jitter = (random: () => number) => Effect.sleep(`${Math.floor(random() * 3)} millis`)

describe("the shared all-reduce area", () => {
  it("is 16 + 16 n + 4 length (n + 1) bytes, 14.0 MiB at 8 ranks x 407,050 parameters", () => {
    expect(SharedAllReduce.areaBytes(8, 407_050)).toBe(16 + 128 + 4 * 407_050 * 10)
    expect((SharedAllReduce.areaBytes(8, 407_050) / 2 ** 20).toFixed(1)).toBe("15.5")
  })

  // The reduction runs in WebAssembly SIMD where it can (`RingSimd.meanOfRows`), else in JavaScript: both are checked.
  afterEach(() => {
    RingSimd.setEnabled(true)
  })

  it.each([true, false])(
    "every completed round, in any order of arrival and over several rounds of one area, is the exact float32 mean of the contributing members' vectors (within 1 ulp of Cpu.mean) on every member; with no contribution, each member's own segment (SIMD: %s)",
    async (simd) => {
      expect(RingSimd.setEnabled(simd)).toBe(simd && RingSimd.available)
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 8 }),
          fc.integer({ min: 0, max: 40 }),
          fc.integer({ min: 1, max: 3 }),
          fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          async (n, length, rounds, seed) => {
            let state = seed
            const random = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32
            const members = membersOf(n, length)
            for (let round = 0; round < rounds; round++) {
              const contributes = Array.from({ length: n }, () => random() < 0.75)
              const vectors = Array.from({ length: n }, () =>
                Float32Array.from({ length }, () => (random() - 0.5) * 10 ** Math.floor(random() * 8 - 4))
              )
              const originals = vectors.map((v) => Float32Array.from(v))
              const results = await Effect.runPromise(
                Effect.forEach(
                  members,
                  (area, r) =>
                    jitter(random).pipe(
                      Effect.andThen(
                        SharedAllReduce.allReduce(area, { ringRank: r, ringSize: n, generation: 0, round }, vectors[r]!, contributes[r]!)
                      )
                    ),
                  { concurrency: "unbounded" }
                )
              )
              if (!contributes.includes(true)) {
                // Nobody trained: each segment is its owner's (ring rank k owns segment k) own values.
                const owners = new Float32Array(length)
                for (let k = 0; k < n; k++) {
                  const [start, end] = Ring.segmentOf(length, n, k)
                  owners.set(vectors[k]!.subarray(start, end), start)
                }
                for (const result of results) expect(Array.from(result!)).toEqual(Array.from(owners))
              } else {
                const expected = expectedMean(vectors, contributes)
                const cpu = Cpu.mean(vectors.filter((_, r) => contributes[r]))
                if (Cpu.isError(cpu)) throw new Error("no mean")
                for (const result of results) {
                  expect(result).toBeDefined()
                  expect(Array.from(result!)).toEqual(Array.from(expected))
                  for (let i = 0; i < length; i++) expect(ulpDistance(result![i]!, cpu[i]!)).toBeLessThanOrEqual(1)
                }
              }
              vectors.forEach((v, r) => expect(Array.from(v)).toEqual(Array.from(originals[r]!)))
            }
          }
        ),
        { seed: SEED, numRuns: 100 }
      )
    }
  )

  it("a member that dies before its part: the round never completes; before the first barrier nobody gets past it (the others wait until interrupted by DeclareDead), after it the others do their parts (nothing is written before every member arrived); nobody's parameters change", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 8 }),
        fc.integer({ min: 1, max: 30 }),
        fc.nat(),
        fc.boolean(),
        async (n, length, deadPick, second) => {
          const dead = deadPick % n
          const vectors = Array.from({ length: n }, (_, r) => Float32Array.from({ length }, (_, i) => r * 100 + i))
          const originals = vectors.map((v) => Float32Array.from(v))
          const members = membersOf(n, length)
          members[0]!.resultOf(4).fill(-1) // what the result held before the round
          const phase = second ? 1 : 0
          const exits = await Effect.runPromise(
            Effect.gen(function* () {
              const fibers = yield* Effect.forEach(members, (area, r) =>
                Effect.forkChild(
                  SharedAllReduce.allReduce(area, { ringRank: r, ringSize: n, generation: 0, round: 4 }, vectors[r]!, true, {
                    ...(r === dead ? { before: (at: 0 | 1) => at === phase } : {})
                  })
                )
              )
              // Past the first barrier the others finish on their own (waited for, so that a loaded
              // machine cannot interrupt them first); before it they would wait forever.
              if (second)
                yield* Effect.forEach(
                  fibers.filter((_, r) => r !== dead),
                  Fiber.await
                )
              else yield* Effect.sleep("20 millis")
              // DeclareDead: every collective still running is interrupted.
              return yield* Effect.forEach(fibers, (fiber) => Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber))))
            })
          )
          // The dead member never did its part (no RoundDone from it: the round is never committed).
          expect(Exit.isSuccess(exits[dead]!)).toBe(false)
          exits.forEach((exit, r) => {
            if (r !== dead) expect(Exit.isSuccess(exit)).toBe(second)
          })
          if (!second) expect(Array.from(members[0]!.resultOf(4))).toEqual(new Array(length).fill(-1))
          vectors.forEach((v, r) => expect(Array.from(v)).toEqual(Array.from(originals[r]!)))
        }
      ),
      { seed: SEED + 1, numRuns: 40 }
    )
  })

  it("a member whose contribution is not finite is marked (badRank) by the reducers that meet it, which withhold their part (no RoundDone: never committed); members watching for the commit are woken", async () => {
    const n = 4
    const members = membersOf(n, 10)
    const vectors = Array.from({ length: n }, (_, r) => Float32Array.from({ length: 10 }, (_, i) => r + i))
    const woken = members[0]!.commits()
    const results = await Effect.runPromise(
      Effect.forEach(
        members,
        (area, r) =>
          SharedAllReduce.allReduce(
            area,
            { ringRank: r, ringSize: n, generation: 0, round: 0 },
            vectors[r]!,
            true,
            r === 2 ? { corrupt: true } : {}
          ),
        { concurrency: "unbounded" }
      )
    )
    // Its row is NaN throughout: every segment meets it.
    expect(results).toEqual([undefined, undefined, undefined, undefined])
    expect(members.map((m) => m.badRank())).toEqual([2, 2, 2, 2])
    const started = performance.now()
    await woken
    expect(performance.now() - started).toBeLessThan(500)
    expect(members[0]!.committed(0)).toBe(false)
  })

  it.each([true, false])(
    "segments of several reduction blocks (6 members x 50,003 values, 5 of them contributing): the exact float32 mean; a value that is not finite far into a segment marks the first contributing row holding it (SIMD: %s)",
    async (simd) => {
      expect(RingSimd.setEnabled(simd)).toBe(simd && RingSimd.available)
      const n = 6
      const length = 50_003
      const members = membersOf(n, length)
      let state = SEED
      const random = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32
      const contributes = [true, false, true, true, true, true]
      const vectors = Array.from({ length: n }, () =>
        Float32Array.from({ length }, () => (random() - 0.5) * 10 ** Math.floor(random() * 8 - 4))
      )
      // -0 everywhere at one index: the sums start at +0, as the JavaScript loop's do, so the mean is +0.
      for (const v of vectors) v[12_345] = -0
      const roundOf = (round: number) =>
        Effect.forEach(
          members,
          (area, r) => SharedAllReduce.allReduce(area, { ringRank: r, ringSize: n, generation: 0, round }, vectors[r]!, contributes[r]!),
          { concurrency: "unbounded" }
        )
      const results = await Effect.runPromise(roundOf(0))
      const expected = Array.from(expectedMean(vectors, contributes))
      for (const result of results) expect(Array.from(result!)).toEqual(expected)
      // Past the first blocks of the last segment: rows 1 (not contributing), 3 and 4 hold it.
      const at = length - 17
      for (const r of [1, 3, 4]) vectors[r]![at] = Number.POSITIVE_INFINITY
      // Only the last segment's reducer meets it; the others do their parts.
      const second = await Effect.runPromise(roundOf(1))
      expect(second.map((result) => result === undefined)).toEqual([false, false, false, false, false, true])
      expect(members.map((m) => m.badRank())).toEqual([3, 3, 3, 3, 3, 3])
    }
  )

  it("an area made in a shared WebAssembly memory (memoryOf) gives each member its row to contribute in (contributionRow), checked there by Finite.allFinite; a contribution written there is averaged exactly as a copied one, and a member attached with the memory posted beside the buffer sees the same rows", async () => {
    const n = 3
    const length = 1_001
    const buffer = SharedAllReduce.make(n, length)
    const memory = SharedAllReduce.memoryOf(buffer)
    // Node, Bun and Deno all have shared WebAssembly memory.
    expect(memory).toBeDefined()
    const members = Array.from({ length: n }, (_, r) => new SharedAllReduce.Area({ buffer, ringRank: r, ringSize: n, length, memory }))
    const vectors = Array.from({ length: n }, (_, r) => Float32Array.from({ length }, (_, i) => (r + 1) * 0.1 + i / 7))
    const rows = members.map((area, r) => {
      const row = area.contributionRow!
      expect(row).toBe(area.rows[r])
      row.set(vectors[r]!)
      return row
    })
    expect(rows.every((row) => Finite.allFinite(row))).toBe(true)
    rows[1]![length - 1] = Number.NaN
    expect(Finite.allFinite(rows[1]!)).toBe(false)
    // Its neighbours' values do not count in its check.
    expect(Finite.allFinite(rows[0]!)).toBe(true)
    expect(Finite.allFinite(rows[2]!)).toBe(true)
    rows[1]![length - 1] = vectors[1]![length - 1]!
    const results = await Effect.runPromise(
      Effect.forEach(
        members,
        (area, r) => SharedAllReduce.allReduce(area, { ringRank: r, ringSize: n, generation: 0, round: 0 }, rows[r]!),
        {
          concurrency: "unbounded"
        }
      )
    )
    const expected = Array.from(expectedMean(vectors, [true, true, true]))
    for (const result of results) expect(Array.from(result!)).toEqual(expected)
    // A plain SharedArrayBuffer area has no such row: contributions are copied in.
    const plain = new SharedAllReduce.Area({
      buffer: new SharedArrayBuffer(SharedAllReduce.areaBytes(n, length)),
      ringRank: 0,
      ringSize: n,
      length
    })
    expect(plain.contributionRow).toBeUndefined()
  })

  it("members at different rounds, or an area for another ring rank, size or length, fail with RingLinkError instead of averaging", async () => {
    const members = membersOf(2, 3)
    const exits = await Effect.runPromise(
      Effect.forEach(
        members,
        (area, r) =>
          Effect.exit(SharedAllReduce.allReduce(area, { ringRank: r, ringSize: 2, generation: 0, round: r }, new Float32Array(3))),
        { concurrency: "unbounded" }
      )
    )
    expect(exits.every((exit) => Exit.isFailure(exit))).toBe(true)
    expect(String((exits[0] as Exit.Failure<unknown, unknown>).cause)).toContain("ring rank 1 is at round 1, this rank at 0")
    const wrong = await Effect.runPromiseExit(
      SharedAllReduce.allReduce(membersOf(2, 3)[0]!, { ringRank: 1, ringSize: 2, generation: 0, round: 0 }, new Float32Array(3))
    )
    expect(String((wrong as Exit.Failure<unknown, unknown>).cause)).toContain(
      "a shared area for ring rank 0 of 2 x 3 parameters, not 1 of 2 x 3"
    )
  })

  it("an idle member sees a collective of its round start without it (neighboursAt), and joins it", async () => {
    const members = membersOf(3, 6)
    const vectors = Array.from({ length: 3 }, (_, r) => Float32Array.from({ length: 6 }, (_, i) => r * 10 + i))
    const result = await Effect.runPromise(
      Effect.gen(function* () {
        expect(members[2]!.neighboursAt(0)).toBe(false)
        const arrived = members[2]!.arrivals()
        const busy = yield* Effect.forEach([0, 1], (r) =>
          Effect.forkChild(SharedAllReduce.allReduce(members[r]!, { ringRank: r, ringSize: 3, generation: 0, round: 0 }, vectors[r]!))
        )
        yield* Effect.promise(() => arrived)
        expect(members[2]!.neighboursAt(1)).toBe(false)
        expect(members[2]!.neighboursAt(0)).toBe(true)
        const own = yield* SharedAllReduce.allReduce(members[2]!, { ringRank: 2, ringSize: 3, generation: 0, round: 0 }, vectors[2]!, false)
        const others = yield* Effect.forEach(busy, Fiber.join)
        return [...others, own]
      })
    )
    const expected = expectedMean(vectors, [true, true, false])
    for (const r of result) expect(Array.from(r!)).toEqual(Array.from(expected))
  })

  it("the coordinator's commit (commit) is seen by every member for that round only, wakes a member watching for it (commits), and survives the int32 wrap of round + 1", async () => {
    const members = membersOf(3, 2)
    const buffer = members[0]!.handle.buffer
    expect(members.map((m) => m.committed(0))).toEqual([false, false, false])
    const watched = members[1]!.commits()
    SharedAllReduce.commit(buffer, 0)
    await watched
    expect(members.map((m) => [m.committed(0), m.committed(1)])).toEqual([
      [true, false],
      [true, false],
      [true, false]
    ])
    SharedAllReduce.commit(buffer, 1)
    expect(members.map((m) => [m.committed(0), m.committed(1)])).toEqual([
      [false, true],
      [false, true],
      [false, true]
    ])
    SharedAllReduce.commit(buffer, 2 ** 31 - 1)
    expect([members[2]!.committed(2 ** 31 - 1), members[2]!.committed(2 ** 31 - 2), members[2]!.committed(1)]).toEqual([true, false, false])
    // A watch with no commit ends by itself within its slice (1 s) and reports nothing committed.
    const started = performance.now()
    await members[0]!.commits()
    expect(performance.now() - started).toBeGreaterThanOrEqual(900)
  })

  it("hands out its result row (no copy), one for even and one for odd rounds: the mean stays there until the members' collective of the round after next", async () => {
    const members = membersOf(2, 4)
    const vectors = [Float32Array.of(1, 2, 3, 4), Float32Array.of(3, 4, 5, 6)]
    const round = (k: number) =>
      Effect.runPromise(
        Effect.forEach(
          members,
          (area, r) => SharedAllReduce.allReduce(area, { ringRank: r, ringSize: 2, generation: 0, round: k }, vectors[r]!),
          { concurrency: "unbounded" }
        )
      )
    const [first] = await round(0)
    expect(first).toBe(members[0]!.resultOf(0))
    expect(members[0]!.badRank()).toBe(-1)
    expect(Array.from(first!)).toEqual([2, 3, 4, 5])
    vectors[1] = Float32Array.of(5, 6, 7, 8)
    const [second] = await round(1)
    expect(second).toBe(members[0]!.resultOf(1))
    expect(Array.from(second!)).toEqual([3, 4, 5, 6])
    expect(Array.from(first!)).toEqual([2, 3, 4, 5])
    vectors[1] = Float32Array.of(7, 8, 9, 10)
    await round(2)
    expect(Array.from(first!)).toEqual([4, 5, 6, 7])
    expect(Array.from(second!)).toEqual([3, 4, 5, 6])
  })
})
