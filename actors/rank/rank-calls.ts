/**
 * What the coordinator asks of a rank beside its training (docs/liveness.md): a checkpoint's save
 * and an eval, each run with the rank's beats going on and answered (`checkpoint`, `evaluate`), a
 * shutdown's save and exit (`stopAsTold`); and an injected hang (`hangUntilGone`). The steps of
 * `rank-training.ts` call them.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Files from "../../src/platform/files.ts"
import type * as Trainer from "../../src/train/trainer.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import type * as CoordinatorGone from "./rank-coordinator-gone.ts"
import { savedMarker } from "./rank-data.ts"
import type { Link, RankData } from "./rank-data.ts"
import type * as RankReports from "./rank-reports.ts"

/** What the calls read of a running rank (`RankTraining.Running` extends it). */
export interface CallRank {
  readonly link: Link
  readonly data: RankData
  readonly rank: number
  readonly leave: (code: number) => void
  readonly trainer: Trainer.Trainer
  readonly writeModel: (dir: string) => Promise<unknown>
  readonly send: RankReports.Reports["send"]
  readonly coordinator: CoordinatorGone.Watch
}

const toCoordinator = Transport.coordinatorPeer

/**
 * Runs `call`, a call the coordinator asked for (`save`, `eval`), with the rank's beats going on
 * from a thread of the process's own up to the call's bound (`RankData.callBeatsMs`), where the
 * link can: a trainer that blocks its thread is then not taken for a dead rank, and a stopped
 * process is (docs/liveness.md).
 */
const beating = async <A>(r: CallRank, call: "save" | "eval", run: () => Promise<A>): Promise<A> => {
  const boundMs = r.data.callBeatsMs?.[call]
  const stop =
    boundMs === undefined || r.link.beatWhile === undefined
      ? undefined
      : r.link.beatWhile(Codec.encode(Frame.fromRank(r.rank, { _tag: "Heartbeat" })), r.data.heartbeatIntervalMs, boundMs)
  try {
    return await run()
  } finally {
    stop?.()
  }
}

/**
 * A frame out before a call the coordinator asked for (a save, an eval): the coordinator holds a
 * rank for the call only once it is seen after the ask (`Liveness.hold`), and a synchronous
 * trainer sends nothing while it runs. Flushed, so that it is out before the call blocks.
 */
const startingCall = (r: CallRank) =>
  Effect.gen(function* () {
    yield* r.send({ _tag: "Heartbeat" })
    yield* r.link.transport.flush
  })

/** Saves for a `Checkpoint` and answers with its `CheckpointResult`. */
export const checkpoint = (r: CallRank, version: number) =>
  Effect.gen(function* () {
    const dir = `${r.data.checkpointDir}/v${version}`
    yield* startingCall(r)
    const savingMs = yield* Clock.currentTimeMillis
    const saved = yield* Effect.tryPromise(() =>
      beating(r, "save", async () => {
        // The trainer's contract: the caller creates the folder.
        await Files.mkdir(dir)
        await r.trainer.save(dir)
        await r.writeModel(dir)
      })
    ).pipe(Effect.result)
    r.coordinator.asked(savingMs, yield* Clock.currentTimeMillis)
    yield* r.send({
      _tag: "CheckpointResult",
      version,
      ok: Result.isSuccess(saved),
      detail: Result.isSuccess(saved) ? dir : String(saved.failure.cause ?? saved.failure)
    })
  })

/** Evaluates for an `Eval` and answers with its `EvalResult`; a trainer without `evaluate` answers nothing. */
export const evaluate = (r: CallRank, epoch: number) =>
  Effect.gen(function* () {
    const { trainer } = r
    if (trainer.evaluate === undefined) return
    const run = trainer.evaluate.bind(trainer)
    yield* startingCall(r)
    const evaluatingMs = yield* Clock.currentTimeMillis
    const result = yield* Effect.promise(() => beating(r, "eval", async () => run()))
    r.coordinator.asked(evaluatingMs, yield* Clock.currentTimeMillis)
    yield* r.send({ _tag: "EvalResult", epoch, accuracy: result.accuracy, loss: result.loss })
  })

/** An injected hang: stop responding (the worker stays alive), but never outlive the coordinator. */
export const hangUntilGone = (r: CallRank) =>
  Effect.gen(function* () {
    const { coordinator } = r
    while (true) {
      const event = yield* Queue.take(r.link.transport.inbox).pipe(
        Effect.timeoutOption(r.data.heartbeatIntervalMs),
        Effect.catch(() => Effect.succeed(undefined))
      )
      if (event === undefined || (event._tag === "Some" && event.value._tag === "Ended" && event.value.peer === toCoordinator)) {
        if (event?._tag === "Some" && event.value._tag === "Ended") coordinator.ended(event.value.cause)
        return yield* coordinator.gone(coordinator.channelClosed(), false)
      }
      const silent = coordinator.silence(yield* Clock.currentTimeMillis)
      if (silent !== undefined) return yield* coordinator.gone(silent, false)
    }
  })

/** Told to stop: saves first when asked to (`ShutdownWithSave`), says `Exiting`, and leaves with 0. */
export const stopAsTold = (r: CallRank, stopping: { readonly save: boolean; readonly reason: string }) =>
  Effect.gen(function* () {
    const { rank, data, trainer } = r
    if (stopping.save) {
      // The marker says the trainer's save resolved (a save may write nothing of its own); its
      // `savedAtMs` is wall-clock time, read by another process (`cohort join`) against its own.
      const dir = `${data.saveDir}/rank${rank}`
      const saved = yield* Effect.tryPromise(async () => {
        await Files.mkdir(dir)
        await trainer.save(dir)
        await r.writeModel(dir)
        await Files.writeFile(`${dir}/${savedMarker}`, `${JSON.stringify({ rank, reason: stopping?.reason, savedAtMs: Date.now() })}\n`)
      }).pipe(Effect.result)
      // Without its marker the launcher lists the rank as not saved; the reason is only here.
      if (Result.isFailure(saved))
        console.error(
          `cohort rank ${rank}: the save before stopping failed: ${DeathReport.errorMessage(saved.failure.cause ?? saved.failure)}`
        )
    }
    yield* r.send({ _tag: "Exiting" })
    yield* r.link.transport.flush
    r.leave(0)
  })
