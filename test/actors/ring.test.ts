import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher.ts"
import type { RunOptions } from "../../actors/run-types.ts"

const drifting = fileURLToPath(new URL("../fixtures/trainers/drifting.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-ring-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const fast: Partial<RunOptions> = { heartbeatTimeoutMs: 3000, heartbeatIntervalMs: 200, tickMs: 50, batchSize: 8, averageEverySteps: 4, outDir, backend: "ring" }

type Result = Awaited<ReturnType<typeof Launcher.run>>
const clean = (result: Result) => result.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])

describe("the ring backend end to end: real worker threads all-reduce among themselves", () => {
  it("a ring of 3 trains 2 epochs with clean audits", async () => {
    const result = await Launcher.run({ ...fast, trainer: drifting, worldSize: 3, epochs: 2 })
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 4800, 0, 0], [1, 4800, 0, 0]])
  })
})
