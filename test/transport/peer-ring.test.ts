// Direct ring links between processes (`PeerRing`), on this runtime's TCP listener and client:
// steps go rank to rank, a stranger (wrong token, or not the previous neighbour) is refused, and a
// neighbour that cannot be reached leaves its generation on the relay.
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as Select from "../../src/platform/select.ts"
import type * as RuntimeTypes from "../../src/platform/types.ts"
import * as FreePorts from "../../src/platform/free-ports.ts"
import * as LinkFrames from "../../src/transport/internal/link-frames.ts"
import * as PeerRing from "../../src/transport/peer-ring.ts"

const host = "127.0.0.1"
const token = "peer-ring-test-token-3f9a"
const opened: Array<PeerRing.PeerRing> = []
afterEach(() => {
  for (const ring of opened.splice(0)) ring.close()
})

/** `count` ranks with listeners (those in `without` get no address). */
const ranks = async (count: number, without: ReadonlyArray<number> = []) => {
  const ports = await FreePorts.freePorts(host, count)
  const urls = ports.map((port, rank) => (without.includes(rank) ? undefined : `tcp://${host}:${port}`))
  const rings = ports.map((port, rank) => PeerRing.start({ rank, token, urls, host, port, connectTimeoutMs: 2000 }))
  opened.push(...rings)
  // Wait for the listeners to bind.
  for (let i = 0; i < 100 && rings.some((ring, rank) => !without.includes(rank) && !ring.listening()); i++)
    await new Promise((r) => setTimeout(r, 20))
  return { rings, urls }
}

const nextMessage = (end: PeerRing.PeerEnd): Promise<RuntimeTypes.RingWire> => new Promise((resolve) => end.onMessage(resolve))

/** The proof a connector owes the listener's `challenge` (as `PeerRing` computes it), signed with `key`. */
const proofOf = async (key: string, parts: ReadonlyArray<string | number>): Promise<string> => {
  const cryptoKey = await crypto.subtle.importKey("raw", new TextEncoder().encode(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"])
  const signed = await crypto.subtle.sign("HMAC", cryptoKey, new TextEncoder().encode(["cohort-peer-ring", ...parts].join("|")))
  return Array.from(new Uint8Array(signed), (b) => b.toString(16).padStart(2, "0")).join("")
}

/** A raw TCP client of `url`'s listener speaking the link's frames: `send` a text frame; `onText` the texts it gets; `closed` the close frame's code (0 when the stream ended without one). */
const rawClient = (url: string, onText: (text: string, send: (text: string) => void) => void): Promise<number> =>
  new Promise((resolve) => {
    const { hostname, port } = new URL(url)
    let code = 0
    const reader = new LinkFrames.FrameReader(
      1 << 20,
      (frame) => {
        if (frame.kind === LinkFrames.kinds.Close) code = frame.code
        else if (frame.kind === LinkFrames.kinds.Text)
          onText(new TextDecoder().decode(frame.payload), (text) => stream.write(LinkFrames.text(text)))
      },
      () => {}
    )
    const stream = Select.connectTcp(hostname, Number(port), {
      open: () => {},
      data: (chunk) => reader.push(chunk),
      close: () => resolve(code)
    })
  })

/** Opens a raw client, answers the listener's challenge with `hello(challenge)`, and gives the close code the listener answered with. */
const strangerCode = (url: string, hello: (challenge: string) => Promise<string>): Promise<number> => {
  let said = false
  return rawClient(url, (text, send) => {
    if (said) return
    said = true
    void hello((JSON.parse(text) as { challenge: string }).challenge).then(send)
  })
}

/** A listener on a free port that takes every connection, sends `challenge` (if any), answers each message with a made-up proof, and keeps what it got. */
const squatter = async (challenge: string | undefined) => {
  const [port] = await FreePorts.freePorts(host, 1)
  const received: Array<string> = []
  const server = await Select.listenTcp({
    host,
    port: port!,
    open: (stream) => {
      if (challenge !== undefined) stream.write(LinkFrames.text(JSON.stringify({ challenge })))
      const reader = new LinkFrames.FrameReader(
        1 << 20,
        (frame) => {
          received.push(new TextDecoder().decode(frame.payload))
          stream.write(LinkFrames.text(JSON.stringify({ proof: "00".repeat(32) })))
        },
        () => {}
      )
      return { data: (chunk) => reader.push(chunk), close: () => {} }
    }
  })
  return { url: `tcp://${host}:${port}`, received, close: () => server.close() }
}

describe(`direct ring links between processes (${Runtime.detect()})`, () => {
  it("a step goes from a rank to its next ring neighbour, as sent", async () => {
    const { rings } = await ranks(3)
    const ends = rings.map((ring, rank) => ring.open(0, PeerRing.neighboursOf([0, 1, 2], rank)))
    expect(await ends[0]!.connected).toBe(true)
    const received = nextMessage(ends[1]!)
    const data = new Float64Array([1.5, -2, 1])
    expect(ends[0]!.send({ generation: 0, round: 3, step: 0, data })).toBe(true)
    const step = await received
    expect([step.generation, step.round, step.step, Array.from(step.data), step.data instanceof Float64Array]).toEqual([
      0,
      3,
      0,
      [1.5, -2, 1],
      true
    ])
  })

  it("counts a step's bytes on the link as its frame header and its values", () => {
    const step = (data: Float64Array | Float32Array | Uint8Array) => PeerRing.stepBytes({ generation: 1, round: 2, step: 0, data })
    expect(step(new Float32Array(250))).toBe(LinkFrames.headerBytes + 1000)
    expect(step(new Float64Array(251))).toBe(LinkFrames.headerBytes + 2008)
    expect(step(new Uint8Array(300).subarray(10, 40))).toBe(LinkFrames.headerBytes + 30)
    // What LinkFrames puts on the stream for the same step.
    const frame = LinkFrames.step(1, 2, 0, new Float32Array(250))
    expect(frame.reduce((sum, part) => sum + part.byteLength, 0)).toBe(step(new Float32Array(250)))
  })

  it("a packed step (`--compress`) goes to the next neighbour as its bytes", async () => {
    const { rings } = await ranks(2)
    const ends = rings.map((ring, rank) => ring.open(0, PeerRing.neighboursOf([0, 1], rank)))
    expect(await ends[0]!.connected).toBe(true)
    const received = nextMessage(ends[1]!)
    const data = new Uint8Array([1, 0, 0, 0, 255, 255, 255, 255, 1, 0, 0, 0, 1, 0, 0, 0, 0, 60])
    const sent = Array.from(data)
    expect(ends[0]!.send({ generation: 0, round: 2, step: 1, data })).toBe(true)
    const step = await received
    expect([step.round, step.step, step.data instanceof Uint8Array, Array.from(step.data)]).toEqual([2, 1, true, sent])
  })

  it("a connection with a wrong token is closed with BadHello (4020), one from a rank that is not the previous neighbour with NotNeighbour (4021)", async () => {
    const { rings, urls } = await ranks(3)
    rings.forEach((ring, rank) => ring.open(0, PeerRing.neighboursOf([0, 1, 2], rank)))
    const hello = (key: string, from: number) => async (challenge: string) =>
      JSON.stringify({ generation: 0, from, challenge: "ab".repeat(32), proof: await proofOf(key, ["hello", challenge, 0, from, 1]) })
    expect(await strangerCode(urls[1]!, hello("guessed", 0))).toBe(PeerRing.closeCodes.BadHello)
    expect(await strangerCode(urls[1]!, async () => "not a hello")).toBe(PeerRing.closeCodes.BadHello)
    // A proof over another challenge than the one this connection got (a replay).
    expect(await strangerCode(urls[1]!, (challenge) => hello(token, 0)(challenge.replace(/^./, (c) => (c === "0" ? "1" : "0"))))).toBe(
      PeerRing.closeCodes.BadHello
    )
    // Rank 2 is rank 1's next neighbour, not its previous one.
    expect(await strangerCode(urls[1]!, hello(token, 2))).toBe(PeerRing.closeCodes.NotNeighbour)
  })

  it("a link opened before its receiver knows the generation waits for it, with the steps it brought; a neighbour without an address leaves the generation on the relay (connected false, send false)", async () => {
    const { rings } = await ranks(3, [2])
    // Rank 0 links to rank 1 before rank 1 opened generation 4.
    const end0 = rings[0]!.open(4, PeerRing.neighboursOf([0, 1, 2], 0))
    expect(await end0.connected).toBe(true)
    expect(end0.send({ generation: 4, round: 0, step: 0, data: new Float32Array([7]) })).toBe(true)
    // The step reaches rank 1 before it opens the generation: it waits with the parked link.
    await new Promise((r) => setTimeout(r, 300))
    const end1 = rings[1]!.open(4, PeerRing.neighboursOf([0, 1, 2], 1))
    expect(Array.from((await nextMessage(end1)).data)).toEqual([7])
    // Rank 2 has no listener: rank 1's link to it is never made.
    expect(await end1.connected).toBe(false)
    expect(end1.send({ generation: 4, round: 0, step: 0, data: new Float32Array([1]) })).toBe(false)
  })

  it("a stranger that took a neighbour's port gets no token and no step, and the generation falls back to the relay", async () => {
    const { rings, urls } = await ranks(2)
    for (const challenge of ["cd".repeat(32), undefined]) {
      const stranger = await squatter(challenge)
      try {
        const ring = PeerRing.start({ rank: 0, token, urls: [urls[0], stranger.url], host, port: 0, connectTimeoutMs: 1000 })
        opened.push(ring)
        const end = ring.open(0, PeerRing.neighboursOf([0, 1], 0))
        expect(await end.connected).toBe(false)
        expect(end.send({ generation: 0, round: 0, step: 0, data: new Float32Array([1]) })).toBe(false)
        expect(stranger.received.every((text) => !text.includes(token))).toBe(true)
        // With a challenge it got the hello (a proof, not the token); without, nothing.
        expect(stranger.received.length).toBe(challenge === undefined ? 0 : 1)
      } finally {
        await stranger.close()
      }
    }
    rings[1]!.close()
  })

  it("between hosts (no run token): each generation's secret and next address come with open; a hello before its generation waits for the secret; a wrong secret or none leaves the relay", async () => {
    const rings = [0, 1].map((rank) => PeerRing.start({ rank, token: "", urls: [], host, port: 0, listen: true, connectTimeoutMs: 2000 }))
    opened.push(...rings)
    const [port0, port1] = await Promise.all(rings.map((ring) => ring.bound))
    const url1 = PeerRing.advertisedUrl(host, port1!)
    expect([typeof port0, url1]).toEqual(["number", `ws://${host}:${port1}/`])
    // Rank 0 links before rank 1 knows generation 2: its hello waits there for rank 1's secret.
    const end0 = rings[0]!.open(2, { prev: 1, next: 1, nextUrl: url1, secret: "generation-2-secret" })
    await new Promise((r) => setTimeout(r, 50))
    const end1 = rings[1]!.open(2, { prev: 0, next: 0, secret: "generation-2-secret" })
    expect(await end0.connected).toBe(true)
    expect(end0.send({ generation: 2, round: 0, step: 0, data: new Float32Array([5]) })).toBe(true)
    expect(Array.from((await nextMessage(end1)).data)).toEqual([5])
    // Rank 1 gave no address for rank 0: its outgoing link is never made.
    expect(await end1.connected).toBe(false)
    // Generation 3: rank 0 holds another secret than rank 1 (a stale or forged FormRing), then none.
    rings[1]!.open(3, { prev: 0, next: 0, secret: "generation-3-secret" })
    expect(await rings[0]!.open(3, { prev: 1, next: 1, nextUrl: url1, secret: "a guess" }).connected).toBe(false)
    expect(await rings[0]!.open(4, { prev: 1, next: 1, nextUrl: url1 }).connected).toBe(false)
  })

  it("over Unix sockets (`unix:` addresses): a large step goes rank to rank as sent, and a socket already at a rank's path is replaced", async () => {
    const dir = await mkdtemp(join(tmpdir(), "cohort-peer-"))
    const closing: Array<RuntimeTypes.RawServer> = []
    try {
      const urls = [0, 1, 2].map((rank) => `unix:${join(dir, `${rank}.sock`)}`)
      // A socket file where rank 1 listens (as one a rank that died leaves): its listener takes the path.
      const stale = await Select.listenTcp({ host, port: 0, path: join(dir, "1.sock"), open: () => ({ data: () => {}, close: () => {} }) })
      closing.push(stale)
      const rings = urls.map((_, rank) => PeerRing.start({ rank, token, urls, host, port: 0, connectTimeoutMs: 2000 }))
      opened.push(...rings)
      for (const ring of rings) expect(await ring.bound).toBe(0)
      const ends = rings.map((ring, rank) => ring.open(0, PeerRing.neighboursOf([0, 1, 2], rank)))
      expect(await ends[0]!.connected).toBe(true)
      const received = nextMessage(ends[1]!)
      const data = Float64Array.from({ length: 300_001 }, (_, i) => i / 7)
      expect(ends[0]!.send({ generation: 0, round: 1, step: 0, data: data.slice() })).toBe(true)
      const step = await received
      expect([step.generation, step.round, step.step, step.data instanceof Float64Array]).toEqual([0, 1, 0, true])
      expect(Buffer.from(step.data.buffer, step.data.byteOffset, step.data.byteLength).equals(Buffer.from(data.buffer))).toBe(true)
    } finally {
      for (const ring of opened.splice(0)) ring.close()
      for (const server of closing) await server.close()
      await new Promise((r) => setTimeout(r, 50))
      await rm(dir, { recursive: true, force: true })
    }
  })

  it("a neighbour that died (its port refuses) leaves the generation on the relay", async () => {
    const { rings } = await ranks(2)
    rings[1]!.close()
    await new Promise((r) => setTimeout(r, 100))
    const end0 = rings[0]!.open(0, PeerRing.neighboursOf([0, 1], 0))
    expect(await end0.connected).toBe(false)
  })
})
