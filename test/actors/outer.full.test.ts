import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { RunOptions } from "../../actors/record/run-types.ts"
import * as SavedModel from "../../src/train/saved-model.ts"

const wide = fileURLToPath(new URL("../fixtures/trainers/wide.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-outer-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const base: RunOptions = {
  trainer: wide,
  worldSize: 3,
  epochs: 2,
  heartbeatTimeoutMs: 5000,
  tickMs: 50,
  batchSize: 8,
  averageEverySteps: 4,
  outDir,
  outerLr: 0.7,
  outerMomentum: 0.9
}

const read = async (dir: string, names: SavedModel.FileNames) => {
  const model = await SavedModel.read(dir, names)
  if (model._tag !== "Model") throw new Error(`${dir}: ${model.reason}`)
  return model
}

describe("the outer optimizer end to end (cpu backend)", () => {
  it("its momentum is saved with each epoch model, and a run resumed from epoch 0's model and momentum ends on the uninterrupted run's model; without the momentum it does not", async () => {
    const whole = await Launcher.run(base)
    expect(whole.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([
      [1600, 0, 0],
      [1600, 0, 0]
    ])
    const v0 = join(whole.runDir, "checkpoints", "v0")
    const model0 = await read(v0, SavedModel.coordinatorFiles)
    const momentum0 = await read(v0, SavedModel.outerMomentumFiles)
    expect([momentum0.meta.epoch, momentum0.meta.round]).toEqual([model0.meta.epoch, model0.meta.round])
    expect(momentum0.params.some((v) => v !== 0)).toBe(true)
    const model1 = await read(join(whole.runDir, "checkpoints", "v1"), SavedModel.coordinatorFiles)

    const resumeState = { epoch: 1, firstRound: model0.meta.round + 1, committed: [], params: model0.params }
    const resumed = await Launcher.run({ ...base, resumeState: { ...resumeState, outerMomentum: momentum0.params } })
    const cold = await Launcher.run({ ...base, resumeState })
    for (const run of [resumed, cold])
      expect(run.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([[1, 1600, 0, 0]])
    const again = await read(join(resumed.runDir, "checkpoints", "v1"), SavedModel.coordinatorFiles)
    const restarted = await read(join(cold.runDir, "checkpoints", "v1"), SavedModel.coordinatorFiles)
    const distance = (a: Float32Array, b: Float32Array) => Math.max(...a.map((v, j) => Math.abs(v - b[j]!)))
    expect(again.meta.round).toBe(model1.meta.round)
    // The same arithmetic on the same values: the same model (the trainer is near its target by then,
    // so a restart without the momentum is off by little, but by far more than rounding).
    expect(distance(again.params, model1.params)).toBeLessThanOrEqual(1e-6)
    expect(distance(restarted.params, model1.params)).toBeGreaterThan(1e-5)
    // Plain averaging writes no momentum.
    const plain = await Launcher.run({ ...base, epochs: 1, outerLr: 1, outerMomentum: 0 })
    expect(existsSync(join(plain.runDir, "checkpoints", "v0", "cohort-outer-momentum.f32"))).toBe(false)
  })
})
