// Packed ring steps end to end (`compress` with the ring backend, between child processes): over
// the coordinator's relay, whose round traffic the journal counts, and over direct links. Node
// only (vitest.config.ts): the packing itself is runtime-independent (test/averaging/ring-compressed.test.ts).
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { RunOptions } from "../../actors/record/run-types.ts"
import * as SavedModel from "../../src/train/saved-model.ts"
import { target } from "../fixtures/trainers/wide.ts"
import { clean, fastRuns } from "./fast-runs.ts"

const wide = fileURLToPath(new URL("../fixtures/trainers/wide.ts", import.meta.url))
const { fast } = fastRuns("ring-compress", { backend: "ring", transport: "process" })

type Round = { readonly type: string; readonly receivedBytes?: number; readonly sentBytes?: number }

/** One epoch of 3 ranks (8,192 parameters): the run, its rounds' relayed bytes, the epoch model's distance from the target, and whether the checkpoint rank holds it. */
const run = async (compress: "none" | "int8", ringLinks: "relay" | "direct", extra: Partial<RunOptions> = {}) => {
  const result = await Launcher.run({ ...fast, trainer: wide, worldSize: 3, epochs: 1, compress, ringLinks, ...extra })
  const rounds = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Round)
    .filter((e) => e.type === "round")
  const dir = join(result.runDir, "checkpoints", "v0")
  const model = await SavedModel.read(dir, SavedModel.coordinatorFiles)
  const held = await SavedModel.read(dir, SavedModel.rankFiles)
  if (model._tag !== "Model" || held._tag !== "Model") throw new Error(`no epoch model (${compress}, ${ringLinks}) in ${result.runDir}`)
  const error = Math.max(...model.params.map((v, j) => Math.abs(v - target[j]!)))
  const bytes = rounds.reduce((sum, r) => sum + r.receivedBytes! + r.sentBytes!, 0) / rounds.length
  const same = Buffer.from(held.params.buffer).equals(Buffer.from(model.params.buffer))
  return { result, rounds, error, bytes, same }
}

describe("packed ring steps between processes", () => {
  it("int8 over the relay and over direct links (there with a rank exiting mid-collective: the survivors redo the round): clean audits, the model where float32's lands, every member holding it, and 3.5× fewer relayed bytes a round", async () => {
    const plain = await run("none", "relay")
    const relayed = await run("int8", "relay")
    const direct = await run("int8", "direct", { collectiveFaults: [{ rank: 2, round: 2, step: 1, fault: "exit" }] })
    expect(direct.result.deaths.map((d) => d.rank)).toEqual([2])
    expect(direct.result.ring?.generations).toBe(2)
    for (const { result, same } of [plain, relayed, direct]) {
      expect(result.exitCode).toBe(0)
      expect(clean(result)).toEqual([[0, 1600, 0, 0]])
      expect(same).toBe(true)
    }
    expect(direct.result.ring?.links).toBe("direct")
    // Steps its neighbour sent the exiting rank after its link closed, before it was declared, go
    // by the relay (the fallback of a failed direct write): at most one sender's collective, 2(N - 1).
    expect(direct.result.ring?.relayed).toBeLessThanOrEqual(4)
    expect(relayed.result.ring?.relayed).toBeGreaterThan(0)
    expect(plain.bytes / relayed.bytes).toBeGreaterThanOrEqual(3.5)
    // Float32 ring steps carry float64 partial sums: int8 is about 5.6 times fewer bytes than those.
    // The target's values reach 13 (an int8 step of whole values would be 0.1): changes from the
    // shared model, with error feedback, land where float32 does.
    expect(plain.error).toBeLessThan(1e-4)
    expect(relayed.error).toBeLessThan(1e-3)
    expect(direct.error).toBeLessThan(1e-3)
  })
})
