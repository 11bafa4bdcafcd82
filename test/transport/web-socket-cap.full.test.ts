// A whole run whose rank port is flooded with idle connections: the listener's cap holds, the
// refusals are the coordinator's alert, never a rank's fault (web-socket-cap.test.ts tests the cap
// itself). Node only (vitest.config.ts: `Bun.serve` and `Deno.serve` count no connections).
import { mkdtempSync, rmSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-rank-cap-"))
const sockets: Array<Socket> = []
afterAll(() => {
  for (const socket of sockets.splice(0)) socket.destroy()
  rmSync(outDir, { recursive: true, force: true })
})

const openIdle = (port: number): Promise<void> =>
  new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => resolve())
    socket.on("error", () => resolve())
    socket.on("close", () => resolve())
    sockets.push(socket)
  })

describe("a run flooded on its rank port", () => {
  it("a run whose rank port gets 2,000 idle connections completes: no death, clean audits, a CoordinatorResource alert names rankConnectionsMax", async () => {
    let port = 0
    let flooded: Promise<void> | undefined
    const result = await Launcher.run({
      trainer: steady,
      worldSize: 2,
      epochs: 2,
      batchSize: 8,
      transport: "websocket",
      outDir,
      onEvent: (event) => {
        if (event.type === "listening") port = Number(new URL(event.url).port)
        if (event.type === "progress" && flooded === undefined && port > 0) {
          flooded = (async () => {
            for (let i = 0; i < 2000; i += 100) await Promise.all(Array.from({ length: 100 }, () => openIdle(port)))
          })()
        }
      }
    })
    await flooded
    expect(result.deaths).toEqual([])
    expect(result.epochs.map((e) => [e.lost, e.duplicated])).toEqual([
      [0, 0],
      [0, 0]
    ])
    const alerts = result.alerts.filter((a) => a.class === "CoordinatorResource")
    expect(alerts.length).toBeGreaterThan(0)
    expect(alerts[0]!.detail).toMatch(
      /^the rank listener refused \d+ connections? at its cap, rankConnectionsMax \(--rank-connections-max\) 132 \(\d+ in all\)/
    )
  }, 60_000)
})
