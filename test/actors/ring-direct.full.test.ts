// The ring between child processes over direct links (`ringLinks` `direct`), beyond the exit
// mid-collective of test/actors/ring.test.ts: a hung neighbour (its links stay open; only
// staleness declares it) and a corrupt step, which no coordinator checks on a direct link. Node
// only (vitest.config.ts): the links' runtime-specific parts run under every runtime in
// test/transport/peer-ring.test.ts and the quick ring test.
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { clean, fastRuns } from "./fast-runs.ts"

const drifting = fileURLToPath(new URL("../fixtures/trainers/drifting.ts", import.meta.url))
const { fast } = fastRuns("ring-direct", { backend: "ring", transport: "process" })

describe("the ring between processes over direct links", () => {
  it("a rank that hangs mid-collective (its links stay open) is declared stale by the coordinator; the survivors re-form, redo the round over new links, and the audit is clean", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      worldSize: 3,
      epochs: 1,
      collectiveFaults: [{ rank: 2, round: 2, step: 2, fault: "hang" }]
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => [d.rank, d.detector])).toEqual([[2, "heartbeat"]])
    // Their area files in memory (`FileAllReduce`): the hung rank's neighbours wait for its token.
    expect(result.ring?.links).toBe("file")
    expect(result.ring?.generations).toBe(2)
    expect(result.ring?.relayed).toBe(0)
  })

  it("a corrupt step (every value NaN) on a direct link fails its receiver's collective, which says so in one line and is declared crashed (no coordinator checks a direct step: ringLinks relay for that); clean audit", async () => {
    const lines: Array<string> = []
    const result = await Launcher.run({
      ...fast,
      trainer: drifting,
      // Ring of 4: step 5 is the last all-gather step, which the re-formed ring of 3 never reaches.
      worldSize: 4,
      epochs: 1,
      // Steps over the links, not the area files (whose corrupt row fails its own rank: test/actors/ring.test.ts).
      ringAreaMemoryMb: 0,
      collectiveFaults: [{ rank: 1, round: 2, step: 5, fault: "corrupt" }],
      onRankOutput: (rank, line) => lines.push(`[rank ${rank}] ${line}`)
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0]])
    expect(result.deaths.map((d) => d.rank)).toEqual([2])
    expect(lines.filter((line) => line.includes("ring collective failed"))).toEqual([
      "[rank 2] cohort rank 2: ring collective failed (direct socket link): step 5 carried a value that is not finite"
    ])
    expect(result.ring?.generations).toBe(2)
  })
})
