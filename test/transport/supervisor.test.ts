import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Memory from "../../src/transport/memory.ts"
import * as Supervisor from "../../src/transport/supervisor.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Script from "./rank-script.ts"

const exitingFrame = Uint8Array.of(0xee)
const isExiting = (frame: Uint8Array) => frame.length === 1 && frame[0] === 0xee

describe("transport supervisor (DESIGN.md §3.10, §5)", () => {
  it.effect("an end without Exiting is one death report after the rank's last frame; with Exiting it is a clean exit", () =>
    Effect.scoped(Effect.gen(function*() {
      const network = yield* Memory.make
      const coordinator = yield* network.endpoint(Transport.coordinatorPeer)
      const r0 = yield* network.endpoint(0)
      const r1 = yield* network.endpoint(1)
      yield* r0.send(Transport.coordinatorPeer, Script.dataFrame(0))
      yield* r0.send(Transport.coordinatorPeer, Script.dataFrame(1))
      yield* network.kill(0, DeathReport.exited(0))
      yield* r1.send(Transport.coordinatorPeer, Script.dataFrame(5))
      yield* r1.send(Transport.coordinatorPeer, exitingFrame)
      yield* network.kill(1, DeathReport.exited(0))
      const inbound = yield* Supervisor.supervise(coordinator, { isExiting }).pipe(Stream.take(6), Stream.runCollect)
      const perRank = (rank: number) =>
        inbound
          .filter((i) => (i._tag === "Frame" || i._tag === "BadFrame" ? i.peer : i.rank) === rank)
          .map((i) => (i._tag === "Frame" ? Script.indexOf(i.bytes) : i))
      assert.deepStrictEqual(perRank(0), [0, 1, DeathReport.make(0, DeathReport.exited(0))])
      assert.deepStrictEqual(perRank(1), [5, -1, { _tag: "Left", rank: 1, cause: DeathReport.exited(0) }])
    })))

  it("a bad frame passes through and an exiting recorded by the caller makes the end clean", () => {
    const supervisor = Supervisor.make({ isExiting })
    const bad: Transport.BadFrame = { _tag: "BadFrame", peer: 3, error: "x", arrivedMs: 1 }
    assert.strictEqual(supervisor.classify(bad), bad)
    supervisor.exiting(3)
    assert.deepStrictEqual(supervisor.classify({ _tag: "Ended", peer: 3, cause: DeathReport.killed("SIGKILL") }), {
      _tag: "Left",
      rank: 3,
      cause: DeathReport.killed("SIGKILL")
    })
    assert.deepStrictEqual(
      supervisor.classify({ _tag: "Ended", peer: 4, cause: DeathReport.crashed("boom") }),
      DeathReport.make(4, DeathReport.crashed("boom"))
    )
  })

  it("a rank's Crashing frame turns its exit into Crashed{error, stack}; a kill stays a kill", () => {
    const stack = "Error: trainBatch always fails\n    at Object.trainBatch (file:///t.ts:9:13)\n    at run (rank.ts:1:1)"
    const crashing = (frame: Uint8Array) => (frame[0] === 0xcc ? { error: "trainBatch always fails", stack } : undefined)
    const supervisor = Supervisor.make({ isExiting, crashOf: crashing })
    for (const peer of [1, 2, 3]) {
      const frame: Transport.Frame = { _tag: "Frame", peer, bytes: Uint8Array.of(0xcc), arrivedMs: 1 }
      assert.strictEqual(supervisor.classify(frame), frame)
    }
    const crashed = DeathReport.crashed("trainBatch always fails", stack)
    assert.deepStrictEqual(crashed, {
      _tag: "Crashed",
      error: "trainBatch always fails",
      stack,
      fingerprint: "trainBatch always fails\nat Object.trainBatch (file:///t.ts:9:13)"
    })
    assert.deepStrictEqual(supervisor.classify({ _tag: "Ended", peer: 1, cause: DeathReport.exited(1) }), DeathReport.make(1, crashed))
    assert.deepStrictEqual(supervisor.classify({ _tag: "Ended", peer: 2, cause: DeathReport.crashed("exit") }), DeathReport.make(2, crashed))
    assert.deepStrictEqual(
      supervisor.classify({ _tag: "Ended", peer: 3, cause: DeathReport.killed("SIGKILL") }),
      DeathReport.make(3, DeathReport.killed("SIGKILL"))
    )
    // Without a Crashing frame first, an exit is an exit.
    assert.deepStrictEqual(supervisor.classify({ _tag: "Ended", peer: 4, cause: DeathReport.exited(1) }), DeathReport.make(4, DeathReport.exited(1)))
  })

  it("two crashes are the same error when their message and top stack frame agree", () => {
    assert.strictEqual(DeathReport.topFrame("Error: x\n    at a (f.ts:1:2)\n    at b (g.ts:3:4)"), "at a (f.ts:1:2)")
    assert.strictEqual(DeathReport.topFrame("no frames here"), "")
    assert.strictEqual(DeathReport.fingerprintOf("x", "Error: x\n    at a (f.ts:1:2)\n    at c (h.ts:5:6)"), "x\nat a (f.ts:1:2)")
    assert.strictEqual(DeathReport.fingerprintOf("x", undefined), "x\n")
    assert.deepStrictEqual(DeathReport.crashedBy("plain text"), { _tag: "Crashed", error: "plain text", fingerprint: "plain text\n" })
  })
})
