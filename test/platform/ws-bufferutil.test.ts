// The WebSocket server's unmasking on Node: the bufferutil addon, which ws uses when installed.
import { describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as NodeRuntime from "../../src/platform/node.ts"
import { createRequire } from "node:module"

const runtime = Runtime.detect()

/** `length` bytes of a pattern at byte `offset` of a larger buffer (any alignment). */
const patterned = (length: number, offset: number): Uint8Array => {
  const backing = new Uint8Array(length + offset + 8)
  for (let i = 0; i < backing.length; i++) backing[i] = (i * 151 + 7) & 0xff
  return backing.subarray(offset, offset + length)
}

/** Whether `a` and `b` hold the same bytes (`toEqual` on 40 KB arrays is slow). */
const same = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((value, i) => value === b[i])

// A server unmasks every byte a client sends (RFC 6455 §5.3); without the optional `bufferutil`
// addon, `ws` on Node does it in a JavaScript byte loop, about 30 times slower (docs/churn.md).
describe.runIf(runtime === "node")("ws with bufferutil (node)", () => {
  it("ws finds the bufferutil addon, and a client's masked messages of every size reach the server intact", async () => {
    const require = createRequire(import.meta.url)
    const wsDir = require.resolve("ws/package.json").replace(/package\.json$/, "")
    const bufferUtil = require(`${wsDir}lib/buffer-util.js`) as { unmask: { name: string } }
    // ws's own loop is the named `_unmask`; with the addon it wraps it in an anonymous function.
    expect(bufferUtil.unmask.name).not.toBe("_unmask")
    const received: Array<Uint8Array> = []
    let arrived: () => void = () => undefined
    const allArrived = new Promise<void>((resolve) => {
      arrived = resolve
    })
    const sizes = [1, 5, 31, 32, 33, 125, 126, 4097, 40_016, 70_001]
    const server = await NodeRuntime.serveWs({
      host: "127.0.0.1",
      port: 0,
      maxPayloadBytes: 1 << 20,
      open: () => ({
        message: (data) => {
          if (typeof data === "string") return
          received.push(Uint8Array.from(data))
          if (received.length === sizes.length) arrived()
        },
        close: () => undefined
      })
    })
    const socket = NodeRuntime.openWebSocket(`ws://127.0.0.1:${server.port}/`, undefined)
    await new Promise<void>((resolve, reject) => {
      socket.onopen = () => resolve()
      socket.onerror = () => reject(new Error("socket error"))
    })
    const sent = sizes.map((size) => patterned(size, size % 4).slice())
    for (const bytes of sent) socket.send(bytes)
    await allArrived
    expect(received.map((bytes) => bytes.length)).toEqual(sizes)
    expect(received.every((bytes, i) => same(bytes, sent[i]!))).toBe(true)
    socket.close()
    await server.close()
  })

  it("a message sent in parts (sendParts, fragments) reaches the client as the parts joined, in order with whole messages", async () => {
    const parts = [patterned(9, 1), patterned(40_016, 0), patterned(130, 3), patterned(70_001, 2)].map((p) => p.slice())
    const whole = patterned(77, 0).slice()
    let sendParts: ((parts: ReadonlyArray<Uint8Array>) => void) | undefined
    let send: ((data: Uint8Array | string) => void) | undefined
    let opened: () => void = () => undefined
    const open = new Promise<void>((resolve) => {
      opened = resolve
    })
    const server = await NodeRuntime.serveWs({
      host: "127.0.0.1",
      port: 0,
      maxPayloadBytes: 1 << 20,
      open: (socket) => {
        sendParts = socket.sendParts
        send = socket.send
        opened()
        return { message: () => undefined, close: () => undefined }
      }
    })
    const received: Array<Uint8Array> = []
    let arrived: () => void = () => undefined
    const both = new Promise<void>((resolve) => {
      arrived = resolve
    })
    const socket = NodeRuntime.openWebSocket(`ws://127.0.0.1:${server.port}/`, undefined)
    socket.binaryType = "arraybuffer"
    socket.onmessage = (event) => {
      received.push(new Uint8Array(event.data as ArrayBuffer))
      if (received.length === 2) arrived()
    }
    await open
    expect(sendParts).toBeDefined()
    sendParts!(parts)
    send!(whole)
    await both
    const joined = new Uint8Array(parts.reduce((sum, p) => sum + p.length, 0))
    let at = 0
    for (const p of parts) {
      joined.set(p, at)
      at += p.length
    }
    expect(same(received[0]!, joined)).toBe(true)
    expect(same(received[1]!, whole)).toBe(true)
    socket.close()
    await server.close()
  })
})
