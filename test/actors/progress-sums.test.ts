// A rank's progress events add up to the epoch: the coordinator's accounting, the same on every
// runtime, so this runs on Node only (vitest.config.ts); the ranks' own paths run everywhere in
// launcher.test.ts and ring.test.ts.
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { RunEvent } from "../../actors/record/run-types.ts"
import { fastRuns } from "./fast-runs.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
// Batches of 32: the sums do not depend on how many batches make them, and an epoch of 3 ranks
// is 50 batches a rank, not 200.
const { fast } = fastRuns("progress-sums", { batchSize: 32 })

describe("progress events", () => {
  it("each rank's last progress event of an epoch, before the epoch's line, is what it trained of it: they add up to the epoch (static and progressive, cpu and ring)", async () => {
    for (const [mode, backend] of [
      ["static", "cpu"],
      ["static", "ring"],
      ["progressive", "cpu"]
    ] as const) {
      const events: Array<RunEvent> = []
      const result = await Launcher.run({
        ...fast,
        trainer: steady,
        worldSize: 3,
        epochs: 2,
        mode,
        backend,
        onEvent: (event) => void events.push(event)
      })
      expect(result.exitCode).toBe(0)
      for (const epoch of [0, 1]) {
        const ended = events.findIndex((e) => e.type === "epoch" && e.summary.epoch === epoch)
        const last = new Map<number, number>()
        for (const e of events.slice(0, ended)) if (e.type === "progress" && e.epoch === epoch) last.set(e.rank, e.samplesDone)
        expect({ mode, backend, epoch, trained: [...last.values()].reduce((a, b) => a + b, 0) }).toEqual({
          mode,
          backend,
          epoch,
          trained: 4800
        })
      }
    }
  }, 120_000)
})
