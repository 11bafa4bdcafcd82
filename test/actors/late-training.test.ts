// Training that a round did not wait for still reaches the model: a rank left out of a round
// (`roundDeadlineMs`, `roundSilenceMs`) carries what it trained onto the round's model, and a
// silent rank's chunks taken back at an epoch's end are trained by others, its own training of
// them dropped. The tally trainer shows it: every sample's parameter must be above 0. The deadline
// runs contribute changes (`deltas`): a whole model folded a round late is averaged as it stands,
// and a round of only such contributions takes the others' progress since its base away
// (docs/records.md).
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { RunResult } from "../../actors/record/run-types.ts"
import { clean, fastRuns } from "./fast-runs.ts"

const slowRank2 = fileURLToPath(new URL("../fixtures/trainers/tally-slow-rank-2.ts", import.meta.url))
const stallRank1 = fileURLToPath(new URL("../fixtures/trainers/tally-stall-rank-1.ts", import.meta.url))
const { fast } = fastRuns("late-training")

/** The samples whose tally in epoch `epoch`'s model is 0: their training never reached it. */
const untrained = (result: RunResult, epoch: number): Array<number> => {
  const bytes = readFileSync(join(result.runDir, "checkpoints", `v${epoch}`, "cohort-epoch-model.f32"))
  const model = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)
  const zero: Array<number> = []
  model.forEach((value, i) => {
    if (!(value > 0)) zero.push(i)
  })
  return zero
}

describe("training a round did not wait for reaches the model", () => {
  for (const mode of ["progressive", "static"] as const) {
    it(`${mode}, deltas: with a round deadline, the straggler's training from before each Update it was not waiting for is in the model`, async () => {
      const result = await Launcher.run({ ...fast, trainer: slowRank2, worldSize: 3, epochs: 1, mode, roundDeadlineMs: 50, deltas: true })
      expect(result.exitCode).toBe(0)
      expect(clean(result)).toEqual([[0, 960, 0, 0]])
      expect(result.outcome.counters.roundsClosedAtDeadline).toBeGreaterThan(0)
      expect(untrained(result, 0)).toEqual([])
    }, 90_000)
  }

  it("progressive: a rank that stalls 4 s has its chunks taken back at the epoch's end; nobody is declared, the audits are exact, and every sample reached the model", async () => {
    const result = await Launcher.run({
      ...fast,
      trainer: stallRank1,
      worldSize: 3,
      epochs: 3,
      mode: "progressive",
      roundSilenceMs: 100,
      heartbeatTimeoutMs: 10_000
    })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([
      [0, 960, 0, 0],
      [1, 960, 0, 0],
      [2, 960, 0, 0]
    ])
    expect(result.deaths).toEqual([])
    expect(result.outcome.counters.takeBacks).toBeGreaterThan(0)
    for (const epoch of [0, 1, 2]) expect(untrained(result, epoch)).toEqual([])
  }, 90_000)
})
