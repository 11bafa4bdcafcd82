import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Worker from "../../src/transport/worker.ts"
import { contractSuite } from "./contract.ts"
import * as Fixture from "./fixtures/entry.ts"
import * as Script from "./rank-script.ts"

const entry = await Fixture.entry("worker-rank")

contractSuite({
  name: `worker threads (${Runtime.detect()})`,
  exitCause: DeathReport.exited(0),
  closedCause: (code) => DeathReport.disconnected(code),
  start: (ranks, options) =>
    Effect.gen(function* () {
      const host = yield* Worker.host(options)
      for (let rank = 0; rank < ranks; rank++) yield* host.spawn({ entry, rank })
      return host.transport
    })
})

/** Asks rank 0 to send `n` frames then leave `how`; returns the events that follow, through its end. */
const dieAfterBurst = (how: Script.Leave, n: number, extra: Partial<Worker.SpawnOptions> = {}) =>
  Effect.gen(function* () {
    const host = yield* Worker.host()
    yield* host.spawn({ entry, rank: 0, ...extra })
    yield* host.transport.send(0, Script.command({ op: "burst", n, bytes: 32, then: how }))
    const frames: Array<number> = []
    while (true) {
      const event = yield* Effect.orDie(Queue.take(host.transport.inbox))
      if (event._tag === "Frame") frames.push(Script.indexOf(event.bytes))
      else if (event._tag === "Ended") return { frames, ended: event, host }
    }
  })

const upTo = (n: number) => Array.from({ length: n }, (_, i) => i)
const runtime = Runtime.detect()

/**
 * `Crashed{error}` with the error's stack where the worker's `error` event carries one (Node and
 * Bun); Deno's carries none (a rank reports its stack itself, in its `Crashing` frame).
 */
const assertCrashed = (ended: unknown, error: string): void => {
  const { cause } = ended as { readonly cause: DeathReport.DeathCause }
  const stack = cause._tag === "Crashed" ? cause.stack : undefined
  if (runtime === "deno") assert.strictEqual(stack, undefined)
  else assert.match(stack ?? "", new RegExp(`^Error: ${error}\n\\s+at `))
  assert.deepStrictEqual(ended, { _tag: "Ended", peer: 0, cause: DeathReport.crashed(error, stack) })
}

describe(`worker-thread supervision (${runtime}): one death report per way to die, after the last frame`, () => {
  it.effect("a worker that throws is Crashed with its error, after its last frame", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { frames, ended } = yield* dieAfterBurst("throw", 200)
        assert.deepStrictEqual(frames, upTo(200))
        assertCrashed(ended, "rank threw")
      })
    )
  )

  it.effect("a worker that rejects a promise is Crashed with the rejection, after its last frame", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { frames, ended } = yield* dieAfterBurst("reject", 200)
        assert.deepStrictEqual(frames, upTo(200))
        assertCrashed(ended, "rank rejected")
      })
    )
  )

  it.effect("a worker that calls process.exit(7) right after sending is Exited 7, after its last frame", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { frames, ended } = yield* dieAfterBurst("exit7", 2500)
        assert.deepStrictEqual(frames, upTo(2500))
        assert.deepStrictEqual(ended, { _tag: "Ended", peer: 0, cause: DeathReport.exited(7) })
      })
    )
  )

  it.effect("a worker that exits 0 without Exiting still ends with a report: Exited 0", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { frames, ended } = yield* dieAfterBurst("exit0", 10)
        assert.deepStrictEqual(frames, upTo(10))
        assert.deepStrictEqual(ended.cause, DeathReport.exited(0))
      })
    )
  )

  it.effect(
    `a TypeScript entry starts as it is (${runtime === "node" ? "through the tsx bootstrap" : "natively"}) and exits 0 after its frames`,
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { frames, ended } = yield* dieAfterBurst("exit0", 3, { entry: Fixture.typescript("worker-rank") })
          assert.deepStrictEqual(frames, upTo(3))
          assert.deepStrictEqual(ended.cause, DeathReport.exited(0))
        })
      )
  )

  it.effect("a worker the host terminates is Killed terminate, after its last frame", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const host = yield* Worker.host()
        yield* host.spawn({ entry, rank: 0 })
        yield* host.transport.send(0, Script.command({ op: "burst", n: 300, bytes: 32, then: "hang" }))
        for (let i = 0; i < 300; i++) {
          const event = yield* Effect.orDie(Queue.take(host.transport.inbox))
          assert.strictEqual(event._tag === "Frame" && Script.indexOf(event.bytes), i)
        }
        yield* host.terminate(0)
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(host.transport.inbox)), {
          _tag: "Ended",
          peer: 0,
          cause: DeathReport.killed("terminate")
        })
      })
    )
  )

  if (runtime === "bun") {
    it.effect("bun ignores worker resourceLimits: a worker past its heap limit runs on and is Exited 0", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { frames, ended } = yield* dieAfterBurst("oom", 5, { resourceLimits: { maxOldGenerationSizeMb: 32 } })
          assert.deepStrictEqual(frames, upTo(5))
          assert.deepStrictEqual(ended.cause, DeathReport.exited(0))
        })
      )
    )
  } else {
    it.effect(`a worker past its heap limit is Crashed out of memory (${runtime} enforces resourceLimits)`, () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { frames, ended } = yield* dieAfterBurst("oom", 5, { resourceLimits: { maxOldGenerationSizeMb: 32 } })
          assert.deepStrictEqual(frames, upTo(5))
          assert.strictEqual(ended.cause._tag, "Crashed")
          assert.match((ended.cause as DeathReport.Crashed).error, /out of memory/i)
        })
      )
    )
  }

  it.effect(
    `a worker started with nice 7 runs its thread at nice 7${process.platform === "linux" ? "" : " (Linux only: 0 here)"}, the host's thread stays as it was`,
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const hostNice = Script.ownNice()
          const host = yield* Worker.host()
          yield* host.spawn({ entry, rank: 0, nice: 7 })
          assert.strictEqual(yield* Script.niceOf(host.transport), process.platform === "linux" ? Math.max(7, hostNice) : hostNice)
          assert.strictEqual(Script.ownNice(), hostNice)
        })
      )
  )

  it.effect("closing the host's scope terminates its workers; a second spawn of one rank is refused", () =>
    Effect.gen(function* () {
      const host = yield* Effect.scoped(
        Effect.gen(function* () {
          const host = yield* Worker.host()
          yield* host.spawn({ entry, rank: 0 })
          const error = yield* Effect.flip(host.spawn({ entry, rank: 0 }))
          assert.deepStrictEqual(error.reason, { _tag: "SpawnFailed", detail: "rank 0 already has a child" })
          return host
        })
      )
      const error = yield* Effect.flip(host.transport.send(0, Script.dataFrame(0)))
      assert.deepStrictEqual(error.reason, { _tag: "Closed" })
      assert.deepStrictEqual(Transport.coordinatorPeer, -1)
    })
  )
})

describe(`worker-thread output (${runtime}): prints go to onOutput, never to the host's stdout`, () => {
  it.effect("what a worker prints through console and process.stdout/stderr reaches onOutput line by line, bounded", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const lines: Array<readonly [number, string]> = []
        const host = yield* Worker.host({ onOutput: (rank, line) => lines.push([rank, line]) })
        yield* host.spawn({ entry, rank: 3 })
        const { replies, ended } = yield* Script.printAndExit(host.transport, 3)
        assert.deepStrictEqual(ended, { _tag: "Ended", peer: 3, cause: DeathReport.exited(0) })
        assert.strictEqual(replies, Script.prints.length + 2)
        assert.deepStrictEqual(ended, { _tag: "Ended", peer: 3, cause: DeathReport.exited(0) })
        const isStderr = (line: string) => Script.printedLines.stderr.includes(line)
        assert.deepStrictEqual(
          lines.filter(([, line]) => !isStderr(line)),
          Script.printedLines.stdout.map((line) => [3, line] as const)
        )
        assert.deepStrictEqual(
          lines.filter(([, line]) => isStderr(line)),
          Script.printedLines.stderr.map((line) => [3, line] as const)
        )
      })
    )
  )
})
