// Beat links (`ServerOptions.beatLinks`, `src/platform/beat-link.ts`): a joined rank's thread of
// its own proves its join's beat session with the welcome's key and beats on a second connection;
// the server counts each beat as a sighting of that rank only. At most one link a rank (4032); a
// wrong key, or another rank's session, is refused (4033). Real sockets and threads; runs under
// Node, Bun and Deno (the thread's WebSocket differs by runtime).
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as BeatLink from "../../src/platform/beat-link.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"

const runToken = "run-token-beat-7c1e93d2"

/** Polls `ready` every 20 ms for up to `withinMs`. */
const until = (ready: () => boolean, withinMs = 10_000) =>
  Effect.promise(async () => {
    for (const startMs = Date.now(); !ready() && Date.now() - startMs < withinMs; ) await new Promise((r) => setTimeout(r, 20))
    return ready()
  })
const sleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))

describe("beat links", () => {
  it.live(
    "a rank's beats are its sightings while it beats, and stop with it; a second link is refused with 4032, a wrong key or another rank's session with 4033",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const links: Array<[number, boolean]> = []
          const refused: Array<number> = []
          const server = yield* WebSocket.serve({
            runToken,
            worldSize: 2,
            beatLinks: true,
            onBeatLink: (rank, open) => void links.push([rank, open]),
            onRefused: (code) => void refused.push(code)
          })
          const c0 = yield* WebSocket.connect({ url: server.url, runToken, rank: 0, resumable: true })
          const c1 = yield* WebSocket.connect({ url: server.url, runToken, rank: 1 })
          assert.isDefined(c0.beat)
          assert.isDefined(c1.beat)
          assert.notStrictEqual(c0.beat!.key, c1.beat!.key)
          const start = (rank: number, beat: { session: string; key: string }) =>
            BeatLink.start({
              url: server.url,
              rank,
              session: beat.session,
              key: beat.key,
              proofText: WebSocket.beatProofText(rank, beat.session),
              retryMs: 100
            })!
          const one = start(1, c1.beat!)
          yield* Effect.addFinalizer(() => Effect.sync(() => one.close()))
          assert.isTrue(yield* until(() => one.open()))
          assert.deepStrictEqual(links, [[1, true]])
          // Rank 1's own link is quiet (protocol 1 sends no pings): arrivals are its beats.
          yield* sleep(300)
          const before = server.transport.lastArrivalMs(1) ?? 0
          const stop = one.beatWhile(50, 60_000)
          assert.isTrue(yield* until(() => (server.transport.lastArrivalMs(1) ?? 0) > before + 200))
          stop()
          yield* sleep(200)
          const stopped = server.transport.lastArrivalMs(1)
          yield* sleep(400)
          assert.strictEqual(server.transport.lastArrivalMs(1), stopped)
          // One link a rank; a wrong key; rank 1's session and key claiming rank 0.
          const second = start(1, c1.beat!)
          assert.isTrue(yield* until(() => refused.length === 1))
          const forged = start(0, { session: c0.beat!.session, key: c1.beat!.key })
          assert.isTrue(yield* until(() => refused.length === 2))
          const other = start(0, c1.beat!)
          assert.isTrue(yield* until(() => refused.length === 3))
          assert.deepStrictEqual(refused, [
            Transport.CloseCode.BeatLinkTaken,
            Transport.CloseCode.BeatLinkBad,
            Transport.CloseCode.BeatLinkBad
          ])
          for (const link of [second, forged, other]) link.close()
          one.close()
          assert.isTrue(yield* until(() => links.length === 2))
          assert.deepStrictEqual(links, [
            [1, true],
            [1, false]
          ])
        })
      ),
    30_000
  )

  it.live("a server without beat links hands out no beat key", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 1 })
        const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0, resumable: true })
        assert.isUndefined(client.beat)
      })
    )
  )
})
