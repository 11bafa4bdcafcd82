import { describe, expect, it } from "vitest"
import { RingNeighbours } from "../../actors/coordinator/ring-neighbours.ts"
import type { FormRing } from "../../src/core/messages.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"

const ring = (generation: number, ringRank: number, peers: ReadonlyArray<number>): FormRing => ({
  _tag: "FormRing",
  generation,
  ringRank,
  ringSize: peers.length,
  peers
})

describe("RingNeighbours: each ring member's FormRing names its neighbours, not the whole ring", () => {
  it("no rank listens: the neighbours only, no address and no secret", () => {
    expect(new RingNeighbours().neighbourRing(ring(3, 0, [2, 5, 9]))).toEqual({
      ...ring(3, 0, []),
      ringSize: 3,
      prev: 9,
      next: 5,
      nextAddress: "",
      ringSecret: ""
    })
  })

  it("ranks that advertised a listener: the next one's address (empty for one that did not) and one fresh secret per generation, never reused", () => {
    const neighbours = new RingNeighbours()
    neighbours.advertised(5, "ws://10.0.0.5:4000/")
    neighbours.advertised(9, "ws://10.0.0.9:4000/")
    const members = [2, 5, 9]
    const first = members.map((_, r) => neighbours.neighbourRing(ring(1, r, members)))
    expect(first.map((m) => m.nextAddress)).toEqual(["ws://10.0.0.5:4000/", "ws://10.0.0.9:4000/", ""])
    const secrets = new Set(first.map((m) => m.ringSecret))
    expect(secrets.size).toBe(1)
    expect([...secrets][0]).toMatch(/^[0-9a-f]{32}$/)
    const second = neighbours.neighbourRing(ring(2, 0, [5, 9]))
    expect([second.prev, second.next, second.nextAddress]).toEqual([9, 9, "ws://10.0.0.9:4000/"])
    expect(secrets.has(second.ringSecret!)).toBe(false)
    // A rank that left takes its address with it.
    neighbours.advertised(9, undefined)
    expect(neighbours.neighbourRing(ring(2, 0, [5, 9])).nextAddress).toBe("")
  })

  it("a FormRing's bytes no longer grow with the ring: 256 members, each frame the same few bytes", () => {
    const members = Array.from({ length: 256 }, (_, i) => i)
    const bytes = (message: FormRing) => Codec.encode(Frame.fromCoordinator(message)).length
    const neighbours = new RingNeighbours()
    expect(bytes(ring(7, 128, members))).toBeGreaterThan(500)
    expect(bytes(neighbours.neighbourRing(ring(7, 128, members)))).toBeLessThan(32)
    for (const rank of members) neighbours.advertised(rank, `ws://10.1.0.${rank}:40123/`)
    expect(bytes(neighbours.neighbourRing(ring(7, 128, members)))).toBeLessThan(100)
  })
})
