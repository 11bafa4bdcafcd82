// The round's direct-link bytes for the journal (actors/launcher/round-links.ts): the sums of what
// every rank's RoundDone carried for the round.
import { describe, expect, it } from "vitest"
import * as RoundLinks from "../../actors/launcher/round-links.ts"

const roundDone = (round: number, generation: number, links?: { readonly sent: number; readonly received: number }) =>
  ({
    _tag: "RoundDone",
    epoch: 0,
    round,
    generation,
    samplesDone: 0,
    ...(links === undefined ? {} : { linkSentBytes: links.sent, linkReceivedBytes: links.received })
  }) as const

describe("round links", () => {
  it("sums the ranks' direct-link bytes of the round that closes, once", () => {
    const tracker = RoundLinks.make()
    tracker.onFrame(0, roundDone(0, 0, { sent: 1500, received: 1500 }))
    tracker.onFrame(1, roundDone(0, 0, { sent: 1500, received: 1480 }))
    expect(tracker.onRound(0)).toEqual({ sent: 3000, received: 2980 })
    expect(tracker.onRound(0)).toBeUndefined()
  })

  it("is undefined when no report carried link bytes (relayed steps, cpu contributions)", () => {
    const tracker = RoundLinks.make()
    tracker.onFrame(0, roundDone(3, 0))
    tracker.onFrame(1, { _tag: "Params", epoch: 0, round: 3, samplesDone: 0, params: new Float32Array(0) })
    expect(tracker.onRound(3)).toBeUndefined()
  })

  it("counts a round redone by a new generation with both reports' bytes, and keeps a later round's report for it", () => {
    const tracker = RoundLinks.make()
    tracker.onFrame(0, roundDone(5, 0, { sent: 100, received: 100 }))
    tracker.onFrame(0, roundDone(5, 1, { sent: 60, received: 40 }))
    tracker.onFrame(1, roundDone(5, 1, { sent: 40, received: 60 }))
    tracker.onFrame(1, roundDone(6, 1, { sent: 7, received: 7 }))
    expect(tracker.onRound(5)).toEqual({ sent: 200, received: 200 })
    expect(tracker.onRound(6)).toEqual({ sent: 7, received: 7 })
  })
})
