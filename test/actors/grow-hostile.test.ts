// Growing cohorts (docs/growing.md) against joiners that hold the run token but break the rules: a served
// run (`Launcher.serve`, in this process) with one `cohort join` rank, and joiners made with the
// WebSocket client here that send what a rank never should. Under the runtime running the tests.
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { ToCoordinator } from "../../src/core/messages.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import { waitFor } from "../cli-process.ts"
import { serveHeldRun } from "../served-ranks.ts"

const runtime = Runtime.detect()
const held = fileURLToPath(new URL("../fixtures/trainers/steady-held.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-grow-hostile-"))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
})

const runToken = "grow-hostile-test-token-0123456789"
const tokenFile = join(dir, "token")
writeFileSync(tokenFile, `${runToken}\n`)

interface Hostile {
  readonly client: WebSocket.ClientHandle
  readonly scope: Scope.Closeable
  readonly say: (message: ToCoordinator) => void
}

/** A joiner of the run at `url` with the token (`rank: "auto"` by default), that sends what the test says. */
const hostile = (url: string, rank: number | "auto" = "auto"): Promise<Hostile> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const client = yield* WebSocket.connect({ url, runToken, rank }).pipe(Scope.provide(scope))
      const say = (message: ToCoordinator): void =>
        void client.transport.sendUnsafe(Transport.coordinatorPeer, Codec.encode(Frame.fromRank(client.rank, message)))
      return { client, scope, say }
    })
  )

interface Event {
  readonly type: string
  readonly rank?: number
  readonly closeCode?: number
  readonly address?: string
}

describe(`a growing run against joiners that break the rules (${runtime})`, () => {
  it("an EvalResult nobody asked for never reaches the journal; the joins the coordinator refuses at their Hello are counted and say where they came from; a joiner that never says Hello is closed with 4020 when the run completes, not waited for", async () => {
    const hold = join(dir, "hold")
    writeFileSync(hold, "")
    const { served, at, rank0 } = await serveHeldRun({ dir, trainer: held, runToken, tokenFile, hold, maxRanks: 4, started: children })

    // A joiner whose Hello gives another parameter count: closed with 4009 by the coordinator.
    const wrong = await hostile(at)
    wrong.say({ _tag: "Hello", paramsLength: 5 })
    await waitFor(() => wrong.client.closeCode() !== undefined, 30_000, "the wrong count's close")
    expect([wrong.client.rank, wrong.client.closeCode()]).toEqual([1, Transport.CloseCode.ParamsMismatch])

    // A joiner that joins properly, then reports an eval of epoch 0 that nobody asked of it.
    const forger = await hostile(at)
    forger.say({ _tag: "Hello", paramsLength: 4 })
    forger.say({ _tag: "EvalResult", epoch: 0, accuracy: 1, loss: 0 })
    forger.say({ _tag: "Exiting" })
    await Effect.runPromise(Scope.close(forger.scope, Exit.void))
    await Effect.runPromise(Scope.close(wrong.scope, Exit.void))

    // A joiner let in that never says Hello: no rank of the run, closed when it ends (4020).
    const silent = await hostile(at)

    unlinkSync(hold)
    const result = await served
    expect(await rank0.exit).toBe(0)
    expect(result.exitCode).toBe(0)
    expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[4800, 0, 0]])
    expect(result.outcome.joins?.map((j) => j.rank)).toEqual([2])
    expect([silent.client.rank, silent.client.closeCode()]).toEqual([3, Transport.CloseCode.JoinRunOver])
    expect(result.refusals).toEqual({ [Transport.CloseCode.ParamsMismatch]: 1 })
    const logged = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Event)
    expect(logged.filter((e) => e.type === "eval" && e.rank === 2)).toEqual([])
    expect(logged.filter((e) => e.type === "refused").map((e) => [e.closeCode, e.address])).toEqual([
      [Transport.CloseCode.ParamsMismatch, "127.0.0.1"]
    ])
  }, 120_000)

  it("a joiner let in that never says Hello is closed with 4004 once the formation timeout passed, counted and journaled as a refusal: it does not hold its index until the run ends", async () => {
    let listening: (url: string) => void = () => {}
    const url = new Promise<string>((resolve) => (listening = resolve))
    const served = Launcher.serve({
      trainer: held,
      worldSize: 1,
      maxRanks: 2,
      mode: "progressive",
      epochs: 1,
      runToken,
      outDir: dir,
      formationTimeoutMs: 1000,
      heartbeatTimeoutMs: 60_000,
      tickMs: 50,
      onListening: (l) => listening(l.url),
      onEvent: () => {},
      onRankOutput: () => {}
    })
    const at = await url
    // Rank 0 says Hello (the run forms) and nothing more while the test acts.
    const rank0 = await hostile(at, 0)
    rank0.say({ _tag: "Hello", paramsLength: 4 })
    const silent = await hostile(at)
    await waitFor(() => silent.client.closeCode() !== undefined, 30_000, "the silent joiner's close")
    expect([silent.client.rank, silent.client.closeCode()]).toEqual([1, Transport.CloseCode.JoinTimeout])
    rank0.say({ _tag: "Exiting" })
    await Effect.runPromise(Scope.close(rank0.scope, Exit.void))
    const result = await served
    expect(result.refusals).toEqual({ [Transport.CloseCode.JoinTimeout]: 1 })
    const logged = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Event & { readonly reason?: string })
    expect(logged.filter((e) => e.type === "refused").map((e) => [e.closeCode, e.address, e.reason])).toEqual([
      [Transport.CloseCode.JoinTimeout, "127.0.0.1", "rank 1 sent no Hello within 1000 ms of its join"]
    ])
    await Effect.runPromise(Scope.close(silent.scope, Exit.void))
  }, 120_000)
})
