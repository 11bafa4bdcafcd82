// The live dashboard's server (src/dashboard/live.ts) on this runtime's HTTP server (node:http,
// Bun.serve, Deno.serve): the page, the event stream (replay in pieces, batches, progress
// throttled per rank, the end), the kill endpoint's checks, the loopback Host check, the token,
// the bound on open pages and the dropping of a page that stops reading.
import { connect } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import * as Live from "../../src/dashboard/live.ts"

const opened: Array<Live.Live> = []
afterEach(async () => {
  for (const live of opened.splice(0)) await live.close()
})

const startLive = async (options: Partial<Live.LiveOptions> = {}): Promise<Live.Live> => {
  const live = await Live.start({ host: "127.0.0.1", port: 0, title: "t", flushIntervalMs: 20, progressIntervalMs: 1500, ...options })
  opened.push(live)
  return live
}

const started = {
  type: "started",
  ms: 0,
  runId: "r",
  runDir: "runs/r",
  worldSize: 3,
  epochs: 1,
  epochSamples: 9,
  mode: "static",
  transport: "worker"
}
const progress = (rank: number, samplesDone: number) => ({
  type: "progress",
  ms: 10 + samplesDone,
  rank,
  epoch: 0,
  samplesDone,
  samplesPerSecond: 1,
  state: "training"
})

/** Reads server-sent `data:` messages from `url` (each a JSON array; clock events left out). */
const stream = async (url: string) => {
  const response = await fetch(url)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let buffered = ""
  const next = async (): Promise<ReadonlyArray<{ readonly type: string }> | "end"> => {
    for (;;) {
      const at = buffered.indexOf("\n\n")
      if (at >= 0) {
        const block = buffered.slice(0, at)
        buffered = buffered.slice(at + 2)
        if (!block.startsWith("data: ")) continue
        const events = (JSON.parse(block.slice(6)) as ReadonlyArray<{ readonly type: string }>).filter((e) => e.type !== "clock")
        if (events.length > 0) return events
        continue
      }
      const read = await reader.read()
      if (read.done) return "end"
      buffered += decoder.decode(read.value, { stream: true })
    }
  }
  return { response, next }
}

/** Polls `check` every 20 ms for at most 10 s. */
const until = async (check: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 20))
  expect(check()).toBe(true)
}

/** One raw HTTP/1.1 request with a chosen Host header and target; resolves with the status line. */
const rawStatus = (port: number, host: string, target = "/"): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`))
    let text = ""
    socket.on("data", (chunk) => (text += chunk.toString()))
    socket.on("end", () => resolve(text.split("\r\n")[0] ?? ""))
    socket.on("error", reject)
  })

describe("the live dashboard's server", () => {
  it("serves the live page with its key, and streams the run: replay first, then batches, each rank's progress at most once per interval, and the end", async () => {
    const live = await startLive()
    expect(live.url).toBe(`http://127.0.0.1:${live.port}/`)
    // (Its connection is not reused for the stream: Bun's fetch may send a request again on a
    // kept-alive connection the server has closed.)
    const page = await fetch(live.url, { headers: { connection: "close" } })
    expect([page.status, page.headers.get("content-type")]).toEqual([200, "text/html; charset=utf-8"])
    expect(await page.text()).toMatch(
      /<script type="application\/json" id="cohort-config">\{"mode":"live","faults":false,"key":"[0-9a-f]{32}"\}<\/script>/
    )

    live.onEvent(started)
    live.onEvent({ type: "decision", ms: 1, detail: "2 × StartEpoch: planned" })
    live.onEvent(progress(0, 1))
    const events = await stream(`${live.url}events`)
    expect(events.response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8")
    // The replay, then each rank's latest progress.
    expect(await events.next()).toEqual([started])
    expect(await events.next()).toEqual([progress(0, 1)])
    // Two reports of rank 1 and one of rank 0 inside one interval: rank 1's latest goes out, and
    // rank 0's waits for its interval (it was sent in the replay just now).
    live.onEvent(progress(1, 2))
    live.onEvent(progress(1, 3))
    live.onEvent(progress(0, 4))
    live.onEvent({ type: "round", ms: 20, epoch: 0, round: 0, contributors: 3, openMs: 1 })
    expect(await events.next()).toEqual([progress(1, 3), { type: "round", ms: 20, epoch: 0, round: 0, contributors: 3, openMs: 1 }])
    expect(await events.next()).toEqual([progress(0, 4)])
    live.onEvent({ type: "ended", ms: 30, outcome: { status: "completed" }, exitCode: 0 })
    expect(await events.next()).toEqual([{ type: "ended", ms: 30, outcome: { status: "completed" }, exitCode: 0 }])
    expect(await events.next()).toBe("end")
  })

  it("kills only with kill buttons on, a POST carrying the page's key, and a rank in range", async () => {
    const killed: Array<number> = []
    const off = await startLive()
    expect((await fetch(`${off.url}kill?rank=1`, { method: "POST" })).status).toBe(404)
    const live = await startLive({ kill: (rank) => void killed.push(rank) })
    live.onEvent(started)
    const key = /"key":"([0-9a-f]{32})"/.exec(await (await fetch(live.url)).text())![1]!
    const kill = (query: string, headers: Record<string, string> = { "x-cohort-dashboard": key }, method = "POST") =>
      fetch(`${live.url}kill${query}`, { method, headers }).then(async (r) => [r.status, await r.text()])
    expect(await kill("?rank=1", {})).toEqual([403, "missing or wrong x-cohort-dashboard key"])
    expect(await kill("?rank=1", { "x-cohort-dashboard": "0".repeat(32) })).toEqual([403, "missing or wrong x-cohort-dashboard key"])
    expect(await kill("?rank=1", { "x-cohort-dashboard": key }, "GET")).toEqual([405, "POST /kill?rank=N"])
    expect(await kill("?rank=3")).toEqual([400, "rank must be an integer from 0 to 2, got '3'"])
    expect(await kill("?rank=-1")).toEqual([400, "rank must be an integer from 0 to 2, got '-1'"])
    expect(killed).toEqual([])
    expect(await kill("?rank=2")).toEqual([202, "kill of rank 2 requested"])
    expect(killed).toEqual([2])
  })

  it("answers only to a loopback Host name on loopback, and asks for the token when it has one", async () => {
    const live = await startLive()
    expect(await rawStatus(live.port, `127.0.0.1:${live.port}`)).toBe("HTTP/1.1 200 OK")
    expect(await rawStatus(live.port, `localhost:${live.port}`)).toBe("HTTP/1.1 200 OK")
    expect(await rawStatus(live.port, `attacker.example:${live.port}`)).toBe("HTTP/1.1 403 Forbidden")
    let token: string | undefined
    const guarded = await startLive({ token: () => token })
    expect((await fetch(guarded.url)).status).toBe(503)
    token = "a-run-token-of-some-length"
    expect((await fetch(guarded.url)).status).toBe(403)
    expect((await fetch(`${guarded.url}?token=wrong-token-of-some-length`)).status).toBe(403)
    expect((await fetch(`${guarded.url}?token=${token}`)).status).toBe(200)
    expect((await fetch(`${guarded.url}nothing?token=${token}`)).status).toBe(404)
  })

  it("refuses a page's stream past clientsMax with 503", async () => {
    const live = await startLive({ clientsMax: 1 })
    const first = await stream(`${live.url}events`)
    expect(first.response.status).toBe(200)
    const second = await fetch(`${live.url}events`)
    expect([second.status, await second.text()]).toEqual([503, "too many dashboard pages open (at most 1), and every one keeps up"])
  })

  it("sends a page opened late the whole replay in pieces, in order, each serialised once, then a dead rank's last progress and the end", async () => {
    const live = await startLive({ pageSendBytesMax: 4096 })
    live.onEvent(started)
    live.onEvent(progress(2, 5))
    const alerts = Array.from({ length: 300 }, (_, i) => ({
      type: "alert",
      ms: 20 + i,
      alert: { severity: "info", path: "p", class: "c", detail: "x".repeat(100), count: i }
    }))
    for (const alert of alerts) live.onEvent(alert)
    const death = { type: "death", ms: 400, death: { rank: 2, epoch: 0, detector: "supervisor", cause: "killed", declaredMs: 400 } }
    live.onEvent(death)
    live.onEvent({ type: "ended", ms: 500, outcome: { status: "completed" }, exitCode: 0 })
    const events = await stream(`${live.url}events`)
    const messages: Array<ReadonlyArray<{ readonly type: string }>> = []
    for (;;) {
      const next = await events.next()
      if (next === "end") break
      messages.push(next)
    }
    // About 35 KiB of events in pieces of about 4 KiB, then the progress, then the stream ends.
    expect(messages.length).toBeGreaterThan(8)
    expect(messages.slice(0, -1).flat()).toEqual([
      started,
      ...alerts,
      death,
      { type: "ended", ms: 500, outcome: { status: "completed" }, exitCode: 0 }
    ])
    expect(messages.at(-1)).toEqual([progress(2, 5)])
    expect(live.pages()).toEqual({ open: 0, dropped: 0, refused: 0 })
  })

  it("drops a page that stops reading once its unsent bytes pass pageBufferedBytesMax, so that a new page can connect", async () => {
    const live = await startLive({ clientsMax: 1, pageBufferedBytesMax: 256 * 1024 })
    live.onEvent(started)
    const stalled = connect(live.port, "127.0.0.1", () => stalled.write(`GET /events HTTP/1.1\r\nHost: 127.0.0.1:${live.port}\r\n\r\n`))
    stalled.on("error", () => {})
    stalled.pause()
    await until(() => live.pages().open === 1)
    // (Not kept alive: Bun's fetch may send the next request on a connection the server closed.)
    const refused = await fetch(`${live.url}events`, { headers: { connection: "close" } })
    expect([refused.status, await refused.text()]).toEqual([503, "too many dashboard pages open (at most 1), and every one keeps up"])
    // Events keep coming; the kernel's buffers fill first, then the page's own (at most 64 MiB sent).
    const detail = "y".repeat(16 * 1024)
    for (let i = 0; i < 4096 && live.pages().dropped === 0; i++) {
      for (let j = 0; j < 16; j++)
        live.onEvent({ type: "alert", ms: i, alert: { severity: "info", path: "p", class: "c", detail, count: j } })
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    expect(live.pages()).toEqual({ open: 0, dropped: 1, refused: 0 })
    stalled.destroy()
    const next = await fetch(`${live.url}events`, { headers: { connection: "close" } })
    expect(next.status).toBe(200)
    await next.body?.cancel()
  }, 60_000)

  it("gives a new page the place of a page that stopped reading in the middle of its replay, when clientsMax pages are open", async () => {
    const live = await startLive({ clientsMax: 1 })
    live.onEvent(started)
    // About 16 MiB of replay: more than the kernel's buffers take for a page that reads nothing.
    const detail = "z".repeat(16 * 1024)
    for (let i = 0; i < 1024; i++)
      live.onEvent({ type: "alert", ms: i, alert: { severity: "info", path: "p", class: "c", detail, count: i } })
    const stalled = connect(live.port, "127.0.0.1", () => stalled.write(`GET /events HTTP/1.1\r\nHost: 127.0.0.1:${live.port}\r\n\r\n`))
    stalled.on("error", () => {})
    stalled.pause()
    await until(() => live.pages().open === 1)
    let status = 0
    for (let i = 0; i < 100 && status !== 200; i++) {
      const next = await fetch(`${live.url}events`, { headers: { connection: "close" } })
      status = next.status
      await next.body?.cancel()
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(status).toBe(200)
    expect(live.pages().dropped).toBe(1)
    stalled.destroy()
  }, 60_000)

  it("answers only the paths it serves, as sent: //events is not the page, and a Host with anything after the address is refused", async () => {
    const live = await startLive()
    expect(await rawStatus(live.port, `[::1]:${live.port}`)).toBe("HTTP/1.1 200 OK")
    // Node's server hands these to the dashboard (403); Bun's and Deno's refuse them first (400).
    const refused = ["HTTP/1.1 400 Bad Request", "HTTP/1.1 403 Forbidden"]
    expect(refused).toContain(await rawStatus(live.port, `[::1]attacker.example`))
    expect(refused).toContain(await rawStatus(live.port, `127.0.0.1:${live.port}x`))
    expect(refused).toContain(await rawStatus(live.port, `[::1]attacker.example:${live.port}`))
    expect(await rawStatus(live.port, `127.0.0.1:${live.port}`, "//events")).toBe("HTTP/1.1 404 Not Found")
    expect(await rawStatus(live.port, `127.0.0.1:${live.port}`, "//")).toBe("HTTP/1.1 404 Not Found")
    expect(Live.hostName("[::1]:80")).toBe("[::1]")
    expect(Live.hostName("localhost")).toBe("localhost")
    expect(Live.hostName("[::1]x")).toBe("")
  })
})
