/**
 * Calls the coordinator asks of a rank (a `Checkpoint`, an `Eval`; docs/liveness.md): the hold
 * each ask puts on the rank's liveness, its release by the answer or by a frame of a later epoch,
 * and the cause of a stale rank, which names the call that ran over its bound. Internal to
 * `src/core`.
 *
 * @since 0.1.0
 */
import { alert, path } from "./emit.ts"
import type { Command } from "./inputs.ts"
import * as Liveness from "./liveness.ts"
import * as Membership from "./membership.ts"
import type { Rank, ToCoordinator } from "./messages.ts"
import type { State } from "./state.ts"

/**
 * Holds each rank asked for a call by `cmds` (a `Checkpoint`, an `Eval`) for `saveTimeoutMs` or
 * `evalTimeoutMs` on top of its timeout (docs/design.md §3.1, `Liveness.hold`): a synchronous trainer
 * sends nothing while it saves or evaluates. Ranks that beat during calls (`beatsDuringCalls`
 * for every rank, `setBeatsDuringCalls` for one) get holds that only name the bound. Read off the commands, so that every path that asks
 * (an epoch's end, a checkpoint's failover) holds its rank. An epoch the same commands start on
 * the rank after the ask releases the hold once a frame of it arrives (`Liveness.Hold`): so a rank
 * whose trainer has no `evaluate`, and never answers `Eval`, is held no longer than it takes to
 * go on. O(commands).
 */
export const holdCalls = (state: State, cmds: ReadonlyArray<Command>): void => {
  const { config, liveness } = state
  let asked: Array<{ readonly to: Rank; readonly call: "save" | "eval"; readonly id: number; readonly forMs: number }> | undefined
  let entered: Map<Rank, number> | undefined
  for (const c of cmds) {
    if (c._tag === "Send" && (c.message._tag === "Checkpoint" || c.message._tag === "Eval")) {
      const call =
        c.message._tag === "Checkpoint"
          ? { to: c.to, call: "save" as const, id: c.message.version, forMs: config.saveTimeoutMs }
          : { to: c.to, call: "eval" as const, id: c.message.epoch, forMs: config.evalTimeoutMs }
      ;(asked ??= []).push(call)
    } else if (asked !== undefined) {
      // An epoch the asked rank enters after the ask: its frames of that epoch show it went past.
      const enter = (to: Rank, epoch: number) => {
        if (asked!.some((a) => a.to === to) && !(entered ??= new Map()).has(to)) entered.set(to, epoch)
      }
      if (c._tag === "Send" && (c.message._tag === "StartEpoch" || c.message._tag === "AssignChunk")) enter(c.to, c.message.epoch)
      else if (c._tag === "SendRanges" && (c.kind === "StartEpoch" || c.kind === "AssignChunk"))
        for (const to of c.ranks) enter(to, c.epoch)
    }
  }
  for (const a of asked ?? []) {
    // This run's ranks went past an eval without answering it: their trainer has no `evaluate`,
    // and an eval they never run is no reason to hold them (a hold counted by any frame sent past
    // the ask would shield a rank that then left silently for `evalTimeoutMs`).
    if (a.call === "eval" && state.evalsUnanswered) continue
    Liveness.hold(
      liveness,
      a.to,
      a.call,
      a.id,
      state.clockMs,
      a.forMs,
      entered?.get(a.to) ?? Infinity,
      config.beatsDuringCalls || Liveness.beats(liveness, a.to)
    )
  }
}

/**
 * A call's answer from `rank`, or a frame of an epoch it entered after the ask, ends the call's
 * hold (`holdCalls`). So does a checkpoint's answer end the hold of an eval asked before it (an
 * eval of an epoch up to the checkpoint's version: an epoch's end asks its eval first, and ranks
 * apply the coordinator's messages in order). An eval hold ended without its answer shows that
 * the run's trainer has no `evaluate` (one that has answers before it reads anything asked
 * later): evals are not held from then on (`State.evalsUnanswered`).
 */
export const releaseCall = (state: State, rank: Rank, message: ToCoordinator): void => {
  if (!Membership.inRange(state.membership, rank)) return
  let ended: ReadonlyArray<Liveness.Hold> = []
  if (message._tag === "CheckpointResult") {
    Liveness.release(state.liveness, rank, "save", message.version)
    ended = Liveness.releaseWhere(state.liveness, rank, (h) => h.call === "eval" && h.id <= message.version)
  } else if (message._tag === "EvalResult") Liveness.release(state.liveness, rank, "eval", message.epoch)
  else if (message._tag === "Progress" || message._tag === "Params" || message._tag === "ChunkDone" || message._tag === "RoundDone") {
    ended = Liveness.passed(state.liveness, rank, message.epoch)
  }
  if (ended.some((h) => h.call === "eval")) state.evalsUnanswered = true
}

/**
 * Why a stale rank is declared: its silence and its timeout; past an extension, which call ran
 * over its bound, with a `SaveTimeout` or `EvalTimeout` alert naming the bound.
 */
export const staleCause = (state: State, rank: Rank, cmds: Array<Command>): string => {
  const { config, liveness } = state
  const silentMs = Liveness.silentMs(liveness, rank, state.clockMs)
  const own =
    config.livenessDetector === "adaptive"
      ? `adaptive timeout ${Math.round(Liveness.timeoutOf(liveness, rank))} ms of at most ${config.heartbeatTimeoutMs}`
      : `timeout ${config.heartbeatTimeoutMs} ms`
  const overrun = Liveness.overrun(liveness, rank)
  if (overrun.length === 0) return `no frame for ${silentMs} ms (${own})`
  const calls: Array<string> = []
  for (const h of overrun) {
    const bound = h.call === "save" ? `saveTimeoutMs ${config.saveTimeoutMs}` : `evalTimeoutMs ${config.evalTimeoutMs}`
    const what = h.call === "save" ? `checkpoint ${h.id}` : `the eval of epoch ${h.id}`
    alert(
      state,
      cmds,
      h.call === "save" ? "SaveTimeout" : "EvalTimeout",
      path(state, rank),
      `rank ${rank} ran past ${bound} on ${what} (no frame for ${silentMs} ms)`
    )
    calls.push(bound)
  }
  return `no frame for ${silentMs} ms (${own} + ${calls.join(" + ")} for the calls it was asked)`
}
