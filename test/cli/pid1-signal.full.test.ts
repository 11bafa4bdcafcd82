// NEEDS ROOT ON LINUX (full tier): the command as PID 1 of its PID namespace (a container's entry,
// `unshare --pid --fork`). PID 1 gets no default action for a signal it has no handler for, so a
// SIGTERM that came while the command was still loading (here: a trainer module that takes 20 s to
// import) used to be dropped, and only a SIGKILL ended it; it now ends the command at once, 143.
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { removeDir, waitFor } from "../cli-process.ts"

const cli = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))
const slowImport = fileURLToPath(new URL("../fixtures/trainers/slow-import.ts", import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), "cohort-pid1-"))
const started: Array<ChildProcess> = []
afterAll(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) spawnSync("kill", ["-KILL", String(child.pid)])
  await removeDir(scratch)
})

describe("cohort serve as PID 1", () => {
  it("a SIGTERM while the trainer module still loads ends it at once (143), not at the container's SIGKILL", async () => {
    if (process.platform !== "linux" || process.getuid?.() !== 0) throw new Error("THIS TEST NEEDS ROOT ON LINUX (unshare)")
    const marker = join(scratch, "importing")
    const args = ["--pid", "--fork", "--kill-child", process.execPath, cli, "serve", "--trainer", slowImport, "--world-size", "1"]
    const child = spawn("unshare", [...args, "--epochs", "1", "--out", join(scratch, "runs")], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, COHORT_TEST_IMPORT_MS: "20000", COHORT_TEST_IMPORT_MARKER: marker }
    })
    started.push(child)
    let err = ""
    child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()))
    const exit = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
    await waitFor(() => existsSync(marker) && readFileSync(marker, "utf8") !== "", 60_000, `the trainer's import (stderr: ${err})`)
    // The trainer sees itself as PID 1: the command runs first in its namespace.
    expect(readFileSync(marker, "utf8")).toBe("1")
    const sentAt = Date.now()
    // unshare --fork passes no signal on: the namespace's PID 1 is its only child.
    const pid1 = Number(readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim())
    process.kill(pid1, "SIGTERM")
    // unshare exits as its child did: 128 + 15.
    const late = new Promise<string>((resolve) => setTimeout(() => resolve("still running 15 s after the SIGTERM"), 15_000).unref())
    expect(await Promise.race([exit, late]), err).toBe(143)
    expect(Date.now() - sentAt).toBeLessThan(10_000)
  }, 90_000)
})
