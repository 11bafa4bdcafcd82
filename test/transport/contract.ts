/**
 * The one contract suite every transport passes (DESIGN.md §5): ordering both ways, batching,
 * end after the last frame, bad frames under both policies, and send errors.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import type * as DeathReport from "../../src/actor/death-report.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Script from "./rank-script.ts"

export interface Harness {
  readonly name: string
  /** A coordinator endpoint with `ranks` scripted ranks 0..ranks-1 joined. */
  readonly start: (
    ranks: number,
    options: Transport.Options
  ) => Effect.Effect<Transport.TransportShape, Transport.TransportError, Scope.Scope>
  /** The cause the coordinator sees when a scripted rank leaves with `exit0`. */
  readonly exitCause: DeathReport.DeathCause
  /** The cause when the coordinator closes the link with `closeCode`. */
  readonly closedCause: (closeCode: number) => DeathReport.DeathCause
}

const next = (t: Transport.TransportShape) => Effect.orDie(Queue.take(t.inbox))

/** The next event from `peer`, skipping nothing: fails the test if another peer's event comes first. */
const nextFrom = (t: Transport.TransportShape, peer: Transport.Peer) =>
  Effect.gen(function*() {
    const event = yield* next(t)
    assert.strictEqual(event.peer, peer, `expected an event from ${peer}, got ${JSON.stringify(event)}`)
    return event
  })

const ask = (t: Transport.TransportShape, rank: Transport.Peer) =>
  Effect.gen(function*() {
    yield* t.send(rank, Script.command({ op: "stats" }))
    const event = yield* nextFrom(t, rank)
    assert.strictEqual(event._tag, "Frame")
    return Script.parseReply((event as Transport.Frame).bytes)
  })

const options: Transport.Options = { inspect: Script.inspect }

export const contractSuite = (harness: Harness): void => {
  describe(`transport contract: ${harness.name}`, () => {
    it.effect("frames from a rank arrive in send order, several per underlying message", () =>
      Effect.scoped(Effect.gen(function*() {
        const t = yield* harness.start(1, options)
        yield* t.send(0, Script.command({ op: "burst", n: 3000, bytes: 64 }))
        for (let i = 0; i < 3000; i++) {
          const event = yield* nextFrom(t, 0)
          assert.strictEqual(event._tag, "Frame")
          assert.strictEqual(Script.indexOf((event as Transport.Frame).bytes), i)
          assert.strictEqual((event as Transport.Frame).bytes.byteLength, 64)
        }
        const reply = yield* ask(t, 0)
        assert.strictEqual(reply.stats.framesSent, 3000)
        assert.isBelow(reply.stats.messagesSent, 3000)
        assert.strictEqual((yield* t.stats).framesReceived, 3001)
      })))

    it.effect("frames to a rank arrive in send order, several per underlying message", () =>
      Effect.scoped(Effect.gen(function*() {
        const t = yield* harness.start(1, options)
        for (let i = 0; i < 3000; i++) yield* t.send(0, Script.dataFrame(i, 64))
        const reply = yield* ask(t, 0)
        assert.deepStrictEqual([reply.received, reply.inOrder], [3000, true])
        const stats = yield* t.stats
        assert.strictEqual(stats.framesSent, 3001)
        assert.isBelow(stats.messagesSent, 3001)
      })))

    it.effect("a rank's end is delivered once, after every frame it sent", () =>
      Effect.scoped(Effect.gen(function*() {
        const t = yield* harness.start(2, options)
        yield* t.send(0, Script.command({ op: "burst", n: 1500, bytes: 16, then: "exit0" }))
        for (let i = 0; i < 1500; i++) {
          const event = yield* nextFrom(t, 0)
          assert.strictEqual(event._tag, "Frame")
          assert.strictEqual(Script.indexOf((event as Transport.Frame).bytes), i)
        }
        assert.deepStrictEqual(yield* nextFrom(t, 0), { _tag: "Ended", peer: 0, cause: harness.exitCause })
        // A round trip with rank 1 shows nothing more came from rank 0 in the meantime.
        assert.strictEqual((yield* ask(t, 1)).received, 0)
        assert.deepStrictEqual(yield* t.peers, [1])
        const error = yield* Effect.flip(t.send(0, Script.dataFrame(0)))
        assert.deepStrictEqual(error.reason, { _tag: "PeerGone", peer: 0 })
      })))

    it.effect("a bad frame is counted and surfaced in order, and the drop policy keeps the link", () =>
      Effect.scoped(Effect.gen(function*() {
        const t = yield* harness.start(1, options)
        yield* t.send(0, Script.command({ op: "bad" }))
        const first = yield* nextFrom(t, 0)
        assert.strictEqual(first._tag === "Frame" && Script.indexOf(first.bytes), 0)
        const bad = yield* nextFrom(t, 0)
        assert.deepStrictEqual(bad._tag === "BadFrame" && [bad.peer, bad.error], [0, "bad test frame"])
        const third = yield* nextFrom(t, 0)
        assert.strictEqual(third._tag === "Frame" && Script.indexOf(third.bytes), 1)
        assert.strictEqual((yield* t.stats).badFrames, 1)
        assert.strictEqual((yield* ask(t, 0)).received, 0)
      })))

    it.effect("the close policy closes the link with the verdict's close code at the bad frame", () =>
      Effect.scoped(Effect.gen(function*() {
        const t = yield* harness.start(1, { ...options, badFramePolicy: "close" })
        yield* t.send(0, Script.command({ op: "bad" }))
        const first = yield* nextFrom(t, 0)
        assert.strictEqual(first._tag === "Frame" && Script.indexOf(first.bytes), 0)
        const bad = yield* nextFrom(t, 0)
        assert.strictEqual(bad._tag, "BadFrame")
        assert.deepStrictEqual(yield* nextFrom(t, 0), {
          _tag: "Ended",
          peer: 0,
          cause: harness.closedCause(Script.badCloseCode)
        })
        assert.strictEqual((yield* t.stats).framesReceived, 1)
      })))

    it.effect("sending to a peer that never joined, or a frame over the limit, fails by reason", () =>
      Effect.scoped(Effect.gen(function*() {
        const t = yield* harness.start(1, { ...options, messageBytesMax: 1024 })
        const unknown = yield* Effect.flip(t.send(5, Script.dataFrame(0)))
        assert.deepStrictEqual(unknown.reason, { _tag: "UnknownPeer", peer: 5 })
        const large = yield* Effect.flip(t.send(0, new Uint8Array(1017)))
        assert.deepStrictEqual(large.reason, { _tag: "FrameTooLarge", peer: 0, bytes: 1017, frameBytesMax: 1016 })
        yield* t.send(0, Script.dataFrame(0, 1016))
        assert.strictEqual((yield* ask(t, 0)).received, 1)
      })))
  })
}
