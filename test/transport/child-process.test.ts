import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as ChildProcess from "../../src/transport/child-process.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Transport from "../../src/transport/transport.ts"
import { contractSuite } from "./contract.ts"
import * as Fixture from "./fixtures/entry.ts"
import * as Script from "./rank-script.ts"

const entry = await Fixture.entry("child-rank")
const runtime = Runtime.detect()

contractSuite({
  name: `child processes (${runtime})`,
  exitCause: DeathReport.exited(0),
  closedCause: (code) => DeathReport.disconnected(code),
  start: (ranks, options) =>
    Effect.gen(function* () {
      const host = yield* ChildProcess.host(options)
      for (let rank = 0; rank < ranks; rank++) yield* host.spawn({ entry, rank })
      return host.transport
    })
})

const burstThen = (how: Script.Leave, n: number, from: URL = entry, heapLimitMb?: number) =>
  Effect.gen(function* () {
    const host = yield* ChildProcess.host()
    yield* host.spawn({ entry: from, rank: 0, ...(heapLimitMb === undefined ? {} : { heapLimitMb }) })
    yield* host.transport.send(0, Script.command({ op: "burst", n, bytes: 32, then: how }))
    const frames: Array<number> = []
    for (let i = 0; i < n; i++) {
      const event = yield* Effect.orDie(Queue.take(host.transport.inbox))
      frames.push(event._tag === "Frame" ? Script.indexOf(event.bytes) : -1)
    }
    assert.deepStrictEqual(
      frames,
      Array.from({ length: n }, (_, i) => i)
    )
    return host
  })

describe(`child-process supervision (${runtime}): one death report per way to die, after the last frame`, () => {
  it.effect("a child killed with SIGKILL is Killed SIGKILL, after its last frame", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const host = yield* burstThen("hang", 400)
        yield* host.kill(0, "SIGKILL")
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(host.transport.inbox)), {
          _tag: "Ended",
          peer: 0,
          cause: DeathReport.killed("SIGKILL")
        })
      })
    )
  )

  it.effect("a child that calls process.exit(7) right after writing is Exited 7, after its last frame", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const host = yield* burstThen("exit7", 2500)
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(host.transport.inbox)), {
          _tag: "Ended",
          peer: 0,
          cause: DeathReport.exited(7)
        })
      })
    )
  )

  it.effect(`a TypeScript entry starts as it is (${runtime === "node" ? "node --import tsx" : runtime}) and exits 0 after its frames`, () =>
    Effect.scoped(
      Effect.gen(function* () {
        const host = yield* burstThen("exit0", 3, Fixture.typescript("child-rank"))
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(host.transport.inbox)), {
          _tag: "Ended",
          peer: 0,
          cause: DeathReport.exited(0)
        })
      })
    )
  )

  it.effect("a child that throws exits 1 and is Exited 1 (a process cannot report its error)", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const host = yield* burstThen("throw", 50)
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(host.transport.inbox)), {
          _tag: "Ended",
          peer: 0,
          cause: DeathReport.exited(1)
        })
      })
    )
  )
})

describe(`child-process priority (${runtime})`, () => {
  if (runtime === "bun") {
    it.effect("bun has no heap limit for a child: past 32 MiB of heap it runs on and is Exited 0", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const host = yield* burstThen("oom", 5, entry, 32)
          assert.deepStrictEqual(yield* Effect.orDie(Queue.take(host.transport.inbox)), {
            _tag: "Ended",
            peer: 0,
            cause: DeathReport.exited(0)
          })
        })
      )
    )
  } else {
    it.effect(
      `a child past its heap limit is Crashed out of memory (${runtime} aborts it with ${runtime === "deno" ? "SIGTRAP" : "SIGABRT"})`,
      () =>
        Effect.scoped(
          Effect.gen(function* () {
            const host = yield* burstThen("oom", 5, entry, 32)
            const ended = yield* Effect.orDie(Queue.take(host.transport.inbox))
            const signal = runtime === "deno" ? "SIGTRAP" : "SIGABRT"
            assert.deepStrictEqual(ended, {
              _tag: "Ended",
              peer: 0,
              cause: DeathReport.crashed(`out of memory: the rank's process aborted (${signal}) at its heap limit of 32 MiB`)
            })
          })
        ),
      30_000
    )
  }

  it.effect("a child started with nice 7 runs at nice 7", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const host = yield* ChildProcess.host()
        yield* host.spawn({ entry, rank: 0, nice: 7 })
        // A launcher already running above nice 7 keeps its own value: the child is never raised.
        assert.strictEqual(yield* Script.niceOf(host.transport), Math.max(7, Script.ownNice()))
      })
    )
  )
})

describe(`child-process output (${runtime}): frames on a channel of their own, prints as lines`, () => {
  it.effect("what a rank prints on stdout and stderr reaches onOutput line by line, bounded, and its frames are untouched", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const lines: Array<readonly [number, string]> = []
        const host = yield* ChildProcess.host({ onOutput: (rank, line) => lines.push([rank, line]) })
        yield* host.spawn({ entry, rank: 0 })
        const { replies, ended } = yield* Script.printAndExit(host.transport)
        // One reply per print and the burst's 2 frames: nothing printed was taken for a frame.
        assert.strictEqual(replies, Script.prints.length + 2)
        assert.deepStrictEqual(ended, { _tag: "Ended", peer: 0, cause: DeathReport.exited(0) })
        const isStderr = (line: string) => Script.printedLines.stderr.includes(line)
        assert.deepStrictEqual(
          lines.filter(([, line]) => !isStderr(line)),
          Script.printedLines.stdout.map((line) => [0, line] as const)
        )
        assert.deepStrictEqual(
          lines.filter(([, line]) => isStderr(line)),
          Script.printedLines.stderr.map((line) => [0, line] as const)
        )
      })
    )
  )

  it.effect("a rank printing 100,000 lines at once gets 100 through in its first second; the rest is dropped and counted exactly", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const lines: Array<string> = []
        const host = yield* ChildProcess.host({ onOutput: (_rank, line) => lines.push(line) })
        yield* host.spawn({ entry, rank: 0 })
        const text = Array.from({ length: 100_000 }, (_, i) => `line ${i}\n`).join("")
        yield* host.transport.send(0, Script.command({ op: "print", to: "stdout", text }))
        yield* host.transport.send(0, Script.command({ op: "burst", n: 1, bytes: 8, then: "exit0" }))
        while ((yield* Effect.orDie(Queue.take(host.transport.inbox)))._tag !== "Ended") {}
        const note = /^\((\d+) lines? dropped: over 100 lines per second\)$/
        const forwarded = lines.filter((line) => !note.test(line))
        const dropped = lines.reduce((sum, line) => sum + Number(note.exec(line)?.[1] ?? 0), 0)
        assert.deepStrictEqual(
          forwarded.slice(0, 100),
          Array.from({ length: 100 }, (_, i) => `line ${i}`)
        )
        assert.match(lines[100]!, note)
        // Reading 1.3 MB takes well under a second; a loaded machine may open a few more windows.
        assert.isAtMost(forwarded.length, 1000)
        assert.strictEqual(forwarded.length + dropped, 100_000)
      })
    )
  )

  it.effect("a record header claiming 1 GiB closes that rank at once with MessageTooBig (1009); the other ranks live on", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const host = yield* ChildProcess.host()
        for (let rank = 0; rank < 3; rank++) yield* host.spawn({ entry, rank })
        // Every rank is up (answers) before rank 1 misbehaves.
        for (let rank = 0; rank < 3; rank++) yield* host.transport.send(rank, Script.command({ op: "print", to: "stdout", text: "" }))
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* Effect.orDie(Queue.take(host.transport.inbox)))._tag, "Frame")
        const started = Date.now()
        yield* host.transport.send(1, Script.command({ op: "raw", lengthBytes: 1 << 30, bytes: 64 << 20 }))
        assert.deepStrictEqual(yield* Effect.orDie(Queue.take(host.transport.inbox)), {
          _tag: "Ended",
          peer: 1,
          cause: DeathReport.disconnected(Transport.CloseCode.MessageTooBig)
        })
        // Measured 30-65 ms (Node, Bun, Deno; load average 8 on 2 cores); the bound leaves room for a loaded machine, far below the 6-10 s stall
        // of a reader that buffers the record.
        assert.isBelow(Date.now() - started, 3000)
        for (const rank of [0, 2]) {
          yield* host.transport.send(rank, Script.command({ op: "burst", n: 50, bytes: 32 }))
          for (let i = 0; i < 50; i++) {
            const event = yield* Effect.orDie(Queue.take(host.transport.inbox))
            assert.deepStrictEqual(event._tag === "Frame" && [event.peer, Script.indexOf(event.bytes)], [rank, i])
          }
        }
        assert.deepStrictEqual(yield* host.transport.peers, [0, 2])
      })
    )
  )
})
