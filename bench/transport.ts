/**
 * Transport benchmark (docs/design.md §6): one-way frames per second from a rank to the
 * coordinator for each transport, beside the raw ceiling of the same channel measured in the same
 * run, as a ratio:
 *
 * - worker threads: Cohort's batched frames vs raw `postMessage` of small objects over a port;
 * - WebSocket: Cohort's batched frames vs raw binary WebSocket messages (the runtime's own server
 *   and client: `ws` under Node, `Bun.serve` + global client under Bun, `Deno.serve` + global
 *   client under Deno; both ends in this process);
 * - in-memory: Cohort only (no raw channel to compare with).
 *
 * The `+ wire decode` rows also decode and validate every received frame with `src/wire`'s codec
 * (bound to the sender), the work the coordinator does on each frame; the raw rows never decode.
 *
 * Every stream uses the same flow control as TOOLCHAIN.md §6: the receiver acknowledges every
 * 10,000 frames and the sender keeps at most 2 windows in flight. Frames are a pre-encoded CBOR
 * `Progress` frame from `src/wire` (about 20 bytes); raw messages are a small object (worker) or a
 * 64-byte buffer (WebSocket).
 *
 * Run: `node --import tsx bench/transport.ts`, `bun bench/transport.ts`,
 * `deno run -A bench/transport.ts`, or `npm run bench:transport`. Flags: `--quick` (under 10 s),
 * `--no-json`. Results go to `bench/results/transport.<runtime>.json` (rewritten by every run and
 * ignored by git; copy a run worth keeping into docs/benchmarks.md).
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { isMainThread, MessageChannel, Worker as NodeWorker } from "node:worker_threads"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Memory from "../src/transport/memory.ts"
import * as Runtime from "../src/platform/detect.ts"
import * as Select from "../src/platform/select.ts"
import * as Transport from "../src/transport/transport.ts"
import * as WebSocket from "../src/transport/web-socket.ts"
import * as Worker from "../src/transport/worker.ts"
import * as Codec from "../src/wire/codec.ts"
import * as Frame from "../src/wire/frame.ts"

const window = 10_000
const ackBytes = Uint8Array.of(0xac)
const frame = Codec.encode(Frame.fromRank(0, { _tag: "Progress", epoch: 3, samplesDone: 123_456, msPerBatch: 1.5 }))
const nowMs = () => performance.now()

// ---------------------------------------------------------------------------------------------
// Worker roles (this file is also the worker entry)
// ---------------------------------------------------------------------------------------------

// The raw sender is plain JavaScript (an `eval` worker), so it starts without tsx or effect:
// `n` small objects over the port it is given, at most 2 windows ahead of the acks.
const rawSenderSource = `
const { workerData } = require("node:worker_threads")
const { port, n, window } = workerData
let sent = 0
let acked = 0
const pump = () => {
  while (sent < n && sent - acked < 2 * window) port.postMessage({ type: "Heartbeat", rank: 17, step: sent++, ts: 1.7e12 })
}
port.on("message", () => {
  acked += window
  pump()
})
pump()
`

/** Cohort sender inside a worker: `n` frames to the coordinator, windowed on ack frames. */
const transportSender = (t: Transport.TransportShape, n: number) =>
  Effect.gen(function* () {
    let sent = 0
    let acked = 0
    while (sent < n) {
      while (sent < n && sent - acked < 2 * window) {
        yield* t.send(Transport.coordinatorPeer, frame)
        sent += 1
      }
      if (sent < n) {
        yield* t.flush
        const event = yield* Queue.take(t.inbox)
        if (event._tag !== "Frame") return
        acked += window
      }
    }
    yield* t.flush
    while (true) {
      const event = yield* Queue.take(t.inbox)
      if (event._tag !== "Frame") return
    }
  })

// ---------------------------------------------------------------------------------------------
// Measurements: each returns frames per second, receiver side, from first send to last arrival
// ---------------------------------------------------------------------------------------------

const rawWorker = (n: number): Promise<number> =>
  new Promise((resolve, reject) => {
    const { port1, port2 } = new MessageChannel()
    const worker = new NodeWorker(rawSenderSource, {
      eval: true,
      workerData: { port: port2, n, window },
      transferList: [port2]
    })
    let received = 0
    let started = 0
    port1.on("message", () => {
      if (received === 0) started = nowMs()
      received += 1
      if (received % window === 0) port1.postMessage(0)
      if (received === n) {
        const elapsed = nowMs() - started
        port1.close()
        void worker.terminate().then(() => resolve((n - 1) / (elapsed / 1000)))
      }
    })
    worker.on("error", reject)
  })

const cohortWorker =
  (decode: boolean) =>
  (n: number): Promise<number> =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const host = yield* Worker.host()
          yield* host.spawn({ entry: import.meta.url, rank: 0, data: { benchTransport: true, n } })
          const t = host.transport
          return yield* receive(t, 0, n, decode)
        })
      )
    )

let decoded = 0

/** Counts `n` frames from `peer` on `t`, acking each window, decoding each with the wire codec when `decode`; frames per second. */
const receive = (t: Transport.TransportShape, peer: Transport.Peer, n: number, decode = false) =>
  Effect.gen(function* () {
    let received = 0
    let started = 0
    while (received < n) {
      const events = yield* Queue.takeAll(t.inbox)
      for (const event of events) {
        if (event._tag !== "Frame") return yield* Effect.die(new Error(`unexpected ${event._tag}`))
        if (received === 0) started = nowMs()
        received += 1
        if (decode && Result.isSuccess(Codec.decode(event.bytes, { from: peer }))) decoded += 1
        if (received % window === 0) yield* t.send(peer, ackBytes)
      }
    }
    const elapsed = nowMs() - started
    yield* t.send(peer, ackBytes)
    return (n - 1) / (elapsed / 1000)
  })

const rawWebSocket = async (n: number): Promise<number> => {
  const payload = new Uint8Array(64)
  let finish: (rate: number) => void = () => {}
  const done = new Promise<number>((resolve) => (finish = resolve))
  let received = 0
  let started = 0
  const server = await Select.serveWs({
    host: "127.0.0.1",
    port: 0,
    maxPayloadBytes: 1 << 20,
    open: (socket) => ({
      message: () => {
        if (received === 0) started = nowMs()
        received += 1
        if (received % window === 0) socket.send("ack")
        if (received === n) finish((n - 1) / ((nowMs() - started) / 1000))
      },
      close: () => {}
    })
  })
  let sent = 0
  let acked = 0
  const pump = () => {
    while (sent < n && sent - acked < 2 * window) {
      client.send(payload)
      sent += 1
    }
  }
  const client = Select.connectWs(`ws://127.0.0.1:${server.port}/`, {
    open: pump,
    message: () => {
      acked += window
      pump()
    },
    close: () => {}
  })
  const rate = await done
  client.close(1000, "done")
  await server.close()
  return rate
}

const cohortWebSocket =
  (decode: boolean) =>
  (n: number): Promise<number> =>
    Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const runToken = "bench-run-token-0001"
          const server = yield* WebSocket.serve({ runToken, worldSize: 1 })
          const client = yield* WebSocket.connect({ url: server.url, runToken, rank: 0 })
          yield* Effect.forkScoped(transportSender(client.transport, n))
          return yield* receive(server.transport, 0, n, decode)
        })
      )
    )

const cohortMemory = (n: number): Promise<number> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const network = yield* Memory.make
        const coordinator = yield* network.endpoint(Transport.coordinatorPeer)
        const rank = yield* network.endpoint(0)
        yield* Effect.forkScoped(transportSender(rank, n))
        return yield* receive(coordinator, 0, n)
      })
    )
  )

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

const median = (values: ReadonlyArray<number>): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const fmt = (value: number | undefined): string =>
  value === undefined ? "-" : value >= 1000 ? Math.round(value).toLocaleString("en-US") : value.toFixed(2)

const main = async () => {
  const args = process.argv.slice(2)
  const quick = args.includes("--quick")
  const reps = quick ? 1 : 3
  const nWorker = quick ? 60_000 : 1_000_000
  const nSocket = quick ? 60_000 : 300_000
  const runtime = Runtime.detect()
  const startedMs = nowMs()

  const measure = async (f: (n: number) => Promise<number>, n: number) => {
    const rates: Array<number> = []
    for (let i = 0; i < reps; i++) rates.push(await f(n))
    return median(rates)
  }
  const rows: Array<{ transport: string; frames: number; rawPerSec?: number; cohortPerSec: number; ratio?: number }> = []
  const add = async (transport: string, n: number, cohort: (n: number) => Promise<number>, rawPerSec?: number) => {
    const cohortPerSec = await measure(cohort, n)
    rows.push({
      transport,
      frames: n,
      cohortPerSec,
      ...(rawPerSec === undefined ? {} : { rawPerSec, ratio: cohortPerSec / rawPerSec })
    })
  }
  const rawWorkerPerSec = await measure(rawWorker, nWorker)
  await add("worker threads", nWorker, cohortWorker(false), rawWorkerPerSec)
  await add("worker threads + wire decode", nWorker, cohortWorker(true), rawWorkerPerSec)
  const rawSocketPerSec = await measure(rawWebSocket, nSocket)
  await add("WebSocket", nSocket, cohortWebSocket(false), rawSocketPerSec)
  await add("WebSocket + wire decode", nSocket, cohortWebSocket(true), rawSocketPerSec)
  await add("in-memory", nSocket, cohortMemory)

  console.log(
    `transport bench: ${Runtime.describe()}, ${quick ? "quick" : "full"} (median of ${reps}), ` +
      `one-way rank -> coordinator, window 2 x ${window}, Cohort frame ${frame.byteLength} B CBOR`
  )
  console.log("| transport | frames | raw ceiling msg/s | Cohort frames/s | ratio |")
  console.log("|---|---:|---:|---:|---:|")
  for (const row of rows) {
    console.log(`| ${row.transport} | ${fmt(row.frames)} | ${fmt(row.rawPerSec)} | ${fmt(row.cohortPerSec)} | ${fmt(row.ratio)} |`)
  }
  console.log(`total ${((nowMs() - startedMs) / 1000).toFixed(1)} s (${decoded} frames decoded by the wire codec)`)
  if (!args.includes("--no-json")) {
    const path = join(import.meta.dirname, "results", `transport.${runtime}.json`)
    mkdirSync(dirname(path), { recursive: true })
    writeFileSync(
      path,
      `${JSON.stringify({ bench: "transport", runtime: Runtime.describe(), quick, reps, window, frameBytes: frame.byteLength, rows }, null, 2)}\n`
    )
    console.log(`wrote ${path}`)
  }
}

if (isMainThread) {
  await main()
} else {
  const { data, transport } = await Effect.runPromise(Worker.connect())
  await Effect.runPromise(transportSender(transport, (data as { readonly n: number }).n))
}
