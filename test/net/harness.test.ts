// The network-namespace harness itself (test/net/netns.ts): a non-root process is told why it
// cannot run these tests; the delaying relay's latency and order; and the WebSocket transport
// across two namespaces, with the link cut and restored (docs/testing.md).
// Linux and root only, as CI runs; elsewhere every test here fails with the harness's message.
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as Netns from "./netns.ts"

const runtime = Runtime.detect()
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const token = "net-test-token-5b1f0c9e"

describe(`network namespaces as hosts (${runtime})`, () => {
  it("a process that is not root is refused with the reason, and creates nothing", () => {
    Netns.requireRootLinux()
    const line = Netns.runtimeCommand(fixture("not-root.ts"))
    const result = spawnSync(line.command, line.args, { cwd: Netns.repoRoot, uid: 65534, gid: 65534, encoding: "utf8", timeout: 30_000 })
    expect(result.stdout).toContain("NETWORK TESTS NEED ROOT ON LINUX")
    expect(result.stdout).toContain("uid 65534 on linux")
    expect(result.status).toBe(2)
  }, 40_000)

  it("the relay adds 100 ± 20 ms per direction and keeps order", async () => {
    const network = Netns.create(["a", "b"])
    try {
      const echo = network.script("a", fixture("echo.mjs"), ["server", network.address("a")], { lifetimeMs: 30_000 })
      const port = Number((await echo.waitFor(/echo listening (\d+)/, 20_000))[1])
      const relay = await network.relay("b", {
        listen: "127.0.0.1:0",
        target: `${network.address("a")}:${port}`,
        delayMs: 100,
        jitterMs: 20,
        lifetimeMs: 30_000
      })
      const client = network.script("b", fixture("echo.mjs"), ["client", `127.0.0.1:${relay.port}`, "30"], { lifetimeMs: 30_000 })
      const rtts = JSON.parse((await client.waitFor(/rtts (\[.*\])/, 25_000))[1] ?? "[]") as Array<number>
      await client.waitFor(/order (ok|broken)/, 1000)
      expect(client.stdout()).toContain("order ok")
      expect(rtts.length).toBe(30)
      // Two delayed hops of at least 80 ms each; a loaded machine only adds.
      expect(Math.min(...rtts)).toBeGreaterThanOrEqual(158)
      expect([...rtts].sort((x, y) => x - y)[15]).toBeLessThan(400)
    } finally {
      network.destroy()
    }
  }, 60_000)

  it("nftables drops the share of packets asked for; TCP still delivers every byte in order", async () => {
    const network = Netns.create(["a", "b"])
    try {
      network.dropPercent("a", 10)
      const echo = network.script("a", fixture("echo.mjs"), ["server", network.address("a")], { lifetimeMs: 30_000 })
      const port = Number((await echo.waitFor(/echo listening (\d+)/, 20_000))[1])
      const client = network.script("b", fixture("echo.mjs"), ["client", `${network.address("a")}:${port}`, "100"], { lifetimeMs: 30_000 })
      await client.waitFor(/order (ok|broken)/, 25_000)
      expect(client.stdout()).toContain("order ok")
      // About 200 packets reach A (100 lines and the acks of 100 echoes): about 20 dropped.
      const dropped = network.dropped("a")
      expect(dropped).toBeGreaterThan(3)
      expect(dropped).toBeLessThan(80)
    } finally {
      network.destroy()
    }
  }, 60_000)

  it("WebSocket transport: a frame crosses from B to A; with B's link cut A sees no frame and B notices; restored, the frames sent meanwhile arrive in order", async () => {
    const network = Netns.create(["a", "b"])
    try {
      const coordinator = network.script("a", fixture("ws-coordinator.ts"), [network.address("a"), token, "1", "50000"], {
        lifetimeMs: 55_000
      })
      const port = Number((await coordinator.waitFor(/listening (\d+)/, 20_000))[1])
      const rank = network.script(
        "b",
        fixture("ws-rank.ts"),
        [`ws://${network.address("a")}:${port}/`, token, "0", "100", "1000", "50000"],
        { lifetimeMs: 55_000 }
      )
      await coordinator.waitFor(/frame 0 3\n/, 20_000)
      const frames = () => [...coordinator.stdout().matchAll(/frame 0 (\d+)\n/g)].map((m) => Number(m[1]))

      network.cut("b")
      await sleep(500) // frames already on the wire when it was cut
      const beforeSilence = frames().length
      const silence = Number((await rank.waitFor(/silence (\d+)/, 5000))[1])
      await sleep(1500)
      // The coordinator saw nothing more, and no end: a cut link is silence, not a close.
      expect(frames().length).toBe(beforeSilence)
      expect(coordinator.stdout()).not.toContain("ended")
      expect(silence).toBeLessThanOrEqual(beforeSilence)

      network.restore("b")
      // TCP retransmits what the rank sent during the cut (a frame every 100 ms for 2 s or more):
      // every frame, once, in order; the rank hears echoes again.
      const target = beforeSilence + 15
      await coordinator.waitFor(new RegExp(`frame 0 ${target}\\n`), 20_000)
      const seen = frames().slice(0, target + 1)
      expect(seen).toEqual(Array.from({ length: target + 1 }, (_, i) => i))
      await rank.waitFor(/echo \d+/, 5000)
      expect(coordinator.stdout()).not.toContain("ended")
    } finally {
      network.destroy()
    }
  }, 60_000)

  it("WebSocket transport: a rank closed by the coordinator during the cut gets the close code once the link is back", async () => {
    const network = Netns.create(["a", "b"])
    try {
      const coordinator = network.script("a", fixture("ws-coordinator.ts"), [network.address("a"), token, "1", "50000", "1000", "4011"], {
        lifetimeMs: 55_000
      })
      const port = Number((await coordinator.waitFor(/listening (\d+)/, 20_000))[1])
      const rank = network.script(
        "b",
        fixture("ws-rank.ts"),
        [`ws://${network.address("a")}:${port}/`, token, "0", "100", "1000", "50000"],
        { lifetimeMs: 55_000 }
      )
      await coordinator.waitFor(/frame 0 3\n/, 20_000)
      network.cut("b")
      await coordinator.waitFor(/closed 0/, 5000)
      await rank.waitFor(/silence/, 5000)
      network.restore("b")
      const restoredAt = Date.now()
      // The close frame waited in A's send queue; TCP delivers it once the link is back.
      const ended = JSON.parse((await rank.waitFor(/ended (\{.*\})/, 20_000))[1] ?? "{}") as { _tag?: string; closeCode?: number }
      console.log(
        `[net ${runtime}] the close reached the rank ${Date.now() - restoredAt} ms after the link came back: ${JSON.stringify(ended)}`
      )
      expect(ended).toEqual({ _tag: "Disconnected", closeCode: 4011 })
      expect(await rank.exited).toBe(0)
    } finally {
      network.destroy()
    }
  }, 60_000)
})
