/**
 * The death chain (docs/design.md §3.2, §3.10): one batch of departures (deaths found in one tick, or
 * a clean exit mid-run) declared in the order of §3.10: alerts, remainders, ledger, roles, the
 * unrecoverable check, aborting ring collectives, redistribution, the ring's re-rendezvous.
 * Internal to `src/core`.
 *
 * @since 0.1.0
 */
import * as Assignments from "./assignments.ts"
import * as ChunkPool from "./chunk-pool.ts"
import { alert, broadcast, extendLive, formRing, leaveRound, memberCount, path, send } from "./emit.ts"
import { wake } from "./epochs.ts"
import { reissueModels } from "./model-handover.ts"
import { complete } from "./ending.ts"
import * as EpochModel from "./epoch-model.ts"
import type { Command } from "./inputs.ts"
import * as Liveness from "./liveness.ts"
import * as Membership from "./membership.ts"
import type { Rank } from "./messages.ts"
import type { Death, Leave } from "./outcome.ts"
import { failoverCheckpoint, maybeResolveFastest, moveRoles } from "./role-moves.ts"
import * as Roles from "./roles.ts"
import { discardRingRound, maybeCloseRound } from "./rounds.ts"
import * as Split from "./split.ts"
import type { State } from "./state.ts"
import { saveAndStop, unrecoverableReason } from "./stops.ts"

export interface Departure {
  readonly rank: Rank
  readonly kind: "death" | "exit"
  readonly detector: "supervisor" | "heartbeat"
  readonly cause: string
  readonly reportedAtMs: number
  /** A `Crashed` report's error, stack and fingerprint. */
  readonly crash?: { readonly error: string; readonly stack: string | undefined; readonly fingerprint: string | undefined }
}

/**
 * A crash of running out of file descriptors (`EMFILE`, `ENFILE`): the host's shortage (for a
 * worker rank, its coordinator's process), not the trainer's bug, so it is never a repeated crash.
 */
const isDescriptorShortage = (error: string): boolean => /\b(EMFILE|ENFILE)\b/.test(error)

/** Records a crash while the run goes on; the first one seen on a second rank is the repeat. */
export const noteCrash = (state: State, rank: Rank, crash: NonNullable<Departure["crash"]>): void => {
  if (crash.fingerprint === undefined || isDescriptorShortage(crash.error)) return
  const first = state.crashes.get(crash.fingerprint)
  if (first === undefined) state.crashes.set(crash.fingerprint, { rank, error: crash.error, stack: crash.stack })
  else state.repeatedCrash ??= { ranks: [first.rank, rank], error: first.error, stack: first.stack ?? crash.stack }
}

/** The samples `rank` is known to have trained and not committed (`Leave.redoneSamples`). */
const trainedUncommitted = (state: State, rank: Rank): number => {
  if (state.pool !== undefined) return ChunkPool.doneSamples(state.pool, rank)
  const reported = state.reportedDone.get(rank)
  if (state.assignments === undefined || reported === undefined || reported.epoch !== state.epoch) return 0
  const known = Math.min(reported.samplesDone, Assignments.assignedLength(state.assignments, rank))
  return Math.max(0, known - Assignments.committed(state.assignments, rank))
}

/** The cost line of a departure while the run trains (`State.leaves`). */
const leaveOf = (state: State, d: Departure): Leave => ({
  rank: d.rank,
  epoch: state.epoch,
  kind: d.kind === "exit" ? "graceful" : d.detector === "heartbeat" ? "silent" : "crash",
  cause: d.cause,
  lastSeenAtMs: state.clockMs - Liveness.silentMs(state.liveness, d.rank, state.clockMs),
  reportedAtMs: d.reportedAtMs,
  declaredAtMs: state.clockMs,
  remainderSamples: 0,
  redoneSamples: trainedUncommitted(state, d.rank),
  redistributed: false
})

/**
 * Declares one batch of departures: deaths found in one tick (reports first, then stale ranks), or
 * a single clean exit mid-run. Commands come out in the order of docs/design.md §3.10.
 */
export const declareBatch = (state: State, batch: ReadonlyArray<Departure>, cmds: Array<Command>): void => {
  // Long because its steps are docs/design.md §3.10's in that order, and the order is the rule.
  const { membership, config } = state
  // Once the last epoch is audited and only its model is owed, departures move nothing.
  const finishing = state.phase === "running" && state.epochModel?.finishing === true
  const running = state.phase === "running" && !finishing
  const rolesBefore = { ...state.roles }
  const alerts: Array<Command> = []
  const remainders: Array<{ readonly rank: Rank; readonly death: Death | undefined; readonly ranges: Array<readonly [number, number]> }> =
    []
  let checkpointMoved = false
  const anyDeath = batch.some((d) => d.kind === "death")
  const leaves: Array<Leave> = []
  if (running) state.roundDisturbed = true

  // 1. For each departing rank, in order: alert, remainder, ledger, activeCount, roles.
  for (const d of batch) {
    let death: Death | undefined
    if (d.kind === "death") {
      death = {
        rank: d.rank,
        epoch: state.epoch,
        detector: d.detector,
        cause: d.cause,
        stack: d.crash?.stack,
        reportedAtMs: d.reportedAtMs,
        declaredAtMs: state.clockMs,
        remainderSamples: 0,
        extensions: 0,
        afterEnd: !running
      }
      state.deaths.push(death)
      // After the end the epoch is closed (completed) or stopped (its deaths are in the outcome).
      if (running) state.epochDeaths.push(death)
      if (running && d.crash !== undefined) noteCrash(state, d.rank, d.crash)
      alert(state, alerts, "RankLost", path(state, d.rank), `rank ${d.rank} lost (${d.detector}): ${d.cause}`)
    } else {
      state.exits.push(d.rank)
      if (running) state.epochExits.push(d.rank)
    }
    const ranges = running && state.assignments !== undefined ? Assignments.remainder(state.assignments, d.rank) : []
    if (death !== undefined) death.remainderSamples = ranges.reduce((sum, [, size]) => sum + size, 0)
    if (running) {
      const leave = leaveOf(state, d)
      leave.remainderSamples = ranges.reduce((sum, [, size]) => sum + size, 0)
      state.leaves.push(leave)
      leaves.push(leave)
    }
    remainders.push({ rank: d.rank, death, ranges })
    if (Membership.isLive(membership, d.rank)) leaveRound(state, d.rank)
    // A joiner that dies before it entered the rounds was never a member: not a failure of the limit.
    if (running && d.kind === "death" && state.joining.has(d.rank)) state.counters.joinersLost += 1
    state.joining.delete(d.rank)
    state.unreachable.delete(d.rank)
    state.takenBack.delete(d.rank)
    state.takenBackSilentMs.delete(d.rank)
    Roles.forget(state.calibration, d.rank)
    Liveness.unwatch(state.liveness, d.rank)
    if (d.kind === "death") Membership.declareDead(membership, d.rank)
    else Membership.markExited(membership, d.rank)
    if (!running) {
      // After the end nothing fails over, but a checkpoint its holder died with is said lost
      // (the last epoch's checkpoint is asked as the run completes).
      const pending = state.checkpoint
      if (d.kind === "death" && pending !== undefined && pending.rank === d.rank) {
        state.checkpoint = undefined
        alert(
          state,
          alerts,
          "CheckpointFailed",
          "root",
          `checkpoint ${pending.version} not saved: rank ${d.rank} died with it pending after the run ended`
        )
      }
      continue
    }
    moveRoles(state, d.rank)
    if (state.checkpoint !== undefined && state.checkpoint.rank === d.rank) {
      checkpointMoved =
        failoverCheckpoint(state, alerts, `rank ${d.rank} ${d.kind === "death" ? "died" : "exited"} with it pending`, false) ||
        checkpointMoved
    }
  }
  cmds.push(...alerts)
  if (finishing) {
    // The asked member left: another one is asked, or with none left the run completes without it.
    if (EpochModel.reissue(state, new Set(batch.map((d) => d.rank)), cmds)._tag === "Settled") complete(state, cmds)
    return
  }
  if (!running) return
  if (state.ring !== undefined) discardRingRound(state)
  maybeResolveFastest(state)

  // 3. (decided before anything is sent) Is the run now unrecoverable?
  const verdict = unrecoverableReason(state, anyDeath)
  if (verdict === undefined && Roles.differ(rolesBefore, state.roles)) {
    broadcast(
      cmds,
      { _tag: "SetRoles", ...state.roles },
      `roles move away from ${batch.length === 1 ? "rank" : "ranks"} ${batch.map((d) => d.rank).join(", ")}`
    )
  }
  // 2. Ring: abort in-flight collectives.
  if (state.ring !== undefined) {
    for (const d of batch) if (d.kind === "death") broadcast(cmds, { _tag: "DeclareDead", rank: d.rank }, `rank ${d.rank} is dead`)
  }
  if (verdict !== undefined) {
    saveAndStop(state, cmds, verdict.reason, verdict.detail)
    return
  }
  for (const leave of leaves) leave.redistributed = true

  // 4. Redistribute every remainder over the survivors as they stand after the whole batch.
  const a = state.assignments
  if (a !== undefined) {
    // Joiners take remainders from the round after their welcome, unless no one else is left.
    const joining = state.joining
    const skipJoining = joining.size > 0 && memberCount(state) > 0
    const survivorCount = skipJoining ? memberCount(state) : membership.activeCount
    const throughput = config.redistribution === "throughput" && state.calibration.calibratedLive === membership.activeCount
    const ranks = throughput ? Membership.survivors(membership).filter((r) => !skipJoining || !joining.has(r)) : []
    const weights = throughput ? ranks.map((r) => 1 / Roles.smoothedMsPerBatch(state.calibration, r)!) : []
    const nextLive = (from: number) => {
      let r = Membership.nextLive(membership, from)
      while (skipJoining && joining.has(r)) r = Membership.nextLive(membership, r + 1)
      return r
    }
    // One command per dead rank, its slices in range order. Its ranges are laid end to end and
    // split as one (`Split.spreadEqual`): split range by range, a remainder of k ranges gave each
    // survivor k more, and under constant churn the lists splintered into one-sample ranges
    // (8,595 of them in one remainder at 256 ranks, each death then blocking the coordinator).
    for (const { rank: from, death, ranges } of remainders) {
      if (ranges.length === 0) continue
      const reason = `remainder of rank ${from} in ${ranges.length} ${ranges.length === 1 ? "range" : "ranges"} (${throughput ? "throughput" : "equal"} split over ${survivorCount} ${survivorCount === 1 ? "survivor" : "survivors"})`
      const all = throughput
        ? Split.spreadProportional(ranges, ranks, weights)
        : Split.spreadEqual(ranges, survivorCount, membership.worldSize, nextLive)
      for (let i = 0; i < all.ranks.length; i++) extendLive(state, a, all.ranks[i]!, all.offsets[i]!, all.sizes[i]!)
      if (all.ranks.length > 0) cmds.push({ _tag: "SendRanges", kind: "ExtendPartition", epoch: state.epoch, ...all, reason })
      if (death !== undefined) death.extensions += all.ranks.length
    }
  }
  if (state.pool !== undefined) {
    for (const { rank, death } of remainders) {
      const moved = ChunkPool.forfeit(state.pool, rank)
      ChunkPool.retire(state.pool, rank)
      const samples = moved.reduce((sum, r) => sum + r.size, 0)
      if (death !== undefined) death.remainderSamples = samples
      const leave = leaves.find((l) => l.rank === rank)
      if (leave !== undefined) leave.remainderSamples = samples
    }
  }

  // 5. Re-rendezvous the ring (a joiner whose model was to come from a departed rank is asked for
  // from another member first); wake idle survivors; re-send a moved checkpoint.
  if (state.ring !== undefined) {
    const departed = new Set(batch.map((d) => d.rank))
    if (!reissueModels(state, departed, cmds, state.ring.generation + 1)) return
    EpochModel.reissue(state, departed, cmds)
    formRing(state, cmds, `re-rendezvous without rank${batch.length === 1 ? "" : "s"} ${batch.map((d) => d.rank).join(", ")}`)
  }
  wake(state, cmds, `take the chunks reclaimed from ranks ${batch.map((d) => d.rank).join(", ")}`)
  if (checkpointMoved && state.checkpoint !== undefined) {
    send(
      cmds,
      state.checkpoint.rank,
      { _tag: "Checkpoint", version: state.checkpoint.version },
      `checkpoint ${state.checkpoint.version} fails over to rank ${state.checkpoint.rank}`
    )
  }
  // A round may now close without the departed ranks.
  maybeCloseRound(state, cmds)
}
