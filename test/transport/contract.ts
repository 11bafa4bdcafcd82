/**
 * The one contract suite every transport passes (docs/design.md §5): ordering both ways, batching,
 * end after the last frame, bad frames as `WireError` under both policies, and send errors.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import type * as DeathReport from "../../src/actor/death-report.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WireFrames from "../../src/transport/wire-frames.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import * as WireError from "../../src/wire/wire-error.ts"
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
  Effect.gen(function* () {
    const event = yield* next(t)
    if (event.peer !== peer) assert.fail(`expected an event from ${peer}, got a ${event._tag} from ${event.peer}`)
    return event
  })

const ask = (t: Transport.TransportShape, rank: Transport.Peer) =>
  Effect.gen(function* () {
    yield* t.send(rank, Script.command({ op: "stats" }))
    const event = yield* nextFrom(t, rank)
    assert.strictEqual(event._tag, "Frame")
    return Script.parseReply((event as Transport.Frame).bytes)
  })

/** A valid wire frame from `rank`. */
const wireHeartbeat = (rank: number): Uint8Array => Codec.encode(Frame.fromRank(rank, { _tag: "Heartbeat" }))

/** A wire frame from `rank` cut one byte short: a `WireError` with reason `Truncated`. */
const wireTruncated = (rank: number): Uint8Array => wireHeartbeat(rank).slice(0, -1)

/** The close code `WireError.closeCode` gives a truncated frame (protocol error). */
const badCloseCode = 1002

const wire = WireFrames.inspect()

/** The suite's inspector: the script's data frames and JSON replies pass; the wire codec checks the rest. */
const inspect: Transport.Inspect = (peer, frame) => (frame[0] === 1 || frame[0] === 0x7b ? undefined : wire(peer, frame))

const sendBad = Script.command({
  op: "send",
  frames: [wireHeartbeat(0), wireTruncated(0), wireHeartbeat(0)].map((f) => [...f])
})

const options: Transport.Options = { inspect }

export const contractSuite = (harness: Harness): void => {
  describe(`transport contract: ${harness.name}`, () => {
    it.effect("frames from a rank arrive in send order, several per underlying message", () =>
      Effect.scoped(
        Effect.gen(function* () {
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
        })
      )
    )

    it.effect("frames to a rank arrive in send order, several per underlying message", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const t = yield* harness.start(1, options)
          for (let i = 0; i < 3000; i++) yield* t.send(0, Script.dataFrame(i, 64))
          const reply = yield* ask(t, 0)
          assert.deepStrictEqual([reply.received, reply.inOrder], [3000, true])
          const stats = yield* t.stats
          assert.strictEqual(stats.framesSent, 3001)
          assert.isBelow(stats.messagesSent, 3001)
        })
      )
    )

    it.effect("frames of 1 MiB arrive whole and in order both ways", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const t = yield* harness.start(1, options)
          const mib = 1024 * 1024
          for (let i = 0; i < 3; i++) yield* t.send(0, Script.dataFrame(i, mib))
          const reply = yield* ask(t, 0)
          assert.deepStrictEqual([reply.received, reply.inOrder], [3, true])
          yield* t.send(0, Script.command({ op: "burst", n: 3, bytes: mib }))
          for (let i = 0; i < 3; i++) {
            const event = yield* nextFrom(t, 0)
            assert.deepStrictEqual(event._tag === "Frame" && [Script.indexOf(event.bytes), event.bytes.byteLength], [i, mib])
          }
        })
      )
    )

    it.effect("a rank's end is delivered once, after every frame it sent", () =>
      Effect.scoped(
        Effect.gen(function* () {
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
        })
      )
    )

    it.effect("a frame that fails to decode is surfaced in order as a WireError, and the drop policy keeps the link", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const t = yield* harness.start(1, options)
          yield* t.send(0, sendBad)
          const first = yield* nextFrom(t, 0)
          assert.deepStrictEqual(first._tag === "Frame" && [...first.bytes], [...wireHeartbeat(0)])
          const bad = yield* nextFrom(t, 0)
          assert.strictEqual(bad._tag, "BadFrame")
          const error = (bad as Transport.BadFrame).error as WireError.WireError
          assert.deepStrictEqual([error._tag, error.reason._tag, error.rank], ["WireError", "Truncated", 0])
          const third = yield* nextFrom(t, 0)
          assert.deepStrictEqual(third._tag === "Frame" && [...third.bytes], [...wireHeartbeat(0)])
          assert.strictEqual((yield* t.stats).badFrames, 1)
          assert.strictEqual((yield* ask(t, 0)).received, 0)
        })
      )
    )

    it.effect("the close policy closes the link at the bad frame with its WireError close code", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const t = yield* harness.start(1, { ...options, badFramePolicy: "close" })
          yield* t.send(0, sendBad)
          const first = yield* nextFrom(t, 0)
          assert.strictEqual(first._tag, "Frame")
          const bad = yield* nextFrom(t, 0)
          assert.strictEqual(bad._tag === "BadFrame" && WireError.closeCode(bad.error as WireError.WireError), 1002)
          assert.deepStrictEqual(yield* nextFrom(t, 0), {
            _tag: "Ended",
            peer: 0,
            cause: harness.closedCause(badCloseCode)
          })
          assert.strictEqual((yield* t.stats).framesReceived, 1)
        })
      )
    )

    it.effect("sending to a peer that never joined, or a frame over the limit, fails by reason", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const t = yield* harness.start(1, { ...options, messageBytesMax: 1024 })
          const unknown = yield* Effect.flip(t.send(5, Script.dataFrame(0)))
          assert.deepStrictEqual(unknown.reason, { _tag: "UnknownPeer", peer: 5 })
          const large = yield* Effect.flip(t.send(0, new Uint8Array(1017)))
          assert.deepStrictEqual(large.reason, { _tag: "FrameTooLarge", peer: 0, bytes: 1017, frameBytesMax: 1016 })
          yield* t.send(0, Script.dataFrame(0, 1016))
          assert.strictEqual((yield* ask(t, 0)).received, 1)
        })
      )
    )
  })
}
