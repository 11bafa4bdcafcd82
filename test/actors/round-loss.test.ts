// The round's training loss for the journal (actors/launcher/round-loss.ts): the contributors' losses,
// weighted by the samples each trained since its previous contribution.
import { describe, expect, it } from "vitest"
import * as RoundLoss from "../../actors/launcher/round-loss.ts"

const params = new Float32Array(0)
const contribution = (epoch: number, round: number, samplesDone: number, loss?: number) =>
  ({ _tag: "Params", epoch, round, samplesDone, params, ...(loss === undefined ? {} : { loss }) }) as const

describe("round loss", () => {
  it("static mode: weights each contributor by the growth of its samplesDone in the epoch, from 0 in a new epoch", () => {
    const tracker = RoundLoss.make("static")
    tracker.onFrame(0, contribution(0, 0, 64, 1))
    tracker.onFrame(1, contribution(0, 0, 32, 4))
    expect(tracker.onRound([0, 1])).toBe((64 * 1 + 32 * 4) / 96)
    tracker.onFrame(0, contribution(0, 1, 96, 2))
    tracker.onFrame(1, contribution(0, 1, 96, 0.5))
    expect(tracker.onRound([0, 1])).toBe((32 * 2 + 64 * 0.5) / 96)
    tracker.onFrame(0, contribution(1, 2, 16, 3))
    tracker.onFrame(1, contribution(1, 2, 48, 1))
    expect(tracker.onRound([0, 1])).toBe((16 * 3 + 48 * 1) / 64)
  })

  it("leaves out contributors without a loss and ranks that did not contribute; no loss at all is undefined", () => {
    const tracker = RoundLoss.make("static")
    tracker.onFrame(0, contribution(0, 0, 10))
    tracker.onFrame(1, contribution(0, 0, 10, 2.5))
    tracker.onFrame(2, contribution(0, 0, 10, 99))
    expect(tracker.onRound([0, 1])).toBe(2.5)
    tracker.onFrame(0, contribution(0, 1, 20))
    expect(tracker.onRound([0])).toBeUndefined()
    // Rank 2's loss waited for a round that counted it.
    expect(tracker.onRound([2])).toBe(99)
  })

  it("progressive mode: weights by the chunks completed since the contribution; the ring's redone round keeps its weight", () => {
    const tracker = RoundLoss.make("progressive")
    tracker.onFrame(0, { _tag: "ChunkDone", epoch: 0, offset: 0, size: 30 })
    tracker.onFrame(0, { _tag: "ChunkDone", epoch: 0, offset: 30, size: 30 })
    tracker.onFrame(1, { _tag: "ChunkDone", epoch: 0, offset: 60, size: 20 })
    tracker.onFrame(0, { _tag: "RoundDone", epoch: 0, round: 4, generation: 1, samplesDone: 0, loss: 1 })
    tracker.onFrame(1, { _tag: "RoundDone", epoch: 0, round: 4, generation: 1, samplesDone: 0, loss: 2 })
    // A death: the new generation redoes round 4 and both report it again.
    tracker.onFrame(0, { _tag: "RoundDone", epoch: 0, round: 4, generation: 2, samplesDone: 0, loss: 1 })
    tracker.onFrame(1, { _tag: "RoundDone", epoch: 0, round: 4, generation: 2, samplesDone: 0, loss: 2 })
    expect(tracker.onRound([0, 1])).toBe((60 * 1 + 20 * 2) / 80)
  })
})
