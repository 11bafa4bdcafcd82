/**
 * Roles and checkpoints as ranks come and go (docs/design.md §3.5, §3.11 for joiners): moving the roles
 * away from a rank that left, the checkpoint's failover to the next untried live rank, and the
 * `fastest` policy's resolution once every survivor is calibrated. Internal to `src/core`.
 *
 * @since 0.1.0
 */
import type { Command } from "./inputs.ts"
import * as Membership from "./membership.ts"
import type { Rank } from "./messages.ts"
import * as Roles from "./roles.ts"
import { alert, broadcast, send } from "./emit.ts"
import type { State } from "./state.ts"

/** Moves the roles away from a rank that died or exited (docs/design.md §3.5, §3.11 for joiners). */
export const moveRoles = (state: State, gone: Rank): void => {
  const { roles, membership } = state
  if (state.config.rolePolicy === "fastest") {
    const holders = [roles.checkpoint, roles.eval, roles.epochFn]
    if (!holders.includes(gone)) return
    // With only uncalibrated joiners left, the lowest of them (docs/design.md §3.5: an uncalibrated
    // survivor means the lowest live rank): a role left on a dead rank would skip every later
    // eval and epochFn, and only the checkpoint fails over on its own.
    const next =
      (state.calibration.calibratedLive < membership.activeCount
        ? lowestEligible(state)
        : Roles.resolveFastest(state.calibration, membership)) ?? Membership.lowestLive(membership)
    if (next === undefined) return
    if (roles.checkpoint === gone) roles.checkpoint = next
    if (roles.eval === gone) roles.eval = next
    if (roles.epochFn === gone) roles.epochFn = next
  } else if (roles.checkpoint === gone) {
    const next = lowestEligible(state)
    if (next !== undefined) roles.checkpoint = next
  }
}

/** Picks the next checkpoint rank after a failure; returns true when one was found. */
export const failoverCheckpoint = (state: State, cmds: Array<Command>, why: string, sendNow: boolean): boolean => {
  const pending = state.checkpoint
  if (pending === undefined) return false
  const m = state.membership
  let next = Membership.nextLive(m, 0)
  // A pinned policy's checkpoint never fails over to a rank that joined mid-run.
  const pinned = state.config.rolePolicy !== "fastest"
  while (next < m.worldSize && (pending.tried.has(next) || (pinned && state.lateJoiner[next] === 1)))
    next = Membership.nextLive(m, next + 1)
  if (next >= m.worldSize) {
    alert(state, cmds, "CheckpointFailed", "root", `checkpoint ${pending.version} not saved: ${why}; no untried live rank left`)
    state.checkpoint = undefined
    return false
  }
  pending.tried.add(next)
  pending.rank = next
  state.roles.checkpoint = next
  if (sendNow) {
    broadcast(cmds, { _tag: "SetRoles", ...state.roles }, `checkpoint role moves to rank ${next} with checkpoint ${pending.version}`)
    send(cmds, next, { _tag: "Checkpoint", version: pending.version }, `checkpoint ${pending.version} fails over to rank ${next}: ${why}`)
  }
  return true
}

export const maybeResolveFastest = (state: State): boolean => {
  if (state.config.rolePolicy !== "fastest" || state.fastestResolved) return false
  const { calibration, membership } = state
  if (membership.activeCount === 0 || calibration.calibratedLive < membership.activeCount) return false
  state.fastestResolved = true
  const next = Roles.resolveFastest(calibration, membership)!
  const before = { ...state.roles }
  state.roles.checkpoint = next
  state.roles.eval = next
  state.roles.epochFn = next
  // A pending checkpoint may finish where it is (its result is matched against `checkpoint.rank`),
  // but the role moves with the resolution: the next checkpoint goes to the fastest (docs/design.md §3.5).
  return Roles.differ(before, state.roles)
}

/**
 * The lowest survivor a role may move to, or `undefined`: with the pinned policy never a rank that
 * joined mid-run; with `fastest` not one that is still uncalibrated. O(ranks skipped).
 */
export const lowestEligible = (state: State): Rank | undefined => {
  const m = state.membership
  const pinned = state.config.rolePolicy !== "fastest"
  for (let r = Membership.nextLive(m, 0); r < m.worldSize; r = Membership.nextLive(m, r + 1)) {
    if (state.lateJoiner[r] === 0 || (!pinned && Roles.isCalibrated(state.calibration, r))) return r
  }
  return undefined
}
