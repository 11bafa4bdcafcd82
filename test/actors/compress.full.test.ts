import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import * as SavedModel from "../../src/train/saved-model.ts"
import { target } from "../fixtures/trainers/wide.ts"

const wide = fileURLToPath(new URL("../fixtures/trainers/wide.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-compress-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

type Round = { readonly type: string; readonly round?: number; readonly receivedBytes?: number; readonly sentBytes?: number }

/** One epoch of 3 ranks: the run, its rounds' traffic from the journal, the epoch model's largest distance from the target. */
const run = async (compress: "none" | "fp16" | "int8") => {
  const result = await Launcher.run({
    trainer: wide,
    worldSize: 3,
    epochs: 1,
    heartbeatTimeoutMs: 5000,
    tickMs: 50,
    batchSize: 8,
    averageEverySteps: 4,
    outDir,
    compress
  })
  const rounds = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Round)
    .filter((e) => e.type === "round")
  const model = await SavedModel.read(join(result.runDir, "checkpoints", "v0"), SavedModel.coordinatorFiles)
  if (model._tag !== "Model")
    throw new Error(
      `no epoch model (${compress}): ${model.reason}: ${readFileSync(join(result.runDir, "events.ndjson"), "utf8")
        .split("\n")
        .filter((l) => l.includes('"model"'))
        .join("\n")} in ${result.runDir}`
    )
  // The checkpoint rank saved the model it holds beside the coordinator's: the same float32 values.
  const held = await SavedModel.read(join(result.runDir, "checkpoints", "v0"), SavedModel.rankFiles)
  const error = Math.max(...model.params.map((v, j) => Math.abs(v - target[j]!)))
  const perRound = (key: "receivedBytes" | "sentBytes") => rounds.reduce((sum, r) => sum + r[key]!, 0) / rounds.length
  const heldSame = held._tag === "Model" && Buffer.from(held.params.buffer).equals(Buffer.from(model.params.buffer))
  return { result, rounds, error, heldSame, received: perRound("receivedBytes"), sent: perRound("sentBytes") }
}

describe("compressed contributions and updates end to end (cpu backend, 8,192 parameters)", () => {
  it("int8 and fp16 with error feedback land on the same model as float32 with 3.5× and 1.9× fewer bytes per round; every audit exact", async () => {
    const plain = await run("none")
    const half = await run("fp16")
    const int8 = await run("int8")
    for (const { result, rounds, heldSame } of [plain, half, int8]) {
      expect(result.outcome.status).toBe("completed")
      // Updates travel as packed changes: each rank adds them to the model it holds, as the coordinator does.
      expect(heldSame).toBe(true)
      expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[1600, 0, 0]])
      // Every round's traffic is in the journal: 3 contributions in, 3 updates out.
      expect(rounds.length).toBeGreaterThan(5)
      for (const r of rounds) expect([r.receivedBytes! > 0, r.sentBytes! > 0]).toEqual([true, true])
    }
    // A float32 round: three 32 KiB contributions in, three updates out (each frame a few bytes more).
    expect(plain.received).toBeGreaterThanOrEqual(3 * 4 * 8192)
    expect(plain.received / int8.received).toBeGreaterThanOrEqual(3.5)
    expect(plain.sent / int8.sent).toBeGreaterThanOrEqual(3.5)
    expect(plain.received / half.received).toBeGreaterThanOrEqual(1.9)
    // The target's values reach 13: float32 lands within rounding, fp16 and int8 within a step of their quantizer.
    expect(plain.error).toBeLessThan(1e-4)
    expect(half.error).toBeLessThan(13 * 2 ** -10)
    expect(int8.error).toBeLessThan(13 / 127)
  })
})
