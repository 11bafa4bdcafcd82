// Direct ring links between processes (`PeerRing`), on this runtime's WebSocket server and client:
// steps go rank to rank, a stranger (wrong token, or not the previous neighbour) is refused, and a
// neighbour that cannot be reached leaves its generation on the relay.
import { afterEach, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as Select from "../../src/platform/select.ts"
import type * as RuntimeTypes from "../../src/platform/types.ts"
import * as FreePorts from "../../src/platform/free-ports.ts"
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
  const urls = ports.map((port, rank) => (without.includes(rank) ? undefined : `ws://${host}:${port}/`))
  const rings = ports.map((port, rank) => PeerRing.start({ rank, token, urls, host, port, connectTimeoutMs: 2000 }))
  opened.push(...rings)
  // Wait for the listeners to bind.
  for (let i = 0; i < 100 && rings.some((ring, rank) => !without.includes(rank) && !ring.listening()); i++) await new Promise((r) => setTimeout(r, 20))
  return { rings, urls }
}

const nextMessage = (end: PeerRing.PeerEnd): Promise<RuntimeTypes.RingWire> => new Promise((resolve) => end.onMessage(resolve))

/** Opens a raw client, says `hello`, and gives the close code the listener answered with. */
const strangerCode = (url: string, hello: string): Promise<number> =>
  new Promise((resolve) => {
    const socket = Select.connectWs(url, { open: () => socket.send(hello), message: () => {}, close: (code) => resolve(code) })
  })

describe(`direct ring links between processes (${Runtime.detect()})`, () => {
  it("a step goes from a rank to its next ring neighbour, as sent", async () => {
    const { rings } = await ranks(3)
    const ends = rings.map((ring, rank) => ring.open(0, [0, 1, 2], rank))
    expect(await ends[0]!.connected).toBe(true)
    const received = nextMessage(ends[1]!)
    const data = new Float64Array([1.5, -2, 1])
    expect(ends[0]!.send({ generation: 0, round: 3, step: 0, data })).toBe(true)
    const step = await received
    expect([step.generation, step.round, step.step, Array.from(step.data), step.data instanceof Float64Array]).toEqual([0, 3, 0, [1.5, -2, 1], true])
  })

  it("a connection with a wrong token is closed with BadHello (4020), one from a rank that is not the previous neighbour with NotNeighbour (4021)", async () => {
    const { rings, urls } = await ranks(3)
    rings.forEach((ring, rank) => ring.open(0, [0, 1, 2], rank))
    expect(await strangerCode(urls[1]!, JSON.stringify({ token: "guessed", generation: 0, from: 0 }))).toBe(PeerRing.closeCodes.BadHello)
    expect(await strangerCode(urls[1]!, "not a hello")).toBe(PeerRing.closeCodes.BadHello)
    // Rank 2 is rank 1's next neighbour, not its previous one.
    expect(await strangerCode(urls[1]!, JSON.stringify({ token, generation: 0, from: 2 }))).toBe(PeerRing.closeCodes.NotNeighbour)
  })

  it("a link opened before its receiver knows the generation waits for it; a neighbour without an address leaves the generation on the relay (connected false, send false)", async () => {
    const { rings } = await ranks(3, [2])
    // Rank 0 links to rank 1 before rank 1 opened generation 4.
    const end0 = rings[0]!.open(4, [0, 1, 2], 0)
    expect(await end0.connected).toBe(true)
    expect(end0.send({ generation: 4, round: 0, step: 0, data: new Float32Array([7]) })).toBe(true)
    const end1 = rings[1]!.open(4, [0, 1, 2], 1)
    expect(Array.from((await nextMessage(end1)).data)).toEqual([7])
    // Rank 2 has no listener: rank 1's link to it is never made.
    expect(await end1.connected).toBe(false)
    expect(end1.send({ generation: 4, round: 0, step: 0, data: new Float32Array([1]) })).toBe(false)
  })

  it("a neighbour that died (its port refuses) leaves the generation on the relay", async () => {
    const { rings } = await ranks(2)
    rings[1]!.close()
    await new Promise((r) => setTimeout(r, 100))
    const end0 = rings[0]!.open(0, [0, 1], 0)
    expect(await end0.connected).toBe(false)
  })
})
