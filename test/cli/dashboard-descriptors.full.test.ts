// The coordinator's file descriptors are its own problem, never a rank's: the CLI runs with its
// descriptors lowered to 1024 (`prlimit`, so that exhausting them is cheap; its worker ranks open
// a few hundred files at once while they load their modules) and a live dashboard, and this test
// opens 3,000 idle connections to the dashboard while the run trains. With the
// dashboard's cap (256 by default) the run completes with an alert naming the cap; with the cap
// out of the way the process runs out of descriptors, the run goes on with an alert saying so and
// no rank crashes (the ranks' memory check opens no file), and it completes once the connections
// go. Full tier: two training runs against 3,000 connections; the quick tier checks the cap
// itself in test/dashboard/live-cap.test.ts.
import { existsSync, mkdtempSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/record/run-types.ts"
import { removeDir, waitFor } from "../cli-process.ts"
import { spawn } from "node:child_process"

const cli = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))
const trainer = fileURLToPath(new URL("../fixtures/trainers/steady-slow.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-descriptors-"))
afterAll(() => removeDir(outDir))

const prlimit = "/usr/bin/prlimit"
const descriptorsMax = 1024
const connections = 3000

/** Opens `count` idle connections to `port` one after the other; each that fails is counted and dropped. */
const openIdle = async (port: number, count: number, into: Array<Socket>): Promise<void> => {
  for (let i = 0; i < count; i++) {
    await new Promise<void>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => resolve())
      socket.on("error", () => resolve())
      into.push(socket)
    })
  }
}

/**
 * Runs the CLI and opens the idle connections once it trains; with `releaseOn`, closes them once
 * its stderr shows that text (the coordinator said why it is short), else at its end.
 */
const runWithIdleConnections = async (extra: ReadonlyArray<string>, releaseOn?: string): Promise<RunResult> => {
  const args = [
    `--nofile=${descriptorsMax}:${descriptorsMax}`,
    process.execPath,
    cli,
    "run",
    "--trainer",
    trainer,
    "--world-size",
    "3",
    "--epochs",
    "4",
    "--dashboard",
    "0",
    "--json",
    "--out",
    outDir,
    ...extra
  ]
  const child = spawn(prlimit, args, { stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  let err = ""
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()))
  const exit = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  const sockets: Array<Socket> = []
  try {
    await waitFor(() => /dashboard: http:\/\/127\.0\.0\.1:\d+\//.test(err), 30_000, "the dashboard's address")
    const port = Number(/dashboard: http:\/\/127\.0\.0\.1:(\d+)\//.exec(err)![1])
    await waitFor(() => err.includes("epoch 0:"), 30_000, "training")
    await openIdle(port, connections, sockets)
    if (releaseOn !== undefined) {
      await waitFor(() => err.includes(releaseOn), 60_000, releaseOn)
      for (const socket of sockets.splice(0)) socket.destroy()
    }
    expect(await exit).toBe(0)
  } finally {
    for (const socket of sockets) socket.destroy()
    child.kill("SIGKILL")
  }
  return JSON.parse(out) as RunResult
}

// Node only (vitest.config.ts leaves it out of the Bun and Deno passes: their servers count no
// connections). Without util-linux's prlimit it fails, saying so.
describe(`3,000 idle dashboard connections to a coordinator with ${descriptorsMax} descriptors`, () => {
  it("with the dashboard's default cap: the run completes, an alert names the cap, no rank dies", async () => {
    expect(existsSync(prlimit), `${prlimit} (util-linux) is needed to lower the coordinator's descriptors`).toBe(true)
    const result = await runWithIdleConnections([])
    expect(result.outcome.status).toBe("completed")
    expect(result.deaths).toEqual([])
    const alerts = result.alerts.filter((a) => a.class === "CoordinatorResource")
    expect(alerts.length).toBeGreaterThanOrEqual(1)
    for (const alert of alerts)
      expect(alert.detail).toMatch(
        /^the dashboard refused \d+ connections? at its cap, connectionsMax 256 \(\d+ in all\); the run goes on$/
      )
    expect(result.alerts.filter((a) => /out of file descriptors/.test(a.detail))).toEqual([])
    expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([
      [4800, 0, 0],
      [4800, 0, 0],
      [4800, 0, 0],
      [4800, 0, 0]
    ])
  }, 120_000)

  it("with the cap out of the way the process runs out of descriptors: the run still completes, an alert says why, no rank crashes", async () => {
    const result = await runWithIdleConnections(
      ["--dashboard-connections-max", "100000"],
      "the coordinator's process is out of file descriptors"
    )
    expect(result.outcome.status).toBe("completed")
    expect(result.deaths).toEqual([])
    const shortage = result.alerts.filter((a) => a.class === "CoordinatorResource" && /out of file descriptors \(EMFILE/.test(a.detail))
    expect(shortage.length).toBeGreaterThanOrEqual(1)
    expect(result.epochs.map((e) => [e.lost, e.duplicated])).toEqual([
      [0, 0],
      [0, 0],
      [0, 0],
      [0, 0]
    ])
  }, 120_000)
})
