// NEEDS ROOT ON LINUX (full tier): exactly once when the model after an epoch cannot be written.
// The run folder is on a small tmpfs filled inside epoch 0, while the journal's page still has
// room: the coordinator's write of checkpoints/v0 fails (ENOSPC), the run stops (exit 5), and the
// journal keeps no audit line of epoch 0 (it has no model a resume could start epoch 1 from). The
// resume, once space is freed, trains epoch 0 again and epoch 1: across the run and its resume
// every epoch is audited exactly once, and the resume names the storage fault, not a dead process.
import { type ChildProcess, spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/record/run-types.ts"
import { removeDir, startCli, waitFor } from "../cli-process.ts"
import { fillDisk, requireRootLinux, sh, unmount } from "../mounts.ts"
import { journalOf, onlyRunDir } from "../run-folders.ts"

const steadyPaced = fileURLToPath(new URL("../fixtures/trainers/steady-paced.ts", import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), "cohort-model-enospc-"))
const started: Array<ChildProcess> = []
afterAll(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) spawnSync("kill", ["-KILL", String(child.pid)])
  await removeDir(scratch)
})

/** Each batch's wait (ms): an epoch of 2 ranks lasts about 2.5 s, time enough to fill the disk inside epoch 0. */
const env = { COHORT_TEST_BATCH_MS: "30" }
/** The resume's batches: nothing is faulted in it, so it need not be slow. */
const resumeEnv = { COHORT_TEST_BATCH_MS: "4" }

describe("the model after an epoch that cannot be written (ENOSPC)", () => {
  it("is not audited by the run; its resume trains it: each epoch audited exactly once across the chain", async () => {
    requireRootLinux("mount")
    const mount = join(scratch, "tmpfs")
    mkdirSync(mount)
    try {
      sh("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", mount])
      const out = join(mount, "runs")
      const run = startCli(
        ["run", "--trainer", steadyPaced, "--transport", "worker", "--world-size", "2", "--epochs", "2", "--no-kill", "--out", out],
        { cwd: process.cwd(), env, started }
      )
      // Fill once epoch 0 trains: its remaining lines fit in the journal's last page, the model does not.
      let runDir = ""
      await waitFor(
        () => {
          runDir = onlyRunDir(out)
          return runDir !== "" && journalOf(runDir).some((e) => e.type === "progress" && e.epoch === 0)
        },
        60_000,
        `epoch 0 under way (stderr: ${run.err()})`
      )
      const filler = join(mount, "filler")
      fillDisk(filler)
      expect(await run.exit, run.err()).toBe(5)
      const v0 = join(runDir, "checkpoints", "v0")
      expect(run.err()).toMatch(new RegExp(`^cohort: cannot write ${v0}: ENOSPC: no space left on device`, "m"))
      const parent = journalOf(runDir)
      expect(parent.some((e) => e.type === "model" && e.epoch === 0 && e.error?.startsWith("ENOSPC") === true)).toBe(true)
      const parentEpochs = parent.flatMap((e) => (e.type === "epoch" ? [e.summary.epoch] : []))
      expect(parentEpochs).toEqual([])
      // A summary, when the full disk let it be written, claims no audit of epoch 0 either.
      const summary = join(runDir, "summary.json")
      if (existsSync(summary)) expect((JSON.parse(readFileSync(summary, "utf8")) as RunResult).epochs).toEqual([])

      rmSync(filler)
      const resumed = startCli(["resume", runDir, "--json"], { cwd: process.cwd(), env: resumeEnv, started })
      expect(await resumed.exit, resumed.err()).toBe(0)
      expect(resumed.err()).toContain("epoch 0's audit is not in the parent's journal: its model could not be written (ENOSPC")
      expect(resumed.err()).not.toContain("process died")
      const child = JSON.parse(resumed.out()) as RunResult
      expect(child.outcome.status).toBe("completed")
      expect(child.epochs.every((e) => e.lost === 0 && e.duplicated === 0 && e.samplesCommitted === 4800)).toBe(true)
      // The chain's audit: the parent's journaled epochs and the resume's, each epoch exactly once.
      const childDir = readdirSync(out)
        .map((name) => join(out, name))
        .find((dir) => dir !== runDir)!
      const childEpochs = journalOf(childDir).flatMap((e) => (e.type === "epoch" ? [e.summary.epoch] : []))
      expect([...parentEpochs, ...childEpochs].sort()).toEqual([0, 1])
    } finally {
      unmount(mount)
    }
  }, 60_000)
})
