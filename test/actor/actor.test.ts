import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Actor from "../../src/actor/actor.ts"
import * as DeathReport from "../../src/actor/death-report.ts"

const collector = (seen: Array<number>, mailbox?: Actor.MailboxOptions) => ({
  initial: 0,
  receive: (state: number, n: number) =>
    Effect.sync(() => {
      seen.push(n)
      return state + n
    }),
  ...(mailbox === undefined ? {} : { mailbox })
})

describe("actor kit (docs/design.md §5)", () => {
  it.effect("an actor handles its messages one at a time in the order they were told", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const seen: Array<number> = []
        const ref = yield* Actor.spawn("collector", collector(seen))
        for (let i = 0; i < 100; i++) yield* ref.tell(i)
        while ((yield* ref.stats).received < 100) yield* Effect.yieldNow
        assert.deepStrictEqual(
          seen,
          Array.from({ length: 100 }, (_, i) => i)
        )
      })
    )
  )

  it.effect("tryTell queues at once while the mailbox has room, and says false when it is full, queuing nothing", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const gate = yield* Deferred.make<void>()
        const seen: Array<number> = []
        const ref = yield* Actor.spawn<void, number>("gated", {
          initial: undefined,
          receive: (_, n) =>
            Effect.andThen(
              Deferred.await(gate),
              Effect.sync(() => void seen.push(n))
            ),
          mailbox: { capacity: 2 }
        })
        yield* ref.tell(0)
        while ((yield* ref.stats).queued > 0) yield* Effect.yieldNow // 0 is being handled, behind the gate
        assert.deepStrictEqual([ref.tryTell(1), ref.tryTell(2), ref.tryTell(3)], [true, true, false])
        yield* Deferred.succeed(gate, undefined)
        while ((yield* ref.stats).received < 3) yield* Effect.yieldNow
        assert.deepStrictEqual(seen, [0, 1, 2])
      })
    )
  )

  it.effect("state carries from one message to the next", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const out = yield* Deferred.make<number>()
        const ref = yield* Actor.spawn<number, number | "report">("adder", {
          initial: 0,
          receive: (state, m) => (m === "report" ? Effect.as(Deferred.succeed(out, state), state) : Effect.succeed(state + m))
        })
        yield* ref.tell(2)
        yield* ref.tell(3)
        yield* ref.tell("report")
        assert.strictEqual(yield* Deferred.await(out), 5)
      })
    )
  )

  it.effect("the fail policy refuses a message to a full mailbox with MailboxFull", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const gate = yield* Deferred.make<void>()
        const ref = yield* Actor.spawn("blocked", {
          initial: 0,
          receive: (s: number) => Effect.as(Deferred.await(gate), s),
          mailbox: { capacity: 2, whenFull: "fail" }
        })
        yield* ref.tell(1) // taken at once, blocks on the gate
        while ((yield* ref.stats).queued !== 0) yield* Effect.yieldNow
        yield* ref.tell(2)
        yield* ref.tell(3)
        const error = yield* Effect.flip(ref.tell(4))
        assert.strictEqual(error._tag, "MailboxFull")
        assert.deepStrictEqual(error, new Actor.MailboxFull({ actor: "blocked", capacity: 2 }))
      })
    )
  )

  it.effect("the dropping policy drops the newest message and counts it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const seen: Array<number> = []
        const gate = yield* Deferred.make<void>()
        const ref = yield* Actor.spawn("dropper", {
          initial: 0,
          receive: (s: number, n: number) =>
            Effect.as(
              Effect.andThen(
                Deferred.await(gate),
                Effect.sync(() => seen.push(n))
              ),
              s
            ),
          mailbox: { capacity: 2, whenFull: "dropping" }
        })
        yield* ref.tell(1)
        while ((yield* ref.stats).queued !== 0) yield* Effect.yieldNow
        for (const n of [2, 3, 4, 5]) yield* ref.tell(n)
        yield* Deferred.succeed(gate, undefined)
        while ((yield* ref.stats).received < 3) yield* Effect.yieldNow
        assert.deepStrictEqual(seen, [1, 2, 3])
        assert.strictEqual((yield* ref.stats).dropped, 2)
      })
    )
  )

  it.effect("the sliding policy drops the oldest queued message and counts it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const seen: Array<number> = []
        const gate = yield* Deferred.make<void>()
        const ref = yield* Actor.spawn("slider", {
          initial: 0,
          receive: (s: number, n: number) =>
            Effect.as(
              Effect.andThen(
                Deferred.await(gate),
                Effect.sync(() => seen.push(n))
              ),
              s
            ),
          mailbox: { capacity: 2, whenFull: "sliding" }
        })
        yield* ref.tell(1)
        while ((yield* ref.stats).queued !== 0) yield* Effect.yieldNow
        for (const n of [2, 3, 4, 5]) yield* ref.tell(n)
        yield* Deferred.succeed(gate, undefined)
        while ((yield* ref.stats).received < 3) yield* Effect.yieldNow
        assert.deepStrictEqual(seen, [1, 4, 5])
        assert.strictEqual((yield* ref.stats).dropped, 2)
      })
    )
  )

  it.effect("the suspend policy makes tell wait for room instead of dropping", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const seen: Array<number> = []
        const ref = yield* Actor.spawn("waiter", collector(seen, { capacity: 1, whenFull: "suspend" }))
        for (let i = 0; i < 50; i++) yield* ref.tell(i)
        while ((yield* ref.stats).received < 50) yield* Effect.yieldNow
        assert.strictEqual(seen.length, 50)
        assert.strictEqual((yield* ref.stats).dropped, 0)
      })
    )
  )

  it.effect("closing the scope stops the actor and the actors it spawned", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const childRef = yield* Deferred.make<Actor.ActorRef<number>>()
      const parent = yield* Actor.spawn<number, "spawn">("parent", {
        initial: 0,
        receive: (s) =>
          Effect.gen(function* () {
            const child = yield* Actor.spawn("child", collector([]))
            yield* Deferred.succeed(childRef, child)
            return s
          })
      }).pipe(Scope.provide(scope))
      yield* parent.tell("spawn")
      const child = yield* Deferred.await(childRef)
      yield* Scope.close(scope, Exit.void)
      assert.isTrue(Actor.isStopped(yield* parent.await))
      assert.isTrue(Actor.isStopped(yield* child.await))
      const error = yield* Effect.flip(child.tell(1))
      assert.deepStrictEqual(error, new Actor.ActorStopped({ actor: "child" }))
    })
  )

  it.effect("a defect ends the actor, stops its children, and its exit reads as Crashed with the message and stack", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const childRef = yield* Deferred.make<Actor.ActorRef<number>>()
        const ref = yield* Actor.spawn<number, "spawn" | "die">("rank3", {
          initial: 0,
          receive: (s, m) =>
            m === "die"
              ? Effect.die(new Error("broken invariant"))
              : Effect.as(
                  Effect.flatMap(Actor.spawn("child", collector([])), (c) => Deferred.succeed(childRef, c)),
                  s
                )
        })
        yield* ref.tell("spawn")
        yield* ref.tell("die")
        const exit = yield* ref.await
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause))
        const cause = DeathReport.fromExit(exit)
        const stack = cause._tag === "Crashed" ? cause.stack : undefined
        assert.match(stack ?? "", /^Error: broken invariant\n\s+at /)
        assert.deepStrictEqual(cause, DeathReport.crashed("broken invariant", stack))
        assert.isTrue(Actor.isStopped(yield* (yield* Deferred.await(childRef)).await))
      })
    )
  )

  it.effect("an actor stopped from outside reads as Killed by interrupt", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const ref = yield* Actor.spawn("rank1", collector([]))
        yield* ref.stop
        assert.deepStrictEqual(DeathReport.fromExit(yield* ref.await), DeathReport.killed("interrupt"))
      })
    )
  )

  it("fromExit reads success as Exited 0 and a typed failure as Crashed", () => {
    assert.deepStrictEqual(DeathReport.fromExit(Exit.void), DeathReport.exited(0))
    assert.deepStrictEqual(DeathReport.fromExit(Exit.fail("bad frame")), DeathReport.crashed("bad frame"))
  })
})
