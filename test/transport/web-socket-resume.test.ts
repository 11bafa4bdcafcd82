// Resumable WebSocket links (join protocol 2, `ClientOptions.resumable`) on loopback: the
// transport contract holds over them; a cut (the client's socket dropped without a handshake)
// is resumed and every frame sent meanwhile, both ways, arrives once and in order; a large frame
// travels in pieces, each one a sign of life; a rank the coordinator ended while it was away is
// refused with RankDead on its return; a rank that never comes back ends after resumeWindowMs.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Select from "../../src/platform/select.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import { contractSuite } from "./contract.ts"
import * as Script from "./rank-script.ts"

const runtime = Runtime.detect()
const runToken = "run-token-resume-4b8e1d"
const sleep = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

contractSuite({
  name: `WebSocket, resumable links (${runtime})`,
  exitCause: DeathReport.disconnected(1000),
  closedCause: (code) => DeathReport.disconnected(code),
  start: (ranks, options) =>
    Effect.gen(function* () {
      const server = yield* WebSocket.serve({ ...options, runToken, worldSize: ranks })
      for (let rank = 0; rank < ranks; rank++) {
        const client = yield* WebSocket.connect({ url: server.url, runToken, rank, resumable: true })
        const leave = (how: Script.Leave) => {
          if (how !== "hang") Effect.runFork(client.close(1000))
        }
        yield* Effect.forkScoped(Script.run(client.transport, leave))
      }
      return server.transport
    })
})

const frame = (n: number, bytes = 16) => {
  const out = new Uint8Array(bytes)
  new DataView(out.buffer).setUint32(0, n, true)
  return out
}
const numberOf = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true)

/** Takes `n` events from `inbox`, failing on an `Ended`. */
const takeFrames = (inbox: Queue.Dequeue<Transport.Event, unknown>, n: number) =>
  Effect.gen(function* () {
    const got: Array<number> = []
    while (got.length < n) {
      const event = yield* Queue.take(inbox)
      if (event._tag === "Ended") return yield* Effect.die(new Error(`ended: ${JSON.stringify(event.cause)} after ${got.length}`))
      if (event._tag === "Frame") got.push(numberOf(event.bytes))
    }
    return got
  })

describe(`WebSocket resumable links (${runtime})`, () => {
  it.live(
    "a cut is resumed: frames sent both ways while it lasts arrive once and in order, and nobody ends",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const resumed: Array<number> = []
          const server = yield* WebSocket.serve({ runToken, worldSize: 1, onResumed: (rank) => resumed.push(rank) })
          const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0, resumable: true, reconnectRetryMs: 20 })
          assert.isTrue(client.resumable)
          for (let i = 0; i < 3; i++) {
            yield* client.transport.send(Transport.coordinatorPeer, frame(i))
            yield* server.transport.send(0, frame(100 + i))
          }
          assert.deepStrictEqual(yield* takeFrames(server.transport.inbox, 3), [0, 1, 2])
          assert.deepStrictEqual(yield* takeFrames(client.transport.inbox, 3), [100, 101, 102])
          for (let cut = 0; cut < 3; cut++) {
            yield* client.drop
            for (let i = 0; i < 5; i++) {
              yield* client.transport.send(Transport.coordinatorPeer, frame(10 * (cut + 1) + i))
              yield* server.transport.send(0, frame(1000 + 10 * cut + i))
            }
            assert.deepStrictEqual(
              yield* takeFrames(server.transport.inbox, 5),
              [0, 1, 2, 3, 4].map((i) => 10 * (cut + 1) + i)
            )
            assert.deepStrictEqual(
              yield* takeFrames(client.transport.inbox, 5),
              [0, 1, 2, 3, 4].map((i) => 1000 + 10 * cut + i)
            )
          }
          assert.isTrue(server.connected(0))
          assert.strictEqual(client.closeCode(), undefined)
          // One resume per cut, or more when an attempt overtook another (each one takes the link).
          assert.isAtLeast(resumed.length, 3)
          assert.isTrue(resumed.every((rank) => rank === 0))
        })
      ),
    20_000
  )

  it.live(
    "a rank whose thread was blocked for longer than reconnectSilenceMs (a synchronous save) keeps its socket: no resume, frames sent meanwhile arrive",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const resumed: Array<number> = []
          const server = yield* WebSocket.serve({ runToken, worldSize: 1, onResumed: (rank) => resumed.push(rank) })
          const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0, resumable: true, reconnectSilenceMs: 1000 })
          yield* server.transport.send(0, frame(1))
          assert.deepStrictEqual(yield* takeFrames(client.transport.inbox, 1), [1])
          yield* server.transport.send(0, frame(2))
          // This thread is both sides': the server's pings wait too, and arrive just after the block.
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2500)
          yield* client.transport.send(Transport.coordinatorPeer, frame(3))
          assert.deepStrictEqual(yield* takeFrames(client.transport.inbox, 1), [2])
          assert.deepStrictEqual(yield* takeFrames(server.transport.inbox, 1), [3])
          yield* sleep(500)
          assert.deepStrictEqual(resumed, [])
          assert.isTrue(server.connected(0))
        })
      ),
    20_000
  )

  it.live(
    "a rank that leaves while its link is cut resumes once to send what it sent last, then closes: the coordinator gets its frame and its own close code",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({ runToken, worldSize: 1 })
          const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0, resumable: true, reconnectRetryMs: 20 })
          yield* client.drop
          yield* client.transport.send(Transport.coordinatorPeer, frame(7))
          yield* client.close(Transport.CloseCode.Normal)
          assert.deepStrictEqual(yield* takeFrames(server.transport.inbox, 1), [7])
          const ended = yield* Queue.take(server.transport.inbox)
          assert.deepStrictEqual(ended, { _tag: "Ended", peer: 0, cause: DeathReport.disconnected(Transport.CloseCode.Normal) })
          assert.strictEqual(client.closeCode(), Transport.CloseCode.Normal)
        })
      ),
    20_000
  )

  it.live(
    "a 3 MiB frame travels in 64 KiB pieces: each piece refreshes lastArrivalMs before the frame is whole",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({ runToken, worldSize: 1 })
          const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0, resumable: true })
          const big = new Uint8Array(3 * 1024 * 1024).map((_, i) => i % 251)
          yield* server.transport.send(0, big)
          const event = yield* Queue.take(client.transport.inbox)
          assert.strictEqual(event._tag, "Frame")
          if (event._tag !== "Frame") return
          assert.deepStrictEqual(event.bytes, big)
          // The client's own arrival time of the last piece is the frame's (or later: a ping).
          assert.isAtLeast(client.transport.lastArrivalMs(Transport.coordinatorPeer)!, event.arrivedMs)
        })
      ),
    20_000
  )

  it.live(
    "a rank ended while it was away is refused with RankDead on its return; its link ends with 4011",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({ runToken, worldSize: 1 })
          // A silence longer than the test: only the drop makes it reconnect, and only after 300 ms.
          const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0, resumable: true, reconnectRetryMs: 300 })
          yield* client.drop
          server.transport.disconnect(0, Transport.CloseCode.RankDead)
          const ended = yield* Queue.take(server.transport.inbox)
          assert.deepStrictEqual(ended, { _tag: "Ended", peer: 0, cause: DeathReport.disconnected(Transport.CloseCode.RankDead) })
          const gone = yield* Queue.take(client.transport.inbox)
          assert.deepStrictEqual(gone, {
            _tag: "Ended",
            peer: Transport.coordinatorPeer,
            cause: DeathReport.disconnected(Transport.CloseCode.RankDead)
          })
          assert.strictEqual(client.closeCode(), Transport.CloseCode.RankDead)
          assert.strictEqual((yield* server.refusals)[Transport.CloseCode.RankDead], 1)
        })
      ),
    20_000
  )

  it.live(
    "a rank whose socket dropped and that never comes back ends after resumeWindowMs as Disconnected{1006}",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({ runToken, worldSize: 1, resumeWindowMs: 300 })
          // A rank that joins with protocol 2 and is gone at once, without a close frame (a client of
          // this module would come back once to close, even as it leaves).
          yield* Effect.callback<void>((resume) => {
            const raw = Select.connectWs(server.url, {
              open: () => raw.send(JSON.stringify({ v: 2, token: runToken, rank: 0 })),
              message: (data) => {
                if (typeof data !== "string") return
                raw.drop()
                resume(Effect.void)
              },
              close: () => {}
            })
          })
          const startedMs = performance.now()
          const ended = yield* Queue.take(server.transport.inbox)
          assert.strictEqual(ended._tag, "Ended")
          if (ended._tag === "Ended") assert.strictEqual(ended.cause._tag, "Disconnected")
          assert.isAtLeast(performance.now() - startedMs, 200)
          assert.isFalse(server.connected(0))
        })
      ),
    20_000
  )

  it.live(
    "a socket that closed while the coordinator stalled is held for resumeWindowMs plus the stall: the rank's late resume is welcomed",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({ runToken, worldSize: 1, resumeWindowMs: 200, pingIntervalMs: 50 })
          const join = (text: string) =>
            Effect.callback<{ readonly raw: ReturnType<typeof Select.connectWs>; readonly welcome: string }>((resume) => {
              const raw = Select.connectWs(server.url, {
                open: () => raw.send(text),
                message: (data) => {
                  if (typeof data === "string") resume(Effect.succeed({ raw, welcome: data }))
                },
                close: (code) => resume(Effect.die(new Error(`refused with ${code}`)))
              })
            })
          const first = yield* join(JSON.stringify({ v: 2, token: runToken, rank: 0 }))
          const session: string = JSON.parse(first.welcome).session
          // The rank cuts its socket; the coordinator (this thread) stalls and reads the close after it.
          first.raw.drop()
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 800)
          // Longer after the wake than resumeWindowMs, well within resumeWindowMs + the stall.
          yield* sleep(450)
          const again = yield* join(JSON.stringify({ v: 2, token: runToken, rank: 0, resume: { session, received: 0, attempt: 1 } }))
          assert.strictEqual(JSON.parse(again.welcome).session, session)
          assert.isTrue(server.connected(0))
          // Gone for good afterwards: the window is the plain one again.
          again.raw.drop()
          const startedMs = performance.now()
          const ended = yield* Queue.take(server.transport.inbox)
          assert.strictEqual(ended._tag, "Ended")
          assert.isBelow(performance.now() - startedMs, 700)
        })
      ),
    20_000
  )

  it.live(
    "a link goes on past reconnectSilenceMs while the server sends now and then: its pings fill the gaps",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({ runToken, worldSize: 1, pingIntervalMs: 50 })
          const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0, resumable: true, reconnectSilenceMs: 400 })
          for (let i = 0; i < 2; i++) {
            yield* server.transport.send(0, frame(i))
            yield* sleep(600)
          }
          assert.deepStrictEqual(yield* takeFrames(client.transport.inbox, 2), [0, 1])
          yield* client.transport.send(Transport.coordinatorPeer, frame(7))
          assert.deepStrictEqual(yield* takeFrames(server.transport.inbox, 1), [7])
          assert.strictEqual(client.closeCode(), undefined)
        })
      ),
    20_000
  )

  it.live(
    "a server of join protocol 1 only refuses protocol 2 as a bad join: the client joins again with protocol 1, without resumes",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const joins: Array<unknown> = []
          // What an older server does: a `v` other than 1 is a bad join (4000); a v1 join is welcomed.
          const server = yield* Effect.acquireRelease(
            Effect.promise(() =>
              Select.serveWs({
                host: "127.0.0.1",
                port: 0,
                maxPayloadBytes: 1024 * 1024,
                open: (socket) => ({
                  message: (data) => {
                    if (typeof data !== "string") return
                    const join = JSON.parse(data) as { v?: number }
                    joins.push(join.v)
                    if (join.v !== undefined && join.v !== 1) return socket.close(Transport.CloseCode.BadJoin, "bad join")
                    socket.send(JSON.stringify({ v: 1, welcome: 0 }))
                  },
                  close: () => {}
                })
              })
            ),
            (raw) => Effect.promise(() => raw.close())
          )
          const client = yield* WebSocket.connect({ url: `ws://127.0.0.1:${server.port}/`, runToken, rank: 0, resumable: true })
          assert.deepStrictEqual(joins, [2, 1])
          assert.isFalse(client.resumable)
          assert.strictEqual(client.rank, 0)
        })
      ),
    20_000
  )
})
