// A WebSocket rank (`transport: "websocket"`, a rank process that joins the coordinator's server)
// stopped with SIGSTOP while its synchronous save blocks its thread is declared within the
// heartbeat timeout plus a margin, not after saveTimeoutMs (600 s by default): with beat links,
// a thread of the rank's own beats on a second connection while the save runs, and SIGSTOP
// silences it too. A save three times the timeout, not stopped, is no death. Real rank
// processes and sockets; Node only (the beat link's thread is the same code on every runtime).
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { rankPid } from "../rank-processes.ts"

const slowSave = fileURLToPath(new URL("../fixtures/trainers/slow-save.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-served-stopped-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const heartbeatTimeoutMs = 1000
const base = {
  trainer: slowSave,
  transport: "websocket" as const,
  beatLinks: true,
  worldSize: 3,
  epochs: 2,
  batchSize: 16,
  heartbeatTimeoutMs,
  heartbeatIntervalMs: 200,
  tickMs: 50
}

describe("a served rank stopped inside a blocking save, with beat links", () => {
  it("the checkpoint holder stopped 700 ms into a 2000 ms save is declared within the timeout plus a margin; every audit exact", async () => {
    process.env["COHORT_TEST_SAVE_MS"] = "2000"
    const dir = join(outDir, "stopped")
    let stopped: { rank: number; atMs: number } | undefined
    const declared = new Map<number, number>()
    const result = await Launcher.run({
      ...base,
      epochs: 2,
      outDir: dir,
      onEvent: (event) => {
        if (event.type === "death") declared.set(event.death.rank, Date.now())
        const asked = event.type === "decision" ? /^Checkpoint to rank (\d+): checkpoint after epoch 0$/.exec(event.detail) : null
        if (asked !== null && stopped === undefined) {
          const rank = Number(asked[1])
          setTimeout(() => {
            const pid = rankPid(rank, dir)
            if (pid === undefined || stopped !== undefined) return
            process.kill(pid, "SIGSTOP")
            stopped = { rank, atMs: Date.now() }
          }, 700)
        }
      }
    })
    expect(stopped).toBeDefined()
    const death = result.deaths.find((d) => d.rank === stopped!.rank)
    expect(death?.detector).toBe("heartbeat")
    // Its last beat left at most heartbeatIntervalMs before the stop; a tick and a loaded machine on top.
    expect(declared.get(stopped!.rank)! - stopped!.atMs).toBeLessThan(heartbeatTimeoutMs + 2000)
    expect(result.deaths.map((d) => d.rank)).toEqual([stopped!.rank])
    expect(result.outcome.status).toBe("completed")
    expect(result.epochs.map((e) => [e.lost, e.duplicated])).toEqual(Array(2).fill([0, 0]))
  }, 40_000)

  it("a save three times the heartbeat timeout, not stopped, is no death", async () => {
    process.env["COHORT_TEST_SAVE_MS"] = String(3 * heartbeatTimeoutMs)
    const result = await Launcher.run({ ...base, epochs: 2, outDir: join(outDir, "slow") })
    expect(result.deaths).toEqual([])
    expect(result.outcome.status).toBe("completed")
    expect(result.epochs.map((e) => [e.lost, e.duplicated])).toEqual(Array(2).fill([0, 0]))
  }, 40_000)
})
