/**
 * The file all-reduce (docs/ring.md) with its members as fibers of one thread, their files in a
 * folder of this test's own and their direct links as in-memory `BufferedLink`s in a ring. Its
 * result must be bit for bit the shared all-reduce area's (worker threads), the float32 rounding of
 * the float64 sum of the contributions in ring-rank order divided by their number, within one
 * float32 unit in the last place of `Cpu.mean`.
 */
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, rmSync, truncateSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import fc from "fast-check"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { ulpDistance } from "./float32.ts"
import * as Cpu from "../../src/averaging/cpu.ts"
import * as FileAllReduce from "../../src/averaging/file-all-reduce.ts"
import * as Finite from "../../src/averaging/finite.ts"
import * as Ring from "../../src/averaging/ring.ts"
import * as RingSimd from "../../src/averaging/ring-simd.ts"
import * as SharedAllReduce from "../../src/averaging/shared-all-reduce.ts"

const SEED = 20261205
const root = mkdtempSync(join(tmpdir(), "cohort-file-all-reduce-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let folders = 0
const freshFolder = (): string => mkdtempSync(join(root, `f${folders++}-`))

/** `n` members' inboxes, each member's sends going to the next ring rank's link. */
const ringOf = (n: number): Array<Ring.RingInbox> => {
  const links: Array<Ring.BufferedLink> = []
  for (let r = 0; r < n; r++) links.push(new Ring.BufferedLink((message) => Effect.sync(() => links[(r + 1) % n]!.push(message))))
  return links.map((link) => new Ring.RingInbox(link))
}

const bits = (values: Float32Array): Array<number> => Array.from(new Uint32Array(values.buffer, values.byteOffset, values.length))

/** One round of the shared all-reduce area over the same vectors: the bits the file area must give. */
const sharedMean = (vectors: ReadonlyArray<Float32Array>, contributes: ReadonlyArray<boolean>): Promise<Float32Array> => {
  const n = vectors.length
  const length = vectors[0]!.length
  const buffer = SharedAllReduce.make(n, length)
  const areas = vectors.map((_, r) => new SharedAllReduce.Area({ buffer, ringRank: r, ringSize: n, length }))
  return Effect.runPromise(
    Effect.forEach(
      areas,
      (area, r) => SharedAllReduce.allReduce(area, { ringRank: r, ringSize: n, generation: 0, round: 0 }, vectors[r]!, contributes[r]!),
      { concurrency: "unbounded" }
    )
  ).then((results) => Float32Array.from(results[0]!))
}

/** Every member's part of one round; gives their outcomes. */
const roundOf = (
  areas: ReadonlyArray<FileAllReduce.FileArea>,
  inboxes: ReadonlyArray<Ring.RingInbox>,
  round: number,
  vectors: ReadonlyArray<Float32Array>,
  contributes: ReadonlyArray<boolean>,
  faults: ReadonlyArray<FileAllReduce.Faults> = [],
  intos: ReadonlyArray<Float32Array | undefined> = []
): Promise<Array<FileAllReduce.Outcome>> =>
  Effect.runPromise(
    Effect.forEach(
      areas,
      (area, r) =>
        FileAllReduce.allReduce(
          area,
          inboxes[r]!,
          { ringRank: r, ringSize: areas.length, generation: area.generation, round },
          vectors[r]!,
          contributes[r]!,
          faults[r] ?? {},
          intos[r]
        ),
      { concurrency: "unbounded" }
    )
  )

/** Random values with -0, +0 and magnitudes from 1e-4 to 1e4. */
const vectorOf = (random: () => number, length: number): Float32Array =>
  Float32Array.from({ length }, () => {
    const pick = random()
    return pick < 0.05 ? -0 : pick < 0.1 ? 0 : (random() - 0.5) * 10 ** Math.floor(random() * 8 - 4)
  })

describe("the file all-reduce", () => {
  afterEach(() => {
    RingSimd.setEnabled(true)
  })

  it("takes 4 length (n + 1) bytes of files a generation, 14.0 MiB at 8 ranks x 407,050 parameters", () => {
    expect(FileAllReduce.areaBytes(8, 407_050)).toBe(4 * 407_050 * 9)
    expect((FileAllReduce.areaBytes(8, 407_050) / 2 ** 20).toFixed(1)).toBe("14.0")
  })

  it.each([true, false])(
    "over consecutive rounds of one generation, with odd lengths, -0 and members that do not contribute, every member reads the shared all-reduce area's bits (the float32 mean in ring-rank order, within 1 ulp of Cpu.mean), into its own vector or the one its segment was reduced into; nobody's parameters change (SIMD: %s)",
    async (simd) => {
      expect(RingSimd.setEnabled(simd)).toBe(simd && RingSimd.available)
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 7 }),
          fc.integer({ min: 0, max: 41 }),
          fc.integer({ min: 1, max: 3 }),
          fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          async (n, length, rounds, seed) => {
            let state = seed
            const random = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32
            const folder = freshFolder()
            const areas = Array.from({ length: n }, (_, r) =>
              FileAllReduce.open(folder, { generation: 3, ringRank: r, ringSize: n, length })
            )
            const inboxes = ringOf(n)
            for (let round = 0; round < rounds; round++) {
              const contributes = Array.from({ length: n }, () => random() < 0.75)
              const vectors = Array.from({ length: n }, () => vectorOf(random, length))
              const originals = vectors.map((v) => Float32Array.from(v))
              // Odd ring ranks have their segment reduced straight into the vector they read the mean into.
              const intos = areas.map((_, r) => (r % 2 === 1 ? Finite.alloc(length) : undefined))
              const outcomes = await roundOf(areas, inboxes, round, vectors, contributes, [], intos)
              const expected = await sharedMean(vectors, contributes)
              const cpu = Cpu.mean(vectors.filter((_, r) => contributes[r]))
              for (const [r, outcome] of outcomes.entries()) {
                expect(outcome).toEqual({ _tag: "file" })
                const mean = intos[r] ?? new Float32Array(length)
                FileAllReduce.readResult(areas[r]!, mean)
                expect(bits(mean)).toEqual(bits(expected))
                // -0 and +0 are equal here: a float64 sum starts at +0 (as the area's), `Cpu.mean` of one -0 keeps it.
                if (!Cpu.isError(cpu))
                  for (let i = 0; i < length; i++) if (mean[i] !== cpu[i]) expect(ulpDistance(mean[i]!, cpu[i]!)).toBeLessThanOrEqual(1)
              }
              vectors.forEach((v, r) => expect(bits(v)).toEqual(bits(originals[r]!)))
            }
            for (const area of areas) FileAllReduce.close(area)
            expect(readdirSync(folder)).toEqual([])
          }
        ),
        { seed: SEED, numRuns: 60 }
      )
    }
  )

  it("segments longer than one read of the SIMD reduction (16,384 values) give the shared all-reduce area's bits too, odd lengths included", async () => {
    let state = 11
    const random = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32
    for (const [n, length] of [
      [2, 65_537],
      [3, 100_003]
    ] as const) {
      const folder = freshFolder()
      const areas = Array.from({ length: n }, (_, r) => FileAllReduce.open(folder, { generation: 0, ringRank: r, ringSize: n, length }))
      const vectors = Array.from({ length: n }, () => vectorOf(random, length))
      const contributes = Array.from({ length: n }, () => true)
      const outcomes = await roundOf(areas, ringOf(n), 0, vectors, contributes)
      const expected = await sharedMean(vectors, contributes)
      for (const [r, outcome] of outcomes.entries()) {
        expect(outcome).toEqual({ _tag: "file" })
        const mean = new Float32Array(length)
        FileAllReduce.readResult(areas[r]!, mean)
        expect(bits(mean)).toEqual(bits(expected))
      }
      for (const area of areas) FileAllReduce.close(area)
    }
  })

  it("members that start the next round while one still has to read this round's results leave those results as they were: they wait for its token before writing theirs", async () => {
    const folder = freshFolder()
    const n = 3
    const length = 10
    const inboxes = ringOf(n)
    const areas = Array.from({ length: n }, (_, r) => FileAllReduce.open(folder, { generation: 0, ringRank: r, ringSize: n, length }))
    const first = Array.from({ length: n }, (_, r) => Float32Array.from({ length }, (_, i) => r * 10 + i))
    const second = Array.from({ length: n }, (_, r) => Float32Array.from({ length }, (_, i) => -(r + 1) * i))
    const all = [true, true, true]
    await roundOf(areas, inboxes, 0, first, all)
    const expectedFirst = await sharedMean(first, all)
    // Members 0 and 2 apply round 0 and go on with round 1; member 1 has not read round 0 yet.
    for (const r of [0, 2]) FileAllReduce.readResult(areas[r]!, new Float32Array(length))
    const ahead = [0, 2].map((r) =>
      Effect.runFork(FileAllReduce.allReduce(areas[r]!, inboxes[r]!, { ringRank: r, ringSize: n, generation: 0, round: 1 }, second[r]!))
    )
    await new Promise((resolve) => setTimeout(resolve, 20))
    for (const fiber of ahead) expect(fiber.pollUnsafe()).toBeUndefined()
    const late = new Float32Array(length)
    FileAllReduce.readResult(areas[1]!, late)
    expect(bits(late)).toEqual(bits(expectedFirst))
    const own = await Effect.runPromise(
      FileAllReduce.allReduce(areas[1]!, inboxes[1]!, { ringRank: 1, ringSize: n, generation: 0, round: 1 }, second[1]!)
    )
    expect(own).toEqual({ _tag: "file" })
    for (const fiber of ahead) expect(await Effect.runPromise(Fiber.join(fiber))).toEqual({ _tag: "file" })
    const expectedSecond = await sharedMean(second, all)
    for (const area of areas) {
      const mean = new Float32Array(length)
      FileAllReduce.readResult(area, mean)
      expect(bits(mean)).toEqual(bits(expectedSecond))
      FileAllReduce.close(area)
    }
  })

  it("a committed result that another process overwrote with NaN is refused by every member that reads it, naming whose file; one cut short fails the read", async () => {
    const folder = freshFolder()
    const n = 3
    const length = 9
    const inboxes = ringOf(n)
    const areas = Array.from({ length: n }, (_, r) => FileAllReduce.open(folder, { generation: 0, ringRank: r, ringSize: n, length }))
    const params = Array.from({ length: n }, (_, r) => Float32Array.from({ length }, (_, i) => r + i))
    await roundOf(areas, inboxes, 0, params, [true, true, true])
    // Ring rank 1's result segment (values 3 to 5) sits after its row of `length` values.
    const path = join(folder, readdirSync(folder).find((name) => name.endsWith("-1.f32"))!)
    const fd = openSync(path, "r+")
    writeSync(fd, new Float32Array([Number.NaN]), 0, 4, 4 * length)
    closeSync(fd)
    // Read into a plain vector (the JavaScript check) and into one from `Finite.alloc` (SIMD).
    for (const r of [0, 2])
      for (const into of [new Float32Array(length), Finite.alloc(length)])
        expect(() => FileAllReduce.readResult(areas[r]!, into)).toThrow(`ring rank 1's result in ${path} holds a value that is not finite`)
    truncateSync(path, 4 * length)
    expect(() => FileAllReduce.readResult(areas[0]!, new Float32Array(length))).toThrow(/the file ended/)
    for (const area of areas) FileAllReduce.close(area)
  })

  it("when one member cannot make its file (no folder), the round falls back to the socket ring for every member, with the ring's bits", async () => {
    const folder = freshFolder()
    const n = 4
    const length = 11
    const areas = Array.from({ length: n }, (_, r) =>
      FileAllReduce.open(r === 2 ? join(folder, "missing") : folder, { generation: 0, ringRank: r, ringSize: n, length })
    )
    expect(areas[2]!.fd).toBeUndefined()
    expect(areas[2]!.problem).toBe("ENOENT")
    let state = 7
    const random = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32
    const vectors = Array.from({ length: n }, () => vectorOf(random, length))
    const contributes = [true, false, true, true]
    const outcomes = await roundOf(areas, ringOf(n), 0, vectors, contributes)
    const ring = await Effect.runPromise(
      Effect.forEach(
        ringOf(n),
        (inbox, r) => Ring.allReduce(inbox, { ringRank: r, ringSize: n, generation: 0, round: 0 }, vectors[r]!, contributes[r]!),
        { concurrency: "unbounded" }
      )
    )
    outcomes.forEach((outcome, r) => {
      expect(outcome._tag).toBe("ring")
      if (outcome._tag === "ring") expect(bits(outcome.mean)).toEqual(bits(ring[r]!))
    })
    expect(outcomes.map((o) => (o._tag === "ring" ? o.problem : "-"))).toEqual([undefined, undefined, "ENOENT", undefined])
  })

  it("a contribution that is not finite (written past the rank's own check) is named by every reducer that meets it, which gives no segment", async () => {
    const folder = freshFolder()
    const n = 3
    const areas = Array.from({ length: n }, (_, r) => FileAllReduce.open(folder, { generation: 1, ringRank: r, ringSize: n, length: 9 }))
    const vectors = Array.from({ length: n }, () => new Float32Array(9).fill(1))
    const outcomes = await roundOf(areas, ringOf(n), 5, vectors, [true, true, true], [{}, { corrupt: true }, {}])
    expect(outcomes).toEqual([
      { _tag: "bad", rank: 1 },
      { _tag: "bad", rank: 1 },
      { _tag: "bad", rank: 1 }
    ])
  })

  it("a member that never takes part: the others wait for its token, applying nothing, until they are interrupted; a newer generation's file replaces the member's older one", async () => {
    const folder = freshFolder()
    const n = 3
    const inboxes = ringOf(n)
    const areas = Array.from({ length: n }, (_, r) => FileAllReduce.open(folder, { generation: 0, ringRank: r, ringSize: n, length: 6 }))
    const vectors = Array.from({ length: n }, (_, r) => new Float32Array(6).fill(r))
    const fibers = [0, 1].map((r) =>
      Effect.runFork(FileAllReduce.allReduce(areas[r]!, inboxes[r]!, { ringRank: r, ringSize: n, generation: 0, round: 0 }, vectors[r]!))
    )
    await new Promise((resolve) => setTimeout(resolve, 20))
    for (const fiber of fibers) expect(fiber.pollUnsafe()).toBeUndefined()
    await Effect.runPromise(Effect.forEach(fibers, (fiber) => Fiber.interrupt(fiber)))
    vectors.forEach((v, r) => expect(Array.from(v)).toEqual(new Array(6).fill(r)))
    const next = FileAllReduce.open(folder, { generation: 1, ringRank: 0, ringSize: 2, length: 6 }, areas[0])
    expect(existsSync(FileAllReduce.areaPath(folder, 0, 0))).toBe(false)
    expect(existsSync(next.path)).toBe(true)
    FileAllReduce.close(next)
    for (const area of areas) FileAllReduce.close(area)
    expect(readdirSync(folder)).toEqual([])
  })
})
