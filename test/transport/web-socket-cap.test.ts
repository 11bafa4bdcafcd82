// The ranks' listener caps its connections (Node: `node:http`'s maxConnections): connections past
// `connectionsMax` are closed as they arrive and reported to `onResource`; a rank that joined keeps
// its link (a whole run flooded on its rank port: web-socket-cap.full.test.ts).
import { connect, type Socket } from "node:net"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import { afterEach, describe, expect, it } from "vitest"
import type * as RuntimeTypes from "../../src/platform/types.ts"
import * as ListenerResources from "../../src/transport/listener-resources.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"

const sockets: Array<Socket> = []
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy()
})

const openIdle = (port: number): Promise<void> =>
  new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => resolve())
    socket.on("error", () => resolve())
    socket.on("close", () => resolve())
    sockets.push(socket)
  })

const until = async (done: () => boolean, timeoutMs: number): Promise<void> => {
  const end = Date.now() + timeoutMs
  while (!done() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 20))
}

const token = "rank-cap-test-token-0123456789"

// Node only (vitest.config.ts leaves it out of the Bun and Deno passes: `Bun.serve` and
// `Deno.serve` count no connections).
describe("the ranks' listener's connection cap", () => {
  it("holds at most connectionsMax connections: the rest are closed as they arrive and reported; the joined rank's link carries frames on", async () => {
    const events: Array<RuntimeTypes.ResourceEvent> = []
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const server = yield* WebSocket.serve({
            runToken: token,
            worldSize: 2,
            connectionsMax: 6,
            onResource: (event) => events.push(event)
          })
          const rank = yield* WebSocket.connect({ url: server.url, runToken: token, rank: 0, resumable: true })
          yield* Effect.promise(async () => {
            for (let i = 0; i < 40; i++) await openIdle(server.port)
            await until(() => events.length >= 35, 10_000)
          })
          // One connection is the rank's: 5 idle ones are held, 35 refused.
          expect(events.length).toBe(35)
          expect(events.every((e) => e._tag === "ConnectionRefused" && e.connectionsMax === 6)).toBe(true)
          yield* rank.transport.send(Transport.coordinatorPeer, new Uint8Array([1, 2, 3]))
          yield* rank.transport.flush
          const event = yield* Queue.take(server.transport.inbox)
          expect(event._tag === "Frame" && [...event.bytes]).toEqual([1, 2, 3])
        })
      )
    )
  })

  it("the default is two connections a rank, the pending joins and 64 more", () => {
    expect(WebSocket.connectionsMaxOf(4)).toBe(8 + WebSocket.pendingJoinsMaxDefault + 64)
    expect(WebSocket.connectionsMaxOf(100, 16)).toBe(200 + 16 + 64)
  })

  it("a tally tells refusals and accept failures at most once per interval, each line with what came since and the total", () => {
    const tally = ListenerResources.make("the rank listener", 6, "rankConnectionsMax")
    expect(tally.drain(0)).toEqual([])
    for (let i = 0; i < 3; i++) tally.onResource({ _tag: "ConnectionRefused", connectionsMax: 6 })
    tally.onResource({ _tag: "AcceptFailed", code: "EMFILE", message: "accept EMFILE" })
    expect(tally.drain(5000)).toEqual([
      "the rank listener refused 3 connections at its cap, rankConnectionsMax 6 (3 in all); the ranks that joined keep their links and the run goes on",
      "the rank listener could not accept 1 connection: accept EMFILE (the coordinator's process is out of file descriptors; 1 in all); the run goes on"
    ])
    tally.onResource({ _tag: "ConnectionRefused", connectionsMax: 6 })
    expect(tally.drain(5500)).toEqual([])
    expect(tally.drain(6000)).toEqual([
      "the rank listener refused 1 connection at its cap, rankConnectionsMax 6 (4 in all); the ranks that joined keep their links and the run goes on"
    ])
  })
})
