/**
 * A model too large for the links' message limit: every model travels whole through the
 * coordinator's links at some point (a contribution, an `Update`, the model after each epoch), so
 * the run refuses it at formation with the limit in its message instead of standing still once
 * the first frame is refused.
 */
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { fastRuns } from "./fast-runs.ts"

const overLimit = fileURLToPath(new URL("../fixtures/trainers/over-message-limit.ts", import.meta.url))
const { fast } = fastRuns("model-size")

describe("a model over the links' message limit", () => {
  it("fails the formation, naming the largest model that fits", async () => {
    const run = Launcher.run({ ...fast, trainer: overLimit, worldSize: 2, epochs: 1 })
    await expect(run).rejects.toThrow(
      "the trainer's model has 4,177,921 parameters (16,711,684 bytes as float32); a model travels whole in one message beside 65,536 bytes kept for the frame's other fields, so the links' message limit of 16,777,216 bytes fits at most 4,177,920 parameters"
    )
  }, 60_000)
})
