// The model after each ended epoch goes to the shell, which writes it on the coordinator's host
// before the epoch's audit is final (src/core/epoch-model.ts): at once with cpu; with ring, asked of
// a member, no round closing and the run not completing until it arrived.
import { describe, expect, it } from "vitest"
import * as Coordinator from "../../src/core/coordinator.ts"
import { frame, make, params, report, tags, tick } from "./harness.ts"

/** A death report, then the tick it wakes (the batch is declared there). */
const dies = (s: Coordinator.State, rank: number, nowMs: number) => [...report(s, rank, nowMs), ...tick(s, nowMs)]

const roundDone = (s: Coordinator.State, rank: number, nowMs: number, samplesDone: number) =>
  frame(s, rank, nowMs, { _tag: "RoundDone", epoch: s.epoch, round: s.round, generation: s.ring!.generation, samplesDone })

const model = (s: Coordinator.State, rank: number, nowMs: number, round: number, values: ReadonlyArray<number>) =>
  frame(s, rank, nowMs, { _tag: "Params", epoch: s.epoch, round, samplesDone: 0, params: Float32Array.from(values) })

const epochModel = (cmds: ReadonlyArray<Coordinator.Command>) => {
  const found = cmds.find((c) => c._tag === "EpochModel")
  return found?._tag === "EpochModel"
    ? { epoch: found.epoch, round: found.round, params: found.params === undefined ? undefined : [...found.params], from: found.from }
    : undefined
}

const requests = (cmds: ReadonlyArray<Coordinator.Command>) =>
  cmds.flatMap((c) => (c._tag === "Send" && c.message._tag === "RequestParams" ? [[c.to, c.message.round]] : []))

describe("the model after each epoch", () => {
  it("cpu: EpochModel follows EpochEnded in the same step, naming the epoch's last round and no parameters (the shell holds the mean)", () => {
    const s = make({ worldSize: 2, epochSamples: 4, epochs: 2 })
    Coordinator.start(s, 0)
    params(s, 0, 1, 2)
    const end = params(s, 1, 1, 2)
    expect(tags(end).slice(0, 3)).toEqual(["AverageRound", "EpochEnded", "EpochModel"])
    expect(epochModel(end)).toEqual({ epoch: 0, round: 0, params: undefined, from: undefined })
  })

  it("ring: the lowest member is asked for the epoch's last mean; no round closes until it answers; its answer is handed to the shell", () => {
    const s = make({ worldSize: 3, epochSamples: 6, epochs: 2, backend: "ring" })
    Coordinator.start(s, 0)
    roundDone(s, 0, 1, 2)
    roundDone(s, 1, 1, 2)
    const end = roundDone(s, 2, 1, 2)
    expect(tags(end).slice(0, 2)).toEqual(["AverageRound", "EpochEnded"])
    expect(requests(end)).toEqual([[0, 0]])
    expect(epochModel(end)).toBeUndefined()
    // Epoch 1's first round is complete, but waits for the model.
    roundDone(s, 0, 2, 2)
    roundDone(s, 1, 2, 2)
    expect(tags(roundDone(s, 2, 2, 2))).toEqual([])
    const answered = model(s, 0, 3, 0, [1, 2])
    expect(epochModel(answered)).toEqual({ epoch: 0, round: 0, params: [1, 2], from: 0 })
    expect(tags(answered)).toContain("AverageRound")
  })

  it("ring: a refused answer (non-finite, or of another round) asks the next member", () => {
    const s = make({ worldSize: 3, epochSamples: 6, epochs: 2, backend: "ring" })
    Coordinator.start(s, 0, { paramsLength: 2 })
    roundDone(s, 0, 1, 2)
    roundDone(s, 1, 1, 2)
    roundDone(s, 2, 1, 2)
    const refused = model(s, 0, 2, 0, [1, Number.NaN])
    expect(tags(refused)).toEqual(["Alert:BadParams", "Send:RequestParams"])
    expect(requests(refused)).toEqual([[1, 0]])
    // A late answer from the member asked before is not taken.
    expect(epochModel(model(s, 0, 3, 0, [1, 2]))).toBeUndefined()
    expect(epochModel(model(s, 1, 4, 0, [3, 4]))).toEqual({ epoch: 0, round: 0, params: [3, 4], from: 1 })
  })

  it("ring: the asked member dies before it answers: the next live member is asked in the same batch", () => {
    const s = make({ worldSize: 3, epochSamples: 6, epochs: 2, backend: "ring" })
    Coordinator.start(s, 0)
    roundDone(s, 0, 1, 2)
    roundDone(s, 1, 1, 2)
    roundDone(s, 2, 1, 2)
    const death = dies(s, 0, 2)
    expect(requests(death)).toEqual([[1, 0]])
    expect(epochModel(model(s, 1, 3, 0, [5]))).toEqual({ epoch: 0, round: 0, params: [5], from: 1 })
  })

  it("ring: the last epoch completes the run only once its model arrived; a death meanwhile moves nothing and re-asks", () => {
    const s = make({ worldSize: 3, epochSamples: 3, epochs: 1, backend: "ring" })
    Coordinator.start(s, 0)
    roundDone(s, 0, 1, 1)
    roundDone(s, 1, 1, 1)
    const end = roundDone(s, 2, 1, 1)
    expect(tags(end)).not.toContain("RunEnded")
    expect(s.phase).toBe("running")
    const death = dies(s, 0, 2)
    expect(requests(death)).toEqual([[1, 0]])
    expect(tags(death)).not.toContain("Broadcast:FormRing")
    expect(s.deaths.map((d) => d.afterEnd)).toEqual([true])
    const done = model(s, 1, 3, 0, [7])
    expect(tags(done).slice(-3)).toEqual(["EpochModel", "Broadcast:Shutdown", "RunEnded"])
    expect(s.outcome?.status).toBe("completed")
  })

  it("ring: with no member left that holds the model, EpochModel goes out without parameters and the run completes", () => {
    const s = make({ worldSize: 2, epochSamples: 2, epochs: 1, backend: "ring" })
    Coordinator.start(s, 0)
    roundDone(s, 0, 1, 1)
    roundDone(s, 1, 1, 1)
    dies(s, 0, 2)
    const last = dies(s, 1, 3)
    expect(epochModel(last)).toEqual({ epoch: 0, round: 0, params: undefined, from: undefined })
    expect(s.outcome?.status).toBe("completed")
  })
})
