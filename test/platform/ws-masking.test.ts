import { describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as NodeRuntime from "../../src/platform/node.ts"
import * as WsMasking from "../../src/platform/ws-masking.ts"

const runtime = Runtime.detect()

/** The byte-at-a-time XOR the word version must match. */
const byteLoop = (bytes: Uint8Array, key: Uint8Array): void => {
  for (let i = 0; i < bytes.length; i++) bytes[i]! ^= key[i & 3]!
}

/** `length` bytes of a pattern at byte `offset` of a larger buffer (any alignment). */
const patterned = (length: number, offset: number): Uint8Array => {
  const backing = new Uint8Array(length + offset + 8)
  for (let i = 0; i < backing.length; i++) backing[i] = (i * 151 + 7) & 0xff
  return backing.subarray(offset, offset + length)
}

/** Whether `a` and `b` hold the same bytes (`toEqual` on 40 KB arrays is slow). */
const same = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((value, i) => value === b[i])

const key = Uint8Array.of(0x9e, 0x01, 0xff, 0x5a)

describe("ws masking four bytes at a time", () => {
  it("unmasks exactly as the byte loop does, at every alignment and length, leaving the bytes around it alone", () => {
    for (const length of [0, 1, 3, 4, 5, 31, 32, 33, 63, 64, 65, 127, 1000, 40_016]) {
      for (let offset = 0; offset < 4; offset++) {
        const words = patterned(length, offset)
        const bytes = patterned(length, offset)
        WsMasking.unmask(words, key)
        byteLoop(bytes, key)
        expect(same(new Uint8Array(words.buffer), new Uint8Array(bytes.buffer))).toBe(true)
      }
    }
  })

  it("masks into another buffer at any offset as the byte loop does, the source untouched", () => {
    for (const length of [0, 2, 40, 125, 126, 4096, 40_016]) {
      for (const offset of [0, 2, 6, 8, 14]) {
        const source = patterned(length, 1)
        const before = Uint8Array.from(source)
        const output = new Uint8Array(offset + length)
        WsMasking.mask(source, key, output, offset, length)
        const expected = Uint8Array.from(before)
        byteLoop(expected, key)
        expect(same(output.subarray(offset), expected)).toBe(true)
        expect(same(source, before)).toBe(true)
      }
    }
  })

  it("masks in place when the output is the source at offset 0", () => {
    const bytes = patterned(1001, 3)
    const expected = Uint8Array.from(bytes)
    byteLoop(expected, key)
    WsMasking.mask(bytes, key, bytes, 0, bytes.length)
    expect(same(bytes, expected)).toBe(true)
  })
})

describe.runIf(runtime === "node")("ws masking installed (node)", () => {
  it("replaces ws's byte loops before ws loads, and a client's masked messages reach the server intact", async () => {
    expect(WsMasking.installed).toBe(true)
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
})
