// NEEDS ROOT ON LINUX (full tier): a launcher that ran as PID 1 of its own PID namespace (a
// container's entry point), its ranks child processes averaging through area files in /dev/shm,
// SIGKILLed mid-run: it cannot remove its memory folder, which stays with the area files in it;
// the next launch's sweep (`FreePorts.sweepStaleSocketFolders`) finds nothing listening on the
// folder's `alive.sock` and removes it, whatever pid the dead launcher had.
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, utimesSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as AreaFile from "../../src/platform/area-file.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as FreePorts from "../../src/platform/free-ports.ts"
import { removeDir } from "../cli-process.ts"
import { requireRootLinux } from "../mounts.ts"
import { childrenOf } from "../rank-processes.ts"

const runtime = Runtime.detect()
const cli = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))
const steadyPaced = fileURLToPath(new URL("../fixtures/trainers/steady-paced.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-folder-pid1-"))
const started: Array<ChildProcess> = []
afterAll(async () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) spawnSync("kill", ["-KILL", String(child.pid)])
  await removeDir(outDir)
})

/** The memory folder of the area files process `pid` holds open, if any. */
const areaFolderOf = (pid: number): string | undefined => {
  for (const fd of safeList(`/proc/${pid}/fd`)) {
    try {
      const match = /^(.*\/cohort-[^/]+)\/area-\d+-\d+\.f32$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (match !== null) return match[1]
    } catch {}
  }
  return undefined
}
const safeList = (path: string): Array<string> => {
  try {
    return readdirSync(path)
  } catch {
    return []
  }
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe(`a launcher that ran as PID 1, its ranks averaging through area files (${runtime})`, () => {
  it("SIGKILLed mid-run leaves its memory folder; the next launch's sweep removes it", async () => {
    requireRootLinux("unshare --pid")
    const runtimeArgs = runtime === "deno" ? ["run", "-A", cli] : [cli]
    const args = ["--pid", "--fork", "--mount-proc", process.execPath, ...runtimeArgs, "run", "--trainer", steadyPaced]
    args.push("--transport", "process", "--backend", "ring", "--world-size", "2", "--epochs", "3", "--out", outDir)
    const coordinator = spawn("unshare", args, { stdio: ["ignore", "pipe", "pipe"] })
    started.push(coordinator)
    let stderr = ""
    coordinator.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    coordinator.stdout.resume()
    // The namespace's PID 1 is unshare's child; its children are the ranks.
    let folder: string | undefined
    let pid1: number | undefined
    for (const until = Date.now() + 90_000; folder === undefined && Date.now() < until; await sleep(50)) {
      pid1 = childrenOf(coordinator.pid!)[0]
      folder =
        pid1 === undefined
          ? undefined
          : childrenOf(pid1)
              .map(areaFolderOf)
              .find((found) => found !== undefined)
    }
    expect(folder, `no rank held an area file; stderr: ${stderr}`).toBeDefined()
    expect(folder!.startsWith(AreaFile.memoryFolder())).toBe(true)
    spawnSync("kill", ["-KILL", String(pid1)])
    await new Promise<void>((resolve) =>
      coordinator.exitCode !== null || coordinator.signalCode !== null ? resolve() : coordinator.on("close", () => resolve())
    )
    // Nobody could clean up: the folder and its files stay.
    expect(safeList(folder!)).toContain("alive.sock")
    // A folder a minute old: the sweep leaves younger ones alone (one may be being made).
    const then = new Date(Date.now() - 120_000)
    utimesSync(folder!, then, then)
    const removed = await FreePorts.sweepStaleSocketFolders(AreaFile.memoryFolder())
    expect(removed).toContain(folder)
    expect(existsSync(folder!)).toBe(false)
  }, 180_000)
})
