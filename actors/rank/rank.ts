/**
 * The rank actor: one training rank's loop, run inside its worker thread or child process
 * (docs/design.md §3.3, §3.5, §3.7, §4).
 *
 * It takes `StartEpoch`, `ExtendPartition` and `AssignChunk`, trains batch by batch through the
 * user's trainer, reports `Progress` at most every `progressIntervalMs` (so that many fast ranks do
 * not flood the coordinator) and `ChunkDone` after every chunk, and
 * contributes `Params` every `averageEverySteps` batches or when it runs out of work, then waits
 * for the round's `Update`. A contribution is what commits its samples. It sends a `Heartbeat`
 * whenever it sent nothing for `heartbeatIntervalMs`. It runs checkpoint and eval callbacks when
 * asked, and on `ShutdownWithSave` saves through the trainer, announces `Exiting` and leaves.
 *
 * With the ring backend (`RankData.backend` `ring`) a contribution point does not send
 * `Params`: the rank keeps its pre-round parameters and samples done, runs `Ring.allReduce` for
 * (generation, round) with its ring neighbours (over direct `MessageChannel` links between worker
 * threads, handed over per generation, or relayed through the coordinator as `RingData`), sends
 * `RoundDone{epoch, round, generation, samplesDone}` and waits for
 * `RoundCommitted{round, generation}` (or, in a shared all-reduce area, the commit the coordinator
 * writes there, which it looks at before anything the coordinator sent after) before it applies
 * the mean (which then becomes `lastAverage`, the model every save writes). `DeclareDead` interrupts a running collective and
 * discards a finished but unconfirmed one; no collective of that generation starts again. A newer
 * `FormRing` supersedes the older generation (its ports are closed) and the rank redoes the round
 * from its pre-round parameters, so no partial average is ever applied and a round's samples
 * commit exactly once (the coordinator commits them at the round's close). A rank with no work
 * left joins its neighbours' collective of its round as soon as their first step reaches it (a
 * message of that round waiting in its inbox), contributing its current parameters and the
 * samples it already reported, so that neighbours never wait on an idle rank, at an epoch's end
 * included. Faults for tests fire between two steps (`RankData.collectiveFault`). A rank joining a
 * running ring run gets its model as an `Update` before anything else of the ring; a
 * member asked for it (`RequestParams{round}`) answers `Params{round, params}` with `lastAverage`
 * when that is the model of `round`, else with no parameters.
 *
 * A rank never outlives its coordinator: when the coordinator's link
 * ends (the channel closed: its process died, its socket dropped) or the coordinator sent nothing
 * for `coordinatorTimeoutMs`, the rank saves through the trainer under `<saveDir>/rank<r>` with an
 * `emergency.json` beside the model (`EmergencySave`), the save bounded by `coordinatorTimeoutMs`
 * too, prints one line on the coordinator's stderr (a child process) or its own, and exits with
 * `coordinatorGoneExitCode`.
 *
 * This file holds the training loop (`run`) and the entry body (`main`); its parts live beside it:
 * `rank-training.ts` (the loop's steps over the rank's state: loading the trainer, carrying out
 * the coordinator's messages, training a batch, contributing), `rank-data.ts` (what a rank is given and writes: `RankData`, `Link`, exit codes, save files; all
 * re-exported here), `rank-reports.ts` (frames the rank sends of its own accord: heartbeats,
 * progress, the memory check, an injected flood), `rank-ring.ts` (the ring collective) and
 * `rank-coordinator-gone.ts` (the coordinator watch and the emergency save).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as DeathReport from "../../src/actor/death-report.ts"
import type { ToCoordinator } from "../../src/core/messages.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import type { Link } from "./rank-data.ts"
import { hangUntilGone, stopAsTold } from "./rank-calls.ts"
import { applyAreaCommit } from "./rank-model.ts"
import { apply, contributeBeforeLeaving, recovered, start, turn } from "./rank-training.ts"

// The rank's model, faults, exit codes and save files live in rank-data.ts; importers take them from here.
export {
  collectiveFaultExitCode,
  coordinatorGoneExitCode,
  coordinatorTimeoutMsDefault,
  isJoinedRun,
  rankDataOf,
  savedMarker
} from "./rank-data.ts"
export type { CollectiveFault, EmergencySave, JoinedRun, Link, RankData } from "./rank-data.ts"

/** A stack without the frames of Effect's own runtime, which say nothing about the trainer's bug. */
const trainerStack = (stack: string): string =>
  stack
    .split("\n")
    .filter((line) => !/[\\/]node_modules[\\/]effect[\\/]/.test(line))
    .join("\n")

/** `text` cut to at most `max` UTF-16 code units, saying how much was cut. */
const clip = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} characters cut)`

const toCoordinator = Transport.coordinatorPeer

/**
 * Runs the rank until the coordinator says stop (then calls `leave(0)`), or the coordinator is
 * gone: its link ends or it is silent for `coordinatorTimeoutMs` (then saves, see `EmergencySave`,
 * and calls `leave(coordinatorGoneExitCode)`). An injected hang stops the rank responding; it
 * still leaves, without a save, once the coordinator is gone.
 * `loadTrainer` imports the trainer module (a bundled entry passes the module it has built in).
 * A trainer that fails to load or throws ends the rank with a defect: its supervisor reports it.
 *
 * @since 0.1.0
 * @category rank
 */
export const run = (
  link: Link,
  leave: (code: number) => void,
  loadTrainer: (url: string) => Promise<unknown> = (url) => import(url),
  leaveAsked?: AbortSignal
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const r = yield* start(link, leave, loadTrainer)
    const { s, coordinator } = r
    leaveAsked?.addEventListener("abort", () => r.wake.notify(), { once: true })
    // A rank that listens for its ring neighbours says where (its listener is bound by then).
    const ringAddress = yield* Effect.promise(() => r.ring.ringAddress())
    yield* r.send({ _tag: "Hello", paramsLength: r.paramsLength, ...(ringAddress === undefined ? {} : { ringAddress }) })
    while (true) {
      if (r.clock.currentTimeMillisUnsafe() >= s.hangAtMs) return yield* hangUntilGone(r)
      applyAreaCommit(r)
      // A new coordinator took the run over: what it plans replaces what the old one gave.
      yield* recovered(r)
      // Apply everything already delivered.
      for (let event = Queue.takeUnsafe(link.transport.inbox); event !== undefined; event = Queue.takeUnsafe(link.transport.inbox)) {
        if (event._tag === "Failure" || !(yield* apply(r, event.value))) {
          if (s.stopping !== undefined) break // told to stop: it goes as told, below
          return yield* coordinator.gone(coordinator.channelClosed())
        }
      }
      if (leaveAsked?.aborted === true) s.stopping ??= { save: false, reason: "left" }
      if (s.stopping !== undefined) {
        // Told to go mid-run (or asked to leave): what it trained is committed, not trained again.
        if (!s.stopping.save) yield* contributeBeforeLeaving(r)
        return yield* stopAsTold(r, s.stopping)
      }
      if ((yield* turn(r)) === "stop") return
    }
  })

/**
 * A rank entry's whole body: connects with `connect` (a transport's rank-side `connect()`), runs
 * the rank, and leaves the process or worker with its exit code through `exit` (default
 * `process.exit`; a WebSocket rank closes its socket first, so that its last frames arrive before
 * its end). `stop` aborted interrupts the rank where it is, without a leave or a last frame (a
 * process that runs many ranks stops one that way to make it crash or go silent). `leaveAsked`
 * aborted makes it leave gracefully after its current batch: it contributes what it trained and
 * did not contribute yet, then says `Exiting`. `loadTrainer` imports the trainer module (bundled entries pass the module they
 * contain). A failure to connect is a defect: the rank ends and its supervisor reports it.
 *
 * A rank that fails (its trainer throws, a defect) reports the error as its last frame,
 * `Crashing{error, stack}`, and exits with code 1: its supervisor then declares it
 * `Crashed{error, stack}`. This is how a child process reports its error at all, and how a
 * worker's stack reaches the coordinator under Deno, whose worker `error` event carries none.
 * Nothing is printed: the coordinator shows the error once; only a ring collective that
 * failed (a neighbour's bad step, a closed link) also prints one line on the rank's own stderr,
 * `cohort rank N: ring collective failed (direct link): ...`.
 *
 * @since 0.1.0
 * @category rank
 */
export const main = (
  connect: Effect.Effect<Link, Transport.TransportError>,
  loadTrainer?: (url: string) => Promise<unknown>,
  leave: (code: number) => void = (code) => process.exit(code),
  stop?: AbortSignal,
  leaveAsked?: AbortSignal
): Promise<void> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const link = yield* Effect.orDie(connect)
      const exit = yield* Effect.exit(run(link, leave, loadTrainer, leaveAsked))
      if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return
      const error = Cause.squash(exit.cause)
      // Each text field must fit the wire's `textBytesMax` (64 KiB): 8 K characters of message and
      // 16 K of stack are at most 24 KiB and 48 KiB in UTF-8.
      const crashing: ToCoordinator = {
        _tag: "Crashing",
        error: clip(DeathReport.errorMessage(error), 8 * 1024),
        stack: clip(trainerStack(DeathReport.errorStack(error) ?? ""), 16 * 1024)
      }
      yield* link.transport.send(toCoordinator, Codec.encode(Frame.fromRank(link.rank, crashing))).pipe(Effect.ignore)
      yield* link.transport.flush
      leave(1)
    }),
    stop === undefined ? undefined : { signal: stop }
  )
