// NEEDS ROOT ON LINUX (full tier): a coordinator that ran as PID 1 of its own PID namespace (as a
// container's entry point does), SIGKILLed mid-run, leaves `run.lock` naming process 1; `cohort
// resume` from outside the namespace sees it stale (one line says whose and why) and completes;
// a `resume.lock` of the same dead holder is taken over. Real processes: `unshare --pid --fork
// --mount-proc` running the CLI, whose ranks are worker threads.
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, readlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/record/run-types.ts"
import * as Runtime from "../../src/platform/detect.ts"
import { removeDir, startCli } from "../cli-process.ts"
import { epochOneUnderway, journalOf } from "../run-folders.ts"
import { childrenOf } from "../rank-processes.ts"

const runtime = Runtime.detect()
const cli = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))
// 40 ms a batch by default (an epoch of 2 ranks: about 3 s, to be killed inside epoch 1); the
// resume, which nothing interrupts, sets 4 ms.
const steadyPaced = fileURLToPath(new URL("../fixtures/trainers/steady-paced.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-pid1-"))
const started: Array<ChildProcess> = []
afterAll(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) spawnSync("kill", ["-KILL", String(child.pid)])
  await removeDir(outDir)
})

const requireRootLinux = (): void => {
  if (process.platform !== "linux" || process.getuid?.() !== 0) {
    throw new Error(`THIS TEST NEEDS ROOT ON LINUX (unshare --pid): uid ${process.getuid?.()} on ${process.platform}`)
  }
}

describe(`a coordinator that ran as PID 1 (${runtime})`, () => {
  it("SIGKILLed mid-run: its run.lock names process 1; resume says the lock is stale and why, takes over a resume.lock of the same holder, and completes with clean audits", async () => {
    requireRootLinux()
    const runtimeArgs = runtime === "deno" ? ["run", "-A", cli] : [cli]
    const parentOut = join(outDir, "runs")
    const coordinator = spawn(
      "unshare",
      [
        "--pid",
        "--fork",
        "--mount-proc",
        process.execPath,
        ...runtimeArgs,
        "run",
        "--trainer",
        steadyPaced,
        "--transport",
        "worker",
        "--world-size",
        "2",
        "--epochs",
        "3",
        "--no-kill",
        "--out",
        parentOut
      ],
      { stdio: ["ignore", "pipe", "pipe"] }
    )
    started.push(coordinator)
    let stderr = ""
    coordinator.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    coordinator.stdout.resume()
    const runDir = await epochOneUnderway(parentOut, () => `the run in PID 1, stderr: ${stderr}`)
    const lock = JSON.parse(readFileSync(join(runDir, "run.lock"), "utf8")) as { pid: number; pidNamespace?: string }
    expect(lock.pid).toBe(1)
    expect([typeof lock.pidNamespace, lock.pidNamespace === readlinkSync("/proc/self/ns/pid")]).toEqual(["string", false])
    // The namespace's PID 1 is unshare's child; killing it ends the namespace.
    const inside = childrenOf(coordinator.pid!)
    expect(inside.length).toBe(1)
    spawnSync("kill", ["-KILL", String(inside[0])])
    await new Promise<void>((resolve) =>
      coordinator.exitCode !== null || coordinator.signalCode !== null ? resolve() : coordinator.on("close", () => resolve())
    )
    expect(journalOf(runDir).some((e) => e.type === "ended")).toBe(false)
    // A resume that ran as PID 1 of that namespace and died left its lock too.
    writeFileSync(join(runDir, "resume.lock"), readFileSync(join(runDir, "run.lock")))

    const resumed = startCli(["resume", runDir, "--world-size", "2", "--json"], {
      cwd: process.cwd(),
      env: { COHORT_TEST_BATCH_MS: "4" },
      started
    })
    const code = await resumed.exit
    expect(code, resumed.err()).toBe(0)
    const notes = resumed
      .err()
      .split("\n")
      .filter((line) => line.startsWith("cohort: note:"))
    expect(notes.slice(0, 2)).toEqual([
      `cohort: note: the lock ${runDir}/run.lock is stale: process 1 of another PID namespace (a container) is gone; the run is not running`,
      `cohort: note: took over the stale lock ${runDir}/resume.lock: process 1 of another PID namespace (a container) is gone`
    ])
    const child = JSON.parse(resumed.out()) as RunResult
    expect(child.outcome.status).toBe("completed")
    expect(child.epochs.every((e) => e.lost === 0 && e.duplicated === 0)).toBe(true)
    expect(child.epochs.at(-1)?.epoch).toBe(2)
    expect(existsSync(join(runDir, "resume.lock"))).toBe(false)
  }, 300_000)
})
