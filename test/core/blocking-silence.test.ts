import { describe, expect, it } from "vitest"
import type * as Config from "../../src/core/config.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import * as Liveness from "../../src/core/liveness.ts"
import { frame, heartbeat, make, params, ranges, tick } from "./harness.ts"

const declared = (s: Coordinator.State) => s.leaves.map((l) => [l.rank, l.kind] as const)

describe("blockingSilenceMs: a silent rank the run waits on is declared before the heartbeat timeout", () => {
  const cpu = (options: Partial<Config.Options> = {}) => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 10_000, blockingSilenceMs: 500, ...options })
    Coordinator.start(s, 0)
    return s
  }

  it("refuses a negative or non-finite bound", () => {
    for (const blockingSilenceMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const made = Coordinator.make({ worldSize: 2, epochSamples: 2, epochs: 1, blockingSilenceMs }, 0)
      expect("_tag" in made && made.option).toBe("blockingSilenceMs")
    }
  })

  it("static mode: the open round waits on a silent rank; it is declared once silent past the bound, as a silent leave, and the round closes", () => {
    const s = cpu()
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    // Rank 2 sent nothing since the start: silent 500 ms is not more than the bound.
    expect(tick(s, 500)).toEqual([])
    expect(s.leaves).toEqual([])
    const cmds = tick(s, 501)
    expect(declared(s)).toEqual([[2, "silent"]])
    expect(s.leaves[0]?.cause).toBe("no frame for 501 ms while the run waited on it (blockingSilenceMs 500)")
    expect(cmds.some((c) => c._tag === "AverageRound")).toBe(true)
  })

  it("off by default: the same round waits for the heartbeat timeout", () => {
    const s = cpu({ blockingSilenceMs: 0 })
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    tick(s, 5000)
    expect(s.leaves).toEqual([])
    tick(s, 10_001)
    expect(declared(s)).toEqual([[2, "silent"]])
  })

  it("a round not open yet waits on nobody: a silent rank keeps the heartbeat timeout", () => {
    const s = cpu()
    heartbeat(s, 100, [0, 1])
    tick(s, 2000)
    expect(s.leaves).toEqual([])
  })

  it("a rank that contributed and waits for the Update, or holds no work, is never declared early", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 10_000, blockingSilenceMs: 500 })
    Coordinator.start(s, 0)
    params(s, 0, 10, 5) // contributed: the round does not wait on it
    params(s, 1, 2000, 5)
    heartbeat(s, 2000, [2])
    tick(s, 2001)
    expect(s.leaves).toEqual([])
  })

  it("a rank running a save it was asked for is not declared early", () => {
    const s = cpu()
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    Liveness.hold(s.liveness, 2, "save", 1, 0, 60_000)
    frame(s, 2, 1, { _tag: "Heartbeat" })
    tick(s, 5000)
    expect(s.leaves).toEqual([])
  })

  it("progressive mode: the epoch's last chunks held by a silent rank are taken back once it is silent past the bound, and the audit stays exact", () => {
    const s = make({
      worldSize: 2,
      epochSamples: 20,
      epochs: 1,
      mode: "progressive",
      chunkSamples: 5,
      chunksInflightMax: 2,
      heartbeatTimeoutMs: 10_000,
      blockingSilenceMs: 500
    })
    Coordinator.start(s, 0) // rank 0 (0,5) (5,5), rank 1 (10,5) (15,5)
    frame(s, 0, 10, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 5 })
    frame(s, 0, 20, { _tag: "ChunkDone", epoch: 0, offset: 5, size: 5 })
    // Nothing left in the pool: rank 0 contributes; the round and the epoch wait on rank 1's chunks.
    params(s, 0, 30, 10)
    tick(s, 400)
    expect(s.leaves).toEqual([])
    const cmds = tick(s, 501)
    expect(declared(s)).toEqual([[1, "silent"]])
    expect(s.leaves[0]?.redoneSamples).toBe(0)
    const held = ranges(s, cmds, "AssignChunk").map(([, offset, size]) => [offset, size] as const)
    expect(held).toEqual([
      [10, 5],
      [15, 5]
    ])
    while (held.length > 0) {
      const [offset, size] = held.shift()!
      for (const [, o, z] of ranges(s, frame(s, 0, 600, { _tag: "ChunkDone", epoch: 0, offset, size }), "AssignChunk")) held.push([o, z])
    }
    const end = params(s, 0, 700, 20)
    const summary = end.find((c) => c._tag === "EpochEnded")
    expect(summary?._tag === "EpochEnded" && [summary.summary.samplesCommitted, summary.summary.lost, summary.summary.duplicated]).toEqual([
      20, 0, 0
    ])
  })
})
