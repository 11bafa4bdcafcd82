/**
 * The core's small verbs, shared by its modules: emitting commands and alerts, and keeping the
 * round counters (`uncommittedLive`, `pendingRequired`) right as lists and pools change. Internal
 * to `src/core`, except `causeText`, which `coordinator.ts` re-exports.
 *
 * @since 0.1.0
 */
import * as Alerts from "./alerts.ts"
import * as Assignments from "./assignments.ts"
import * as ChunkPool from "./chunk-pool.ts"
import type { Command, DeathCause } from "./inputs.ts"
import * as Membership from "./membership.ts"
import type { Rank, ToRank } from "./messages.ts"
import type { State } from "./state.ts"

export const send = (cmds: Array<Command>, to: Rank, message: ToRank, reason: string): void => {
  cmds.push({ _tag: "Send", to, message, reason })
}

export const broadcast = (cmds: Array<Command>, message: ToRank, reason: string): void => {
  cmds.push({ _tag: "Broadcast", message, reason })
}

export const path = (state: State, rank: Rank): string =>
  Alerts.rankPath(rank, state.config.maxRanks, state.config.rankHosts, state.multiHost)

export const alert = (state: State, cmds: Array<Command>, alertClass: Alerts.AlertClass, alertPath: string, detail: string): void => {
  const record = Alerts.raise(state.lane, state.clockMs, alertClass, alertPath, detail)
  if (record !== undefined) cmds.push({ _tag: "Alert", alert: record })
}

/**
 * How a death cause reads in a death's `cause` and in messages: `crashed: <error>`,
 * `killed by SIGKILL`, `exited with code 1 without Exiting`, `disconnected (close code 1006)`,
 * `refused: <reason>`.
 *
 * @since 0.1.0
 * @category outcome
 */
export const causeText = (cause: DeathCause): string => {
  switch (cause._tag) {
    case "Exited":
      return `exited with code ${cause.code} without Exiting`
    case "Crashed":
      return `crashed: ${cause.error}`
    case "Killed":
      return `killed by ${cause.signal}`
    case "Disconnected":
      return `disconnected (close code ${cause.closeCode})`
    case "Refused":
      return `refused: ${cause.reason}`
  }
}

export const hasUncommitted = (state: State, rank: Rank): boolean => {
  if (state.pool !== undefined) return ChunkPool.holdsUncommitted(state.pool, rank)
  if (state.assignments !== undefined) return Assignments.hasUncommitted(state.assignments, rank)
  return false
}

/** Runs `mutate` and keeps `uncommittedLive` and `pendingRequired` right for a live `rank`. */
export const tracked = <A>(state: State, rank: Rank, mutate: () => A): A => {
  const before = hasUncommitted(state, rank)
  const result = mutate()
  const after = hasUncommitted(state, rank)
  if (before !== after && Membership.isLive(state.membership, rank)) {
    const delta = after ? 1 : -1
    state.uncommittedLive += delta
    if (state.contributed[rank] === 0) state.pendingRequired += delta
  }
  return result
}

/** Records that chunks were handed to `rank` now (`State.handedMs`; `rounds.ts` `ownSilenceMs` reads it). */
export const handed = (state: State, rank: Rank): void => {
  state.handedMs[rank] = Math.max(0, Math.min(0xffffffff, Math.ceil(state.clockMs - state.handedOriginMs)))
}

/** Appends an extension to a survivor's list, keeping the round counters right. O(1). */
export const extendLive = (state: State, a: Assignments.Assignments, rank: Rank, offset: number, size: number): void => {
  const had = Assignments.hasUncommitted(a, rank)
  Assignments.extend(a, rank, offset, size)
  if (!had && size > 0) {
    state.uncommittedLive += 1
    if (state.contributed[rank] === 0) state.pendingRequired += 1
  }
}

/** A live rank leaves the live set: it no longer holds up rounds. Call before unlinking it. */
export const leaveRound = (state: State, rank: Rank): void => {
  if (hasUncommitted(state, rank)) {
    state.uncommittedLive -= 1
    if (state.contributed[rank] === 0) state.pendingRequired -= 1
  }
}

/**
 * Sends `FormRing` to every ring member; every call after the first bumps the generation. The
 * members are the survivors but the joiners still waiting for the next generation:
 * `includeJoining` makes them members now (the round boundary where they enter).
 */
export const formRing = (state: State, cmds: Array<Command>, reason: string, includeJoining = false): void => {
  const ring = state.ring
  if (ring === undefined) return
  if (state.started) ring.generation += 1
  ring.pending = true
  ring.startedMs = state.clockMs
  ring.readyCount = 0
  ring.ready.fill(0)
  const peers: Array<Rank> = []
  Membership.forEachSurvivor(state.membership, (r) => {
    if (includeJoining || !state.joining.has(r)) peers.push(r)
  })
  peers.forEach((rank, ringRank) => {
    send(cmds, rank, { _tag: "FormRing", generation: ring.generation, ringRank, ringSize: peers.length, peers }, reason)
  })
}

/** Survivors the open round may wait on: every survivor but the joiners since it opened. */
export const memberCount = (state: State): number => state.membership.activeCount - state.joining.size
