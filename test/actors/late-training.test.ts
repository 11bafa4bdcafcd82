// Training that a round did not wait for still reaches the model: a rank left out of a round
// (`roundDeadlineMs`, `roundSilenceMs`) carries what it trained onto the round's model, and a
// silent rank's chunks taken back at an epoch's end are trained by others, its own training of
// them dropped. The tally trainer shows it: every sample's parameter must be above 0. These runs
// contribute changes (`deltas`, on by default with either option): a whole model folded a round
// late is averaged as it stands, and a round of only such contributions takes the others' progress
// since its base away (docs/edge-averaging.md "Deltas"; replayed on the core below).
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { resolveOptions } from "../../actors/launcher/launch-options.ts"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { RunOptions, RunResult } from "../../actors/record/run-types.ts"
import * as Cpu from "../../src/averaging/cpu.ts"
import * as Deltas from "../../src/averaging/deltas.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import { frame, make, tick } from "../core/harness.ts"
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

/**
 * How the stalled-rank run below, at a machine load of 17 to 24, ended some epochs with 32 or 64
 * samples' tallies at 0 while every audit was exact: a round of only late whole models. Replayed on
 * the core with explicit times; the rounds' models are averaged as the coordinator's shell averages
 * them (`Cpu.mean`, contributions turned into parameters by `Deltas` when the run's options say
 * so). Three ranks, 12 samples, chunks of 2, two in flight, `roundSilenceMs` 100; one parameter
 * per sample position, +1 where a rank trained it.
 *
 * - Rank 1 stalls from the start, holding [4, 8). Ranks 0 and 2 contribute [0, 2) and [8, 10);
 *   round 0 closes without rank 1 (silent past the bound).
 * - Rank 0 contributes [2, 4) to round 1 and is idle; rank 1's chunks are taken back and handed
 *   to it. Rank 2, which holds [10, 12), is starved of CPU.
 * - Rounds 1, 2 and 3 close without rank 2 (silent past the bound) but with rank 0's [2, 4),
 *   [4, 6) and [6, 8), each rank 0's parameters on the model before.
 * - Rank 2 then sends [10, 12) with its parameters, trained on round 0's model: the Updates of
 *   rounds 1 to 3 were still on their way. No other rank owes round 4: it closes with rank 2
 *   alone, and the epoch ends.
 *
 * Rank 2's whole model lacks rounds 1 to 3, so the epoch's model had [2, 8) at 0, though the audit
 * counted every sample once. Its change since round 0's model (`deltas`), added to round 3's model,
 * loses nothing.
 */
const lateAlone = (deltas: boolean): { readonly model: Float32Array; readonly audit: ReadonlyArray<ReadonlyArray<number>> } => {
  const s = make({
    worldSize: 3,
    epochSamples: 12,
    epochs: 1,
    mode: "progressive",
    chunkSamples: 2,
    chunksInflightMax: 2,
    heartbeatTimeoutMs: 10_000,
    roundSilenceMs: 100
  })
  const sent = deltas ? Deltas.make() : undefined
  let model: Float32Array | undefined
  let epochModel: Float32Array | undefined
  const carryOut = (cmds: ReadonlyArray<Coordinator.Command>) => {
    for (const cmd of cmds) {
      if (cmd._tag === "AverageRound") {
        const mean = Cpu.mean(cmd.params)
        if (!Cpu.isError(mean)) model = mean
        for (const rank of Coordinator.survivors(s)) sent?.modelSent(rank, cmd.round)
      }
      if (cmd._tag === "EpochModel") epochModel = model
    }
  }
  // What each rank applied last (its round and model) and trained since.
  const ranks = [0, 1, 2].map(() => ({ round: -1, model: new Float32Array(12), trained: new Float32Array(12) }))
  const apply = (rank: number) => {
    ranks[rank] = { round: s.round - 1, model: model!.slice(), trained: new Float32Array(12) }
  }
  const train = (rank: number, nowMs: number, offset: number) => {
    const r = ranks[rank]!
    r.trained.fill(1, offset, offset + 2)
    carryOut(frame(s, rank, nowMs, { _tag: "ChunkDone", epoch: 0, offset, size: 2 }))
    const whole = r.model.map((value, i) => value + r.trained[i]!)
    // A rank that applied a model sends its change since, with deltas on (`rank-training.ts` `contribute`).
    const params = deltas && r.round >= 0 ? r.trained.slice() : whole
    const message = { _tag: "Params", epoch: 0, round: r.round + 1, samplesDone: 0, params } as const
    carryOut(frame(s, rank, nowMs, sent?.toParams(rank, message, model) ?? message))
  }
  carryOut(Coordinator.start(s, 0))
  train(0, 10, 0)
  train(2, 10, 8)
  carryOut(tick(s, 110)) // round 0 closes without rank 1
  apply(0)
  apply(2)
  train(0, 120, 2)
  carryOut(tick(s, 130)) // rank 1's [4, 8) taken back, to idle rank 0
  expect(s.counters.takeBacks).toBe(1)
  carryOut(tick(s, 220)) // round 1 closes without rank 2
  apply(0)
  train(0, 230, 4) // round 2: rank 2 still silent
  apply(0)
  train(0, 250, 6) // round 3
  expect([s.round, s.epoch, s.counters.roundsClosedWithoutSilent]).toEqual([4, 0, 4])
  train(2, 255, 10) // round 4: rank 2 alone, on round 0's model
  expect(s.summaries.length).toBe(1)
  return { model: epochModel!, audit: s.summaries.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated]) }
}

describe("a late whole model closing a round alone (the core's rounds, averaged as the shell does)", () => {
  it("averages away the rounds it missed: the audit is exact, but [2, 8) are 0 in the epoch's model", () => {
    const { model, audit } = lateAlone(false)
    expect(audit).toEqual([[0, 12, 0, 0]])
    expect([...model].flatMap((value, i) => (value > 0 ? [] : [i]))).toEqual([2, 3, 4, 5, 6, 7])
  })

  it("a run with roundSilenceMs or roundDeadlineMs contributes changes by default, and then every sample reaches the model", () => {
    const resolved = (options: Partial<RunOptions>) => resolveOptions({ trainer: "t.ts", ...options }, false).deltas
    expect([resolved({}), resolved({ roundSilenceMs: 100 }), resolved({ roundDeadlineMs: 50 })]).toEqual([false, true, true])
    expect([resolved({ roundSilenceMs: 100, deltas: false }), resolved({ roundSilenceMs: 100, backend: "ring" })]).toEqual([false, false])
    const { model, audit } = lateAlone(resolved({ roundSilenceMs: 100, mode: "progressive" }))
    expect(audit).toEqual([[0, 12, 0, 0]])
    expect([...model].flatMap((value, i) => (value > 0 ? [] : [i]))).toEqual([])
  })
})

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
