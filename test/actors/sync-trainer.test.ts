// A trainer whose trainBatch returns its result, not a promise: the rank's loop takes it without
// a suspension of its own (rank-training.ts, `trainBatch`), so every other wait of the loop
// (heartbeats, the inbox, the ring's collectives) rides on the loop's own turns. The other ring
// tests train asynchronously (a 4 ms timer a batch).
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { clean, fastRuns } from "./fast-runs.ts"

const driftingSync = fileURLToPath(new URL("../fixtures/trainers/drifting-sync.ts", import.meta.url))
const { fast } = fastRuns("sync-trainer", { backend: "ring" })

describe("a synchronous trainer on the ring", () => {
  it.each([
    ["worker threads, a shared all-reduce area", "worker", "area"],
    ["child processes, area files in memory", "process", "file"]
  ] as const)(
    "(%s): a rank that exits mid-collective, the survivors redo the round; no other death, clean audits",
    async (_, transport, links) => {
      const result = await Launcher.run({
        ...fast,
        trainer: driftingSync,
        transport,
        worldSize: 3,
        epochs: 2,
        collectiveFaults: [{ rank: 1, round: 2, step: 1, fault: "exit" }]
      })
      expect(result.exitCode).toBe(0)
      expect(clean(result)).toEqual([
        [0, 4800, 0, 0],
        [1, 4800, 0, 0]
      ])
      expect(result.deaths.map((d) => [d.rank, d.cause])).toEqual([[1, "exited with code 70 without Exiting"]])
      expect(result.ring?.links).toBe(links)
      expect(result.ring?.generations).toBe(2)
    }
  )
})
