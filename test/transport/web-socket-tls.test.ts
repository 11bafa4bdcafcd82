// `wss://` on this runtime's server (`ws` on `node:https`, `Bun.serve`, `Deno.serve` with a
// certificate) and the client's checks of it: a private CA, a pinned fingerprint, and the
// refusals (1015, nothing sent) for a wrong CA, a wrong pin and no trust at all. The
// certificates are made here with openssl.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import { request } from "node:https"
import { afterAll } from "vitest"
import * as Live from "../../src/dashboard/live.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import { makeTestCerts } from "../tls-certs.ts"

const runtime = Runtime.detect()
const runToken = "run-token-tls-7f3a1c2d"
const certs = makeTestCerts()
afterAll(() => certs.remove())

/** GET over https trusting the test CA: the status and body. */
const httpsGet = (url: string) =>
  Effect.promise(
    () =>
      new Promise<readonly [number, string]>((resolve, reject) => {
        const req = request(url, { ca: certs.ca }, (response) => {
          let body = ""
          response.on("data", (chunk) => (body += String(chunk)))
          response.on("end", () => resolve([response.statusCode ?? 0, body]))
        })
        req.on("error", reject)
        req.end()
      })
  )

const bytes = (...values: ReadonlyArray<number>) => new Uint8Array(values)

/** A server over TLS on localhost; `joins` counts the joins it accepted. */
const tlsServer = Effect.gen(function* () {
  const joins: Array<number> = []
  const server = yield* WebSocket.serve({
    runToken,
    worldSize: 2,
    tls: { cert: certs.cert, key: certs.key },
    onJoined: (rank) => void joins.push(rank)
  })
  return { server, joins, url: `wss://localhost:${server.port}/` }
})

const refusalOf = (options: WebSocket.ClientOptions) =>
  Effect.scoped(WebSocket.connect(options)).pipe(
    Effect.flip,
    Effect.map((error) =>
      error.reason._tag === "Refused" ? ([error.reason.closeCode, error.reason.detail] as const) : ([error.reason._tag, ""] as const)
    )
  )

describe(`WebSocket over TLS (${runtime})`, () => {
  it.live("a rank that trusts the private CA joins over wss:// and frames go both ways", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { server, url } = yield* tlsServer
        assert.match(server.url, /^wss:\/\/127\.0\.0\.1:\d+\/$/)
        const client = yield* WebSocket.connect({ url, runToken, rank: 1, tls: { ca: certs.ca } })
        yield* client.transport.send(Transport.coordinatorPeer, bytes(1, 2, 3))
        const received = yield* Effect.orDie(Queue.take(server.transport.inbox))
        assert.deepStrictEqual([received.peer, received._tag === "Frame" ? [...received.bytes] : received._tag], [1, [1, 2, 3]])
        yield* server.transport.send(1, bytes(9))
        const back = yield* Effect.orDie(Queue.take(client.transport.inbox))
        assert.deepStrictEqual(back._tag === "Frame" ? [...back.bytes] : back._tag, [9])
      })
    )
  )

  it.live("a pinned fingerprint is enough, whatever the names and the signer; a resumable link joins too", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { server } = yield* tlsServer
        // 127.0.0.1 is in the certificate; the pin ignores names anyway, so another name for the host works too.
        const client = yield* WebSocket.connect({
          url: `wss://127.0.0.1:${server.port}/`,
          runToken,
          rank: 0,
          resumable: true,
          tls: { fingerprint256: certs.fingerprint256.replace(/:/g, "").toLowerCase() }
        })
        assert.isTrue(client.resumable)
      })
    )
  )

  it.live("a wrong CA, a wrong pin and the system's roots refuse the server with 1015 before the join is sent", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { url, joins, server } = yield* tlsServer
        const wrongCa = yield* refusalOf({ url, runToken, rank: 0, tls: { ca: certs.otherCa } })
        assert.strictEqual(wrongCa[0], Transport.CloseCode.TlsFailed)
        assert.match(wrongCa[1], /^not trusted: /)
        const wrongPin = yield* refusalOf({ url, runToken, rank: 0, tls: { fingerprint256: "00".repeat(32) } })
        assert.strictEqual(wrongPin[0], Transport.CloseCode.TlsFailed)
        assert.match(wrongPin[1], new RegExp(`^it has fingerprint ${certs.fingerprint256}, not the pinned 00:00`))
        const systemRoots = yield* refusalOf({ url, runToken, rank: 0 })
        assert.strictEqual(systemRoots[0], Transport.CloseCode.TlsFailed)
        // Nothing reached the server as a join: no join accepted, none refused.
        assert.deepStrictEqual(joins, [])
        assert.deepStrictEqual(yield* server.refusals, {})
      })
    )
  )

  it.live("plain requests on the wss:// port, and the dashboard, are served over https", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({
          runToken,
          worldSize: 1,
          tls: { cert: certs.cert, key: certs.key },
          http: async (request) => ({ status: 200, headers: { "content-type": "text/plain" }, body: `hello ${request.path}` })
        })
        assert.deepStrictEqual(yield* httpsGet(`https://localhost:${server.port}/page`), [200, "hello /page"])
        const live = yield* Effect.acquireRelease(
          Effect.promise(() => Live.start({ host: "127.0.0.1", port: 0, title: "tls", tls: { cert: certs.cert, key: certs.key } })),
          (live) => Effect.promise(() => live.close())
        )
        assert.match(live.url, /^https:\/\/127\.0\.0\.1:\d+\/$/)
        const [status, page] = yield* httpsGet(live.url)
        assert.deepStrictEqual([status, page.includes("<html")], [200, true])
      })
    )
  )
})
