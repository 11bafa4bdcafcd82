// A server that took a run over after its coordinator's process was lost (`ServerOptions.recovering`,
// docs/recovery.md): a rank's resume of a session the new server never had is welcomed as a
// recovered join. The rank's first message (its Hello) arrives again, what the old session still
// held does not, the client counts the recovery, and the link goes on both ways. A server that is
// not recovering refuses the same resume with ResumeLost. A rank that joined the running run
// (beyond the world size) is asked to try again until the new server's run formed, then admitted.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Runtime from "../../src/platform/detect.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"

const runtime = Runtime.detect()
const runToken = "run-token-recover-5c2a9f"
const sleep = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

const frame = (n: number) => {
  const out = new Uint8Array(16)
  new DataView(out.buffer).setUint32(0, n, true)
  return out
}
const numberOf = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true)

/** The next frame's number from `inbox` (an `Ended` fails the test). */
const nextFrame = (inbox: Queue.Dequeue<Transport.Event, unknown>) =>
  Effect.gen(function* () {
    while (true) {
      const event = yield* Queue.take(inbox)
      if (event._tag === "Ended") return yield* Effect.die(new Error(`ended: ${JSON.stringify(event.cause)}`))
      if (event._tag === "Frame") return numberOf(event.bytes)
    }
  })

/** A client joined to a server that is then closed: the client's link is left to resume. */
const orphaned = Effect.gen(function* () {
  const first = yield* Scope.make()
  const server = yield* WebSocket.serve({ runToken, worldSize: 1 }).pipe(Scope.provide(first))
  const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0, resumable: true, reconnectRetryMs: 20 })
  yield* client.transport.send(Transport.coordinatorPeer, frame(1))
  assert.strictEqual(yield* nextFrame(server.transport.inbox), 1)
  yield* Scope.close(first, Exit.void)
  return { client, port: server.port }
})

/** Admits any index: a run that may grow. */
const admitAll = (asked: unknown) => ({ rank: asked as number })

describe(`WebSocket recovered joins (${runtime})`, () => {
  it.live(
    "a joiner (beyond the world size) coming back is asked to try again until the recovering server's run formed, then welcomed as recovered",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const first = yield* Scope.make()
          const server = yield* WebSocket.serve({ runToken, worldSize: 1, admit: admitAll }).pipe(Scope.provide(first))
          server.markFormed()
          const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 1, resumable: true, reconnectRetryMs: 20 })
          yield* client.transport.send(Transport.coordinatorPeer, frame(1))
          assert.strictEqual(yield* nextFrame(server.transport.inbox), 1)
          yield* Scope.close(first, Exit.void)
          const again = yield* WebSocket.serve({ runToken, worldSize: 1, port: server.port, recovering: true, admit: admitAll })
          yield* sleep(300)
          // Refused with TryAgainLater meanwhile: the link is still trying.
          assert.strictEqual(client.recoveries(), 0)
          assert.strictEqual(client.closeCode(), undefined)
          again.markFormed()
          assert.strictEqual(yield* nextFrame(again.transport.inbox), 1)
          assert.strictEqual(client.recoveries(), 1)
          yield* again.transport.send(1, frame(100))
          assert.strictEqual(yield* nextFrame(client.transport.inbox), 100)
        })
      ),
    20_000
  )

  it.live(
    "a recovering server welcomes a resume of a session it never had: the first message again, nothing the old session held, the link goes on",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { client, port } = yield* orphaned
          // Sent while no coordinator listens: the old session holds it, and the new one never gets it.
          yield* client.transport.send(Transport.coordinatorPeer, frame(2))
          yield* sleep(50)
          const again = yield* WebSocket.serve({ runToken, worldSize: 1, port, recovering: true })
          assert.strictEqual(yield* nextFrame(again.transport.inbox), 1)
          assert.strictEqual(client.recoveries(), 1)
          yield* client.transport.send(Transport.coordinatorPeer, frame(3))
          yield* again.transport.send(0, frame(100))
          assert.strictEqual(yield* nextFrame(again.transport.inbox), 3)
          assert.strictEqual(yield* nextFrame(client.transport.inbox), 100)
        })
      ),
    20_000
  )

  it.live(
    "a server that is not recovering refuses the same resume with ResumeLost, and the rank's link ends",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { client, port } = yield* orphaned
          yield* WebSocket.serve({ runToken, worldSize: 1, port })
          while (client.closeCode() === undefined) yield* sleep(20)
          assert.strictEqual(client.closeCode(), Transport.CloseCode.ResumeLost)
          assert.strictEqual(client.recoveries(), 0)
        })
      ),
    20_000
  )
})
