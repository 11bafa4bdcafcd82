import { describe, expect, it } from "vitest"
import * as Failover from "../../bench/failover.ts"

// The quick versions of the benches that train real workers (a minute and more on 2 cores): full
// tier only; the straggler bench's is in straggler.full.test.ts (Node only). The quick tier keeps cheaper runs of the same paths: test/actors/launcher.test.ts
// (kills, hangs and a round deadline with clean audits) and test/actors/ring.test.ts (a fault
// inside an all-reduce); the benches themselves are type-checked by `npm test`.
describe("quick benchmarks that train real workers", () => {
  it("failover: real workers are killed and hung, each caught by its detector, with clean audits; a ring member exits inside an all-reduce and the survivors complete the next round", async () => {
    const { result, hostile, websocket, ring } = await Failover.run(true)
    expect([result.worldSize, result.kills, result.hangs, result.lost, result.duplicated]).toEqual([7, 3, 1, 0, 0])
    // The same cluster with its last rank flooding 100,000 frames/s: every honest death caught by
    // its detector, clean audits (the flooder itself may be closed where the machine cannot keep up).
    expect([hostile.worldSize, hostile.kills, hostile.hangs, hostile.lost, hostile.duplicated]).toEqual([7, 3, 1, 0, 0])
    // The same quiet cluster as rank processes joined over WebSocket (loopback).
    expect([websocket.transport, websocket.worldSize, websocket.kills, websocket.hangs, websocket.lost, websocket.duplicated]).toEqual([
      "websocket",
      7,
      3,
      1,
      0,
      0
    ])
    // The ring row: rank 0 exits inside round 3's all-reduce; the 3 survivors re-form (generation
    // 2 of 2) and complete a round after it, with clean audits.
    expect([ring.worldSize, ring.deaths, ring.generations, ring.lost, ring.duplicated]).toEqual([4, 1, 2, 0, 0])
    expect(ring.declaredToNextRoundMs.median).toBeGreaterThanOrEqual(0)
  }, 180_000)
})
