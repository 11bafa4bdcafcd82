// A served run against joiners that hold the run token and send the messages the coordinator
// checks in plain code before their schemas (`Params`, `ChunkDone`, `Progress`;
// src/wire/internal/hot-messages.ts) with values the schemas refuse, over a real WebSocket: each
// joiner alone is closed and declared, for the field the schema names, the coordinator keeps
// running, and the honest rank's run completes with exact audits.
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { afterAll, describe, expect, it } from "vitest"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import { waitFor } from "../cli-process.ts"
import { serveHeldRun } from "../served-ranks.ts"

const held = fileURLToPath(new URL("../fixtures/trainers/steady-held.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-hot-hostile-"))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
})

const runToken = "hot-hostile-test-token-0123456789"
const tokenFile = join(dir, "token")
writeFileSync(tokenFile, `${runToken}\n`)

const f32 = new Float32Array(4)
/** Each hostile message, and where its schema's first error lies (`SchemaMismatch.path`). */
const hostileMessages: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
  [{ _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params: f32, loss: 1e13 }, "loss"],
  [{ _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params: f32, loss: Number.NaN }, "loss"],
  [{ _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params: f32, loss: null }, "loss"],
  [{ _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params: new Float64Array(4) }, "params"],
  [{ _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params: [0, 0, 0, 0] }, "params"],
  [{ _tag: "Params", epoch: 0, round: 2 ** 53, samplesDone: 0, params: f32 }, "round"],
  [{ _tag: "Params", epoch: -1, round: 0, samplesDone: 0, params: f32 }, "epoch"],
  [{ _tag: "Params", epoch: 0, round: 0, samplesDone: "0", params: f32 }, "samplesDone"],
  [{ _tag: "ChunkDone", epoch: 0, offset: 0, size: Number.POSITIVE_INFINITY }, "size"],
  [{ _tag: "ChunkDone", epoch: 0, offset: -3, size: 1 }, "offset"],
  [{ _tag: "Progress", epoch: 0, samplesDone: 0, msPerBatch: Number.NaN }, "msPerBatch"],
  [{ _tag: "Progress", epoch: 0, samplesDone: 1.5, msPerBatch: 1 }, "samplesDone"]
]

interface Hostile {
  readonly client: WebSocket.ClientHandle
  readonly scope: Scope.Closeable
  readonly say: (message: Record<string, unknown>) => void
}

const hostile = (url: string): Promise<Hostile> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const client = yield* WebSocket.connect({ url, runToken, rank: "auto" }).pipe(Scope.provide(scope))
      const say = (message: Record<string, unknown>): void =>
        void client.transport.sendUnsafe(Transport.coordinatorPeer, Codec.encode(Frame.fromRank(client.rank, message as never)))
      return { client, scope, say }
    })
  )

describe("a served run against joiners that send hot messages their schemas refuse", () => {
  it("each joiner is closed and declared alone; the run completes with exact audits", async () => {
    const hold = join(dir, "hold")
    writeFileSync(hold, "")
    const { served, at, rank0 } = await serveHeldRun({ dir, trainer: held, runToken, tokenFile, hold, maxRanks: 16, started: children })
    const closed: Array<readonly [number, number | undefined]> = []
    for (const [message, field] of hostileMessages) {
      const joiner = await hostile(at)
      joiner.say({ _tag: "Hello", paramsLength: 4 })
      joiner.say(message)
      await waitFor(
        () => joiner.client.closeCode() !== undefined,
        30_000,
        `the close of the joiner whose ${message["_tag"]} had a bad ${field}`
      )
      closed.push([joiner.client.rank, joiner.client.closeCode()])
      await Effect.runPromise(Scope.close(joiner.scope, Exit.void))
    }
    unlinkSync(hold)
    const result = await served
    expect(await rank0.exit).toBe(0)
    expect(result.exitCode).toBe(0)
    expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[4800, 0, 0]])
    const logged = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { readonly type: string; readonly death?: { readonly rank: number; readonly cause: string } })
    // Each joiner alone is declared, for the field its schema refuses; the honest rank 0 never is.
    const ranks = hostileMessages.map((_, i) => i + 1)
    expect(closed).toEqual(ranks.map((rank) => [rank, 1002]))
    const deaths = logged.flatMap((e) => (e.type === "death" && e.death !== undefined ? [e.death] : []))
    expect(deaths.map((d) => d.rank)).toEqual(ranks)
    deaths.forEach((d, i) => expect(d.cause).toContain(`a message that does not match its schema at ${hostileMessages[i]![1]}: `))
  }, 180_000)
})
