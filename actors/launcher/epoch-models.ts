/**
 * The model after each ended epoch, written on the coordinator's host: `checkpoints/v<E>/cohort-epoch-model.f32`
 * and `cohort-epoch-model.json` in the run's folder (`SavedModel.coordinatorFiles`), each written to a temporary
 * file, synced, renamed, and the folder synced. The journal's `epoch` line of E waits for this
 * write (`RunJournal.hold`), so that whenever the coordinator's process dies, a journal that
 * audits epoch E has the model a resume needs beside it, whatever the ranks' own checkpoints (a
 * trainer's format, on whichever host held the checkpoint role) came to.
 *
 * @since 0.1.0
 */
import * as SavedModel from "../../src/train/saved-model.ts"
import { firstLine } from "../record/error-text.ts"
import type { RunEvent } from "../record/run-types.ts"

/**
 * - `dir`: the run's `checkpoints` folder (absolute); `shownDir`: the same as the user named it.
 * - `now`: ms since the run started, for the events.
 * - `onWriteError(path, error)`: a model's write failed (the runtime's `Error`: `ENOSPC`, `EIO`,
 *   `EROFS`, ...), told at once, before its `model` event settles.
 *
 * @since 0.1.0
 * @category options
 */
export interface Options {
  readonly dir: string
  readonly shownDir: string
  readonly now: () => number
  readonly onWriteError?: ((path: string, error: unknown) => void) | undefined
}

/**
 * - `written(epoch)`: resolves with the `model` event of `epoch` once its model is written, or
 *   could not be (the event then carries `error`); never rejects. Called when the epoch's audit
 *   is made: the event's `afterAuditMs` counts from then.
 * - `deliver(epoch, model)`: the coordinator's model of `epoch` (`undefined`: there is none); starts
 *   the write.
 * - `releaseAll(why)`: the run ended: every epoch whose model never came gets a `model` event
 *   with `why` (a write already under way still settles its own).
 *
 * @since 0.1.0
 * @category model
 */
export interface EpochModels {
  readonly written: (epoch: number) => Promise<ReadonlyArray<RunEvent>>
  readonly deliver: (
    epoch: number,
    model: { readonly round: number; readonly params: Float32Array; readonly outerMomentum?: Float32Array } | undefined
  ) => void
  readonly releaseAll: (why: string) => void
}

type Event = Extract<RunEvent, { type: "model" }>

/**
 * Makes the writer of a run's epoch models.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): EpochModels => {
  // Per epoch: its `written` promise; `delivered` once the model came (a write in flight is waited for).
  const pending = new Map<
    number,
    {
      readonly promise: Promise<ReadonlyArray<RunEvent>>
      resolve: (events: ReadonlyArray<RunEvent>) => void
      done: boolean
      delivered: boolean
      readonly auditedAtMs: number
    }
  >()
  const entry = (epoch: number) => {
    let found = pending.get(epoch)
    if (found === undefined) {
      let resolve: (events: ReadonlyArray<RunEvent>) => void = () => {}
      const promise = new Promise<ReadonlyArray<RunEvent>>((r) => (resolve = r))
      found = { promise, resolve, done: false, delivered: false, auditedAtMs: options.now() }
      pending.set(epoch, found)
    }
    return found
  }
  const settle = (epoch: number, event: Event): void => {
    const found = entry(epoch)
    if (found.done) return
    found.done = true
    found.resolve([{ ...event, afterAuditMs: options.now() - found.auditedAtMs }])
  }
  const deliver = (
    epoch: number,
    model: { readonly round: number; readonly params: Float32Array; readonly outerMomentum?: Float32Array } | undefined
  ): void => {
    const folder = `v${epoch}`
    const path = `${options.shownDir}/${folder}`
    entry(epoch).delivered = true
    if (model === undefined) {
      settle(epoch, {
        type: "model",
        ms: options.now(),
        epoch,
        round: -1,
        path,
        bytes: 0,
        writeMs: 0,
        error: "the coordinator holds no model of this epoch"
      })
      return
    }
    const startedMs = options.now()
    const where = { epoch, round: model.round, rank: -1 }
    // The outer optimizer's momentum first: a folder whose model is complete has its momentum too.
    const momentum =
      model.outerMomentum === undefined
        ? Promise.resolve()
        : SavedModel.write(`${options.dir}/${folder}`, model.outerMomentum, where, SavedModel.outerMomentumFiles)
    momentum
      .then(() => SavedModel.write(`${options.dir}/${folder}`, model.params, where, SavedModel.coordinatorFiles))
      .then(
        () =>
          settle(epoch, {
            type: "model",
            ms: options.now(),
            epoch,
            round: model.round,
            path,
            bytes: model.params.length * 4,
            writeMs: options.now() - startedMs
          }),
        (error: unknown) => {
          options.onWriteError?.(path, error)
          settle(epoch, {
            type: "model",
            ms: options.now(),
            epoch,
            round: model.round,
            path,
            bytes: 0,
            writeMs: options.now() - startedMs,
            error: firstLine(error)
          })
        }
      )
  }
  const releaseAll = (why: string): void => {
    for (const [epoch, found] of pending) {
      if (!found.done && !found.delivered)
        settle(epoch, {
          type: "model",
          ms: options.now(),
          epoch,
          round: -1,
          path: `${options.shownDir}/v${epoch}`,
          bytes: 0,
          writeMs: 0,
          error: why
        })
    }
  }
  return { written: (epoch) => entry(epoch).promise, deliver, releaseAll }
}
