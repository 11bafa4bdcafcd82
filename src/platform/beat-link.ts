/**
 * A beat link: a thread of a joined rank's own that keeps a second small WebSocket open to the
 * coordinator's server, proved for the rank's session with the welcome's beat key (an
 * HMAC-SHA256 of `proofText` under it; the key itself never goes on the wire), and sends a
 * one-byte message every `intervalMs` while the rank's thread runs a call the coordinator asked
 * for. The rank's own socket belongs to its thread, which a synchronous `save` blocks; the
 * thread's beats tell the server the process is alive, and a stopped process (SIGSTOP stops
 * every thread) falls silent as it should.
 *
 * The thread runs Node's `worker_threads` API from a `data:` URL (Node, Bun and Deno load it) and
 * holds nothing open (`unref`). It uses the runtime's `WebSocket` where there is one, else the
 * `ws` package the process already has. It reconnects after a drop, every `retryMs`, and stops
 * for good on the server's `BeatLinkTaken` (4032), `BeatLinkBad` (4033) or `RankDead` (4011).
 * Plain `ws://` only: over `wss://` the certificate the rank pins would need checking here too.
 *
 * @since 0.1.0
 */
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"
import { Worker } from "node:worker_threads"

const STATE = 0
const GENERATION = 1
const INTERVAL = 2
const BOUND = 3
const OPEN = 4
const CELLS = 5
const IDLE = 0
const BEATING = 1

// The thread's code: keep the link open; beat while BEATING within the generation's bound.
const source = `
import { parentPort, workerData } from "node:worker_threads"
import { createHmac } from "node:crypto"
const c = new Int32Array(workerData.control)
const WS = globalThis.WebSocket ?? (await import(workerData.wsUrl)).default
const proof = createHmac("sha256", workerData.key).update(workerData.proofText).digest("base64url")
const join = JSON.stringify({ v: 2, beat: workerData.rank, session: workerData.session, proof })
const final = new Set([4011, 4032, 4033])
let socket
let open = false
const connect = () => {
  const s = new WS(workerData.url)
  s.binaryType = "arraybuffer"
  s.onopen = () => s.send(join)
  s.onmessage = (event) => {
    if (typeof event.data === "string" && event.data.includes('"beating"')) {
      open = true
      Atomics.store(c, ${OPEN}, 1)
    }
  }
  s.onerror = () => {}
  s.onclose = (event) => {
    open = false
    Atomics.store(c, ${OPEN}, 0)
    socket = undefined
    if (!final.has(event.code)) setTimeout(connect, workerData.retryMs)
  }
  socket = s
}
connect()
const beat = new Uint8Array([0])
let generation = -1
let startMs = 0
const step = () => {
  if (Atomics.load(c, ${STATE}) === ${BEATING}) {
    const g = Atomics.load(c, ${GENERATION})
    if (g !== generation) {
      generation = g
      startMs = Date.now()
    }
    if (open && Date.now() - startMs <= Atomics.load(c, ${BOUND})) {
      try {
        socket.send(beat)
      } catch {}
    }
  }
  timer = setTimeout(step, Math.max(1, Atomics.load(c, ${INTERVAL})))
}
let timer
// A call starts: beat at once, and at its interval from now on (not the last call's).
parentPort.on("message", () => {
  clearTimeout(timer)
  step()
})
step()
`

/**
 * Where to reach the server and what proves the link: `url` (`ws://`), the rank, its session and
 * the welcome's `key`; `proofText` is `WebSocketProtocol.beatProofText(rank, session)`; `retryMs`
 * the wait before reconnecting after a drop.
 *
 * @since 0.1.0
 * @category beat links
 */
export interface Options {
  readonly url: string
  readonly rank: number
  readonly session: string
  readonly key: string
  readonly proofText: string
  readonly retryMs: number
}

/**
 * A running beat link: `beatWhile(intervalMs, forMs)` beats every `intervalMs` for up to `forMs`
 * ms until the returned function is called (a later call's beats are not an earlier stop's to
 * end); `open()` whether the server took the link now; `close()` ends the thread and its link.
 *
 * @since 0.1.0
 * @category beat links
 */
export interface BeatLink {
  readonly beatWhile: (intervalMs: number, forMs: number) => () => void
  readonly open: () => boolean
  readonly close: () => void
}

/**
 * Starts the beat link's thread (module doc); `undefined` when it cannot start (no thread, no
 * `WebSocket` and no `ws`, a `wss://` url).
 *
 * @since 0.1.0
 * @category beat links
 */
export const start = (options: Options): BeatLink | undefined => {
  if (!options.url.startsWith("ws://")) return undefined
  const control = new Int32Array(new SharedArrayBuffer(CELLS * 4))
  Atomics.store(control, INTERVAL, 1000)
  let wsUrl = ""
  try {
    wsUrl = pathToFileURL(createRequire(import.meta.url).resolve("ws")).href
  } catch {
    if (typeof (globalThis as { WebSocket?: unknown }).WebSocket !== "function") return undefined
  }
  let worker: Worker
  try {
    const url = new URL(`data:text/javascript,${encodeURIComponent(source)}`)
    // No loader of the parent's (tsx) in a thread that runs plain JavaScript.
    worker = new Worker(url, { workerData: { ...options, wsUrl, control: control.buffer }, execArgv: [] })
    worker.unref()
    worker.on("error", () => Atomics.store(control, OPEN, 0))
  } catch {
    return undefined
  }
  const beatWhile = (intervalMs: number, forMs: number): (() => void) => {
    if (!(intervalMs > 0) || !(forMs > 0)) return () => {}
    Atomics.store(control, INTERVAL, Math.max(1, Math.round(intervalMs)))
    Atomics.store(control, BOUND, Math.min(2 ** 31 - 1, Math.round(forMs)))
    Atomics.add(control, GENERATION, 1)
    Atomics.store(control, STATE, BEATING)
    worker.postMessage(0)
    const generation = Atomics.load(control, GENERATION)
    return () => {
      if (Atomics.load(control, GENERATION) === generation) Atomics.store(control, STATE, IDLE)
    }
  }
  const close = (): void => {
    Atomics.store(control, OPEN, 0)
    void worker.terminate()
  }
  return { beatWhile, open: () => Atomics.load(control, OPEN) === 1, close }
}
