// 30,000 idle connections to a running coordinator's dashboard (harness: ./netns.ts; the cap:
// docs/liveness.md): `cohort run --dashboard` in a namespace of its own, with this machine's
// descriptor limit (fewer than 30,000), while a process beside it opens 30,000 connections to the
// dashboard from four loopback addresses (one address has about 28,000 ephemeral ports) and keeps
// them open. The dashboard holds at most its cap (256) and refuses the rest: the run completes, an
// alert names the cap, no rank dies or crashes, audits clean.
//
// In a namespace so that the flood's ports and sockets are its own. Node only (vitest.config.ts:
// the cap is enforced by Node's server only); about 20 s. test/cli/dashboard-descriptors.test.ts
// covers the same with a lowered descriptor limit, and the cap out of the way.
import { rmSync, unlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/run-types.ts"
import * as Cluster from "./cluster.ts"
import * as Netns from "./netns.ts"

const heldTrainer = fileURLToPath(new URL("../fixtures/trainers/steady-held.ts", import.meta.url))
const flooder = fileURLToPath(new URL("./fixtures/idle-connections.mjs", import.meta.url))
const scratch = Cluster.scratch("cohort-flood-")
afterAll(() => rmSync(scratch.dir, { recursive: true, force: true }))
const connections = 30_000
const connectionsMax = 256 // the dashboard's default cap

describe("30,000 idle connections to the dashboard", () => {
  it("the dashboard holds its cap and refuses the rest: the run completes, an alert names the cap, no rank dies, audits clean", async () => {
    const network = Netns.create(["a"])
    const hold = join(scratch.dir, "hold")
    writeFileSync(hold, "")
    try {
      const run = network.script("a", Cluster.cli, [
        "run", "--trainer", heldTrainer, "--world-size", "3", "--epochs", "3", "--no-kill", "--dashboard", "0", "--json",
        "--out", join(scratch.dir, "runs")
      ], { lifetimeMs: 100_000, env: { COHORT_TEST_HOLD: hold } })
      const port = (await run.waitFor(/dashboard: http:\/\/127\.0\.0\.1:(\d+)\//, 30_000))[1]!
      await run.waitFor(/epoch 0/, 30_000)
      const flood = network.exec("a", "prlimit", [
        `--nofile=${connections + 1000}:${connections + 1000}`, process.execPath, flooder,
        "127.0.0.1", port, String(connections), "1000", "127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"
      ], { lifetimeMs: 100_000 })
      const settled = await flood.waitFor(/open (\d+) closed (\d+) failed (\d+)/, 80_000)
      unlinkSync(hold)
      expect(await run.exited, run.stderr()).toBe(0)
      flood.kill("SIGKILL")
      const [open, closed, failed] = settled.slice(1, 4).map(Number) as [number, number, number]
      console.log(`[flood] ${connections} connections: ${open} held, ${closed} refused by the dashboard, ${failed} failed to connect`)
      expect(open + closed + failed).toBe(connections)
      expect(open).toBeLessThanOrEqual(connectionsMax)
      const result = JSON.parse(run.stdout()) as RunResult
      expect(result.outcome.status).toBe("completed")
      expect(result.deaths).toEqual([])
      const alerts = result.alerts.filter((a) => a.class === "CoordinatorResource")
      expect(alerts.length).toBeGreaterThanOrEqual(1)
      for (const alert of alerts) {
        expect(alert.detail).toMatch(/^the dashboard refused \d+ connections? at its cap, connectionsMax 256 \(\d+ in all\); the run goes on$/)
      }
      expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[4800, 0, 0], [4800, 0, 0], [4800, 0, 0]])
    } finally {
      network.destroy()
      rmSync(hold, { force: true })
    }
  }, 120_000)
})
