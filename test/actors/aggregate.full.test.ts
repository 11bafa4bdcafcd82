import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { RunOptions } from "../../actors/record/run-types.ts"
import * as SavedModel from "../../src/train/saved-model.ts"

const poisoner = fileURLToPath(new URL("../fixtures/trainers/poisoner.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-aggregate-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const target = [1, 2, 3, 4]

/** One epoch of 4 ranks with rank 3 poisoning every round; the coordinator's model after it, its distance from the honest target, the run. */
const poisoned = async (poison: "scale" | "flip", options: Partial<RunOptions>) => {
  process.env["COHORT_TEST_POISON"] = poison
  try {
    const result = await Launcher.run({
      trainer: poisoner,
      worldSize: 4,
      epochs: 1,
      heartbeatTimeoutMs: 5000,
      tickMs: 50,
      batchSize: 8,
      averageEverySteps: 4,
      outDir,
      ...options
    })
    const model = await SavedModel.read(join(result.runDir, "checkpoints", "v0"), SavedModel.coordinatorFiles)
    if (model._tag !== "Model") throw new Error(`no epoch model: ${model.reason}`)
    const distance = Math.sqrt(target.reduce((sum, t, j) => sum + (model.params[j]! - t) ** 2, 0))
    return { result, distance: Number.isFinite(distance) ? distance : Number.POSITIVE_INFINITY }
  } finally {
    delete process.env["COHORT_TEST_POISON"]
  }
}

describe("robust aggregation end to end: rank 3 of 4 poisons every contribution", () => {
  for (const [poison, robust] of [
    ["scale", "trimmed-mean"],
    ["flip", "median"]
  ] as const) {
    it(`${poison === "scale" ? "parameters × 1e6" : "sign-flipped parameters"}: the mean is wrecked, ${robust} lands on the honest model and names rank 3; every audit exact`, async () => {
      const plain = await poisoned(poison, {})
      const guarded = await poisoned(poison, { aggregate: robust })
      // Side by side: the plain mean is pulled far off (or out of float range), the robust rule is not.
      expect(plain.distance).toBeGreaterThan(1)
      expect(guarded.distance).toBeLessThan(0.01)
      for (const { result } of [plain, guarded]) {
        expect(result.outcome.status).toBe("completed")
        expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[1600, 0, 0]])
      }
      const outliers = guarded.result.alerts.filter((a) => a.class === "OutlierParams")
      expect(outliers.length).toBeGreaterThan(0)
      expect(new Set(outliers.map((a) => a.path))).toEqual(new Set(["root/rank3"]))
      expect(plain.result.alerts.filter((a) => a.class === "OutlierParams")).toEqual([])
    })
  }

  it("outlierRoundsMax 3 declares the poisoner dead after its third outlier round; the survivors finish with an exact audit", async () => {
    const { result, distance } = await poisoned("scale", { aggregate: "median", outlierRoundsMax: 3 })
    expect(result.outcome.status).toBe("completed")
    expect(result.deaths.map((d) => [d.rank, d.cause])).toEqual([
      [3, "refused: its parameters were outliers in 3 rounds (outlierRoundsMax 3)"]
    ])
    expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[1600, 0, 0]])
    expect(distance).toBeLessThan(0.01)
  })
})
