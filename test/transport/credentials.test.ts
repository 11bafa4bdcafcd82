// A rank's own credential (`src/transport/credentials.ts`) and how the WebSocket server takes
// it (`ServerOptions.credential`): HMACs of the run token that the server checks without a list;
// a credential for index 2 joins as 2 (also when asked for "auto") and never as 1; an "any"
// credential takes one index; revoked and expired ones are refused with their own codes.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Credentials from "../../src/transport/credentials.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"

const runToken = "run-token-cred-4b9e21a7"
const runId = "RUNcred001"
const nowMs = 1_800_000_000_000

describe("credentials", () => {
  it("a credential checks under its run's token and id only, and any change to it is a wrong token", () => {
    const text = Credentials.issue(runToken, runId, { id: "c1", rank: 2, expiresAtMs: undefined })
    assert.match(text, /^cohort1\.c1\.2\.0\.[A-Za-z0-9_-]{43}$/)
    assert.deepStrictEqual(
      Credentials.check(runToken, runId, text, nowMs, () => false),
      { id: "c1", rank: 2 }
    )
    assert.isUndefined(Credentials.check("another-run-token-xx", runId, text, nowMs, () => false))
    assert.isUndefined(Credentials.check(runToken, "RUNother01", text, nowMs, () => false))
    // Claiming another rank with the same mac.
    assert.isUndefined(Credentials.check(runToken, runId, text.replace(".2.0.", ".1.0."), nowMs, () => false))
    assert.isUndefined(Credentials.check(runToken, runId, `${text.slice(0, -1)}${text.endsWith("A") ? "B" : "A"}`, nowMs, () => false))
    assert.isUndefined(Credentials.check(runToken, runId, runToken, nowMs, () => false))
  })

  it("a new id is `c` and 12 hex digits, 13 characters, as docs/security.md shows it", () => {
    const id = Credentials.newId()
    assert.match(id, /^c[0-9a-f]{12}$/)
    assert.strictEqual(id.length, 13)
  })

  it("revoked, then expired, each with its own close code", () => {
    const text = Credentials.issue(runToken, runId, { id: "c2", rank: "any", expiresAtMs: nowMs + 1000 })
    assert.deepStrictEqual(
      Credentials.check(runToken, runId, text, nowMs, () => false),
      { id: "c2", rank: "any" }
    )
    assert.deepStrictEqual(
      Credentials.check(runToken, runId, text, nowMs, (id) => id === "c2"),
      { closeCode: Transport.CloseCode.CredentialRevoked, reason: "credential c2 was revoked" }
    )
    assert.deepStrictEqual(
      Credentials.check(runToken, runId, text, nowMs + 1000, () => false),
      { closeCode: Transport.CloseCode.CredentialExpired, reason: "credential c2 expired" }
    )
  })

  it("bad fields are refused when issuing", () => {
    assert.throws(() => Credentials.issue(runToken, runId, { id: "a.b", rank: 0, expiresAtMs: undefined }), RangeError)
    assert.throws(() => Credentials.issue(runToken, runId, { id: "c", rank: -1, expiresAtMs: undefined }), RangeError)
    assert.throws(() => Credentials.issue(runToken, runId, { id: "c", rank: 0, expiresAtMs: 0 }), RangeError)
  })
})

describe("the WebSocket server with credentials", () => {
  const revoked = new Set<string>()
  const serve = (worldSize: number) => {
    const joins: Array<[number, string | undefined]> = []
    return Effect.map(
      WebSocket.serve({
        runToken,
        worldSize,
        credential: (token) => Credentials.check(runToken, runId, token, Date.now(), (id) => revoked.has(id)),
        onJoined: (rank, _address, credential) => void joins.push([rank, credential])
      }),
      (server) => ({ server, joins })
    )
  }
  const token = (id: string, rank: number | "any", expiresAtMs?: number) => Credentials.issue(runToken, runId, { id, rank, expiresAtMs })
  const refusal = (options: WebSocket.ClientOptions) =>
    Effect.scoped(WebSocket.connect(options)).pipe(
      Effect.flip,
      Effect.map((error) => (error.reason._tag === "Refused" ? error.reason.closeCode : -1))
    )

  it.live(
    "a credential for index 2 joins as 2 (asked for auto too), never as 1; an 'any' one takes one index; the run token still joins",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { server, joins } = yield* serve(4)
          assert.strictEqual(yield* refusal({ url: server.url, runToken: token("k2", 2), rank: 1 }), Transport.CloseCode.CredentialMismatch)
          const two = yield* WebSocket.connect({ url: server.url, runToken: token("k2", 2), rank: "auto" })
          assert.strictEqual(two.rank, 2)
          const any = yield* WebSocket.connect({ url: server.url, runToken: token("kany", "any"), rank: 3 })
          assert.strictEqual(any.rank, 3)
          yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
          assert.deepStrictEqual(joins, [
            [2, "k2"],
            [3, "kany"],
            [0, undefined]
          ])
          assert.strictEqual(
            yield* refusal({ url: server.url, runToken: token("kany", "any"), rank: 1 }),
            Transport.CloseCode.CredentialMismatch
          )
          assert.deepStrictEqual(yield* server.refusals, { [Transport.CloseCode.CredentialMismatch]: 2 })
        })
      )
  )

  it.live("revoked and expired credentials are refused with 4022 and 4023; a forged one with 4001", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { server } = yield* serve(2)
        revoked.add("gone")
        assert.strictEqual(yield* refusal({ url: server.url, runToken: token("gone", 0), rank: 0 }), Transport.CloseCode.CredentialRevoked)
        assert.strictEqual(
          yield* refusal({ url: server.url, runToken: token("old", 0, Date.now() - 1), rank: 0 }),
          Transport.CloseCode.CredentialExpired
        )
        const forged = Credentials.issue("not-the-run-token-at-all", runId, { id: "f", rank: 0, expiresAtMs: undefined })
        assert.strictEqual(yield* refusal({ url: server.url, runToken: forged, rank: 0 }), Transport.CloseCode.WrongToken)
      })
    )
  )
})
