/**
 * Unrecoverable runs and requested stops (docs/design.md §3.6): when the run can no longer go on
 * (a repeated trainer crash, the failure limit, a ring of one, no survivor), and the once-per-run
 * `ShutdownWithSave`. Internal to `src/core`.
 *
 * @since 0.1.0
 */
import * as Config from "./config.ts"
import { broadcast, memberCount } from "./emit.ts"
import { finish } from "./ending.ts"
import type { Command } from "./inputs.ts"
import type { SaveReason } from "./messages.ts"
import { closeOpenRound } from "./rounds.ts"
import type { State } from "./state.ts"

export const unrecoverableReason = (state: State, checkFailureLimit: boolean): { reason: SaveReason; detail: string } | undefined => {
  const { config, membership } = state
  // A trainer that fails the same way on two ranks has a bug: name it before the limits it trips.
  const repeated = state.repeatedCrash
  if (checkFailureLimit && repeated !== undefined && config.onRepeatedCrash === "stop") {
    return {
      reason: "TrainerFault",
      detail: `the trainer failed the same way on ranks ${repeated.ranks[0]} and ${repeated.ranks[1]}: ${repeated.error}`
    }
  }
  if (checkFailureLimit) {
    // The limit counts members: joiners that died before they entered the rounds count
    // neither as failures nor in the fraction's base (`worldSize` for a run that never grows).
    const lost = state.counters.joinersLost
    const counted = membership.failures - lost
    const limit = Config.failureLimitCount(config.failureLimit, membership.joined - lost)
    if (limit !== undefined && counted >= limit) {
      const failures = `${counted} ${counted === 1 ? "failure" : "failures"}`
      const besides =
        lost === 0 ? "" : ` (besides ${lost} ${lost === 1 ? "joiner" : "joiners"} lost before entering the rounds, not counted)`
      return { reason: "FailureLimitReached", detail: `${failures} reached the failure limit of ${limit}${besides}` }
    }
  }
  // Joiners not yet in the ring do not count: the ring re-forms without them.
  if (config.backend === "ring" && memberCount(state) < 2) {
    return { reason: "SingleSurvivor", detail: `the ring backend needs 2 survivors in the ring, ${memberCount(state)} left` }
  }
  if (config.backend === "cpu" && membership.activeCount === 0) {
    return { reason: "AllRanksLost", detail: "no survivor left" }
  }
  return undefined
}

/** Sends `ShutdownWithSave` at most once per run and ends it (docs/design.md §3.6). */
export const saveAndStop = (state: State, cmds: Array<Command>, reason: SaveReason, detail: string): void => {
  if (state.shutdownSent || state.phase !== "running") return
  state.shutdownSent = true
  closeOpenRound(state, cmds, `round ${state.round} closed early: the run stops (${reason})`)
  if (state.membership.activeCount > 0) broadcast(cmds, { _tag: "ShutdownWithSave", reason }, detail)
  finish(state, cmds, "unrecoverable", reason, detail, true)
}

/**
 * An external shutdown request (docs/design.md §1 save reason `GracefulShutdown`): the survivors save
 * and stop, through the same once-per-run `ShutdownWithSave` as an unrecoverable run (§3.6).
 */
export const onShutdownRequested = (state: State, cmds: Array<Command>, detail: string): void => {
  if (state.shutdownSent || state.phase !== "running") return
  state.shutdownSent = true
  closeOpenRound(state, cmds, `round ${state.round} closed early: the run stops (GracefulShutdown)`)
  if (state.started && state.membership.activeCount > 0) broadcast(cmds, { _tag: "ShutdownWithSave", reason: "GracefulShutdown" }, detail)
  finish(state, cmds, "interrupted", "GracefulShutdown", detail, state.started)
}
