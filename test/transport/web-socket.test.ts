import * as Net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Core from "../../src/core/coordinator.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Select from "../../src/platform/select.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as WireFrames from "../../src/transport/wire-frames.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import type * as WireError from "../../src/wire/wire-error.ts"
import * as Worker from "../../src/transport/worker.ts"
import { contractSuite } from "./contract.ts"
import * as Fixture from "./fixtures/entry.ts"
import * as Script from "./rank-script.ts"

const runtime = Runtime.detect()
const runToken = "run-token-7f3a-5c1e9b"

contractSuite({
  name: `WebSocket (${runtime})`,
  exitCause: DeathReport.disconnected(1000),
  closedCause: (code) => DeathReport.disconnected(code),
  start: (ranks, options) =>
    Effect.gen(function* () {
      const server = yield* WebSocket.serve({ ...options, runToken, worldSize: ranks })
      for (let rank = 0; rank < ranks; rank++) {
        const client = yield* WebSocket.connect({ url: server.url, runToken, rank })
        const leave = (how: Script.Leave) => {
          if (how !== "hang") Effect.runFork(client.close(1000))
        }
        yield* Effect.forkScoped(Script.run(client.transport, leave))
      }
      return server.transport
    })
})

/**
 * A raw client: sends `first` once open (then `after`, in the same turn) and resolves with the
 * close code it gets.
 */
const rawJoinPromise = (url: string, first: Uint8Array | string | undefined, after: ReadonlyArray<Uint8Array | string> = []) =>
  new Promise<number>((resolve) => {
    const socket = Select.connectWs(url, {
      open: () => {
        if (first !== undefined) socket.send(first)
        for (const message of after) socket.send(message)
      },
      message: () => {},
      close: resolve
    })
  })

const rawJoin = (url: string, first: Uint8Array | string | undefined, after: ReadonlyArray<Uint8Array | string> = []) =>
  Effect.promise(() => rawJoinPromise(url, first, after))

/** A raw client that never sends: `opened` once connected, `closed` with the close code it gets. */
const rawSilent = (url: string) => {
  let opened!: () => void
  const openedPromise = new Promise<void>((resolve) => (opened = resolve))
  const closed = new Promise<number>((resolve) => {
    Select.connectWs(url, { open: () => opened(), message: () => {}, close: resolve })
  })
  return { opened: openedPromise, closed }
}

const join = (token: string, rank: unknown) => JSON.stringify({ token, rank })

/**
 * A WebSocket client made by hand on a TCP socket, which never answers anything: the opening
 * handshake, then `joinText` as one masked text frame; resolves once the server's welcome arrived.
 */
const rawClient = (port: number, joinText: string): Promise<Net.Socket> =>
  new Promise((resolve, reject) => {
    // Half-open allowed: the server's FIN is not answered with ours either.
    const socket = Net.connect({ port, host: "127.0.0.1", allowHalfOpen: true })
    let received = ""
    let upgraded = false
    socket.on("error", reject)
    socket.on("connect", () =>
      socket.write(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
      )
    )
    socket.on("data", (chunk: Buffer) => {
      if (upgraded) return resolve(socket) // the welcome
      received += chunk.toString("latin1")
      if (!received.includes("\r\n\r\n")) return
      upgraded = true
      const text = Buffer.from(joinText)
      socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | text.length, 0, 0, 0, 0]), text]))
      if (received.length > received.indexOf("\r\n\r\n") + 4) resolve(socket) // the welcome came with the upgrade
    })
  })
const sleep = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

const refusedWith = <R>(effect: Effect.Effect<unknown, Transport.TransportError, R>) =>
  Effect.map(Effect.flip(effect), (error) => (error.reason._tag === "Refused" ? error.reason.closeCode : -1))

describe(`WebSocket security (${runtime}): refusals with close codes, nothing reaches the inbox`, () => {
  it.effect("the server binds to 127.0.0.1 unless told otherwise", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 1 })
        assert.strictEqual(server.host, "127.0.0.1")
        assert.strictEqual(server.url, `ws://127.0.0.1:${server.port}/`)
      })
    )
  )

  it.effect("a join with the wrong token is refused with 4001, once: connect does not retry it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 2 })
        const code = yield* refusedWith(WebSocket.connect({ url: server.url, runToken: "run-token-7f3a-5c1e9c", rank: 0 }))
        assert.strictEqual(code, Transport.CloseCode.WrongToken)
        assert.deepStrictEqual(yield* server.refusals, { 4001: 1 })
        assert.strictEqual(yield* Queue.size(server.transport.inbox), 0)
        assert.deepStrictEqual(yield* server.transport.peers, [])
      })
    )
  )

  it.effect("a join with a rank out of range, negative or fractional, is refused with 4002", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 2 })
        for (const rank of [2, -1, 0.5]) {
          assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank })), 4002)
        }
        assert.deepStrictEqual(yield* server.refusals, { 4002: 3 })
        assert.strictEqual(yield* Queue.size(server.transport.inbox), 0)
      })
    )
  )

  it.effect("a second connection for a live rank is refused with 4003, the first keeps working, and a dead rank cannot rejoin (4011)", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 2 })
        const first = yield* WebSocket.connect({ url: server.url, runToken, rank: 1 })
        assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 1 })), 4003)
        yield* first.transport.send(Transport.coordinatorPeer, Script.dataFrame(9))
        const event = yield* Effect.orDie(Queue.take(server.transport.inbox))
        assert.deepStrictEqual(event._tag === "Frame" && [event.peer, Script.indexOf(event.bytes)], [1, 9])
        assert.strictEqual(yield* Queue.size(server.transport.inbox), 0)
        // A rank whose connection ended cannot join again: a death is permanent.
        yield* first.close()
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(server.transport.inbox)), {
          _tag: "Ended",
          peer: 1,
          cause: DeathReport.disconnected(1000)
        })
        assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 1 })), 4011)
        assert.deepStrictEqual(yield* server.refusals, { 4003: 1, 4011: 1 })
      })
    )
  )

  it.effect(
    "vacate before markFormed frees an ended rank's index: a new join takes it and its frames arrive; after markFormed vacate does nothing",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({ runToken, worldSize: 2 })
          const first = yield* WebSocket.connect({ url: server.url, runToken, rank: "auto" })
          assert.strictEqual(first.rank, 0)
          yield* first.close()
          assert.deepStrictEqual(yield* Effect.orDie(Queue.take(server.transport.inbox)), {
            _tag: "Ended",
            peer: 0,
            cause: DeathReport.disconnected(1000)
          })
          server.vacate(0)
          const again = yield* WebSocket.connect({ url: server.url, runToken, rank: "auto" })
          assert.strictEqual(again.rank, 0)
          yield* again.transport.send(Transport.coordinatorPeer, Script.dataFrame(4))
          const event = yield* Effect.orDie(Queue.take(server.transport.inbox))
          assert.deepStrictEqual(event._tag === "Frame" && [event.peer, Script.indexOf(event.bytes)], [0, 4])
          server.markFormed()
          yield* again.close()
          yield* Effect.orDie(Queue.take(server.transport.inbox))
          server.vacate(0)
          assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 0 })), 4011)
        })
      )
  )

  it.effect(
    "rank auto takes the lowest free rank and the welcome carries the run's data; after markFormed every join is refused with 4010",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const refused: Array<string> = []
          const joined: Array<number> = []
          const server = yield* WebSocket.serve({
            runToken,
            worldSize: 3,
            welcome: (rank) => ({ seed: 7, rank }),
            onJoined: (rank, address) => {
              if (/127\.0\.0\.1$/.test(address)) joined.push(rank)
            },
            onRefused: (code, reason) => void refused.push(`${code} ${reason}`)
          })
          const one = yield* WebSocket.connect({ url: server.url, runToken, rank: 1 })
          const a = yield* WebSocket.connect({ url: server.url, runToken, rank: "auto" })
          const b = yield* WebSocket.connect({ url: server.url, runToken, rank: "auto" })
          assert.deepStrictEqual([one.rank, a.rank, b.rank, a.transport.self, b.transport.self], [1, 0, 2, 0, 2])
          assert.deepStrictEqual(
            [one.run, a.run, b.run],
            [
              { seed: 7, rank: 1 },
              { seed: 7, rank: 0 },
              { seed: 7, rank: 2 }
            ]
          )
          assert.deepStrictEqual(joined, [1, 0, 2])
          assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: "auto" })), 4003)
          server.markFormed()
          assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: "auto" })), 4010)
          assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 1 })), 4010)
          assert.deepStrictEqual(refused, ["4003 every rank is taken", "4010 the run already formed", "4010 the run already formed"])
          assert.strictEqual(yield* rawJoin(server.url, JSON.stringify({ v: 3, token: runToken, rank: 0 })), 4000)
        })
      )
  )

  it.effect(
    "a run that may grow (docs/growing.md): after markFormed the core decides each join; auto takes the next vacant index, and beyond maxRanks (4013), a bad index (4014), a dead rank's index (4015), a live one (4017) and a join while the run saves and stops (4019) are refused with their own codes",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const state = Core.make({ worldSize: 2, maxRanks: 3, epochSamples: 64, epochs: 1 }, 0) as Core.State
          const refused: Array<string> = []
          const server = yield* WebSocket.serve({
            runToken,
            worldSize: 2,
            admit: (asked, taken) => WebSocket.admission(asked, (index) => Core.joinVerdict(state, index, taken)),
            onRefused: (code, reason) => void refused.push(`${code} ${reason}`)
          })
          yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
          yield* WebSocket.connect({ url: server.url, runToken, rank: 1 })
          Core.start(state, 0)
          server.markFormed()
          const grown = yield* WebSocket.connect({ url: server.url, runToken, rank: "auto" })
          assert.deepStrictEqual([grown.rank, grown.transport.self, server.connected(2)], [2, 2, true])
          // Index 2 is taken by that link (the core has not seen its Hello yet): nothing is vacant.
          assert.strictEqual(
            yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: "auto" })),
            Transport.CloseCode.JoinFull
          )
          assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 3 })), Transport.CloseCode.JoinFull)
          assert.strictEqual(
            yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 2 })),
            Transport.CloseCode.JoinLiveIndex
          )
          assert.strictEqual(yield* rawJoin(server.url, join(runToken, "two")), Transport.CloseCode.JoinBadIndex)
          Core.step(state, { _tag: "DeathReport", rank: 1, nowMs: 1, cause: DeathReport.killed("SIGKILL") })
          Core.step(state, { _tag: "Tick", nowMs: 1 })
          assert.strictEqual(
            yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 1 })),
            Transport.CloseCode.JoinDeadIndex
          )
          Core.step(state, { _tag: "ShutdownRequested", nowMs: 2, detail: "SIGINT" })
          assert.strictEqual(
            yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 0 })),
            Transport.CloseCode.JoinShuttingDown
          )
          assert.deepStrictEqual(refused, [
            "4013 all 3 rank indices (maxRanks) are taken",
            "4013 rank index 3 is beyond maxRanks 3",
            "4017 rank 2 is joining",
            '4014 rank index "two" is not an integer >= 0',
            "4015 rank 1 died: a dead rank's index is never reused",
            "4019 the run is saving and stopping"
          ])
          assert.deepStrictEqual(yield* server.refusals, { 4013: 2, 4014: 1, 4015: 1, 4017: 1, 4019: 1 })
        })
      )
  )

  it.live(
    "a run that may grow, still forming: a join the formation cannot take (auto with every formation rank taken, an index beyond the world size) is asked to come back (1013), not refused for good; it joins once the run formed",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const state = Core.make({ worldSize: 1, maxRanks: 3, epochSamples: 64, epochs: 1 }, 0) as Core.State
          const refused: Array<string> = []
          const server = yield* WebSocket.serve({
            runToken,
            worldSize: 1,
            admit: (asked, taken) => WebSocket.admission(asked, (index) => Core.joinVerdict(state, index, taken)),
            onRefused: (code, reason) => void refused.push(`${code} ${reason}`)
          })
          yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
          assert.strictEqual(yield* rawJoin(server.url, join(runToken, 2)), Transport.CloseCode.TryAgainLater)
          const early = yield* Effect.forkScoped(WebSocket.connect({ url: server.url, runToken, rank: "auto" }))
          while (refused.length < 2) yield* Effect.sleep("10 millis")
          Core.start(state, 0)
          server.markFormed()
          const grown = yield* Fiber.join(early)
          assert.deepStrictEqual([grown.rank, server.connected(1)], [1, true])
          assert.deepStrictEqual(refused.slice(0, 2), [
            "1013 the run is forming: join again once it formed",
            "1013 the run is forming: join again once it formed"
          ])
        })
      )
  )

  it.effect(
    "end(rank, cause) from outside: the first end wins, after the frames received; a rank ended before it joined can never join (4011)",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({
            runToken,
            worldSize: 3,
            endCause: (rank) => (rank === 0 ? DeathReport.killed("SIGKILL") : undefined)
          })
          const zero = yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
          const one = yield* WebSocket.connect({ url: server.url, runToken, rank: 1 })
          assert.deepStrictEqual([server.connected(0), server.connected(1), server.connected(2)], [true, true, false])
          yield* one.transport.send(Transport.coordinatorPeer, Script.dataFrame(4))
          yield* one.transport.flush
          yield* sleep(100)
          server.end(1, DeathReport.exited(0))
          server.end(2, DeathReport.exited(1))
          yield* zero.close()
          const events = [
            yield* Effect.orDie(Queue.take(server.transport.inbox)),
            yield* Effect.orDie(Queue.take(server.transport.inbox)),
            yield* Effect.orDie(Queue.take(server.transport.inbox)),
            yield* Effect.orDie(Queue.take(server.transport.inbox))
          ]
          assert.deepStrictEqual(
            events
              .map((e) =>
                e._tag === "Frame"
                  ? `frame ${e.peer} ${Script.indexOf(e.bytes)}`
                  : e._tag === "Ended"
                    ? `ended ${e.peer} ${JSON.stringify(e.cause)}`
                    : e._tag
              )
              .sort(),
            [
              `ended 0 {"_tag":"Killed","signal":"SIGKILL"}`,
              `ended 1 {"_tag":"Exited","code":0}`,
              `ended 2 {"_tag":"Exited","code":1}`,
              "frame 1 4"
            ]
          )
          yield* sleep(50)
          assert.strictEqual(yield* Queue.size(server.transport.inbox), 0)
          assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 2 })), 4011)
          assert.deepStrictEqual([server.connected(0), server.connected(1), server.connected(2)], [false, false, false])
        })
      )
  )

  it.effect("a first message that is not a join is refused with 4000; no join in time with 4004", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 2, joinTimeoutMs: 60_000 })
        assert.strictEqual(yield* rawJoin(server.url, Script.dataFrame(0)), 4000)
        assert.strictEqual(yield* rawJoin(server.url, "{not json"), 4000)
        assert.deepStrictEqual(yield* server.refusals, { 4000: 2 })
        const impatient = yield* WebSocket.serve({ runToken, worldSize: 2, joinTimeoutMs: 1 })
        assert.strictEqual(yield* rawJoin(impatient.url, undefined), 4004)
        assert.deepStrictEqual(yield* impatient.refusals, { 4004: 1 })
        assert.strictEqual(yield* Queue.size(server.transport.inbox), 0)
        assert.strictEqual(yield* Queue.size(impatient.transport.inbox), 0)
      })
    )
  )

  it.live("a connection past pendingJoinsMax is refused with 1013 before it can join; connect retries it until its joinTimeoutMs", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 1, pendingJoinsMax: 0 })
        const startedMs = performance.now()
        assert.strictEqual(yield* refusedWith(WebSocket.connect({ url: server.url, runToken, rank: 0, joinTimeoutMs: 600 })), 1013)
        assert.isAtLeast(performance.now() - startedMs, 600)
        const refusals = yield* server.refusals
        assert.deepStrictEqual(Object.keys(refusals), ["1013"])
        // Retried: back-off delays of 20, 40, 80 ms (each scaled by 0.8 to 1.2) plus one round trip
        // per refusal (150 ms under Deno, whose server waits for the client to go quiet) fit in 600 ms.
        assert.isAtLeast(refusals[1013]!, 3)
        assert.strictEqual(yield* Queue.size(server.transport.inbox), 0)
        assert.strictEqual(WebSocket.pendingJoinsMaxDefault, 64)
      })
    )
  )

  it.live("a rank refused with 1013 while the only pending-join slot is held joins once the slot frees", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 1, pendingJoinsMax: 1, joinTimeoutMs: 400 })
        const holder = rawSilent(server.url)
        yield* Effect.promise(() => holder.opened)
        yield* sleep(50)
        const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
        assert.strictEqual(yield* Effect.promise(() => holder.closed), 4004)
        yield* client.transport.send(Transport.coordinatorPeer, Script.dataFrame(5))
        const event = yield* Effect.orDie(Queue.take(server.transport.inbox))
        assert.deepStrictEqual(event._tag === "Frame" && [event.peer, Script.indexOf(event.bytes)], [0, 5])
        const refusals = yield* server.refusals
        assert.deepStrictEqual(Object.keys(refusals).sort(), ["1013", "4004"])
        assert.strictEqual(refusals[4004], 1)
        assert.isAtLeast(refusals[1013]!, 1)
      })
    )
  )

  it.effect("a connection past pendingJoinsPerAddressMax from one address is refused with 4008; another address still joins", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({
          runToken,
          worldSize: 1,
          host: "::",
          pendingJoinsPerAddressMax: 2,
          joinTimeoutMs: 60_000
        })
        assert.strictEqual(server.url, `ws://[::]:${server.port}/`)
        const flooder = `ws://[::1]:${server.port}/`
        const held = [rawSilent(flooder), rawSilent(flooder)]
        yield* Effect.promise(() => Promise.all(held.map((socket) => socket.opened)))
        yield* sleep(100)
        assert.strictEqual(yield* rawJoin(flooder, undefined), 4008)
        // 127.0.0.1 reaches the dual-stack listener as ::ffff:127.0.0.1: another address.
        yield* WebSocket.connect({ url: `ws://127.0.0.1:${server.port}/`, runToken, rank: 0, joinTimeoutMs: 1 })
        assert.deepStrictEqual(yield* server.refusals, { 4008: 1 })
        assert.deepStrictEqual(yield* server.transport.peers, [0])
        assert.strictEqual(WebSocket.pendingJoinsPerAddressMaxDefault, 16)
      })
    )
  )

  it.effect(
    "a first message without a valid join is refused at once (4000 without a token, 4001 with an empty one), not at the join timeout",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({ runToken, worldSize: 2, joinTimeoutMs: 60_000 })
          const startedMs = performance.now()
          assert.strictEqual(yield* rawJoin(server.url, JSON.stringify({ rank: 0 })), 4000)
          assert.strictEqual(yield* rawJoin(server.url, join("", 0)), 4001)
          assert.isBelow(performance.now() - startedMs, 30_000)
          assert.deepStrictEqual(yield* server.refusals, { 4000: 1, 4001: 1 })
        })
      )
  )

  it.effect("a runToken under 16 characters, the empty one included, fails serve with TokenTooShort", () =>
    Effect.scoped(
      Effect.gen(function* () {
        for (const token of ["", "a".repeat(15)]) {
          const error = yield* Effect.flip(WebSocket.serve({ runToken: token, worldSize: 1 }))
          assert.deepStrictEqual(error.reason, { _tag: "TokenTooShort", length: token.length, runTokenLengthMin: 16 })
        }
        const server = yield* WebSocket.serve({ runToken: "a".repeat(16), worldSize: 1 })
        yield* WebSocket.connect({ url: server.url, runToken: "a".repeat(16), rank: 0 })
        assert.deepStrictEqual(yield* server.transport.peers, [0])
      })
    )
  )

  it.effect("a refusal reaches a client that keeps sending right behind its join with its exact code (5 tries each)", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 2, joinTimeoutMs: 60_000 })
        yield* WebSocket.connect({ url: server.url, runToken, rank: 1 })
        const trailing = Array.from({ length: 30 }, (_, i) => Script.dataFrame(i))
        const codes: Array<number> = []
        for (let i = 0; i < 5; i++) {
          codes.push(yield* rawJoin(server.url, join("run-token-7f3a-5c1e9c", 0), trailing))
          codes.push(yield* rawJoin(server.url, Script.dataFrame(0), trailing))
          codes.push(yield* rawJoin(server.url, join(runToken, 2), trailing))
          codes.push(yield* rawJoin(server.url, join(runToken, 1), trailing))
        }
        assert.deepStrictEqual(codes, Array.from({ length: 5 }, () => [4001, 4000, 4002, 4003]).flat())
        assert.deepStrictEqual(yield* server.refusals, { 4000: 5, 4001: 5, 4002: 5, 4003: 5 })
        assert.strictEqual((yield* server.transport.stats).framesReceived, 0)
      })
    )
  )

  it.effect("a message over messageBytesMax followed by more frames closes with 1009 on both sides (10 tries)", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 10, messageBytesMax: 1024 })
        const trailing = Array.from({ length: 30 }, (_, i) => Script.dataFrame(i))
        for (let rank = 0; rank < 10; rank++) {
          const code = yield* Effect.promise(
            () =>
              new Promise<number>((resolve) => {
                const socket = Select.connectWs(server.url, {
                  open: () => socket.send(join(runToken, rank)),
                  message: () => {
                    socket.send(new Uint8Array(2048))
                    for (const frame of trailing) socket.send(frame)
                  },
                  close: resolve
                })
              })
          )
          assert.strictEqual(code, 1009)
          assert.deepStrictEqual(yield* Effect.orDie(Queue.take(server.transport.inbox)), {
            _tag: "Ended",
            peer: rank,
            cause: DeathReport.disconnected(1009)
          })
        }
        assert.strictEqual((yield* server.transport.stats).framesReceived, 0)
      })
    )
  )

  // Breaker finding: a client that never answers the close (a raw socket here) kept its link open
  // for ws's 30 s close timeout on Node, so its rank died of stale heartbeats instead of 1009.
  it.effect(
    "a message over messageBytesMax from a client that never answers the close ends its link with 1009 within seconds",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({ runToken, worldSize: 1, messageBytesMax: 1024 })
          const { port } = new URL(server.url)
          const raw = yield* Effect.acquireRelease(
            Effect.promise(() => rawClient(Number(port), join(runToken, 0))),
            (socket) => Effect.sync(() => socket.destroy())
          )
          const startedMs = Date.now()
          // A masked binary frame of 2048 bytes (mask 0: the payload as is); then nothing, ever.
          raw.write(Buffer.concat([Buffer.from([0x82, 0x80 | 126, 2048 >> 8, 2048 & 0xff, 0, 0, 0, 0]), Buffer.alloc(2048)]))
          const ended = yield* Effect.orDie(Queue.take(server.transport.inbox))
          assert.deepStrictEqual(ended, { _tag: "Ended", peer: 0, cause: DeathReport.disconnected(1009) })
          assert.isBelow(Date.now() - startedMs, 10_000)
        })
      ),
    60_000
  )

  it.effect("a message over messageBytesMax closes the connection with 1009 and never reaches the inbox", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 1, messageBytesMax: 1024 })
        const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
        yield* client.transport.send(Transport.coordinatorPeer, new Uint8Array(2048))
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(server.transport.inbox)), {
          _tag: "Ended",
          peer: 0,
          cause: DeathReport.disconnected(1009)
        })
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(client.transport.inbox)), {
          _tag: "Ended",
          peer: Transport.coordinatorPeer,
          cause: DeathReport.disconnected(1009)
        })
        assert.strictEqual((yield* server.transport.stats).framesReceived, 0)
      })
    )
  )

  it.effect("a wire frame claiming another rank's id closes the connection with 1008 and is not delivered", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 2, inspect: WireFrames.inspect() })
        const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
        const heartbeat = (from: number) => Codec.encode(Frame.fromRank(from, { _tag: "Heartbeat" }))
        yield* client.transport.send(Transport.coordinatorPeer, heartbeat(0))
        yield* client.transport.send(Transport.coordinatorPeer, heartbeat(1))
        yield* client.transport.send(Transport.coordinatorPeer, heartbeat(0))
        const first = yield* Effect.orDie(Queue.take(server.transport.inbox))
        assert.deepStrictEqual(first._tag === "Frame" && [...first.bytes], [...heartbeat(0)])
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(server.transport.inbox)), {
          _tag: "Ended",
          peer: 0,
          cause: DeathReport.disconnected(1008)
        })
        assert.strictEqual((yield* server.transport.stats).framesReceived, 1)
      })
    )
  )

  it.effect("a frame that fails to decode is a WireError; the close policy closes with its close code 1002", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({
          runToken,
          worldSize: 1,
          inspect: WireFrames.inspect(),
          badFramePolicy: "close"
        })
        const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
        const good = Codec.encode(Frame.fromRank(0, { _tag: "Exiting" }))
        yield* client.transport.send(Transport.coordinatorPeer, good.subarray(0, good.length - 1))
        const bad = yield* Effect.orDie(Queue.take(server.transport.inbox))
        assert.strictEqual(bad._tag, "BadFrame")
        const error = (bad as Transport.BadFrame).error as WireError.WireError
        assert.deepStrictEqual([error._tag, error.reason._tag, error.rank], ["WireError", "Truncated", 0])
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(server.transport.inbox)), {
          _tag: "Ended",
          peer: 0,
          cause: DeathReport.disconnected(1002)
        })
      })
    )
  )
})

/**
 * `sockets` loops, each opening a socket to `url` again as soon as the last one closed, until
 * `durationMs` has passed: one loop in ten sends a join without a token, the others send nothing
 * (so that they hold a pending-join slot until the join timeout). Resolves
 * with the count of close codes seen, once every socket has closed.
 */
const flood = (url: string, sockets: number, durationMs: number) =>
  Effect.promise(async () => {
    const codes: Record<number, number> = {}
    const endMs = performance.now() + durationMs
    await Promise.all(
      Array.from({ length: sockets }, async (_, i) => {
        while (performance.now() < endMs) {
          const code = await rawJoinPromise(url, i % 10 === 0 ? JSON.stringify({ rank: 0 }) : undefined)
          codes[code] = (codes[code] ?? 0) + 1
        }
      })
    )
    return codes
  })

describe(`WebSocket join floods (${runtime})`, () => {
  it.live(
    "80 token-less sockets reconnecting from one address for 2 s are refused with 4000, 4004 and 4008; every real rank joins meanwhile",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const worldSize = 4
          const server = yield* WebSocket.serve({ runToken, worldSize, host: "::", joinTimeoutMs: 1000 })
          const flooding = yield* Effect.forkChild(flood(`ws://[::1]:${server.port}/`, 80, 2000))
          yield* sleep(200)
          const clients = yield* Effect.all(
            Array.from({ length: worldSize }, (_, rank) => WebSocket.connect({ url: `ws://127.0.0.1:${server.port}/`, runToken, rank })),
            { concurrency: "unbounded" }
          )
          // The flood was still on when every rank had joined.
          assert.isUndefined(flooding.pollUnsafe())
          for (const [rank, client] of clients.entries()) {
            yield* client.transport.send(Transport.coordinatorPeer, Script.dataFrame(rank))
          }
          const seen: Array<number> = []
          for (let i = 0; i < worldSize; i++) {
            const event = yield* Effect.orDie(Queue.take(server.transport.inbox))
            if (event._tag === "Frame") seen.push(event.peer)
          }
          assert.deepStrictEqual(seen.sort(), [0, 1, 2, 3])
          const codes = yield* Fiber.join(flooding)
          // Every flood socket was refused by the server, with the code the server counted.
          assert.deepStrictEqual(Object.keys(codes).sort(), ["4000", "4004", "4008"])
          assert.deepStrictEqual(yield* server.refusals, codes)
          assert.deepStrictEqual(yield* server.transport.peers, [0, 1, 2, 3])
        })
      )
  )
})

describe(`WebSocket supervision (${runtime})`, () => {
  it.effect("a rank whose connection drops is Disconnected 1006, after its last frame", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 1 })
        const host = yield* Worker.host()
        yield* host.spawn({
          entry: yield* Effect.promise(() => Fixture.entry("ws-rank")),
          rank: 0,
          data: { url: server.url, runToken, rank: 0 }
        })
        // The worker's own link to the host is not used; the WebSocket is.
        const ws = server.transport
        const hello = yield* Effect.orDie(Queue.take(ws.inbox))
        assert.strictEqual(hello._tag === "Frame" && Script.indexOf(hello.bytes), 99)
        yield* ws.send(0, Script.command({ op: "burst", n: 300, bytes: 32, then: "hang" }))
        for (let i = 0; i < 300; i++) {
          const event = yield* Effect.orDie(Queue.take(ws.inbox))
          assert.strictEqual(event._tag === "Frame" && Script.indexOf(event.bytes), i)
        }
        yield* host.terminate(0)
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(ws.inbox)), {
          _tag: "Ended",
          peer: 0,
          cause: DeathReport.disconnected(Transport.CloseCode.Abnormal)
        })
      })
    )
  )
})
