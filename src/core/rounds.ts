/**
 * Averaging rounds (docs/design.md §3.3, §3.10): contributions, commits and the round's close, for the
 * `cpu` backend (`Params`, committed at receipt) and the `ring` backend (`RoundDone` of the current
 * generation, committed all at once when every ring member reported). Internal to
 * `src/core`.
 *
 * @since 0.1.0
 */
import * as Assignments from "./assignments.ts"
import * as Audit from "./audit.ts"
import * as ChunkPool from "./chunk-pool.ts"
import { alert, hasUncommitted, memberCount, path, tracked } from "./emit.ts"
import { complete, endEpoch } from "./ending.ts"
import * as EpochModel from "./epoch-model.ts"
import * as Liveness from "./liveness.ts"
import * as Membership from "./membership.ts"
import { epochDone, wake } from "./epochs.ts"
import type { Command } from "./inputs.ts"
import { enterRounds } from "./joins.ts"
import type { Rank } from "./messages.ts"
import type { PendingReport, State } from "./state.ts"

/**
 * Commits a contribution's samples (docs/design.md §3.3): the rank's static list up to `samplesDone`
 * (clamped and counted above the assignment; never backwards), or, in progressive mode, the first
 * `chunksMax` chunks it completed (every one by default: the contribution arrived just now).
 * Shared by `Params` (cpu, at receipt) and ring rounds (at the close, with the count each member
 * had done when its `RoundDone` arrived).
 */
export const commitContribution = (
  state: State,
  rank: Rank,
  samplesDone: number,
  cmds: Array<Command>,
  chunksMax = Number.POSITIVE_INFINITY
): void => {
  const log = state.log
  const record = (offset: number, size: number): void => {
    Audit.record(log, rank, offset, size)
    if (size > 0) state.roundCommitted.push([offset, size])
  }
  tracked(state, rank, () => {
    if (state.pool !== undefined) {
      ChunkPool.commit(state.pool, rank, (range) => record(range.offset, range.size), chunksMax)
    } else if (state.assignments !== undefined) {
      const result = Assignments.commit(state.assignments, rank, samplesDone, record)
      if (result.clamped) {
        state.counters.samplesDoneClamped += 1
        alert(
          state,
          cmds,
          "Overflow",
          path(state, rank),
          `samplesDone ${samplesDone} above the ${Assignments.assignedLength(state.assignments, rank)} samples assigned; clamped`
        )
      }
    }
  })
}

/**
 * The `AverageRound` that closes the open round: its epoch, number and opening time, its
 * contributors, the ranges committed since the last close (taken out of `roundCommitted`), the
 * parameters to average with their ranks (none for a ring round, which names its `generation`).
 */
const averageRound = (
  state: State,
  contributors: Array<Rank>,
  params: Array<Float32Array>,
  paramRanks: Array<Rank>,
  reason: string,
  generation?: number
): Command => ({
  _tag: "AverageRound",
  epoch: state.epoch,
  round: state.round,
  openedAtMs: state.roundOpenedMs ?? state.clockMs,
  contributors,
  committed: state.roundCommitted.splice(0),
  params,
  paramRanks,
  ...(generation === undefined ? {} : { generation }),
  reason
})

/**
 * Ring backend: the open round closes once every ring member (every survivor: each
 * death or exit re-forms the ring) reported `RoundDone` for the current generation. Only then are
 * the reporters' samples committed, all in one go through the same path as `Params`, so a sample
 * counts exactly when its parameters were folded into a completed round (docs/design.md §3.3).
 */
export const maybeCloseRingRound = (state: State, cmds: Array<Command>): void => {
  const ring = state.ring!
  const reports = state.ringReports
  if (state.phase !== "running" || reports.size === 0 || reports.size < memberCount(state)) return
  // The asked member must still hold the ended epoch's model when it reads the request.
  if (EpochModel.isOwed(state)) return
  const contributors = [...reports.keys()]
  for (const [rank, report] of reports) commitContribution(state, rank, report.samplesDone, cmds, report.chunks)
  cmds.push(
    averageRound(
      state,
      contributors,
      [],
      [],
      `round ${state.round} closed: every member of ring generation ${ring.generation} reported RoundDone`,
      ring.generation
    )
  )
  for (const rank of contributors) state.contributed[rank] = 0
  reports.clear()
  state.round += 1
  state.roundOpenedMs = undefined
  state.pendingRequired = state.uncommittedLive
  enterRounds(state, cmds)
  if (epochDone(state)) endEpoch(state, cmds)
}

/**
 * A death or exit discards the open ring round's reports: the collective they finished
 * is never applied (no `RoundCommitted` follows), nothing of it was committed, and the new
 * generation redoes the round from each rank's pre-round parameters.
 */
export const discardRingRound = (state: State): void => {
  if (state.ringReports.size === 0) return
  for (const rank of state.ringReports.keys()) state.contributed[rank] = 0
  state.ringReports.clear()
  state.roundOpenedMs = undefined
}

export const onRoundDone = (
  state: State,
  rank: Rank,
  round: number,
  generation: number,
  samplesDone: number,
  cmds: Array<Command>
): void => {
  const ring = state.ring
  if (
    ring === undefined ||
    generation !== ring.generation ||
    round !== state.round ||
    state.ringReports.has(rank) ||
    state.joining.has(rank) ||
    state.modelOwed.has(rank)
  ) {
    state.counters.staleRoundDone += 1
    return
  }
  // A chunk whose ChunkDone comes after this report was not in the rank's contribution: the close
  // commits only the chunks done by now, and later ones wait for a later round (docs/design.md §3.3).
  const chunks = state.pool === undefined ? 0 : ChunkPool.doneChunks(state.pool, rank)
  state.ringReports.set(rank, { samplesDone, chunks })
  state.contributed[rank] = 1 // waiting on the round (the launcher's progress shows it)
  state.roundOpenedMs ??= state.clockMs
  maybeCloseRingRound(state, cmds)
}

/** Closes the open round with the contributions it has: `AverageRound`, and the next round opens. */
export const closeRound = (state: State, cmds: Array<Command>, reason: string): void => {
  const contributors = [...state.contributions.keys()]
  const params: Array<Float32Array> = []
  const paramRanks: Array<Rank> = []
  for (const [rank, sent] of state.contributions) {
    for (const p of sent) {
      params.push(p)
      paramRanks.push(rank)
    }
  }
  cmds.push(averageRound(state, contributors, params, paramRanks, reason))
  for (const rank of contributors) state.contributed[rank] = 0
  for (const rank of state.lastRoundContributors) state.inLastRound[rank] = 0
  for (const rank of contributors) state.inLastRound[rank] = 1
  state.lastRoundContributors = contributors
  state.contributions.clear()
  state.round += 1
  state.roundOpenedMs = undefined
  state.roundClosedMs = state.clockMs
  state.roundDisturbed = false
  enterRounds(state, cmds)
  state.pendingRequired = state.uncommittedLive
  releaseSettled(state, cmds)
}

/**
 * Ranks taken back whose last `Params` with the dropped training came (`State.takenBack`,
 * `settled`) waited for an `Update`: this round's, just sent. They are clean and take chunks again,
 * at once if some are left (after the `Update`, so they train on it). O(ranks taken back).
 */
const releaseSettled = (state: State, cmds: Array<Command>): void => {
  if (state.takenBack.size === 0) return
  const settled = [...state.takenBack].flatMap(([rank, takenBack]) => (takenBack.settled ? [rank] : []))
  if (settled.length === 0) return
  for (const rank of settled) state.takenBack.delete(rank)
  if (state.shutdownSent) return
  const ranks = settled.length === 1 ? `rank ${settled[0]}` : `ranks ${settled.join(", ")}`
  wake(
    state,
    cmds,
    `${ranks}, whose chunks were taken back, got the Update after ${settled.length === 1 ? "its" : "their"} last Params: ${settled.length === 1 ? "it takes" : "they take"} chunks again`
  )
}

/**
 * How long live `rank` has been silent by its own doing, ms: since its last frame, the last chunks
 * handed to it, or, when it contributed to the last round, that round's close, whichever is
 * latest. A rank that contributed waits for the close's `Update` and sends nothing meanwhile: its
 * quiet before the `Update` reached it is the coordinator's, not its own (counted from its last
 * frame, a round slower than the bound left out every rank that waited on it, and rounds of one
 * contributor followed one another, each sending every rank an `Update`). An idle rank beats only
 * now and then, so chunks just handed to it start its count afresh. A rank left out of the last
 * round waited for nothing: its silence runs on from its last frame, and a rank that left stops
 * holding each later round only once. O(1).
 */
export const ownSilenceMs = (state: State, rank: Rank): number => {
  const sinceFrameMs = Liveness.silentMs(state.liveness, rank, state.clockMs)
  const sinceHandedMs = state.clockMs - state.handedOriginMs - state.handedMs[rank]!
  const sinceCloseMs = state.inLastRound[rank] === 1 ? state.clockMs - state.roundClosedMs : sinceHandedMs
  return Math.min(sinceFrameMs, sinceHandedMs, sinceCloseMs)
}

/**
 * Whether the open round leaves live `rank` out although it owes a contribution: silent by its own
 * doing (`ownSilenceMs`) for more than `roundSilenceMs` (on, `cpu`), or twice the usual round. O(1).
 */
export const roundSkips = (state: State, rank: Rank): boolean => {
  const ms = skipAfterMs(state)
  return ms > 0 && ownSilenceMs(state, rank) > ms
}

/**
 * How long a rank that owes the open round a contribution may be silent before the round leaves
 * it out: `roundSilenceMs`, or twice the run's usual round (`State.roundLengthMs`) when that is
 * longer. Under load every rank answers later (its `Update` reaches it later), and a fixed bound
 * then left out live ranks: rounds of one late contributor followed one another, each sending
 * every rank an `Update`, which loaded the machine further (at 256 ranks, 45 rounds instead of 18
 * without churn, half the throughput). 0 when off.
 */
export const skipAfterMs = (state: State): number => {
  const ms = state.config.roundSilenceMs
  return ms <= 0 ? 0 : Math.max(ms, 2 * state.roundLengthMs)
}

/**
 * The live ranks that owe the open round a contribution (they hold uncommitted work and did not
 * contribute) and that it leaves out (`roundSkips`). O(k + s): the ranks silent that long.
 */
const skippedCount = (state: State): number => {
  const ms = skipAfterMs(state)
  if (ms <= 0 || state.pendingRequired <= 0) return 0
  let count = 0
  for (const rank of Liveness.silentBeyond(state.liveness, state.clockMs, ms))
    if (
      Membership.isLive(state.membership, rank) &&
      state.contributed[rank] === 0 &&
      hasUncommitted(state, rank) &&
      roundSkips(state, rank)
    )
      count += 1
  return count
}

/**
 * Closes the open `cpu` round once every survivor that owes it a contribution contributed, or
 * (`roundSilenceMs`) every one but those silent past the bound (`roundSkips`): these stay owed to the next
 * round, where a contribution they send later is folded in and commits. Called after every
 * contribution and departure, and at every tick (a rank turns silent with time).
 */
export const maybeCloseRound = (state: State, cmds: Array<Command>): void => {
  if (state.ring !== undefined) return maybeCloseRingRound(state, cmds)
  if (state.phase !== "running" || state.contributions.size === 0) return
  if (state.pendingRequired <= 0) {
    // The usual round: from the last close to a close that waited for everyone (smoothed, gain 1/8).
    const lengthMs = state.clockMs - state.roundClosedMs
    if (!state.roundDisturbed)
      state.roundLengthMs = state.roundLengthMs === 0 ? lengthMs : state.roundLengthMs + (lengthMs - state.roundLengthMs) / 8
    closeRound(state, cmds, `round ${state.round} closed: every survivor holding uncommitted work contributed`)
  } else {
    const skipped = skippedCount(state)
    if (skipped < state.pendingRequired) return
    state.counters.roundsClosedWithoutSilent += 1
    closeRound(
      state,
      cmds,
      `round ${state.round} closed without ${skipped} ${skipped === 1 ? "rank" : "ranks"} silent for more than ` +
        `${Math.round(skipAfterMs(state))} ms (roundSilenceMs ${state.config.roundSilenceMs}, or twice the usual round): ` +
        `${skipped === 1 ? "it folds" : "they fold"} into the next round`
    )
  }
  if (epochDone(state)) endEpoch(state, cmds)
}

/**
 * A run that stops mid-epoch first closes its open round with the contributions it has:
 * their samples are committed already, so the survivors' last `Update` (what they save as the
 * resumable model) must hold them, and `Outcome.uncommitted` is exactly what it lacks.
 */
export const closeOpenRound = (state: State, cmds: Array<Command>, reason: string): void => {
  // A ring round that did not complete is not a round: nothing of it is committed.
  if (state.ring !== undefined) return discardRingRound(state)
  if (state.started && state.contributions.size > 0) closeRound(state, cmds, reason)
}

/**
 * Whether every value is finite. x * 0 is ±0 for a finite x and NaN for NaN or ±Infinity, and NaN
 * stays NaN: one multiply-add a value and no branch, about half the time of a Number.isFinite per
 * value. Four sums, not one: each add waits only for its own sum's last add.
 */
const allFinite = (params: Float32Array): boolean => {
  let p0 = 0
  let p1 = 0
  let p2 = 0
  let p3 = 0
  const length = params.length
  let i = 0
  for (; i + 4 <= length; i += 4) {
    p0 += params[i]! * 0
    p1 += params[i + 1]! * 0
    p2 += params[i + 2]! * 0
    p3 += params[i + 3]! * 0
  }
  for (; i < length; i++) p0 += params[i]! * 0
  return p0 + p1 + p2 + p3 === 0
}

export const onParams = (state: State, rank: Rank, samplesDone: number, params: Float32Array, cmds: Array<Command>): void => {
  commitContribution(state, rank, samplesDone, cmds)
  if (state.contributed[rank] === 0) {
    state.contributed[rank] = 1
    if (hasUncommitted(state, rank)) state.pendingRequired -= 1
  }
  state.paramsLength ??= params.length
  let usable = params.length === state.paramsLength
  if (usable) {
    usable = allFinite(params)
  }
  if (!usable) {
    state.counters.paramsRejected += 1
    const why = params.length === state.paramsLength ? "non-finite values" : `${params.length} values instead of ${state.paramsLength}`
    alert(state, cmds, "BadParams", path(state, rank), `rank ${rank}'s parameters for round ${state.round} left out of the average: ${why}`)
  }
  // The samples are committed either way: they were trained; only the parameters are not averaged.
  const folded = state.contributions.get(rank) ?? []
  if (usable) folded.push(params)
  state.contributions.set(rank, folded)
  state.roundOpenedMs ??= state.clockMs
  maybeCloseRound(state, cmds)
}

/**
 * An `Outlier` input (docs/edge-averaging.md): the alert names the rank; with `outlierRoundsMax`
 * on, the rank's count of outlier rounds reaching it returns the rank's death report, which the
 * step declares at once (a report left for the next tick could outlive a short run). Dead, exited
 * and out-of-range ranks are ignored: their rounds no longer matter.
 */
export const onOutlier = (state: State, rank: Rank, round: number, detail: string, cmds: Array<Command>): PendingReport | undefined => {
  if (!Membership.isLive(state.membership, rank)) return undefined
  state.counters.outlierContributions += 1
  const rounds = (state.outlierRounds.get(rank) ?? 0) + 1
  state.outlierRounds.set(rank, rounds)
  alert(state, cmds, "OutlierParams", path(state, rank), `rank ${rank}'s parameters for round ${round} far outside the others': ${detail}`)
  const max = state.config.outlierRoundsMax
  if (max === 0 || rounds !== max) return undefined
  return {
    rank,
    nowMs: state.clockMs,
    cause: { _tag: "Refused", reason: `its parameters were outliers in ${rounds} rounds (outlierRoundsMax ${max})` }
  }
}

/**
 * `cpu` backend, `roundDeadlineMs` on: a round open that long since its first contribution, still
 * waiting on some survivor, closes with the contributions in hand once at least `roundQuorum` of
 * the survivors (at least one) contributed. The ranks it did not wait for stay required in the next
 * round; a contribution they sent meanwhile is folded into it and commits then. Checked at each tick.
 */
export const maybeCloseAtDeadline = (state: State, cmds: Array<Command>): void => {
  const { roundDeadlineMs, roundQuorum } = state.config
  if (roundDeadlineMs <= 0 || state.ring !== undefined || state.phase !== "running" || state.roundOpenedMs === undefined) return
  if (state.pendingRequired <= 0 || state.clockMs - state.roundOpenedMs < roundDeadlineMs) return
  const survivors = state.membership.activeCount
  const quorum = Math.max(1, Math.ceil(Math.round(roundQuorum * survivors * 1e9) / 1e9))
  if (state.contributions.size < quorum) return
  state.counters.roundsClosedAtDeadline += 1
  closeRound(
    state,
    cmds,
    `round ${state.round} closed at its deadline (${roundDeadlineMs} ms): ${state.contributions.size} of ${survivors} survivors contributed ` +
      `(quorum ${quorum}); the ${state.pendingRequired} it did not wait for fold into the next round`
  )
  if (epochDone(state)) endEpoch(state, cmds)
}

/**
 * The ended epoch's model is no longer owed (`EpochModel.Outcome` `Settled`): the run completes
 * when that was the last epoch, else a ring round held back by it may close now.
 */
export const afterEpochModel = (state: State, cmds: Array<Command>, outcome: EpochModel.Outcome): void => {
  if (outcome._tag !== "Settled" || state.phase !== "running") return
  if (outcome.finishing) complete(state, cmds)
  else maybeCloseRound(state, cmds)
}
