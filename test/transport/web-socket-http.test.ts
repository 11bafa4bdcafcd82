// Plain HTTP on a WebSocket server's port (`ServerOptions.http`, docs/browser.md: the browser
// page is served where ranks join), on this runtime's server: `ws` on a `node:http` server under
// Node, `Bun.serve`, `Deno.serve`.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Runtime from "../../src/platform/detect.ts"
import type * as Http from "../../src/platform/types.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"

const runtime = Runtime.detect()
const runToken = "run-token-http-5c1e9b"

const get = (url: string, init?: RequestInit) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, type: response.headers.get("content-type"), body: await response.text() }
  })

describe(`WebSocket server: plain HTTP on the same port (${runtime})`, () => {
  it.live("answers plain requests with the handler, joins still work on the same port", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const seen: Array<Http.HttpRequest> = []
        const http: Http.HttpHandler = async (request) => {
          seen.push(request)
          if (request.path === "/boom") throw new Error("boom")
          return { status: 200, headers: { "content-type": "text/plain; charset=utf-8" }, body: `${request.method} ${request.path}` }
        }
        const server = yield* WebSocket.serve({ runToken, worldSize: 1, http })
        const base = `http://127.0.0.1:${server.port}`
        assert.deepStrictEqual(yield* get(`${base}/a%20b/index.html?token=x`), {
          status: 200,
          type: "text/plain; charset=utf-8",
          body: "GET /a b/index.html"
        })
        assert.deepStrictEqual(yield* get(`${base}/boom`), { status: 500, type: "text/plain; charset=utf-8", body: "internal error" })
        // A path that does not URL-decode never reaches the handler.
        assert.deepStrictEqual(yield* get(`${base}/%E0%A4%A`), {
          status: 400,
          type: "text/plain; charset=utf-8",
          body: "bad request target"
        })
        assert.deepStrictEqual(yield* get(`${base}/x`, { method: "POST", body: "1" }), {
          status: 200,
          type: "text/plain; charset=utf-8",
          body: "POST /x"
        })
        assert.deepStrictEqual(
          seen.map((r) => [r.method, r.path, r.query]),
          [
            ["GET", "/a b/index.html", "?token=x"],
            ["GET", "/boom", ""],
            ["POST", "/x", ""]
          ]
        )
        // A join on the same port is unaffected.
        const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
        yield* client.close(1000)
      })
    )
  )

  it.live("without a handler, a plain request is answered 426", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const server = yield* WebSocket.serve({ runToken, worldSize: 1 })
        const answer = yield* get(`http://127.0.0.1:${server.port}/`)
        assert.deepStrictEqual([answer.status, answer.body], [426, "WebSocket upgrade required"])
      })
    )
  )
})
