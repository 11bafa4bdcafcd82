import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Memory from "../../src/transport/memory.ts"
import * as Supervisor from "../../src/transport/supervisor.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Script from "./rank-script.ts"

describe("transport supervisor (docs/design.md §3.10, §5)", () => {
  it.effect("every end is one death report after the rank's last frame, whatever the rank sent before it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const network = yield* Memory.make
        const coordinator = yield* network.endpoint(Transport.coordinatorPeer)
        const r0 = yield* network.endpoint(0)
        const r1 = yield* network.endpoint(1)
        yield* r0.send(Transport.coordinatorPeer, Script.dataFrame(0))
        yield* r0.send(Transport.coordinatorPeer, Script.dataFrame(1))
        yield* network.kill(0, DeathReport.exited(0))
        yield* r1.send(Transport.coordinatorPeer, Script.dataFrame(5))
        // Whatever a rank claims (here an Exiting look-alike), the supervisor reports its end: only
        // the core, which knows whether it accepted an Exiting, may call the end clean.
        yield* r1.send(Transport.coordinatorPeer, Uint8Array.of(0xee))
        yield* network.kill(1, DeathReport.exited(0))
        const inbound = yield* Supervisor.supervise(coordinator).pipe(Stream.take(6), Stream.runCollect)
        const perRank = (rank: number) =>
          inbound
            .filter((i) => (i._tag === "Frame" || i._tag === "BadFrame" ? i.peer : i.rank) === rank)
            .map((i) => (i._tag === "Frame" ? Script.indexOf(i.bytes) : i))
        assert.deepStrictEqual(perRank(0), [0, 1, DeathReport.make(0, DeathReport.exited(0))])
        assert.deepStrictEqual(perRank(1), [5, -1, DeathReport.make(1, DeathReport.exited(0))])
      })
    )
  )

  it("a bad frame passes through unchanged", () => {
    const bad: Transport.BadFrame = { _tag: "BadFrame", peer: 3, error: "x", arrivedMs: 1 }
    assert.strictEqual(Supervisor.classify(bad), bad)
    assert.deepStrictEqual(
      Supervisor.classify({ _tag: "Ended", peer: 4, cause: DeathReport.crashed("boom") }),
      DeathReport.make(4, DeathReport.crashed("boom"))
    )
  })

  it("two crashes are the same error when their message and top stack frame agree", () => {
    assert.strictEqual(DeathReport.topFrame("Error: x\n    at a (f.ts:1:2)\n    at b (g.ts:3:4)"), "at a (f.ts:1:2)")
    assert.strictEqual(DeathReport.topFrame("no frames here"), "")
    assert.strictEqual(DeathReport.fingerprintOf("x", "Error: x\n    at a (f.ts:1:2)\n    at c (h.ts:5:6)"), "x\nat a (f.ts:1:2)")
    assert.strictEqual(DeathReport.fingerprintOf("x", undefined), "x\n")
    assert.deepStrictEqual(DeathReport.crashedBy("plain text"), { _tag: "Crashed", error: "plain text", fingerprint: "plain text\n" })
  })
})
