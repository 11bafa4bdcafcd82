/**
 * Mid-run joins: the time from a joiner's first frame (its `Hello`) reaching the
 * coordinator to its first `AssignChunk` being handed to the transport, in progressive mode with
 * `liveRanks` ranks already live (1,000 in the row), median and p99 over sequential joins.
 *
 * It runs the real coordinator actor (`actors/coordinator/coordinator.ts`: mailbox, core step, codec) over a
 * bench transport that feeds frames into the actor's inbox and records, at the moment of the send,
 * the first `AssignChunk` to each joiner; the live ranks only sent their `Hello` (heartbeats are
 * off: `heartbeatTimeoutMs` 1e9), so the row is the join path's own cost, not a network's.
 *
 * Run: `node --import tsx bench/join.ts [--quick]`.
 */
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Coordinator from "../actors/coordinator/coordinator.ts"
import * as Core from "../src/core/coordinator.ts"
import type { ToRank } from "../src/core/messages.ts"
import * as Transport from "../src/transport/transport.ts"
import * as Codec from "../src/wire/codec.ts"
import * as Frame from "../src/wire/frame.ts"
import * as RecordingTransport from "../test/recording-transport.ts"
import * as Lib from "./lib.ts"

export interface Row {
  readonly liveRanks: number
  readonly joins: number
  readonly firstFrameToChunkMs: { readonly median: number; readonly p99: number }
  /** Samples handed to the joiners at their welcomes, in all. */
  readonly samplesHanded: number
}

const measure = (liveRanks: number, joins: number): Promise<Row> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const made = Core.make(
          {
            worldSize: liveRanks,
            maxRanks: liveRanks + joins,
            epochSamples: liveRanks * 4096,
            epochs: 1,
            mode: "progressive",
            heartbeatTimeoutMs: 1e9,
            coordinatorStallMs: 0
          },
          Lib.nowMs()
        )
        if ("_tag" in made) return yield* Effect.die(made.reason)
        const inbox = yield* Queue.unbounded<Transport.Event, never>()
        const firstChunkMs = new Map<number, number>()
        let waiting: (() => void) | undefined
        const sendUnsafe = (peer: number, frame: Uint8Array): Transport.TransportError | undefined => {
          // Only the joiners' frames are decoded: the live ranks' cost nothing here.
          if (peer < liveRanks || firstChunkMs.has(peer)) return undefined
          const decoded = Codec.decode(frame, { from: "coordinator" })
          if (Result.isSuccess(decoded) && (decoded.success.message as ToRank)._tag === "AssignChunk") {
            firstChunkMs.set(peer, Lib.nowMs())
            waiting?.()
          }
          return undefined
        }
        const transport = RecordingTransport.make(inbox, sendUnsafe)
        const handle = yield* Coordinator.start({ state: made, transport, tickMs: 100, coordHeartbeatMs: Number.POSITIVE_INFINITY })
        const hello = (rank: number) => Codec.encode(Frame.fromRank(rank, { _tag: "Hello", paramsLength: 4 }))
        yield* Queue.offerAll(
          inbox,
          Array.from({ length: liveRanks }, (_, rank) => ({ _tag: "Frame" as const, peer: rank, bytes: hello(rank), arrivedMs: 0 }))
        )
        while (!handle.state.started) yield* Effect.sleep(1)
        const samples: Array<number> = []
        for (let j = 0; j < joins; j++) {
          const rank = liveRanks + j
          const bytes = hello(rank)
          const handed = new Promise<void>((resolve) => (waiting = resolve))
          const sentMs = Lib.nowMs()
          yield* Queue.offer(inbox, { _tag: "Frame", peer: rank, bytes, arrivedMs: sentMs })
          yield* Effect.promise(() => handed)
          samples.push(firstChunkMs.get(rank)! - sentMs)
        }
        if (handle.state.counters.joins !== joins)
          return yield* Effect.die(`expected ${joins} joins, the core welcomed ${handle.state.counters.joins}`)
        return {
          liveRanks,
          joins,
          firstFrameToChunkMs: Lib.percentiles(samples),
          samplesHanded: handle.state.joins.reduce((sum, j) => sum + j.samples, 0)
        }
      })
    )
  )

/** One row at 1,000 live ranks; `quick` joins 100 ranks instead of 1,000. */
export const run = async (quick: boolean): Promise<{ readonly rows: ReadonlyArray<Row>; readonly markdown: string }> => {
  await measure(100, 50) // warm-up
  Lib.collectGarbage()
  Lib.note("join: 1,000 live ranks")
  const rows = [await measure(1_000, quick ? 100 : 1_000)]
  const markdown = Lib.table(
    ["live ranks", "joins", "first frame → first chunk median ms", "p99 ms", "samples handed"],
    rows.map((r) => [r.liveRanks, r.joins, r.firstFrameToChunkMs.median, r.firstFrameToChunkMs.p99, r.samplesHanded])
  )
  return { rows, markdown }
}

if (Lib.isMain("join")) {
  console.log((await run(Lib.isQuick())).markdown)
}
