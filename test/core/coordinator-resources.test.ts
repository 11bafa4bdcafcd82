import { describe, expect, it } from "vitest"
import * as Coordinator from "../../src/core/coordinator.ts"
import { make, tags, tick } from "./harness.ts"

describe("the coordinator's resources are its own problem, never a rank's", () => {
  it("a CoordinatorResource input is a critical alert at root, folded like any other; no rank is touched", () => {
    const s = make({ worldSize: 2, epochSamples: 20, epochs: 1 })
    Coordinator.start(s, 0)
    const detail = "the dashboard refused 5 connections at its cap, connectionsMax 256 (5 in all); the run goes on"
    const cmds = Coordinator.step(s, { _tag: "CoordinatorResource", nowMs: 10, detail })
    expect(cmds).toEqual([
      { _tag: "Alert", alert: { ts: 10, severity: "critical", path: "root", class: "CoordinatorResource", detail, count: 1 } }
    ])
    expect(Coordinator.step(s, { _tag: "CoordinatorResource", nowMs: 20, detail })).toEqual([]) // folded into the window
    expect(Coordinator.activeCount(s)).toBe(2)
  })

  it("ranks crashing the same way of EMFILE (out of file descriptors) are deaths, never a repeated crash: no TrainerFault", () => {
    const s = make({ worldSize: 4, epochSamples: 100, epochs: 1 })
    Coordinator.start(s, 0)
    const error = "EMFILE: too many open files, uv_resident_set_memory"
    const stack = `Error: ${error}\n    at engineMemoryBytes (node.ts:1:1)`
    for (const rank of [1, 2]) {
      Coordinator.step(s, {
        _tag: "DeathReport",
        rank,
        nowMs: 5,
        cause: { _tag: "Crashed", error, stack, fingerprint: `${error}\nat engineMemoryBytes` }
      })
    }
    expect(tags(tick(s, 5)).filter((t) => t === "Alert:RankLost" || t === "Broadcast:ShutdownWithSave")).toEqual([
      "Alert:RankLost",
      "Alert:RankLost"
    ])
    expect(s.phase).toBe("running")
    expect(s.repeatedCrash).toBe(undefined)
  })
})
