// The dashboard's listener caps its connections (Node: `node:http`'s maxConnections): idle
// connections past `connectionsMax` are closed as they arrive and told to `onResource` in one
// line naming the cap, at most once a second; the page still answers.
import { connect, type Socket } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import * as Live from "../../src/dashboard/live.ts"

const sockets: Array<Socket> = []
const opened: Array<Live.Live> = []
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  for (const live of opened.splice(0)) await live.close()
})

const openIdle = (port: number): Promise<void> =>
  new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => resolve())
    socket.on("error", () => resolve())
    sockets.push(socket)
  })

// Node only (vitest.config.ts leaves it out of the Bun and Deno passes: their servers count no connections).
describe("the dashboard's connection cap", () => {
  it("holds at most connectionsMax idle connections; the rest are refused and told in one line naming the cap; the page still loads once one goes", async () => {
    const lines: Array<string> = []
    const live = await Live.start({
      host: "127.0.0.1",
      port: 0,
      title: "t",
      flushIntervalMs: 20,
      connectionsMax: 8,
      onResource: (line) => lines.push(line)
    })
    opened.push(live)
    for (let i = 0; i < 40; i++) await openIdle(live.port)
    const until = Date.now() + 10_000
    while (live.pages().refused < 32 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(live.pages().refused).toBe(32)
    // Told as they come, at most once a second: the last line counts them all.
    while (!(lines.at(-1) ?? "").includes("(32 in all)") && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
    for (const line of lines)
      expect(line).toMatch(/^the dashboard refused \d+ connections? at its cap, connectionsMax 8 \(\d+ in all\); the run goes on$/)
    expect(lines.at(-1)).toContain("(32 in all)")
    sockets.splice(0).forEach((socket) => socket.destroy())
    await new Promise((resolve) => setTimeout(resolve, 100))
    const page = await fetch(live.url)
    expect(page.status).toBe(200)
  })
})
