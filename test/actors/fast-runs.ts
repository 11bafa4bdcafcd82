// Shared by the launcher's end-to-end tests in test/actors/: a scratch folder for a test file's
// runs, the fast timings those runs use, and an epoch's audit as one row.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import type { RunOptions, RunResult } from "../../actors/record/run-types.ts"

/**
 * A scratch folder `cohort-<name>-…` for the calling test file's runs (removed after its tests),
 * and options that run fast there: a 3 s heartbeat timeout beaten every 200 ms, 50 ms ticks,
 * batches of 8 and a round every 4 steps; `extra` on top.
 */
export const fastRuns = (
  name: string,
  extra: Partial<RunOptions> = {}
): { readonly outDir: string; readonly fast: Partial<RunOptions> } => {
  const outDir = mkdtempSync(join(tmpdir(), `cohort-${name}-`))
  afterAll(() => rmSync(outDir, { recursive: true, force: true }))
  return {
    outDir,
    fast: { heartbeatTimeoutMs: 3000, heartbeatIntervalMs: 200, tickMs: 50, batchSize: 8, averageEverySteps: 4, outDir, ...extra }
  }
}

/** Each epoch's audit: `[epoch, samples committed, lost, duplicated]`. */
export const clean = (result: RunResult) => result.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])
