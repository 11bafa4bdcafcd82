/**
 * The ring all-reduce over an in-memory peer link (docs/ring.md): random sizes, values and message
 * delays; a death at a random step. Float32 rounding stated here: a completed round's result is
 * within one float32 unit in the last place of `Cpu.mean` of the same vectors (both round a
 * float64 sum once; only the order of the float64 additions differs), and equal to it exactly when
 * every value is a small integer (then every float64 sum is exact).
 */
import fc from "fast-check"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import { describe, expect, it } from "vitest"
import { ulpDistance } from "./float32.ts"
import * as Cpu from "../../src/averaging/cpu.ts"
import * as Ring from "../../src/averaging/ring.ts"

const SEED = 20261201

/** `n` links in a ring: link `r` sends to `r + 1` and receives from `r - 1`, each delivery after `delayMs(…)`, order kept. */
const ringOf = (n: number, delayMs: () => number) =>
  Effect.gen(function* () {
    const wires = yield* Effect.forEach(Array.from({ length: n }), () => Queue.unbounded<Ring.RingMessage>())
    const links: Array<Ring.PeerLink> = wires.map((_, r) => {
      const out = wires[(r + 1) % n]!
      let last = Promise.resolve()
      return {
        // Each send is delivered after its own delay, but never before the previous one.
        send: (message) =>
          Effect.sync(() => {
            const wait = delayMs()
            last = last
              .then(() => new Promise<void>((resolve) => setTimeout(resolve, wait)))
              .then(() => {
                Queue.offerUnsafe(out, message)
              })
          }),
        receive: Queue.take(wires[r]!)
      }
    })
    return links
  })

describe("Ring.allReduce", () => {
  it("segments cover the vector in order, the first length mod n one longer", () => {
    expect([0, 1, 2].map((i) => Ring.segmentOf(10, 3, i))).toEqual([
      [0, 4],
      [4, 7],
      [7, 10]
    ])
    expect([0, 1, 2, 3].map((i) => Ring.segmentOf(2, 4, i))).toEqual([
      [0, 1],
      [1, 2],
      [2, 2],
      [2, 2]
    ])
  })

  it("a completed round is the mean of the contributing ranks' vectors (within 1 float32 ulp of Cpu.mean of them; exact for small integers), on every rank; with no contribution, each segment's owner's values", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 40 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
        async (n, length, integers, seed, idle) => {
          // A ring of one always contributes (it returns its own vector either way).
          const contributes = Array.from({ length: n }, (_, r) => n === 1 || !idle[r]!)
          let state = seed
          const random = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32
          const vectors = Array.from({ length: n }, () =>
            Float32Array.from({ length }, () =>
              integers ? Math.floor(random() * 200) - 100 : (random() - 0.5) * 10 ** Math.floor(random() * 8 - 4)
            )
          )
          const originals = vectors.map((v) => Float32Array.from(v))
          const results = await Effect.runPromise(
            Effect.gen(function* () {
              const links = yield* ringOf(n, () => Math.floor(random() * 3))
              return yield* Effect.forEach(
                links,
                (link, r) =>
                  Ring.allReduce(
                    new Ring.RingInbox(link),
                    { ringRank: r, ringSize: n, generation: 0, round: 0 },
                    vectors[r]!,
                    contributes[r]
                  ),
                { concurrency: "unbounded" }
              )
            })
          )
          const contributing = vectors.filter((_, r) => contributes[r])
          if (contributing.length === 0) {
            // Nobody trained: each segment is its owner's (ring rank k - 1 owns segment k) own values.
            const owners = new Float32Array(length)
            for (let k = 0; k < n; k++) {
              const [start, end] = Ring.segmentOf(length, n, k)
              owners.set(vectors[(k - 1 + n) % n]!.subarray(start, end), start)
            }
            for (const result of results) expect(Array.from(result)).toEqual(Array.from(owners))
            return
          }
          const expected = Cpu.mean(contributing)
          if (Cpu.isError(expected)) throw new Error("no mean")
          for (const result of results) {
            expect(result.length).toBe(length)
            for (let i = 0; i < length; i++) {
              if (integers) expect(result[i]).toBe(expected[i])
              else expect(ulpDistance(result[i]!, expected[i]!)).toBeLessThanOrEqual(1)
            }
          }
          // Every rank ends with the same vector, and no input was written.
          for (const result of results) expect(Array.from(result)).toEqual(Array.from(results[0]!))
          vectors.forEach((v, r) => expect(Array.from(v)).toEqual(Array.from(originals[r]!)))
        }
      ),
      { seed: SEED, numRuns: 120 }
    )
  })

  it("a rank that dies at a random step: its successor blocks until aborted, a rank that completed holds the exact mean, and an aborted round changes nobody's parameters", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 6 }),
        fc.integer({ min: 1, max: 30 }),
        fc.nat(),
        fc.nat(),
        async (n, length, deadPick, stepPick) => {
          const dead = deadPick % n
          const sendsBeforeDeath = stepPick % (2 * (n - 1)) // it dies after this many of its sends
          const vectors = Array.from({ length: n }, (_, r) => Float32Array.from({ length }, (_, i) => r * 100 + i))
          const originals = vectors.map((v) => Float32Array.from(v))
          const exits = await Effect.runPromise(
            Effect.gen(function* () {
              const links = yield* ringOf(n, () => 0)
              let sent = 0
              const dying: Ring.PeerLink = {
                send: (message) => (sent++ < sendsBeforeDeath ? links[dead]!.send(message) : Effect.never),
                receive: links[dead]!.receive
              }
              const fibers = yield* Effect.forEach(links, (link, r) =>
                Effect.forkChild(
                  Ring.allReduce(
                    new Ring.RingInbox(r === dead ? dying : link),
                    { ringRank: r, ringSize: n, generation: 3, round: 7 },
                    vectors[r]!
                  )
                )
              )
              yield* Effect.sleep("30 millis")
              // DeclareDead: every collective still running is interrupted.
              return yield* Effect.forEach(fibers, (fiber) => Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber))))
            })
          )
          // The rank after the dead one never gets the dead rank's last message: it cannot complete.
          // Ranks further on may (a ring all-reduce can finish at some ranks and not others: the
          // rank side keeps its pre-round parameters until the coordinator confirms the round), and
          // any rank that completed holds the exact mean of all contributions.
          expect(Exit.isSuccess(exits[dead]!)).toBe(false)
          expect(Exit.isSuccess(exits[(dead + 1) % n]!)).toBe(false)
          const mean = Cpu.mean(originals) as Float32Array
          for (const exit of exits) if (Exit.isSuccess(exit)) expect(Array.from(exit.value)).toEqual(Array.from(mean))
          vectors.forEach((v, r) => expect(Array.from(v)).toEqual(Array.from(originals[r]!)))
        }
      ),
      { seed: SEED + 1, numRuns: 60 }
    )
  })

  it("collectives back to back on the same inboxes write their own first steps into buffers they received before, and each is still the exact mean (a rank that does not contribute sends zeros from a reused buffer)", async () => {
    const n = 3
    const length = 10 // segments of 4, 3 and 3 values: the spares' sizes differ from rank to rank
    const sent = new Set<ArrayBufferLike>()
    let sends = 0
    const links = await Effect.runPromise(ringOf(n, () => 0))
    const inboxes = links.map(
      (link) =>
        new Ring.RingInbox({
          receive: link.receive,
          send: (message) =>
            Effect.suspend(() => {
              sent.add(message.data.buffer)
              sends += 1
              return link.send(message)
            })
        })
    )
    for (let round = 0; round < 6; round++) {
      const contributes = [true, round % 2 === 0, true]
      const params = Array.from({ length: n }, (_, r) => Float32Array.from({ length }, (_, i) => (i + 1) * (r + 1) + round))
      const means = await Effect.runPromise(
        Effect.all(
          inboxes.map((inbox, r) => Ring.allReduce(inbox, { ringRank: r, ringSize: n, generation: 0, round }, params[r]!, contributes[r])),
          { concurrency: "unbounded" }
        )
      )
      const expected = Cpu.mean(params.filter((_, r) => contributes[r]))
      if (!(expected instanceof Float32Array)) throw new Error(`no mean: ${expected._tag}`)
      for (const mean of means) expect(Array.from(mean)).toEqual(Array.from(expected))
    }
    // Without the spares each rank would allocate both of its own steps every round.
    expect(sends).toBe(6 * n * 2 * (n - 1))
    expect(sent.size).toBeLessThan(6 * n * 2)
  })

  it("the inbox drops messages of older collectives and keeps newer ones for later", async () => {
    const messages: Array<Ring.RingMessage> = [
      { generation: 1, round: 4, step: 0, data: new Float64Array([1]) }, // older generation: dropped
      { generation: 2, round: 5, step: 0, data: new Float64Array([2]) }, // next round: kept
      { generation: 2, round: 3, step: 0, data: new Float64Array([3]) }, // older round: dropped
      { generation: 2, round: 4, step: 0, data: new Float64Array([4]) } // the one wanted
    ]
    const link: Ring.PeerLink = { send: () => Effect.void, receive: Effect.sync(() => messages.shift()!) }
    const inbox = new Ring.RingInbox(link)
    const got = await Effect.runPromise(inbox.take(2, 4, 0))
    expect(Array.from(got.data)).toEqual([4])
    expect(inbox.stale).toBe(2)
    const later = await Effect.runPromise(inbox.take(2, 5, 0))
    expect(Array.from(later.data)).toEqual([2])
  })

  it("a message of the wrong step, size or contribution count is a RingLinkError, not a wrong mean", async () => {
    const wrongStep: Ring.PeerLink = {
      send: () => Effect.void,
      receive: Effect.succeed({ generation: 0, round: 0, step: 1, data: new Float64Array(2) })
    }
    const exit = await Effect.runPromiseExit(
      Ring.allReduce(new Ring.RingInbox(wrongStep), { ringRank: 0, ringSize: 2, generation: 0, round: 0 }, new Float32Array(4))
    )
    expect(Exit.isFailure(exit) && String(exit.cause)).toContain("expected step 0 of round 0 (generation 0), got step 1")
    // A reduce-scatter step carries the segment's 2 sums and the count of contributions folded in.
    const wrongSize: Ring.PeerLink = {
      send: () => Effect.void,
      receive: Effect.succeed({ generation: 0, round: 0, step: 0, data: new Float64Array(2) })
    }
    const exit2 = await Effect.runPromiseExit(
      Ring.allReduce(new Ring.RingInbox(wrongSize), { ringRank: 0, ringSize: 2, generation: 0, round: 0 }, new Float32Array(4))
    )
    expect(Exit.isFailure(exit2) && String(exit2.cause)).toContain("step 0 carried 2 values, expected 3")
    for (const count of [2, -1, 0.5, Number.NaN]) {
      const badCount: Ring.PeerLink = {
        send: () => Effect.void,
        receive: Effect.succeed({ generation: 0, round: 0, step: 0, data: new Float64Array([1, 2, count]) })
      }
      const exit3 = await Effect.runPromiseExit(
        Ring.allReduce(new Ring.RingInbox(badCount), { ringRank: 0, ringSize: 2, generation: 0, round: 0 }, new Float32Array(4))
      )
      expect(Exit.isFailure(exit3) && String(exit3.cause)).toContain(
        `step 0 carried a contribution count of ${count}, expected an integer in [0, 1]`
      )
    }
  })
})

describe("Ring.isContribution", () => {
  it("is true exactly when every value is finite (-0 counts as finite; one NaN or infinity anywhere makes it false)", () => {
    fc.assert(
      fc.property(fc.array(fc.float({ noDefaultInfinity: false, noNaN: false }), { maxLength: 40 }), (values) => {
        const params = Float32Array.from(values)
        expect(Ring.isContribution(params)).toBe(params.every((value) => Number.isFinite(value)))
      }),
      { seed: SEED, numRuns: 500 }
    )
    for (const odd of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const params = new Float32Array(1001).fill(-0)
      params[1000] = odd
      expect(Ring.isContribution(params)).toBe(false)
    }
    expect(Ring.isContribution(new Float32Array(0))).toBe(true)
  })
})

describe("Ring.checkStep: what the coordinator's relay checks before it forwards a step", () => {
  it("accepts every step a real all-reduce sends, from every ring rank", async () => {
    for (const [n, length] of [
      [2, 5],
      [3, 10],
      [4, 2],
      [5, 17]
    ] as const) {
      const problems: Array<string> = []
      await Effect.runPromise(
        Effect.gen(function* () {
          const links = yield* ringOf(n, () => 0)
          yield* Effect.forEach(
            links,
            (link, r) => {
              const checked: Ring.PeerLink = {
                send: (message) => {
                  const problem = Ring.checkStep(message, { ringRank: r, ringSize: n, length })
                  if (problem !== undefined) problems.push(`ring rank ${r}: ${problem}`)
                  return link.send(message)
                },
                receive: link.receive
              }
              return Ring.allReduce(
                new Ring.RingInbox(checked),
                { ringRank: r, ringSize: n, generation: 0, round: 0 },
                Float32Array.from({ length }, (_, i) => r + i),
                r % 2 === 0
              )
            },
            { concurrency: "unbounded" }
          )
        })
      )
      expect(problems).toEqual([])
    }
  })

  it("names what is wrong with a step that breaks the protocol", () => {
    // A ring of 3 over 10 values: segments [0, 4), [4, 7), [7, 10). Ring rank 1 sends segment 1
    // (3 sums and a count) at step 0, segment 0 at step 1, then finished segments 2 and 1.
    const shape = { ringRank: 1, ringSize: 3, length: 10 }
    const check = (step: number, data: Float64Array | Float32Array) => Ring.checkStep({ generation: 0, round: 0, step, data }, shape)
    expect(check(0, new Float64Array([1, 2, 3, 1]))).toBeUndefined()
    expect(check(1, new Float64Array([1, 2, 3, 4, 2]))).toBeUndefined()
    expect(check(2, new Float32Array([1, 2, 3]))).toBeUndefined()
    expect(check(3, new Float32Array([1, 2, 3]))).toBeUndefined()
    expect(check(4, new Float32Array(3))).toBe("step 4 past the last step (3) of a ring of 3")
    expect(check(0, new Float32Array([1, 2, 3, 1]))).toBe("reduce-scatter step 0 carried float32 values, expected float64 sums")
    expect(check(2, new Float64Array([1, 2, 3]))).toBe("all-gather step 2 carried float64 values, expected a float32 segment")
    expect(check(0, new Float64Array([1, 2, 1]))).toBe("step 0 carried 3 values, expected 4")
    expect(check(3, new Float32Array([1, 2]))).toBe("step 3 carried 2 values, expected 3")
    expect(check(0, new Float64Array([1, 2, 3, 2]))).toBe("step 0 carried a contribution count of 2, expected an integer in [0, 1]")
    expect(check(1, new Float64Array([1, 2, 3, 4, -1]))).toBe("step 1 carried a contribution count of -1, expected an integer in [0, 2]")
    expect(check(0, new Float64Array([1, Number.NaN, 3, 1]))).toBe("step 0 carried a value that is not finite")
    expect(check(2, new Float32Array([1, Number.POSITIVE_INFINITY, 3]))).toBe("step 2 carried a value that is not finite")
    // Finite float64 sums beyond what `count` float32 contributions can add up to: the owner's mean
    // would be infinite and its honest all-gather step refused (a hostile relayed rank's attack).
    const max32 = 3.4028234663852886e38
    expect(check(0, new Float64Array([max32, -max32, 0, 1]))).toBeUndefined()
    expect(check(1, new Float64Array([2 * max32, 0, 0, 0, 2]))).toBeUndefined()
    expect(check(0, new Float64Array([1e300, 2, 3, 1]))).toBe("step 0 carried a partial sum of 1e+300, beyond 1 float32 contributions")
    expect(check(1, new Float64Array([0, -3 * max32, 0, 0, 2]))).toBe(
      `step 1 carried a partial sum of ${-3 * max32}, beyond 2 float32 contributions`
    )
    expect(check(0, new Float64Array([0, 0.5, 0, 0]))).toBe("step 0 carried a partial sum of 0.5, beyond 0 float32 contributions")
    expect(check(0, new Float64Array([Number.NEGATIVE_INFINITY, 0, 0, 1]))).toBe("step 0 carried a value that is not finite")
    expect(Ring.checkStep({ generation: 0, round: 0, step: 0, data: new Float64Array(1) }, { ringRank: 0, ringSize: 1, length: 4 })).toBe(
      "a ring of one sends no step"
    )
  })
})

describe("Ring.RelayOrder: the order of each sender's relayed steps", () => {
  it("accepts the steps of real all-reduces in the order sent: two rounds, then a round redone in the next generation", async () => {
    const n = 3
    const order = new Ring.RelayOrder()
    const problems: Array<string> = []
    const collective = (generation: number, round: number) =>
      Effect.gen(function* () {
        const links = yield* ringOf(n, () => 0)
        yield* Effect.forEach(
          links,
          (link, r) => {
            const checked: Ring.PeerLink = {
              send: (message) => {
                const problem = order.check(r, message, round)
                if (problem !== undefined) problems.push(`ring rank ${r}: ${problem}`)
                return link.send(message)
              },
              receive: link.receive
            }
            return Ring.allReduce(
              new Ring.RingInbox(checked),
              { ringRank: r, ringSize: n, generation, round },
              new Float32Array(7).fill(r),
              true
            )
          },
          { concurrency: "unbounded" }
        )
      })
    await Effect.runPromise(
      Effect.gen(function* () {
        yield* collective(0, 0)
        yield* collective(0, 1)
        yield* collective(1, 1)
      })
    )
    expect(problems).toEqual([])
  })

  it("names a step sent twice, skipped, of another round, or restarted in the same collective (each would fail the honest receiver or sit in its inbox)", () => {
    const order = new Ring.RelayOrder()
    const step = (generation: number, round: number, step: number): Ring.RingMessage => ({
      generation,
      round,
      step,
      data: new Float64Array(2)
    })
    expect(order.check(2, step(0, 4, 0), 4)).toBeUndefined()
    expect(order.check(2, step(0, 4, 0), 4)).toBe("step 0 of round 4 out of order, expected step 1")
    expect(order.check(2, step(0, 4, 2), 4)).toBe("step 2 of round 4 out of order, expected step 1")
    expect(order.check(2, step(0, 5, 0), 4)).toBe("a step of round 5, the open round is 4")
    expect(order.check(2, step(0, 3, 0), 4)).toBe("a step of round 3, the open round is 4")
    expect(order.check(2, step(0, 4, 1), 4)).toBeUndefined()
    expect(order.check(1, step(0, 4, 1), 4)).toBe("step 1 of round 4 out of order, expected step 0") // each sender on its own
    expect(order.check(2, step(1, 4, 0), 4)).toBeUndefined() // the redo in a new generation starts over
    expect(order.check(2, step(1, 4, 0), 4)).toBe("step 0 of round 4 out of order, expected step 1")
  })
})

describe("Ring.RelayOrder with a direct link: a sender that falls back to the relay mid-collective", () => {
  it("takes its first relayed step of a collective at any step (the ones before went direct), then in order", () => {
    const order = new Ring.RelayOrder()
    const step = (generation: number, round: number, step: number): Ring.RingMessage => ({
      generation,
      round,
      step,
      data: new Float64Array(2)
    })
    // Steps 0 and 1 of round 4 went on the direct link, which then closed (its receiver died).
    expect(order.check(1, step(0, 4, 2), 4, true)).toBeUndefined()
    expect(order.check(1, step(0, 4, 3), 4, true)).toBeUndefined()
    expect(order.check(1, step(0, 4, 3), 4, true)).toBe("step 3 of round 4 out of order, expected step 4")
    expect(order.check(1, step(0, 4, 5), 4, true)).toBe("step 5 of round 4 out of order, expected step 4")
    expect(order.check(1, step(0, 5, 0), 4, true)).toBe("a step of round 5, the open round is 4")
    // Without a direct link, every step of a collective comes through the relay, from step 0.
    expect(order.check(2, step(0, 4, 2), 4)).toBe("step 2 of round 4 out of order, expected step 0")
  })
})

describe("a file area's tokens through the relay (Ring.tokenStepBase)", () => {
  const token = (round: number, s: number, value: number, generation = 0): Ring.RingMessage => ({
    generation,
    round,
    step: Ring.tokenStepBase + s,
    data: Float64Array.of(value)
  })
  const shape = { ringRank: 1, ringSize: 3, length: 10 }

  it("checkStep takes one token value (0, 1 or 2) of a token step below tokenStepBase + n - 1, and names anything else", () => {
    expect(Ring.checkStep(token(0, 0, 1), shape)).toBeUndefined()
    expect(Ring.checkStep(token(0, 1, 2), shape)).toBeUndefined()
    expect(Ring.checkStep(token(0, 2, 0), shape)).toBe("token step 2 past the last (1) of a ring of 3")
    expect(Ring.checkStep(token(0, 0, 3), shape)).toBe("token step 0 did not carry one token value")
    expect(Ring.checkStep({ ...token(0, 0, 1), data: new Float64Array(2) }, shape)).toBe("token step 0 did not carry one token value")
    expect(Ring.checkStep({ ...token(0, 0, 1), data: Float32Array.of(1) }, shape)).toBe("token step 0 did not carry one token value")
  })

  it("RelayOrder takes a round's tokens in order from tokenStepBase, then the fallback's data steps from 0, and no token after a data step", () => {
    const order = new Ring.RelayOrder()
    const data = (round: number, step: number): Ring.RingMessage => ({ generation: 0, round, step, data: new Float64Array(2) })
    expect(order.check(1, token(4, 1, 1), 4)).toBe(
      `step ${Ring.tokenStepBase + 1} of round 4 out of order, expected step ${Ring.tokenStepBase}`
    )
    expect(order.check(1, token(4, 0, 1), 4)).toBeUndefined()
    expect(order.check(1, token(4, 1, 2), 4)).toBeUndefined()
    expect(order.check(1, data(4, 1), 4)).toBe("step 1 of round 4 out of order, expected step 0")
    expect(order.check(1, data(4, 0), 4)).toBeUndefined()
    expect(order.check(1, token(4, 0, 1), 4)).toBe(`step ${Ring.tokenStepBase} of round 4 out of order, expected step 1`)
    // With a direct link that closed, the first relayed step may be any, tokens included.
    expect(order.check(2, token(4, 1, 1), 4, true)).toBeUndefined()
    expect(order.check(2, data(4, 3), 4, true)).toBeUndefined()
  })
})

describe("BufferedLink and RingInbox.holds: what the rank actor builds its links on", () => {
  const message = (generation: number, round: number, step: number): Ring.RingMessage => ({
    generation,
    round,
    step,
    data: new Float64Array([step])
  })

  it("an interrupted receive loses no message; the next receive gets it, in order", async () => {
    const link = new Ring.BufferedLink(() => Effect.void)
    const taken = await Effect.runPromise(
      Effect.gen(function* () {
        const waiting = yield* Effect.forkChild(link.receive)
        yield* Effect.yieldNow
        yield* Fiber.interrupt(waiting)
        link.push(message(0, 0, 0))
        link.push(message(0, 0, 1))
        return [(yield* link.receive).step, (yield* link.receive).step]
      })
    )
    expect(taken).toEqual([0, 1])
  })

  it("keeps at most bufferMax messages, dropping the oldest and counting them; fail ends every receive", async () => {
    const link = new Ring.BufferedLink(() => Effect.void, 2)
    for (let step = 0; step < 5; step++) link.push(message(0, 0, step))
    expect([link.overflow, link.pending.map((m) => m.step)]).toEqual([3, [3, 4]])
    link.fail(new Ring.RingLinkError("port closed"))
    await Effect.runPromise(
      Effect.gen(function* () {
        yield* link.receive
        yield* link.receive
      })
    )
    const exit = await Effect.runPromiseExit(link.receive)
    expect(Exit.isFailure(exit)).toBe(true)
  })

  it("holds finds a message of a collective among the kept and the not yet received ones, and nothing else", async () => {
    const link = new Ring.BufferedLink(() => Effect.void)
    const inbox = new Ring.RingInbox(link)
    link.push(message(1, 5, 0)) // a later round: kept while round 4 runs
    link.push(message(1, 4, 0))
    await Effect.runPromise(inbox.take(1, 4, 0))
    expect([inbox.holds(1, 5), inbox.holds(1, 4), inbox.holds(2, 5)]).toEqual([true, false, false])
    link.push(message(1, 6, 0))
    expect([inbox.holds(1, 6), inbox.holds(1, 6, link.pending)]).toEqual([false, true])
  })
})
