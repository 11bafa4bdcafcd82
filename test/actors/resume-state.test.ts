/**
 * The launcher's low-level resume (`RunOptions.resumeState`, docs/resume.md) with real workers: a run
 * stopped at its failure limit leaves each survivor's last averaged model (`SavedModel`) in its save
 * folder, and a run resumed from the outcome's uncommitted ranges trains exactly those, starting
 * from that model; its first epoch's audit covers both runs.
 */
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import * as SavedModel from "../../src/train/saved-model.ts"
import { fastRuns } from "./fast-runs.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
// Batches of 32: an epoch of 3 ranks is 50 batches a rank, not 200; nothing here counts batches.
const { fast } = fastRuns("resume-state", { batchSize: 32 })

/** The complement of `ranges` in `[0, total)`. */
const complement = (ranges: ReadonlyArray<readonly [number, number]>, total: number): Array<readonly [number, number]> => {
  const out: Array<readonly [number, number]> = []
  let at = 0
  for (const [offset, size] of ranges) {
    if (offset > at) out.push([at, offset - at])
    at = offset + size
  }
  if (at < total) out.push([at, total - at])
  return out
}

describe("resumeState", () => {
  it("a stopped run's survivors save their last averaged model; a run resumed from its outcome trains only the uncommitted ranges, from that model", async () => {
    const first = await Launcher.run({
      ...fast,
      trainer: steady,
      worldSize: 3,
      epochs: 2,
      failureLimit: { absolute: 1 },
      kills: [{ rank: 1, atEpoch: 0, atFraction: 0.3 }]
    })
    expect(first.exitCode).toBe(1)
    const uncommitted = first.outcome.uncommitted!
    expect(uncommitted.epoch).toBe(0)
    const models = await Promise.all([0, 2].map((rank) => SavedModel.read(join(first.runDir, "save", `rank${rank}`))))
    const rounds = models.map((m) => (m._tag === "Model" ? [m.meta.rank, m.meta.paramsLength, m.meta.epoch, m.meta.round >= 0] : m.reason))
    expect(rounds).toEqual([
      [0, 4, 0, true],
      [2, 4, 0, true]
    ])
    const model = models[0]!
    if (model._tag !== "Model") return

    // Resumed on 2 ranks with a model the steady trainer never changes: every average stays it.
    const params = new Float32Array([7, 7, 7, 7])
    const committed = complement(uncommitted.ranges, 4800)
    const second = await Launcher.run({
      ...fast,
      trainer: steady,
      worldSize: 2,
      epochs: 2,
      resumeState: { epoch: 0, firstRound: model.meta.round + 1, committed, params }
    })
    expect(second.exitCode).toBe(0)
    expect(second.outcome.epochsCompleted).toBe(2)
    expect(second.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([
      [0, 4800, 0, 0],
      [1, 4800, 0, 0]
    ])
    const checkpoint = await SavedModel.read(join(second.runDir, "checkpoints", "v1"))
    expect(
      checkpoint._tag === "Model"
        ? [Array.from(checkpoint.params), checkpoint.meta.epoch, checkpoint.meta.round > model.meta.round]
        : checkpoint.reason
    ).toEqual([[7, 7, 7, 7], 1, true])
  })

  it("a model of another length than the trainer's fails the formation", async () => {
    const run = Launcher.run({
      ...fast,
      trainer: steady,
      worldSize: 2,
      epochs: 1,
      resumeState: { epoch: 0, firstRound: 1, committed: [], params: new Float32Array(5) }
    })
    await expect(run).rejects.toThrow("the saved model has 5 parameters; the trainer's model has 4 parameters")
  })

  it("a resume point outside the run is a LaunchError", async () => {
    const run = Launcher.run({
      ...fast,
      trainer: steady,
      worldSize: 2,
      epochs: 1,
      resumeState: { epoch: 1, firstRound: 0, committed: [], params: undefined }
    })
    await expect(run).rejects.toThrow("resume epoch 1 is outside [0, 1)")
  })
})
