// 30,000 idle connections to a running coordinator's dashboard (harness: ./netns.ts; the cap:
// docs/liveness.md): `cohort run --dashboard` in a namespace of its own, with this machine's
// descriptor limit (fewer than 30,000), while two processes beside it open 30,000 connections to the
// dashboard from four loopback addresses (one address has about 28,000 ephemeral ports) and keeps
// them open. The dashboard holds at most its cap (256) and refuses the rest: the run completes, an
// alert names the cap, no rank dies or crashes, audits clean.
//
// In a namespace so that the flood's ports and sockets are its own. Node only (vitest.config.ts:
// the cap is enforced by Node's server only); about 20 s. test/cli/dashboard-descriptors.full.test.ts
// covers the same with a lowered descriptor limit, and the cap out of the way.
import { rmSync, unlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/record/run-types.ts"
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
    let sampler: ReturnType<typeof setInterval> | undefined
    try {
      const run = network.script(
        "a",
        Cluster.cli,
        [
          "run",
          "--trainer",
          heldTrainer,
          "--world-size",
          "3",
          "--epochs",
          "3",
          "--no-kill",
          "--dashboard",
          "0",
          "--json",
          "--out",
          join(scratch.dir, "runs")
        ],
        { lifetimeMs: 100_000, env: { COHORT_TEST_HOLD: hold } }
      )
      const port = (await run.waitFor(/dashboard: http:\/\/127\.0\.0\.1:(\d+)\//, 30_000))[1]!
      await run.waitFor(/epoch 0/, 30_000)
      // Connections held by the coordinator's process, sampled while the flood lasts: the sockets it
      // has a descriptor for (a handshake the kernel completed that waits in the listener's queue
      // has none, and the flood counts it as open). The dashboard also closes idle ones after a while.
      let held = 0
      sampler = setInterval(() => {
        const now = Netns.run("ip", [
          "netns",
          "exec",
          network.namespace("a"),
          "ss",
          "-Htnp",
          "state",
          "established",
          `( sport = :${port} )`
        ])
          .split("\n")
          .filter((line) => line.includes(`pid=${run.child.pid},`)).length
        held = Math.max(held, now)
      }, 300)
      // Two processes of 15,000 each: a process may not hold more descriptors than this machine's limit (20,000 here).
      const floods = [
        ["127.0.0.1", "127.0.0.2"],
        ["127.0.0.3", "127.0.0.4"]
      ].map((locals) =>
        network.exec("a", process.execPath, [flooder, "127.0.0.1", port, String(connections / 2), "1000", ...locals], {
          lifetimeMs: 100_000
        })
      )
      await Promise.all(floods.map((flood) => flood.waitFor(/open \d+ closed \d+ failed \d+/, 80_000)))
      const counts = () =>
        floods.map((flood) => [...flood.stdout().matchAll(/open (\d+) closed (\d+) failed (\d+)/g)].at(-1)!.slice(1, 4).map(Number))
      // The dashboard closes the connections over its cap as it takes them: give it a moment.
      await Cluster.sleep(2000)
      clearInterval(sampler)
      const [open, closed, failed] = [0, 1, 2].map((k) => counts().reduce((sum, c) => sum + c[k]!, 0)) as [number, number, number]
      unlinkSync(hold)
      expect(await run.exited, run.stderr()).toBe(0)
      for (const flood of floods) flood.kill("SIGKILL")
      console.log(
        `[flood] ${connections} connections: at most ${held} held by the coordinator's process at once; the flood saw ${open} open, ${closed} closed by the other side, ${failed} failed to connect`
      )
      expect(open + closed + failed).toBe(connections)
      expect(held).toBeGreaterThan(0)
      expect(held).toBeLessThanOrEqual(connectionsMax)
      const result = JSON.parse(run.stdout()) as RunResult
      expect(result.outcome.status).toBe("completed")
      expect(result.deaths).toEqual([])
      const alerts = result.alerts.filter((a) => a.class === "CoordinatorResource")
      expect(alerts.length).toBeGreaterThanOrEqual(1)
      for (const alert of alerts) {
        expect(alert.detail).toMatch(
          /^the dashboard refused \d+ connections? at its cap, connectionsMax 256 \(\d+ in all\); the run goes on$/
        )
      }
      const refusedInAll = Math.max(...alerts.map((a) => Number(/\((\d+) in all\)/.exec(a.detail)![1])))
      console.log(`[flood] the dashboard said it refused ${refusedInAll} in all`)
      // Many more than its cap, but not a fixed share of the flood: the flood also counts handshakes
      // the kernel completed and then reset (the listener's queue full), which the listener never
      // saw, and on a loaded machine those can be most of them; the last alert may also come before
      // the flood ends.
      expect(refusedInAll).toBeGreaterThan(connectionsMax)
      expect(refusedInAll).toBeLessThanOrEqual(connections)
      expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([
        [4800, 0, 0],
        [4800, 0, 0],
        [4800, 0, 0]
      ])
    } finally {
      clearInterval(sampler)
      network.destroy()
      rmSync(hold, { force: true })
    }
  }, 120_000)
})
