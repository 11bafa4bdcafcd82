import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Cause from "effect/Cause"
import * as Queue from "effect/Queue"
import { TestClock } from "effect/testing"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Memory from "../../src/transport/memory.ts"
import * as Transport from "../../src/transport/transport.ts"
import { contractSuite } from "./contract.ts"
import * as Script from "./rank-script.ts"

contractSuite({
  name: "in-memory",
  exitCause: DeathReport.exited(0),
  closedCause: (code) => DeathReport.disconnected(code),
  start: (ranks, options) =>
    Effect.gen(function* () {
      const network = yield* Memory.make
      const coordinator = yield* network.endpoint(Transport.coordinatorPeer, options)
      for (let rank = 0; rank < ranks; rank++) {
        const endpoint = yield* network.endpoint(rank)
        const leave = (how: Script.Leave) => {
          if (how !== "hang") Effect.runSync(network.kill(rank, DeathReport.exited(how === "exit7" ? 7 : 0)))
        }
        yield* Effect.forkScoped(Script.run(endpoint, leave))
      }
      return coordinator
    })
})

const frameIndices = (events: ReadonlyArray<Transport.Event>) => events.map((e) => (e._tag === "Frame" ? Script.indexOf(e.bytes) : e._tag))

const drain = (t: Transport.TransportShape, n: number) =>
  Effect.gen(function* () {
    const out: Array<Transport.Event> = []
    for (let i = 0; i < n; i++) out.push(yield* Effect.orDie(Queue.take(t.inbox)))
    return out
  })

const pair = Effect.gen(function* () {
  const network = yield* Memory.make
  const a = yield* network.endpoint(0, { batchFramesMax: 1 })
  const b = yield* network.endpoint(1, { batchFramesMax: 1 })
  return { network, a, b }
})

const sendAll = (t: Transport.TransportShape, to: number, indices: ReadonlyArray<number>) =>
  Effect.forEach(indices, (i) => t.send(to, Script.dataFrame(i)), { discard: true })

describe("in-memory transport faults", () => {
  it.effect("drop removes exactly the next n messages on one direction", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { network, a, b } = yield* pair
        yield* network.inject(0, 1, { _tag: "Drop", count: 2 })
        yield* sendAll(a, 1, [0, 1, 2, 3])
        assert.deepStrictEqual(frameIndices(yield* drain(b, 2)), [2, 3])
        yield* sendAll(b, 0, [7])
        assert.deepStrictEqual(frameIndices(yield* drain(a, 1)), [7])
        assert.strictEqual((yield* network.faults).dropped, 2)
      })
    )
  )

  it.effect("duplicate delivers each of the next n messages twice", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { network, a, b } = yield* pair
        yield* network.inject(0, 1, { _tag: "Duplicate", count: 1 })
        yield* sendAll(a, 1, [0, 1])
        assert.deepStrictEqual(frameIndices(yield* drain(b, 3)), [0, 0, 1])
      })
    )
  )

  it.effect("reorder swaps a message with the next one", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { network, a, b } = yield* pair
        yield* network.inject(0, 1, { _tag: "Reorder", count: 1 })
        yield* sendAll(a, 1, [0, 1, 2])
        assert.deepStrictEqual(frameIndices(yield* drain(b, 3)), [1, 0, 2])
      })
    )
  )

  it.effect("a held reordered message is released before the sender's end", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { network, a, b } = yield* pair
        yield* network.inject(0, 1, { _tag: "Reorder", count: 1 })
        yield* sendAll(a, 1, [0])
        yield* network.kill(0, DeathReport.crashed("boom"))
        assert.deepStrictEqual(frameIndices(yield* drain(b, 2)), [0, "Ended"])
      })
    )
  )

  it.effect("delay holds messages until the clock reaches their due time, in order, before the end", () =>
    Effect.gen(function* () {
      const { network, a, b } = yield* pair
      yield* network.inject(0, 1, { _tag: "Delay", ms: 100 })
      yield* sendAll(a, 1, [0, 1])
      yield* network.kill(0, DeathReport.exited(3))
      const taking = yield* Effect.forkChild(drain(b, 3))
      yield* TestClock.adjust(99)
      assert.strictEqual(yield* Queue.size(b.inbox), 0)
      yield* TestClock.adjust(1)
      const events = yield* Fiber.join(taking)
      assert.deepStrictEqual(frameIndices(events), [0, 1, "Ended"])
      assert.deepStrictEqual(events[2], { _tag: "Ended", peer: 0, cause: DeathReport.exited(3) })
      assert.deepStrictEqual(
        events.map((e) => (e._tag === "Frame" ? e.arrivedMs : -1)),
        [100, 100, -1]
      )
    }).pipe(Effect.scoped)
  )

  it.effect("a partition drops both ways until healed, and other links keep working", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { network, a, b } = yield* pair
        const c = yield* network.endpoint(2, { batchFramesMax: 1 })
        yield* network.partition([0], [1])
        yield* sendAll(a, 1, [0])
        yield* sendAll(b, 0, [1])
        yield* sendAll(a, 2, [2])
        assert.deepStrictEqual(frameIndices(yield* drain(c, 1)), [2])
        yield* network.heal
        yield* sendAll(a, 1, [3])
        assert.deepStrictEqual(frameIndices(yield* drain(b, 1)), [3])
        assert.strictEqual((yield* network.faults).dropped, 2)
      })
    )
  )

  it.effect("killing a peer flushes its queued frames first and ends it for every other endpoint", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const network = yield* Memory.make
        const a = yield* network.endpoint(0)
        const b = yield* network.endpoint(1)
        const c = yield* network.endpoint(2)
        yield* sendAll(a, 1, [0, 1, 2]) // still batched, not yet flushed
        yield* network.kill(0, DeathReport.killed("SIGKILL"))
        assert.deepStrictEqual(frameIndices(yield* drain(b, 4)), [0, 1, 2, "Ended"])
        assert.deepStrictEqual(yield* drain(c, 1), [{ _tag: "Ended", peer: 0, cause: DeathReport.killed("SIGKILL") }])
        assert.deepStrictEqual(yield* b.peers, [2])
      })
    )
  )
})

describe("in-memory transport bounds and lifetimes", () => {
  it.effect("a message that finds the inbox full closes its link with 4006 and is counted as an overflow", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const network = yield* Memory.make
        const a = yield* network.endpoint(0, { inboxFramesMax: 2 })
        const b = yield* network.endpoint(1, { batchFramesMax: 1 })
        yield* sendAll(b, 0, [0, 1, 2])
        assert.deepStrictEqual(yield* drain(a, 3), [
          { _tag: "Frame", peer: 1, bytes: Script.dataFrame(0), arrivedMs: 0 },
          { _tag: "Frame", peer: 1, bytes: Script.dataFrame(1), arrivedMs: 0 },
          { _tag: "Ended", peer: 1, cause: DeathReport.disconnected(Transport.CloseCode.InboxOverflow) }
        ])
        assert.strictEqual((yield* a.stats).overflows, 1)
        assert.deepStrictEqual(yield* drain(b, 1), [
          { _tag: "Ended", peer: 0, cause: DeathReport.disconnected(Transport.CloseCode.InboxOverflow) }
        ])
      })
    )
  )

  it.effect("closing an endpoint's scope makes it leave: the others see Disconnected 1000 and its inbox ends", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const network = yield* Memory.make
        const a = yield* network.endpoint(0)
        const b = yield* Effect.scoped(
          Effect.gen(function* () {
            const b = yield* network.endpoint(1)
            yield* b.send(0, Script.dataFrame(4))
            return b
          })
        )
        assert.deepStrictEqual(frameIndices(yield* drain(a, 2)), [4, "Ended"])
        const error = yield* Effect.flip(b.send(0, Script.dataFrame(5)))
        assert.deepStrictEqual(error.reason, { _tag: "Closed" })
        const end = yield* Effect.flip(Queue.take(b.inbox))
        assert.isTrue(Cause.isDone(end))
      })
    )
  )

  it.effect("a program written against the Transport service runs on an in-memory endpoint", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const network = yield* Memory.make
        const coordinator = yield* network.endpoint(Transport.coordinatorPeer)
        const rank = yield* network.endpoint(0)
        const hello = Effect.gen(function* () {
          const transport = yield* Transport.Transport
          yield* transport.send(Transport.coordinatorPeer, Script.dataFrame(transport.self + 10))
        })
        yield* Effect.provideService(hello, Transport.Transport, rank)
        assert.deepStrictEqual(frameIndices(yield* drain(coordinator, 1)), [10])
      })
    )
  )
})
