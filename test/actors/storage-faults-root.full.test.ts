// NEEDS ROOT ON LINUX (full tier): a run whose record cannot be written stops at once, loudly and
// safely. Its run directory on a 700 KiB tmpfs that fills mid-run (ENOSPC), or on an ext4 file
// system that turns read-only mid-run (EROFS): the CLI exits 5 with one line naming the error and
// the journal's path, claims no clean audit, and a resume (after space is freed, or from a copy
// on a good disk) trains only the epochs the parent's record did not commit. Each test makes and
// removes its own mounts, even when it fails.
//
// Why ext4 and not `mount -o remount,ro`: the kernel refuses to remount a file system read-only
// while a file on it is open for writing (EBUSY), and the journal is open all run long. An ext4
// mounted `errors=remount-ro` turns read-only under its open files on an error, as a failing disk
// does; `/sys/fs/ext4/<dev>/trigger_fs_error` raises one.
import { type ChildProcess, spawnSync } from "node:child_process"
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/record/run-types.ts"
import * as Runtime from "../../src/platform/detect.ts"
import { removeDir, startCli, waitFor } from "../cli-process.ts"
import { fillDisk, requireRootLinux, sh, unmount } from "../mounts.ts"
import { epochOneUnderway, journalOf } from "../run-folders.ts"

const runtime = Runtime.detect()
const steadyPaced = fileURLToPath(new URL("../fixtures/trainers/steady-paced.ts", import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), "cohort-storage-"))
const started: Array<ChildProcess> = []
afterAll(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) spawnSync("kill", ["-KILL", String(child.pid)])
  await removeDir(scratch)
})

/**
 * Each batch's wait (ms): an epoch of 2 ranks lasts about 18 s, long enough to fill a disk inside
 * it. The faults come in epoch 1, so epoch 0 (75 batches of 32 a rank) runs at 5 ms a batch.
 */
const env = { COHORT_TEST_BATCH_MS: "240", COHORT_TEST_FAST_BATCHES: "75" }
/** The resume's batches: nothing is faulted in it, so its epoch need not be slow (about 1 s). */
const resumeEnv = { COHORT_TEST_BATCH_MS: "10" }

/**
 * Starts a run of `epochs` under `out` and waits until epoch 0 is journaled and checkpointed and
 * epoch 1 is under way; resolves with the CLI and its run directory.
 */
const startRun = async (out: string, epochs: number) => {
  const run = startCli(
    ["run", "--trainer", steadyPaced, "--transport", "worker", "--world-size", "2", "--epochs", String(epochs), "--no-kill", "--out", out],
    { cwd: process.cwd(), env, started }
  )
  const runDir = await epochOneUnderway(out, () => `stderr: ${run.err()}`)
  return { run, runDir }
}

/** What the stopped run said and left: its exit code, its storage line(s), and that nothing reads "clean". */
const expectStopped = async (run: ReturnType<typeof startCli>, runDir: string, code: string, words: string) => {
  expect(await run.exit, run.err()).toBe(5)
  const journal = join(runDir, "events.ndjson")
  const lines = run
    .err()
    .split("\n")
    .filter((line) => line.startsWith(`cohort: cannot write `))
  expect(lines.length, run.err()).toBe(1)
  expect(lines[0]).toMatch(new RegExp(`^cohort: cannot write ${journal}: ${code}: ${words}`))
  expect(lines[0]).toContain(`resume with: `)
  expect(`${run.out()}${run.err()}`).not.toMatch(/clean/)
  expect(run.out()).toContain(`its record is incomplete (cannot write ${journal}), so no audit is claimed`)
  // The alert came at once, on the live view, as a critical StorageFault.
  expect(run.out()).toMatch(new RegExp(`alert critical StorageFault root: cannot write ${journal}: ${code}`))
}

/** Resumes `runDir` and checks the chain: the parent's journaled epochs and the resume's cover each epoch exactly once. */
const expectResumed = async (runDir: string, epochs: number) => {
  const parentEpochs = journalOf(runDir).flatMap((e) => (e.type === "epoch" ? [e.summary.epoch] : []))
  expect(parentEpochs.length).toBeGreaterThanOrEqual(1)
  const resumed = startCli(["resume", runDir, "--world-size", "2", "--json"], { cwd: process.cwd(), env: resumeEnv, started })
  expect(await resumed.exit, resumed.err()).toBe(0)
  const child = JSON.parse(resumed.out()) as RunResult
  expect(child.outcome.status).toBe("completed")
  expect(child.epochs.every((e) => e.lost === 0 && e.duplicated === 0 && e.samplesCommitted === 4800)).toBe(true)
  const childEpochs = child.epochs.map((e) => e.epoch)
  expect([...parentEpochs, ...childEpochs].sort()).toEqual(Array.from({ length: epochs }, (_, epoch) => epoch))
}

describe(`a run whose record cannot be written (${runtime})`, () => {
  it("on a 700 KiB tmpfs that fills mid-run: exit 5, one line naming ENOSPC and the journal, nothing clean; resumed once space is freed, it trains only what was not committed", async () => {
    requireRootLinux("mount")
    const mount = join(scratch, "tmpfs")
    mkdirSync(mount)
    try {
      sh("mount", ["-t", "tmpfs", "-o", "size=700k", "tmpfs", mount])
      const { run, runDir } = await startRun(join(mount, "runs"), 2)
      // The journal's last memory page has room left that no filler takes: fill once that room is
      // small, so that the journal runs out of space inside the epoch, as a disk filling mid-run.
      const journalPath = join(runDir, "events.ndjson")
      await waitFor(() => readFileSync(journalPath).length % 4096 >= 2800, 60_000, "the journal's page nearly full")
      expect(journalOf(runDir).some((e) => e.type === "epoch" && e.summary.epoch === 1)).toBe(false)
      // Fill what is left, as another writer on the same disk would.
      const filler = join(mount, "filler")
      fillDisk(filler)
      await expectStopped(run, runDir, "ENOSPC", "no space left on device")
      rmSync(filler)
      await expectResumed(runDir, 2)
    } finally {
      unmount(mount)
    }
  }, 300_000)

  it("on a file system that turns read-only mid-run: exit 5, one line naming EROFS and the journal, nothing clean; resumed from a copy on a good disk, it trains only what was not committed", async () => {
    requireRootLinux("mount")
    const image = join(scratch, "ext4.img")
    const mount = join(scratch, "ext4")
    mkdirSync(mount)
    try {
      sh("truncate", ["-s", "16M", image])
      sh("mkfs.ext4", ["-q", "-F", image])
      sh("mount", ["-o", "loop,errors=remount-ro", image, mount])
      const device = basename(spawnSync("findmnt", ["-no", "SOURCE", mount], { encoding: "utf8" }).stdout.trim())
      const { run, runDir } = await startRun(join(mount, "runs"), 2)
      sh("sh", ["-c", `echo storage-test > /sys/fs/ext4/${device}/trigger_fs_error`])
      await expectStopped(run, runDir, "EROFS", "read-only file system")
      const copy = join(scratch, "copy")
      cpSync(join(mount, "runs"), copy, { recursive: true })
      await expectResumed(join(copy, basename(runDir)), 2)
    } finally {
      unmount(mount)
    }
  }, 300_000)

  it("--out on a read-only file system names the real cause (read-only), not ENOENT", async () => {
    requireRootLinux("mount")
    const mount = join(scratch, "read-only")
    mkdirSync(mount)
    try {
      sh("mount", ["-t", "tmpfs", "-o", "size=100k,ro", "tmpfs", mount])
      const run = startCli(
        ["run", "--trainer", steadyPaced, "--world-size", "2", "--epochs", "1", "--no-kill", "--out", join(mount, "runs")],
        { cwd: process.cwd(), started }
      )
      expect(await run.exit).toBe(3)
      // Node and Bun name the first folder they could not create; Deno the whole path asked for.
      const runs = join(mount, "runs").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      expect(run.err()).toMatch(new RegExp(`^cohort: the run failed: EROFS: read-only file system, mkdir '${runs}(/[^']*)?'\n$`))
    } finally {
      unmount(mount)
    }
  }, 60_000)
})
