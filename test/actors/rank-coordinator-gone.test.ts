// A rank never outlives its coordinator (docs/faults.md): a coordinator that goes
// silent with its channel still open, and a WebSocket server that goes away. Real clock; the
// silent coordinator is an in-memory endpoint that stops sending, the server a real one.
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import { afterAll, describe, expect, it } from "vitest"
import * as Rank from "../../actors/rank/rank.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Memory from "../../src/transport/memory.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"

const runtime = Runtime.detect()
const steady = pathToFileURL(join(import.meta.dirname, "../fixtures/trainers/steady.ts")).href
const outDir = mkdtempSync(join(tmpdir(), "cohort-gone-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const rankData = (dir: string, coordinatorTimeoutMs: number): Rank.RankData => ({
  trainer: steady,
  worldSize: 1,
  seed: 1,
  batchSize: 8,
  averageEverySteps: 4,
  heartbeatIntervalMs: 100,
  progressIntervalMs: 100,
  hangAfterMs: undefined,
  saveDir: `${dir}/save`,
  checkpointDir: `${dir}/checkpoints`,
  coordinatorTimeoutMs
})

/** Takes frames from the coordinator's inbox until the rank's `Hello`. */
const awaitHello = (coordinator: Transport.TransportShape) =>
  Effect.gen(function* () {
    while (true) {
      const event = yield* Queue.take(coordinator.inbox)
      if (event._tag !== "Frame") continue
      const decoded = Codec.decode(event.bytes, { from: event.peer })
      if (decoded._tag === "Success" && decoded.success.message._tag === "Hello") return
    }
  })

const beat = Codec.encode(Frame.fromCoordinator({ _tag: "CoordHeartbeat" }))
const emergencyOf = (dir: string): Rank.EmergencySave =>
  JSON.parse(readFileSync(`${dir}/save/rank0/emergency.json`, "utf8")) as Rank.EmergencySave

describe(`a rank whose coordinator is gone saves and leaves (${runtime})`, () => {
  it("a coordinator that beats keeps the rank; once it stops sending with its channel open, the rank saves and leaves with code 3 after coordinatorTimeoutMs", async () => {
    const dir = mkdtempSync(join(outDir, "silent-"))
    const lines: Array<string> = []
    let leftWith: number | undefined
    let leftAtMs = 0
    const program = Effect.gen(function* () {
      const network = yield* Memory.make
      const coordinator = yield* network.endpoint(Transport.coordinatorPeer)
      const transport = yield* network.endpoint(0)
      const link: Rank.Link = { transport, rank: 0, data: rankData(dir, 1500), detach: () => (line) => lines.push(line) }
      const fiber = yield* Effect.forkChild(
        Rank.run(link, (code) => {
          leftWith = code
          leftAtMs = Date.now()
        })
      )
      yield* awaitHello(coordinator)
      // 2 s of beats every 100 ms: well inside 1500 ms each time, so the rank stays.
      let lastBeatMs = 0
      for (let i = 0; i < 20; i++) {
        yield* coordinator.send(0, beat)
        lastBeatMs = Date.now()
        yield* Effect.sleep(100)
      }
      expect(leftWith).toBe(undefined)
      yield* Fiber.join(fiber)
      return leftAtMs - lastBeatMs
    })
    const silentMs = await Effect.runPromise(Effect.scoped(program))
    expect(leftWith).toBe(Rank.coordinatorGoneExitCode)
    expect(silentMs).toBeGreaterThanOrEqual(1500)
    expect(silentMs).toBeLessThan(1500 + 5000)
    const record = emergencyOf(dir)
    expect([record.emergency, record.rank, record.reason, record.saved, record.epoch]).toEqual([true, 0, "CoordinatorSilent", true, -1])
    expect(record.silentMs).toBeGreaterThan(1500)
    expect(JSON.parse(readFileSync(`${dir}/save/rank0/steady.json`, "utf8"))).toEqual({ rank: 0, params: [0, 0, 0, 0] })
    expect(lines).toEqual([`cohort rank 0: the coordinator is gone (${record.detail}); saved to ${dir}/save/rank0 (emergency)`])
    expect(record.detail).toMatch(/^no frame for \d+ ms, over coordinatorTimeoutMs 1500$/)
  }, 30_000)

  it("a rank the run closes at its end (4020, 4019) before it trained says so and saves nothing; one that trained saves as when the coordinator is gone", async () => {
    const closedBy = (code: number, trainFirst: boolean) =>
      Effect.gen(function* () {
        const dir = mkdtempSync(join(outDir, `closed-${code}-`))
        const lines: Array<string> = []
        let leftWith: number | undefined
        const network = yield* Memory.make
        const coordinator = yield* network.endpoint(Transport.coordinatorPeer)
        const transport = yield* network.endpoint(0)
        const link: Rank.Link = { transport, rank: 0, data: rankData(dir, 60_000), detach: () => (line) => lines.push(line) }
        const fiber = yield* Effect.forkChild(Rank.run(link, (code) => void (leftWith = code)))
        yield* awaitHello(coordinator)
        if (trainFirst)
          yield* coordinator.send(0, Codec.encode(Frame.fromCoordinator({ _tag: "StartEpoch", epoch: 0, offset: 0, size: 16 })))
        yield* Effect.sleep(100)
        coordinator.disconnect(0, code)
        yield* Fiber.join(fiber)
        return { dir, lines, leftWith }
      })
    for (const code of [Transport.CloseCode.JoinRunOver, Transport.CloseCode.JoinShuttingDown]) {
      const { dir, lines, leftWith } = await Effect.runPromise(Effect.scoped(closedBy(code, false)))
      expect(leftWith).toBe(Rank.coordinatorGoneExitCode)
      expect(lines).toEqual([`cohort rank 0: the run ended before this rank trained (close code ${code}); nothing to save`])
      expect(() => emergencyOf(dir)).toThrow()
    }
    const trained = await Effect.runPromise(Effect.scoped(closedBy(Transport.CloseCode.JoinRunOver, true)))
    expect(emergencyOf(trained.dir)).toMatchObject({
      emergency: true,
      rank: 0,
      reason: "ChannelClosed",
      closeCode: 4020,
      epoch: 0,
      saved: true
    })
    expect(trained.lines).toEqual([
      `cohort rank 0: the coordinator is gone (channel closed with code 4020); saved to ${trained.dir}/save/rank0 (emergency)`
    ])
  }, 30_000)

  it("a WebSocket rank whose server goes away saves and leaves with code 3 at once, long before coordinatorTimeoutMs", async () => {
    const dir = mkdtempSync(join(outDir, "socket-"))
    const lines: Array<string> = []
    let leftWith: number | undefined
    const program = Effect.gen(function* () {
      const serverScope = yield* Scope.make()
      const runToken = "gone-token-0123456789"
      const server = yield* WebSocket.serve({ runToken, worldSize: 1 }).pipe(Scope.provide(serverScope))
      const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
      const link: Rank.Link = {
        transport: client.transport,
        rank: 0,
        data: rankData(dir, 60_000),
        detach: () => (line) => lines.push(line)
      }
      const fiber = yield* Effect.forkChild(Rank.run(link, (code) => (leftWith = code)))
      yield* awaitHello(server.transport)
      const closedAtMs = Date.now()
      yield* Scope.close(serverScope, Exit.void)
      yield* Fiber.join(fiber)
      return Date.now() - closedAtMs
    })
    const tookMs = await Effect.runPromise(Effect.scoped(program))
    expect(leftWith).toBe(Rank.coordinatorGoneExitCode)
    expect(tookMs).toBeLessThan(30_000)
    const record = emergencyOf(dir)
    expect([record.emergency, record.rank, record.reason, record.saved]).toEqual([true, 0, "ChannelClosed", true])
    expect(typeof record.closeCode).toBe("number")
    expect(JSON.parse(readFileSync(`${dir}/save/rank0/steady.json`, "utf8"))).toEqual({ rank: 0, params: [0, 0, 0, 0] })
    expect(lines).toEqual([`cohort rank 0: the coordinator is gone (${record.detail}); saved to ${dir}/save/rank0 (emergency)`])
    expect(record.detail).toMatch(/^channel closed( with code \d+)?$/)
  }, 30_000)
})
