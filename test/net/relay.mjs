// A delaying TCP relay for the network tests (test/net/netns.ts): the kernel here has no netem
// (TOOLCHAIN.md §9), so added latency comes from this process, run inside a namespace.
//
//   relay.mjs LISTEN_HOST:PORT TARGET_HOST:PORT DELAY_MS JITTER_MS BYTES_MAX [RECORD_FILE]
//
// Each accepted connection is paired with a new connection to the target. Every chunk read on
// either side is written to the other side DELAY_MS ± JITTER_MS (uniform) after it arrived, never
// before the chunk read before it (order is kept per direction). An end or error on one side ends
// the other once its delayed chunks are written. Past BYTES_MAX relayed bytes (both directions, all
// connections) it exits with 3: a test's traffic stays bounded. Prints
// `relay listening on HOST:PORT` once listening. With RECORD_FILE, every byte relayed (both ways)
// is appended to that file as it arrives: what an eavesdropper on the link reads.
import { appendFileSync } from "node:fs"
import * as net from "node:net"

const [listen, target, delayArg, jitterArg, bytesMaxArg, recordFile] = process.argv.slice(2)
const split = (hostPort) => {
  const at = hostPort.lastIndexOf(":")
  return { host: hostPort.slice(0, at), port: Number(hostPort.slice(at + 1)) }
}
const from = split(listen)
const to = split(target)
const delayMs = Number(delayArg)
const jitterMs = Number(jitterArg)
const bytesMax = Number(bytesMaxArg)
let bytes = 0

/** Writes what `source` reads to `sink`, each chunk delayed, in order. */
const pipeDelayed = (source, sink) => {
  const queue = []
  let timer
  let ended = false
  let last = 0
  const pump = () => {
    timer = undefined
    const now = Date.now()
    while (queue.length > 0 && queue[0].at <= now) {
      const { chunk } = queue.shift()
      if (chunk === null) {
        sink.end()
        return
      }
      if (!sink.destroyed) sink.write(chunk)
    }
    if (queue.length > 0) timer = setTimeout(pump, queue[0].at - now)
  }
  const push = (chunk) => {
    const at = Math.max(Date.now() + delayMs + (Math.random() * 2 - 1) * jitterMs, last)
    last = at
    queue.push({ at, chunk })
    if (timer === undefined) timer = setTimeout(pump, Math.max(0, queue[0].at - Date.now()))
  }
  source.on("data", (chunk) => {
    bytes += chunk.length
    if (bytes > bytesMax) {
      process.stderr.write(`relay: over ${bytesMax} bytes, stopping\n`)
      process.exit(3)
    }
    if (recordFile !== undefined) appendFileSync(recordFile, chunk)
    push(chunk)
  })
  source.on("end", () => {
    if (!ended) push(null)
    ended = true
  })
  source.on("error", () => sink.destroy())
  source.on("close", () => {
    // A reset (no end) cuts the other side at once, as a dropped connection would.
    if (!ended) sink.destroy()
  })
}

const server = net.createServer({ noDelay: true }, (client) => {
  const upstream = net.connect({ host: to.host, port: to.port, noDelay: true })
  pipeDelayed(client, upstream)
  pipeDelayed(upstream, client)
})
server.listen(from.port, from.host, () => {
  const address = server.address()
  process.stdout.write(`relay listening on ${address.address}:${address.port}\n`)
})
