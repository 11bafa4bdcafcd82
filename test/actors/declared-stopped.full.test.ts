// A rank process the coordinator declared dead by heartbeat (here: stopped with SIGSTOP) is ended
// by the launcher right away: it never resumes to act in the live run (wait out the coordinator's
// silence, write an emergency save into the run's folder). Real rank processes; Node only (the
// launcher's stop is the same on every runtime, and the process host's kill is covered there).
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { rankPid } from "../rank-processes.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-declared-stopped-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

/** Whether `pid` is gone (or a zombie waiting to be reaped: it runs no more). */
const gone = (pid: number): boolean => {
  try {
    return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return true
  }
}

const until = async (check: () => boolean, timeoutMs: number): Promise<boolean> => {
  const endMs = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > endMs) return false
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return true
}

describe("a rank declared dead is stopped", () => {
  it("a rank process stopped with SIGSTOP is gone once the coordinator declares it by heartbeat, and writes nothing into the run after", async () => {
    let pid: number | undefined
    let stopped = false
    let goneAfterDeclared: Promise<boolean> | undefined
    const result = await Launcher.run({
      trainer: steady,
      transport: "process",
      backend: "ring",
      ringLinks: "direct",
      worldSize: 3,
      epochs: 6,
      batchSize: 8,
      heartbeatTimeoutMs: 3000,
      outDir,
      onEvent: (event) => {
        // Mid-epoch, away from the epoch's end (its eval and checkpoint requests).
        if (!stopped && event.type === "progress" && event.rank === 1 && event.epoch >= 1 && event.samplesDone >= 200) {
          stopped = true
          pid = rankPid(1, outDir)
          if (pid !== undefined) process.kill(pid, "SIGSTOP")
        }
        if (event.type === "death" && event.death.rank === 1 && pid !== undefined) {
          const stoppedPid = pid
          // Measured while the run still goes on (the launcher stops what is left at the end anyway).
          goneAfterDeclared = until(() => gone(stoppedPid), 3000)
        }
      }
    })
    expect(pid).toBeDefined()
    const death = result.deaths.find((d) => d.rank === 1)
    expect(death?.detector).toBe("heartbeat")
    expect(await goneAfterDeclared).toBe(true)
    // It never acted again: no emergency save of rank 1 in the run's folder.
    const runDir = result.runDir
    expect(existsSync(join(runDir, "save", "rank1", "emergency.json"))).toBe(false)
    expect(result.outcome.status).toBe("completed")
  }, 60_000)
})
