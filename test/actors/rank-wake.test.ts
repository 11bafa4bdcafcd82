import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import { describe, expect, it } from "vitest"
import * as RankWake from "../../actors/rank/rank-wake.ts"
import type * as Transport from "../../src/transport/transport.ts"

const frame: Transport.Event = { _tag: "Frame", peer: 0, bytes: new Uint8Array(1), arrivedMs: 0 }

/** A few turns of the event loop: whatever was going to end a wait by itself has by then. */
const turns = Effect.promise(() => new Promise<void>((resolve) => setImmediate(() => setImmediate(() => setTimeout(resolve, 5)))))

/** A rank's wake-up over a fresh inbox, its watcher forked; `body` gets both. */
const withWake = <A>(body: (wake: RankWake.Wake, inbox: Queue.Queue<Transport.Event, Cause.Done>) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const inbox = yield* Queue.unbounded<Transport.Event, Cause.Done>()
      const wake = RankWake.make(inbox)
      yield* Effect.forkChild(wake.watch)
      yield* turns
      return yield* body(wake, inbox)
    })
  )

/** Whether a wait forked now is still waiting after a few turns. */
const stillWaiting = (fiber: Fiber.Fiber<void>) => Effect.map(turns, () => fiber.pollUnsafe() === undefined)

describe("RankWake: the rank loop's one wait for the inbox, the ring and the heartbeat", () => {
  it("a wait ends when an event arrives in the inbox, and again for the next event once the loop took the first", () =>
    withWake((wake, inbox) =>
      Effect.gen(function* () {
        for (let k = 0; k < 3; k++) {
          const waiting = yield* Effect.forkChild(wake.wait(60_000))
          expect(yield* stillWaiting(waiting)).toBe(true)
          Queue.offerUnsafe(inbox, frame)
          yield* Fiber.join(waiting)
          expect(Queue.takeUnsafe(inbox)).toBeDefined()
        }
      })
    ))

  it("a wait ends at once while the inbox holds an event the loop did not take", () =>
    withWake((wake, inbox) =>
      Effect.gen(function* () {
        Queue.offerUnsafe(inbox, frame)
        yield* turns
        yield* wake.wait(60_000)
        yield* wake.wait(60_000)
        expect(Queue.sizeUnsafe(inbox)).toBe(1)
      })
    ))

  it("notify ends the current wait, or the next one when the loop was not waiting, once", () =>
    withWake((wake) =>
      Effect.gen(function* () {
        const waiting = yield* Effect.forkChild(wake.wait(60_000))
        expect(yield* stillWaiting(waiting)).toBe(true)
        wake.notify()
        yield* Fiber.join(waiting)
        wake.notify()
        yield* wake.wait(60_000)
        const next = yield* Effect.forkChild(wake.wait(60_000))
        expect(yield* stillWaiting(next)).toBe(true)
        yield* Fiber.interrupt(next)
      })
    ))

  it("a wait ends by itself after its timeout (the heartbeat's turn)", () => withWake((wake) => wake.wait(1)))

  it("the inbox's end ends the wait, and every later one at once", () =>
    withWake((wake, inbox) =>
      Effect.gen(function* () {
        const waiting = yield* Effect.forkChild(wake.wait(60_000))
        expect(yield* stillWaiting(waiting)).toBe(true)
        Queue.endUnsafe(inbox)
        yield* Fiber.join(waiting)
        yield* wake.wait(60_000)
      })
    ))

  it("an interrupted wait takes no later wake-up with it", () =>
    withWake((wake) =>
      Effect.gen(function* () {
        const waiting = yield* Effect.forkChild(wake.wait(60_000))
        expect(yield* stillWaiting(waiting)).toBe(true)
        yield* Fiber.interrupt(waiting)
        wake.notify()
        yield* wake.wait(60_000)
      })
    ))
})
