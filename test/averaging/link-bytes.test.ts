// A rank's tally of the bytes its ring steps moved over direct links, by round: each round's
// RoundDone takes what was counted up to it, once.
import { describe, expect, it } from "vitest"
import * as LinkBytes from "../../src/averaging/link-bytes.ts"

describe("LinkBytes: a rank's direct-link bytes by round", () => {
  it("gives a round's sent and received bytes once, and zeros when nothing was counted", () => {
    const tally = LinkBytes.make()
    expect(tally.take(0)).toEqual({ sent: 0, received: 0 })
    tally.sent(0, 100)
    tally.received(0, 60)
    tally.sent(0, 20)
    expect(tally.take(0)).toEqual({ sent: 120, received: 60 })
    expect(tally.take(0)).toEqual({ sent: 0, received: 0 })
  })

  it("keeps a later round's steps for that round, and a round's take includes an earlier round never taken (an aborted generation's steps)", () => {
    const tally = LinkBytes.make()
    tally.sent(4, 10)
    tally.received(5, 7) // a neighbour already in round 5
    tally.sent(3, 1)
    expect(tally.take(4)).toEqual({ sent: 11, received: 0 })
    expect(tally.take(5)).toEqual({ sent: 0, received: 7 })
  })

  it("adds up to the ring all-reduce's bytes per rank: 2·(N−1) steps of P/N float32 values", () => {
    const ranks = 4
    const params = 1000
    const tally = LinkBytes.make()
    for (let step = 0; step < 2 * (ranks - 1); step++) {
      tally.sent(9, (params / ranks) * 4)
      tally.received(9, (params / ranks) * 4)
    }
    expect(tally.take(9)).toEqual({ sent: ((2 * (ranks - 1)) / ranks) * params * 4, received: ((2 * (ranks - 1)) / ranks) * params * 4 })
  })
})
