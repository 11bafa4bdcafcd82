// The cost line of every departure while the run trains (Core.Leave): its kind, its times, its
// remainder and the samples the survivors train again.
import { describe, expect, it } from "vitest"
import * as Coordinator from "../../src/core/coordinator.ts"
import { frame, heartbeat, make, params, ranges, report, tick } from "./harness.ts"

describe("departures' cost lines", () => {
  it("static: a graceful exit, a crash and a silent leave, each with its kind, times, remainder and redone samples", () => {
    const s = make({ worldSize: 4, epochSamples: 400, epochs: 1, heartbeatTimeoutMs: 100 })
    Coordinator.start(s)
    // Rank 1 committed 20 of its 100 and reported 50 trained: 30 are redone by the survivors.
    params(s, 1, 5, 20)
    frame(s, 1, 6, { _tag: "Progress", epoch: 0, samplesDone: 50, msPerBatch: 1 })
    heartbeat(s, 10, [0, 2, 3])
    frame(s, 0, 11, { _tag: "Exiting" })
    // The report waits for the next tick, which also finds rank 3 stale: one batch.
    report(s, 1, 40)
    // Rank 3 says nothing after 10: declared at the first tick past 110.
    heartbeat(s, 100, [2])
    tick(s, 120)
    expect(s.leaves.map((l) => [l.rank, l.kind, l.remainderSamples, l.redoneSamples, l.redistributed])).toEqual([
      [0, "graceful", 100, 0, true],
      // Its remainder includes its share of rank 0's (34 of 100), rank 3's both others' shares.
      [1, "crash", 114, 30, true],
      [3, "silent", 133, 0, true]
    ])
    expect(s.leaves.map((l) => [l.lastSeenAtMs, l.reportedAtMs, l.declaredAtMs])).toEqual([
      [11, 11, 11],
      [6, 40, 120],
      [10, 120, 120]
    ])
  })

  it("progressive: done but uncommitted chunks are redone; a departure that stops the run moved nothing", () => {
    const s = make({
      worldSize: 2,
      epochSamples: 64,
      epochs: 1,
      mode: "progressive",
      batchSize: 4,
      chunkSamples: 8,
      failureLimit: { absolute: 2 }
    })
    Coordinator.start(s)
    frame(s, 0, 1, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 8 })
    report(s, 0, 2)
    tick(s, 2)
    expect(s.leaves.map((l) => [l.rank, l.kind, l.redoneSamples, l.redistributed])).toEqual([[0, "crash", 8, true]])
    report(s, 1, 3)
    tick(s, 3)
    expect(s.leaves.map((l) => [l.rank, l.redistributed])).toEqual([
      [0, true],
      [1, false]
    ])
  })

  it("the ranks that leave when the run is over have no cost line", () => {
    const s = make({ worldSize: 2, epochSamples: 8, epochs: 1 })
    Coordinator.start(s)
    params(s, 0, 1, 4)
    params(s, 1, 2, 4)
    expect(s.phase).not.toBe("running")
    frame(s, 0, 3, { _tag: "Exiting" })
    frame(s, 1, 4, { _tag: "Exiting" })
    expect(s.leaves).toEqual([])
  })
})

describe("unreachable ranks", () => {
  it("a chunk taken back from a rank a send failed to is never handed to another rank a send failed to (no ping-pong within a step)", () => {
    const s = make({ worldSize: 3, epochSamples: 960, epochs: 1, mode: "progressive", batchSize: 4, chunkSamples: 8 })
    const started = Coordinator.start(s)
    const assigned = ranges(s, started, "AssignChunk")
    const failed = (rank: number) =>
      assigned
        .filter(([to]) => to === rank)
        .flatMap(([to, offset, size]) =>
          Coordinator.step(s, {
            _tag: "SendFailed",
            rank: to,
            nowMs: 1,
            message: { _tag: "AssignChunk", epoch: 0, offset, size },
            reason: "PeerGone"
          })
        )
    // Rank 1's chunks come back; the others are full: nobody is woken.
    expect(ranges(s, failed(1), "AssignChunk")).toEqual([])
    // Rank 2's chunks come back: rank 1 is idle but unreachable, so it is not given them.
    expect(ranges(s, failed(2), "AssignChunk").filter(([to]) => to === 1 || to === 2)).toEqual([])
    // A frame from rank 1 shows it is there again: it is filled at once (idle, it would wait for ever).
    expect(ranges(s, frame(s, 1, 2, { _tag: "Heartbeat" }), "AssignChunk").map(([to]) => to)).toEqual([1, 1])
    expect(s.unreachable.has(1)).toBe(false)
  })
})
