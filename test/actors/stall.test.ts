// The coordinator's own stall is never read as the ranks' silence (docs/design.md §3.10): a blocked
// coordinator thread, a stopped coordinator process. Real workers and real processes.
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type { RunOptions, RunResult } from "../../actors/record/run-types.ts"
import * as Runtime from "../../src/platform/detect.ts"
import { startCli } from "../cli-process.ts"

const runtime = Runtime.detect()
const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-stall-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const busyFor = (ms: number): void => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    // the coordinator's thread does nothing else
  }
}

const audits = (result: RunResult) => result.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])
const stalls = (result: RunResult) => result.alerts.filter((a) => a.class === "CoordinatorStall")
// The longest stall so far, which each alert names: on a loaded machine short stalls fold into
// the same record as the long one (the collapse window keeps the last detail only).
const longestMs = (result: RunResult): number =>
  Math.max(...stalls(result).map((a) => Number(/longest so far (\d+(?:\.\d+)?) ms/.exec(a.detail)?.[1])))

describe(`a stalled coordinator declares nobody (${runtime})`, () => {
  const blockedOnce = async (blockMs: number, options: Partial<RunOptions>): Promise<RunResult> => {
    let blocked = false
    return Launcher.run({
      trainer: steady,
      worldSize: 3,
      epochs: 3,
      batchSize: 8,
      averageEverySteps: 4,
      outDir,
      ...options,
      onEvent: (event) => {
        if (!blocked && event.type === "progress") {
          blocked = true
          busyFor(blockMs)
        }
      }
    })
  }

  // A process of its own: it runs beside the in-process runs below, which block this thread in turn.
  it.concurrent("the coordinator's process stopped with SIGSTOP for 3 s while its rank processes heartbeat: exit 0, no death", async () => {
    const run = startCli(
      [
        ...["run", "--trainer", steady, "--transport", "process", "--world-size", "3", "--epochs", "25"],
        ...["--heartbeat-timeout-ms", "1000", "--no-kill", "--json", "--out", outDir]
      ],
      { cwd: process.cwd() }
    )
    let stopped = false
    run.child.stderr!.on("data", () => {
      // Stop it once training is under way: the first progress line.
      if (!stopped && / progress| rank \d+ .*samples/.test(run.err())) {
        stopped = true
        // kill(1) from a shell (Deno's ChildProcess.kill cannot send SIGCONT), which lets it go on
        // 3 s later: not a timer of this thread, which the in-process tests beside this one block.
        spawn("sh", ["-c", `kill -STOP ${run.child.pid}; sleep 3; kill -CONT ${run.child.pid}`], { stdio: "ignore" })
      }
    })
    const code = await run.exit
    expect(stopped).toBe(true)
    const result = JSON.parse(run.out()) as RunResult
    expect(result.deaths).toEqual([])
    expect(code).toBe(0)
    expect(longestMs(result)).toBeGreaterThanOrEqual(2900)
  }, 120_000)

  describe.concurrent("in-process runs whose observer blocks the coordinator's thread", () => {
    it.sequential("an observer that blocks the coordinator's thread for 3 s with a 1 s heartbeat timeout: no death, a CoordinatorStall alert", async () => {
      const result = await blockedOnce(3000, { heartbeatTimeoutMs: 1000 })
      expect(result.deaths).toEqual([])
      expect(result.exitCode).toBe(0)
      expect(audits(result)).toEqual([
        [0, 4800, 0, 0],
        [1, 4800, 0, 0],
        [2, 4800, 0, 0]
      ])
      expect(longestMs(result)).toBeGreaterThanOrEqual(3000)
      expect(stalls(result).every((a) => a.severity === "warn" && a.path === "root")).toBe(true)
    }, 60_000)

    it.sequential("an 11 s block with the default 10 s heartbeat timeout: no death", async () => {
      const result = await blockedOnce(11_000, {})
      expect(result.deaths).toEqual([])
      expect(result.exitCode).toBe(0)
      expect(longestMs(result)).toBeGreaterThanOrEqual(11_000)
    }, 90_000)
  })
})
