// A rank process stopped with SIGSTOP is declared within the heartbeat timeout plus a margin,
// whatever it was doing, and the run completes with exact audits. The instants are the hard ones:
// at an epoch's end, as the coordinator asks the rank for its eval and checkpoint (before it read
// the ask, while it saves, just after), and one mid-epoch. The trainer's save blocks its thread
// for 600 ms, so that some stops land inside it; the rank process beats from a thread of its own
// meanwhile (docs/liveness.md), so a save is no death and a stop during one is. Real rank
// processes; Node only (the beats run under every runtime in test/actors/liveness-calls.test.ts).
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { rankPid } from "../rank-processes.ts"

const slowSave = fileURLToPath(new URL("../fixtures/trainers/slow-save.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-stopped-boundary-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const heartbeatTimeoutMs = 1000

describe("a rank process stopped at any instant is declared within the heartbeat timeout", () => {
  it("stops at an epoch's end (0, 2, 300 ms after the checkpoint's ask, inside the save) and mid-epoch: each declared within the timeout plus a margin; every audit exact", async () => {
    process.env["COHORT_TEST_SAVE_MS"] = "600"
    // After the checkpoint of epoch e is asked of rank r, stop r `afterMs` later.
    const plan = new Map([
      [0, 0],
      [1, 2],
      [2, 300]
    ])
    const stops: Array<{ rank: number; atMs: number; what: string }> = []
    const declared = new Map<number, number>()
    const stop = (rank: number, what: string) => {
      const pid = rankPid(rank, outDir)
      if (pid === undefined || stops.some((s) => s.rank === rank)) return
      process.kill(pid, "SIGSTOP")
      stops.push({ rank, atMs: Date.now(), what })
    }
    const result = await Launcher.run({
      trainer: slowSave,
      transport: "process",
      worldSize: 5,
      epochs: 5,
      batchSize: 16,
      heartbeatTimeoutMs,
      heartbeatIntervalMs: 200,
      tickMs: 50,
      outDir,
      onEvent: (event) => {
        if (event.type === "death") declared.set(event.death.rank, Date.now())
        if (event.type === "decision") {
          const asked = /^Checkpoint to rank (\d+): checkpoint after epoch (\d+)$/.exec(event.detail)
          const afterMs = asked === null ? undefined : plan.get(Number(asked[2]))
          if (asked !== null && afterMs !== undefined) {
            const rank = Number(asked[1])
            const what = `${afterMs} ms after checkpoint ${asked[2]} was asked`
            if (afterMs === 0) stop(rank, what)
            else setTimeout(() => stop(rank, what), afterMs)
          }
        }
        // Mid-epoch: a rank that holds no call, early in the last epoch.
        if (event.type === "progress" && event.epoch === 4 && event.samplesDone >= 200 && !stops.some((s) => s.what === "mid-epoch")) {
          stop(event.rank, "mid-epoch")
        }
      }
    })
    expect(stops.map((s) => s.what)).toEqual([
      "0 ms after checkpoint 0 was asked",
      "2 ms after checkpoint 1 was asked",
      "300 ms after checkpoint 2 was asked",
      "mid-epoch"
    ])
    for (const s of stops) {
      const death = result.deaths.find((d) => d.rank === s.rank)
      expect(death?.detector, s.what).toBe("heartbeat")
      // Its last frame left at most heartbeatIntervalMs before the stop; a tick and a loaded machine on top.
      expect(declared.get(s.rank)! - s.atMs, s.what).toBeLessThan(heartbeatTimeoutMs + 1500)
    }
    expect(result.deaths.map((d) => d.rank).sort()).toEqual(stops.map((s) => s.rank).sort())
    expect(result.outcome.status).toBe("completed")
    expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual(Array(5).fill([4800, 0, 0]))
  }, 60_000)
})
