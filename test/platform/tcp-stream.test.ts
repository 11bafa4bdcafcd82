// This runtime's plain TCP streams (`Select.listenTcp`, `connectTcp`, `connectPath`): bytes written
// faster than the kernel takes them arrive whole and in order, each write's `sent` comes once, an
// `end` right after them still delivers them all, and a refused connection ends in `close` alone.
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as FreePorts from "../../src/platform/free-ports.ts"
import * as Select from "../../src/platform/select.ts"
import type * as RuntimeTypes from "../../src/platform/types.ts"

const host = "127.0.0.1"

/** Parts of several megabytes in all, each byte a function of its place in the whole stream. */
const partsOf = (sizes: ReadonlyArray<number>): Array<Uint8Array> => {
  let at = 0
  return sizes.map((size) => Uint8Array.from({ length: size }, () => (at++ * 31) & 0xff))
}

/** A listener that keeps every byte it gets, and resolves `ended` with them once the stream closes. */
const keeper = (path: string | undefined) => {
  const chunks: Array<Uint8Array> = []
  let ended: (bytes: Buffer) => void = () => {}
  const done = new Promise<Buffer>((resolve) => {
    ended = resolve
  })
  const server = FreePorts.freePorts(host, 1).then(([port]) =>
    Select.listenTcp({
      host,
      port: port!,
      path,
      open: () => ({ data: (chunk) => void chunks.push(chunk.slice()), close: () => ended(Buffer.concat(chunks)) })
    })
  )
  return { server, done }
}

const sendAll = (stream: RuntimeTypes.TcpStream, parts: ReadonlyArray<Uint8Array>): Array<number> => {
  const sent: Array<number> = []
  for (let i = 0; i < parts.length; i += 2) stream.write(parts.slice(i, i + 2), () => sent.push(i))
  stream.end()
  return sent
}

describe(`plain TCP streams (${Runtime.detect()})`, () => {
  const sizes = [20, 3_000_000, 20, 1, 20, 800_000, 20, 5_000_000]

  it("over TCP: writes the kernel cannot take at once arrive whole and in order, the end after them too", async () => {
    const parts = partsOf(sizes)
    const { server, done } = keeper(undefined)
    const listening = await server
    try {
      let sent: Array<number> = []
      const stream = Select.connectTcp(host, listening.port, {
        open: () => {
          sent = sendAll(stream, parts)
        },
        data: () => {},
        close: () => {}
      })
      expect((await done).equals(Buffer.concat(parts))).toBe(true)
      await new Promise((r) => setTimeout(r, 20))
      expect(sent).toEqual([0, 2, 4, 6])
    } finally {
      await listening.close()
    }
  })

  it("over a Unix socket, likewise; writes made before the connection opens wait for it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "cohort-tcp-"))
    try {
      const parts = partsOf(sizes)
      const { server, done } = keeper(join(dir, "s.sock"))
      const listening = await server
      const stream = Select.connectPath(join(dir, "s.sock"), { open: () => {}, data: () => {}, close: () => {} })
      const sent = sendAll(stream, parts)
      expect((await done).equals(Buffer.concat(parts))).toBe(true)
      await new Promise((r) => setTimeout(r, 20))
      expect(sent).toEqual([0, 2, 4, 6])
      await listening.close()
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it("a refused connection ends in `close`, without `open`", async () => {
    const [port] = await FreePorts.freePorts(host, 1)
    const events: Array<string> = []
    await new Promise<void>((resolve) => {
      Select.connectTcp(host, port!, {
        open: () => void events.push("open"),
        data: () => {},
        close: () => {
          events.push("close")
          resolve()
        }
      })
    })
    expect(events).toEqual(["close"])
  })
})
