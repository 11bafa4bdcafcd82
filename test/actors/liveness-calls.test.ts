// Liveness that does not depend on the trainer's turn (docs/liveness.md): real ranks whose
// synchronous `save` blocks for 3x the heartbeat timeout are not declared, and their checkpoints
// are written; a `trainBatch` that never returns is still declared within the heartbeat timeout.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { RunOptions } from "../../actors/record/run-types.ts"

const slowSave = fileURLToPath(new URL("../fixtures/trainers/slow-save.ts", import.meta.url))
const endlessBatch = fileURLToPath(new URL("../fixtures/trainers/endless-batch.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-liveness-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const heartbeatTimeoutMs = 1000
const options: Partial<RunOptions> = {
  heartbeatTimeoutMs,
  heartbeatIntervalMs: 200,
  tickMs: 50,
  batchSize: 8,
  averageEverySteps: 4,
  outDir
}

describe("a save longer than the heartbeat timeout is not a death", () => {
  // The fixture's save blocks its thread for 3000 ms: 3x heartbeatTimeoutMs.
  process.env["COHORT_TEST_SAVE_MS"] = String(3 * heartbeatTimeoutMs)

  // The three runs go side by side: their ranks mostly sleep (the steady batches, the saves in
  // Atomics.wait), and each has folders of its own.
  for (const transport of ["worker", "process"] as const) {
    it.concurrent(`ranks whose every checkpoint blocks 3x heartbeatTimeoutMs complete with no death and every checkpoint written (${transport})`, async () => {
      const result = await Launcher.run({
        ...options,
        trainer: slowSave,
        worldSize: 3,
        epochs: 2,
        transport,
        saveTimeoutMs: 20_000,
        // The fixture has no evaluate: the Eval asked before each checkpoint holds its rank for
        // next to nothing, so that the save's own hold is what keeps the rank.
        evalTimeoutMs: 1,
        // A rank in a process of its own watches its coordinator too: its own save is not the
        // coordinator's silence.
        ...(transport === "process" ? { coordinatorTimeoutMs: 1500 } : {})
      })
      expect(result.deaths).toEqual([])
      expect(result.outcome.status).toBe("completed")
      expect(result.exitCode).toBe(0)
      expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([
        [4800, 0, 0],
        [4800, 0, 0]
      ])
      for (const version of [0, 1]) expect(existsSync(join(result.runDir, "checkpoints", `v${version}`, "steady.json"))).toBe(true)
      expect(result.alerts.filter((a) => a.class === "SaveTimeout" || a.class === "RankLost")).toEqual([])
    }, 90_000)
  }

  it.concurrent("a save past saveTimeoutMs: a SaveTimeout alert names the bound and the rank is declared (every rank saves as slowly, so each holder in turn)", async () => {
    // The fixture has no evaluate: the Eval before the checkpoint is never answered, and holds the
    // rank for evalTimeoutMs too (the coordinator cannot tell it was skipped), so both are small.
    const result = await Launcher.run({
      ...options,
      trainer: slowSave,
      worldSize: 2,
      epochs: 2,
      saveTimeoutMs: 500,
      evalTimeoutMs: 200,
      rolePolicy: { rank: 0 }
    })
    const timeouts = result.alerts.filter((a) => a.class === "SaveTimeout")
    expect(timeouts.length).toBeGreaterThanOrEqual(1)
    expect(timeouts[0]!.detail).toMatch(/^rank 0 ran past saveTimeoutMs 500 on checkpoint 0 \(no frame for \d+ ms\)$/)
    expect(result.deaths[0]).toMatchObject({ rank: 0, detector: "heartbeat" })
    expect(result.deaths[0]!.cause).toMatch(
      /^no frame for \d+ ms \(timeout 1000 ms \+ evalTimeoutMs 200 \+ saveTimeoutMs 500 for the calls it was asked\)$/
    )
  }, 90_000)
})

describe("a trainBatch that never returns is still declared within the heartbeat timeout", () => {
  it("rank 1 blocks in its 20th batch: declared by heartbeat within heartbeatTimeoutMs plus a tick and scheduling margin; the run completes clean", async () => {
    const blockedFile = join(outDir, "blocked-at")
    process.env["COHORT_TEST_BLOCKED_FILE"] = blockedFile
    let declaredAtMs: number | undefined
    const result = await Launcher.run({
      ...options,
      trainer: endlessBatch,
      worldSize: 3,
      epochs: 1,
      transport: "process",
      onEvent: (event) => {
        if (event.type === "death") declaredAtMs ??= Date.now()
      }
    })
    expect(result.deaths.map((d) => [d.rank, d.detector])).toEqual([[1, "heartbeat"]])
    expect(result.deaths[0]!.cause).toMatch(/^no frame for \d+ ms \(timeout 1000 ms\)$/)
    const blockedAtMs = Number(readFileSync(blockedFile, "utf8"))
    // Stated bound: heartbeatTimeoutMs after its last frame, which left at most heartbeatIntervalMs
    // before it blocked; 2 s of margin for the tick and a loaded machine.
    expect(declaredAtMs! - blockedAtMs).toBeGreaterThan(heartbeatTimeoutMs - 200)
    expect(declaredAtMs! - blockedAtMs).toBeLessThan(heartbeatTimeoutMs + 2000)
    expect(result.outcome.status).toBe("completed")
    expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[4800, 0, 0]])
  }, 90_000)
})
