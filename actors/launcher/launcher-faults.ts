/**
 * The faults a launch was asked to inject (`RunOptions.kills`, `hangs`, `killRequests`), timed
 * from the moment training started (every rank joined): kills by time or by progress into an
 * epoch; hangs by time (the rank hangs itself, this only records it). A fault still waiting
 * when the run ended never happened, and the journal says so (`fault-skipped`).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Core from "../../src/core/coordinator.ts"
import type { Context } from "./launcher-context.ts"
import type { Host } from "./launcher-hosts.ts"
import type { HangSpec, KillSpec, SkippedFault } from "../record/run-types.ts"

/**
 * The faults not yet injected, and when training started (`undefined` before it did).
 *
 * @since 0.1.0
 * @category launcher
 */
export interface Pending {
  readonly kills: Set<KillSpec>
  readonly hangs: Set<HangSpec>
  trainingSinceMs: number | undefined
}

const skip = (ctx: Context, skipped: SkippedFault, now: number): void => {
  ctx.skippedFaults.push(skipped)
  ctx.emit({ type: "fault-skipped", ms: ctx.sinceStart(now), skipped })
}

/**
 * Injects each fault when it is due, checking every 5 ms in a fiber of the scope; returns what
 * is still pending.
 *
 * @since 0.1.0
 * @category launcher
 */
export const inject = (ctx: Context, host: Host): Effect.Effect<Pending, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { state, options, module, trainedInEpoch, faultAt, emit, sinceStart } = ctx
    const pending: Pending = {
      kills: new Set<KillSpec>(ctx.resolved.kills),
      hangs: new Set(ctx.resolved.hangs),
      trainingSinceMs: undefined
    }
    const faults = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (!state.started) return
      pending.trainingSinceMs ??= now
      const trainingSinceMs = pending.trainingSinceMs
      // A kill asked for now is due now: `atSeconds` measured from training's start.
      for (const rank of options.killRequests?.drain() ?? []) pending.kills.add({ rank, atSeconds: (now - trainingSinceMs) / 1000 })
      for (const kill of pending.kills) {
        const due =
          "atSeconds" in kill
            ? now - trainingSinceMs >= kill.atSeconds * 1000
            : state.phase === "running" &&
              (state.epoch > kill.atEpoch ||
                (state.epoch === kill.atEpoch &&
                  [...trainedInEpoch.values()].reduce((a, b) => a + b, 0) >= kill.atFraction * module.trainSamples))
        if (!due) continue
        pending.kills.delete(kill)
        if (!Core.isLive(state, kill.rank)) {
          skip(ctx, { rank: kill.rank, fault: "kill", spec: kill, reason: `rank ${kill.rank} had already left` }, now)
          continue
        }
        faultAt.set(kill.rank, yield* Clock.currentTimeMillis)
        emit({ type: "fault", ms: sinceStart(now), rank: kill.rank, fault: "kill" })
        yield* host.kill(kill.rank)
      }
      for (const hang of pending.hangs) {
        if (now - trainingSinceMs < hang.atSeconds * 1000) continue
        pending.hangs.delete(hang)
        if (!Core.isLive(state, hang.rank)) {
          skip(ctx, { rank: hang.rank, fault: "hang", spec: hang, reason: `rank ${hang.rank} had already left` }, now)
          continue
        }
        faultAt.set(hang.rank, trainingSinceMs + hang.atSeconds * 1000)
        emit({ type: "fault", ms: sinceStart(now), rank: hang.rank, fault: "hang" })
      }
    })
    yield* faults.pipe(Effect.repeat(Schedule.spaced(5)), Effect.forkScoped)
    return pending
  })

/**
 * Faults still waiting when the run ended never happened: say so. The demo's own kill, which
 * nobody asked for, is no news when the user interrupted the run before it came.
 *
 * @since 0.1.0
 * @category launcher
 */
export const skipPending = (ctx: Context, pending: Pending, outcome: Core.Outcome): Effect.Effect<void> =>
  Effect.gen(function* () {
    const endedMs = yield* Clock.currentTimeMillis
    const trained =
      pending.trainingSinceMs === undefined
        ? "before training started"
        : `after ${((endedMs - pending.trainingSinceMs) / 1000).toFixed(1)} s of training`
    for (const kill of pending.kills) {
      if ("plan" in kill && kill.plan === "demo" && outcome.status === "interrupted") continue
      skip(ctx, { rank: kill.rank, fault: "kill", spec: kill, reason: `the run ended ${trained}` }, endedMs)
    }
    for (const hang of pending.hangs) skip(ctx, { rank: hang.rank, fault: "hang", spec: hang, reason: `the run ended ${trained}` }, endedMs)
  })
