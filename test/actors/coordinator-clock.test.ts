// The coordinator actor's timing on Effect's TestClock: its ticks (`Schedule.spaced`) and every
// `nowMs` it hands the core come from `Clock`, so these tests move time by hand and never wait.
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import { TestClock } from "effect/testing"
import * as Coordinator from "../../actors/coordinator/coordinator.ts"
import * as DeathReport from "../../src/actor/death-report.ts"
import type * as Config from "../../src/core/config.ts"
import * as Core from "../../src/core/coordinator.ts"
import type { ToCoordinator, ToRank } from "../../src/core/messages.ts"
import type * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import * as RecordingTransport from "../recording-transport.ts"

const tickMs = 100

/**
 * A coordinator of `worldSize` ranks on a recording transport, at test time 0: `frame(rank,
 * message)` delivers a frame stamped with the test clock's time; `sent` records what it sent.
 */
const coordinator = (config: Partial<Config.Options> & { readonly worldSize: number }, options: Partial<Coordinator.Options> = {}) =>
  Effect.gen(function* () {
    const made = Core.make({ epochs: 1, epochSamples: 64, ...config }, yield* Clock.currentTimeMillis)
    if ("_tag" in made) return yield* Effect.die(made.reason)
    const inbox = yield* Queue.unbounded<Transport.Event, never>()
    const sent: Array<readonly [number, ToRank]> = []
    const transport = RecordingTransport.make(inbox, (peer, bytes) => {
      const decoded = Codec.decode(bytes, { from: "coordinator" })
      if (Result.isSuccess(decoded)) sent.push([peer, decoded.success.message as ToRank])
      return undefined
    })
    const handle = yield* Coordinator.start({ state: made, transport, tickMs, coordHeartbeatMs: Number.POSITIVE_INFINITY, ...options })
    const frame = (rank: number, message: ToCoordinator) =>
      Effect.gen(function* () {
        const arrivedMs = yield* Clock.currentTimeMillis
        yield* Queue.offer(inbox, { _tag: "Frame", peer: rank, bytes: Codec.encode(Frame.fromRank(rank, message)), arrivedMs })
        // Let the actor take it in before the clock moves on.
        for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      })
    const ended = (rank: number, cause: DeathReport.DeathCause) =>
      Effect.gen(function* () {
        yield* Queue.offer(inbox, { _tag: "Ended", peer: rank, cause })
        for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      })
    const hello = (rank: number) => frame(rank, { _tag: "Hello", paramsLength: 2 })
    return { handle, sent, frame, ended, hello }
  })

/** The declared deaths as `[rank, detector, declaredAtMs]`. */
const declared = (state: Core.State) => state.deaths.map((d) => [d.rank, d.detector, d.declaredAtMs] as const)

describe("coordinator actor on the test clock", () => {
  it.effect(
    "a silent rank is declared by heartbeat at the first tick past heartbeatTimeoutMs, not at it; a beating one once it falls silent",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { handle, frame, hello } = yield* coordinator({ worldSize: 2, heartbeatTimeoutMs: 1_000 })
          yield* hello(0)
          yield* hello(1)
          assert.isTrue(handle.state.started)
          // Rank 1 beats every tick; rank 0 is silent since its Hello at 0.
          for (let t = tickMs; t <= 1_000; t += tickMs) {
            yield* TestClock.adjust(tickMs)
            yield* frame(1, { _tag: "Heartbeat" })
          }
          // Silent exactly heartbeatTimeoutMs: not yet stale (strictly greater, docs/design.md §3.1).
          assert.deepStrictEqual(declared(handle.state), [])
          yield* TestClock.adjust(tickMs)
          assert.deepStrictEqual(declared(handle.state), [[0, "heartbeat", 1_100]])
          yield* TestClock.adjust(5_000)
          assert.deepStrictEqual(
            declared(handle.state).map(([rank]) => rank),
            [0, 1]
          )
        })
      )
  )

  it.effect("a death report is declared when it arrives, at the clock's time, without waiting for a tick", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { handle, ended, hello } = yield* coordinator({ worldSize: 3, heartbeatTimeoutMs: 10_000 })
        for (const rank of [0, 1, 2]) yield* hello(rank)
        yield* TestClock.adjust(250 + tickMs / 2)
        yield* ended(2, DeathReport.killed("SIGKILL"))
        assert.deepStrictEqual(declared(handle.state), [[2, "supervisor", 300]])
      })
    )
  )

  it.effect("the run fails to form once formationTimeoutMs passed without every Hello, at the first tick past it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { handle, hello } = yield* coordinator({ worldSize: 2 }, { formationTimeoutMs: 500 })
        yield* hello(0)
        yield* TestClock.adjust(500)
        assert.isFalse(yield* Deferred.isDone(handle.outcome))
        yield* TestClock.adjust(tickMs)
        const outcome = yield* Effect.flip(Deferred.await(handle.outcome))
        assert.strictEqual(outcome.message, "rank 1 did not join within 500 ms")
        assert.isFalse(handle.state.started)
      })
    )
  )

  it.effect("survivors get a CoordHeartbeat every coordHeartbeatMs, and a rank that joined gets them while the run forms", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { sent, hello } = yield* coordinator({ worldSize: 2, heartbeatTimeoutMs: 60_000 }, { coordHeartbeatMs: 300 })
        const beats = (rank: number) => sent.filter(([peer, m]) => peer === rank && m._tag === "CoordHeartbeat").length
        yield* hello(0)
        yield* TestClock.adjust(600)
        // Forming: rank 0 waits for rank 1 and is beaten for (at 300 and 600).
        assert.deepStrictEqual([beats(0), beats(1)], [2, 0])
        yield* hello(1)
        yield* TestClock.adjust(900)
        assert.deepStrictEqual([beats(0), beats(1)], [5, 3])
      })
    )
  )
})
