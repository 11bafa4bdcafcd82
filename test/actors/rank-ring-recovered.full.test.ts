// A ring rank taken over by a new coordinator (docs/recovery.md, the ring backend): two ranks on
// the in-memory transport, a hand-driven coordinator that relays their ring steps. Both finish
// round 0's collective and report RoundDone, but its RoundCommitted never comes (the coordinator
// was lost between its log's commit line and the frame, or before the line). Then each rank's
// link is recovered and the new coordinator says which round is committed:
//
// - round 0 (`RoundCommitted{0}`, then `Update{1}` without parameters): both apply the mean they
//   held unconfirmed, and hold the same model (asked with `RequestParams{1}`: the takeover's
//   first round renumbers it);
// - none (only `Update{1}`): both drop the finished round and go back to their own last averaged
//   model, the trainers' initial one;
// - round 5, a round neither ran: each rank ends (it cannot go on exactly) instead of training on
//   another model.
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import { describe, expect, it } from "vitest"
import type { ToCoordinator, ToRank } from "../../src/core/messages.ts"
import * as Rank from "../../actors/rank/rank.ts"
import * as Memory from "../../src/transport/memory.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"

/** Each batch adds `rank + 1` to every parameter: the two ranks' models differ, their mean is known. */
const trainer = {
  trainSamples: 64,
  createTrainer: (context: { readonly rank: number }) => {
    const params = new Float32Array([10, 20, 30])
    return {
      trainBatch: async () => {
        for (let i = 0; i < params.length; i++) params[i]! += context.rank + 1
        return { loss: 1 }
      },
      getParams: () => params,
      setParams: (next: Float32Array) => params.set(next),
      save: async () => {}
    }
  }
}

const data: Rank.RankData = {
  trainer: "inline",
  worldSize: 2,
  seed: 1,
  batchSize: 8,
  averageEverySteps: 2,
  heartbeatIntervalMs: 100,
  progressIntervalMs: 100,
  hangAfterMs: undefined,
  saveDir: "/nowhere/save",
  checkpointDir: "/nowhere/checkpoints",
  coordinatorTimeoutMs: 0,
  backend: "ring",
  ringLinks: "relay"
}

/**
 * Forms a ring of ranks 0 and 1, gives each 16 samples (2 batches: one contribution), relays their
 * ring steps until both reported `RoundDone` for round 0, recovers both links, sends `confirm`,
 * then asks each for the model of `askRound`. The ranks' answers (`Params.params`), or how each
 * rank's run ended when it ended first.
 */
const takenOver = (confirm: ReadonlyArray<ToRank>, askRound: number) =>
  Effect.gen(function* () {
    const network = yield* Memory.make
    const coordinator = yield* network.endpoint(Transport.coordinatorPeer)
    const recoveries = [0, 0]
    const fibers = []
    for (const rank of [0, 1]) {
      const transport = yield* network.endpoint(rank)
      const link: Rank.Link = { transport, rank, data, recoveries: () => recoveries[rank]!, detach: () => () => {} }
      fibers.push(
        yield* Effect.forkChild(
          Rank.run(
            link,
            () => {},
            async () => trainer
          )
        )
      )
    }
    const send = (rank: number, message: ToRank) => coordinator.send(rank, Codec.encode(Frame.fromCoordinator(message)))
    /** The next frame of a rank's, relaying ring steps to the other rank on the way. */
    const next = Effect.gen(function* () {
      while (true) {
        const event = yield* Queue.take(coordinator.inbox)
        if (event._tag !== "Frame") continue
        const decoded = Codec.decode(event.bytes, { from: event.peer })
        if (decoded._tag !== "Success") continue
        const message = decoded.success.message as ToCoordinator
        if (message._tag === "RingData") yield* send(1 - (event.peer as number), message)
        else return { rank: event.peer as number, message }
      }
    })
    const until = <T extends ToCoordinator["_tag"]>(tag: T, count: number) =>
      Effect.gen(function* () {
        const found: Array<{ readonly rank: number; readonly message: Extract<ToCoordinator, { _tag: T }> }> = []
        while (found.length < count) {
          const got = yield* next
          if (got.message._tag === tag) found.push(got as (typeof found)[number])
        }
        return found
      })
    yield* until("Hello", 2)
    for (const rank of [0, 1]) {
      yield* send(rank, { _tag: "FormRing", generation: 0, ringRank: rank, ringSize: 2, peers: [0, 1] })
      yield* send(rank, { _tag: "StartEpoch", epoch: 0, offset: rank * 16, size: 16 })
    }
    const done = yield* until("RoundDone", 2)
    expect(done.map((d) => [d.message.round, d.message.samplesDone])).toEqual([
      [0, 16],
      [0, 16]
    ])
    // The coordinator is lost before RoundCommitted{0}; a new one takes the ranks back.
    recoveries[0] = 1
    recoveries[1] = 1
    for (const rank of [0, 1]) for (const message of confirm) yield* send(rank, message)
    for (const rank of [0, 1]) yield* send(rank, { _tag: "RequestParams", round: askRound })
    const answers = yield* until("Params", 2).pipe(Effect.timeoutOption(1000))
    const exits = []
    for (const fiber of fibers) exits.push(yield* Fiber.interrupt(fiber).pipe(Effect.as(undefined)))
    return answers._tag === "Some"
      ? answers.value.sort((a, b) => a.rank - b.rank).map((a) => [...a.message.params])
      : fibers.map((fiber) => fiber.pollUnsafe())
  }).pipe(Effect.scoped)

describe("a ring rank taken over by a new coordinator", () => {
  it("applies the finished round the new coordinator confirms: both ranks hold its mean", async () => {
    const answers = await Effect.runPromise(
      takenOver(
        [
          { _tag: "RoundCommitted", round: 0, generation: 0 },
          { _tag: "Update", round: 1, params: new Float32Array(0) }
        ],
        1
      )
    )
    // Rank 0 trained 2 batches (+1 each), rank 1 2 batches (+2 each): the mean adds 3.
    expect(answers).toEqual([
      [13, 23, 33],
      [13, 23, 33]
    ])
  })

  it("drops a finished round the new coordinator does not confirm: both go back to their last averaged model", async () => {
    const answers = await Effect.runPromise(takenOver([{ _tag: "Update", round: 0, params: new Float32Array(0) }], 0))
    expect(answers).toEqual([
      [10, 20, 30],
      [10, 20, 30]
    ])
  })

  it("ends when the new coordinator confirms a round whose mean it does not hold", async () => {
    const exits = await Effect.runPromise(
      takenOver(
        [
          { _tag: "RoundCommitted", round: 5, generation: 0 },
          { _tag: "Update", round: 6, params: new Float32Array(0) }
        ],
        6
      )
    )
    expect(exits.length).toBe(2)
    for (const exit of exits as ReadonlyArray<Exit.Exit<void> | undefined>) {
      expect(exit !== undefined && Exit.isFailure(exit)).toBe(true)
      expect(String(exit !== undefined && Exit.isFailure(exit) ? exit.cause : "")).toContain("last committed ring round is 5")
    }
  })
})
