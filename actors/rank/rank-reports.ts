/**
 * What a rank sends of its own accord (docs/design.md §3.5, §4; `rank.ts` module doc): every frame to
 * the coordinator goes through `send`, which remembers when the last one left so that a
 * `Heartbeat` fills only the gaps of `heartbeatIntervalMs`; a `Progress` once the rank trained
 * `progressIntervalMs` since the last one (so that many fast ranks do not flood the coordinator,
 * and a rank that mostly waits for its rounds does not report every batch), and at least every
 * `progressWaitingMs` of its clock while it trains; the rank's own
 * memory check (`RankData.heapCheckMb`); and a hostile rank's injected flood (`RankData.flood`).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { ToCoordinator } from "../../src/core/messages.ts"
import * as BunRuntime from "../../src/platform/bun.ts"
import * as NodeRuntime from "../../src/platform/node.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import type { Link, RankData } from "./rank-data.ts"

const toCoordinator = Transport.coordinatorPeer

/**
 * A rank that trains reports `Progress` at least this often (ms of its clock, at a batch's end),
 * however little it trained in between, and never more often than `progressIntervalMs`: a rank
 * whose batches are short beside its waits for the round's `Update` would otherwise report once
 * in many rounds. Half the journal's period (one progress line per rank per second), so each
 * second of training still has its line there and the live page's rates stay fresh.
 *
 * @since 0.1.0
 * @category constants
 */
export const progressWaitingMs = 500

/**
 * Where a rank stands after a batch, for its `Progress` and its link's `status`: the epoch, the
 * samples of its list trained in it (`samplesDone`, static mode's position), the samples it
 * trained in the epoch and in all (`samplesInEpoch`, `samplesTotal`).
 *
 * @since 0.1.0
 * @category model
 */
export interface BatchProgress {
  readonly epoch: number
  readonly samplesDone: number
  readonly samplesInEpoch: number
  readonly samplesTotal: number
}

/**
 * A rank's reports (`make`):
 *
 * - `send`: one frame to the coordinator (a send on a closed link is ignored: the link's end
 *   arrives as an event); `packed`: a packed vector sent in place of its `params` (`Codec.encodePacked`).
 * - `sendNow(message, nowMs)`: `send` without an effect, at `nowMs` (the rank's clock, ms): for a
 *   frame sent from a callback (a collective in a shared area that finished).
 * - `heartbeatIfDue(nowMs)`: a `Heartbeat` when nothing went out for `heartbeatIntervalMs`.
 * - `afterBatch(startedMs, finishedMs, progress)`: after a batch that ran from `startedMs` to
 *   `finishedMs` (ms): the memory check (it dies with an out-of-memory error over
 *   `heapCheckMb`), then the `Progress` and the link's `status` when due (the module doc).
 * - `flood(afterMs, framesPerSecond)`: starts the injected flood of `Heartbeat` frames.
 *
 * @since 0.1.0
 * @category model
 */
export interface Reports {
  readonly send: (message: ToCoordinator, packed?: Uint8Array) => Effect.Effect<void>
  readonly sendNow: (message: ToCoordinator, nowMs: number) => void
  readonly heartbeatIfDue: (nowMs: number) => Effect.Effect<void>
  readonly afterBatch: (startedMs: number, finishedMs: number, progress: BatchProgress) => Effect.Effect<void>
  readonly flood: (afterMs: number, framesPerSecond: number) => void
}

/**
 * Makes a rank's reports (`Reports`) over its link.
 *
 * @since 0.1.0
 * @category rank
 */
export const make = (link: Link, data: RankData): Reports => {
  const { transport, rank } = link
  let lastSentMs = 0
  let lastProgressMs = 0
  // Training time (the batches' own, not the waits between them) since the last Progress.
  let trainedSinceProgressMs = 0
  const progressWallMs = Math.max(data.progressIntervalMs, progressWaitingMs)
  const send = (message: ToCoordinator, packed?: Uint8Array) =>
    Effect.gen(function* () {
      lastSentMs = yield* Clock.currentTimeMillis
      yield* transport.send(toCoordinator, Codec.encodePacked(Frame.fromRank(rank, message), packed)).pipe(Effect.ignore)
    })
  const sendNow = (message: ToCoordinator, nowMs: number): void => {
    lastSentMs = nowMs
    // A refused send is ignored, as `send` ignores it: the link's end arrives as an event.
    transport.sendUnsafe(toCoordinator, Codec.encodePacked(Frame.fromRank(rank, message), undefined))
  }
  const heapCheckMb = data.heapCheckMb
  let lastHeapCheckMs = 0
  const heapCheckDue = (finished: number): boolean => heapCheckMb !== undefined && finished - lastHeapCheckMs >= data.progressIntervalMs
  const progressDue = (finished: number): boolean =>
    trainedSinceProgressMs >= data.progressIntervalMs || finished - lastProgressMs >= progressWallMs
  // Most batches report nothing: they cost no generator.
  const afterBatch = (started: number, finished: number, progress: BatchProgress): Effect.Effect<void> => {
    trainedSinceProgressMs += Math.max(0, finished - started)
    return heapCheckDue(finished) || progressDue(finished) ? reportBatch(started, finished, progress) : Effect.void
  }
  const reportBatch = (started: number, finished: number, progress: BatchProgress) =>
    Effect.gen(function* () {
      if (heapCheckDue(finished) && heapCheckMb !== undefined) {
        lastHeapCheckMs = finished
        // Over the limit: measure again after a full collection, so garbage never kills a rank.
        const over = NodeRuntime.engineMemoryBytes() / 2 ** 20 > heapCheckMb
        if (over) BunRuntime.collectGarbage()
        const heapMb = NodeRuntime.engineMemoryBytes() / 2 ** 20
        if (over && heapMb > heapCheckMb) {
          return yield* Effect.die(
            Object.assign(new Error(`out of memory: ${Math.round(heapMb)} MiB in use, over the rank memory limit of ${heapCheckMb} MiB`), {
              code: NodeRuntime.outOfMemoryCode
            })
          )
        }
      }
      if (progressDue(finished)) {
        lastProgressMs = finished
        trainedSinceProgressMs = 0
        const { epoch, samplesDone, samplesInEpoch, samplesTotal } = progress
        yield* send({ _tag: "Progress", epoch, samplesDone, msPerBatch: Math.max(finished - started, 0.001) })
        link.status?.({ epoch, samplesDone: samplesInEpoch, samplesTotal })
      }
    })
  // A hostile rank's flood (fault injection): bursts of Heartbeats on a timer of its own.
  const flood = (afterMs: number, framesPerSecond: number): void => {
    const heartbeat = Codec.encode(Frame.fromRank(rank, { _tag: "Heartbeat" }))
    const perBurst = Math.max(1, Math.round(framesPerSecond / 100))
    setTimeout(() => {
      const timer = setInterval(() => {
        for (let i = 0; i < perBurst; i++) {
          if (transport.sendUnsafe(toCoordinator, heartbeat) !== undefined) return clearInterval(timer)
        }
      }, 10)
    }, afterMs)
  }
  return {
    send,
    sendNow,
    heartbeatIfDue: (nowMs) => (nowMs - lastSentMs >= data.heartbeatIntervalMs ? send({ _tag: "Heartbeat" }) : Effect.void),
    afterBatch,
    flood
  }
}
