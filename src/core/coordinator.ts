/**
 * The coordinator as a deterministic state machine: `step(state, input)` applies one input and
 * returns the commands to carry out (DESIGN.md §3). No I/O, no clock, no randomness: time enters
 * as `nowMs`, and the actor shell in `actors/coordinator.ts` runs the commands.
 *
 * Averaging rounds (DESIGN.md §3.3, §3.10): with the `cpu` backend a round's contributions are
 * `Params` frames, committed as they arrive, and the round closes when every survivor holding
 * uncommitted work contributed. With the `ring` backend (issue 15) they are `RoundDone` frames of
 * the current ring generation and round (others are counted in `staleRoundDone`); the round closes
 * when every ring member (every survivor: each death or exit re-forms the ring) reported, and only
 * then are the reports committed, all at once, through the same path as `Params`; a death or exit
 * before that discards them (the new generation redoes the round) and a run that stops commits
 * nothing of an incomplete ring round. The close emits `AverageRound` with the generation and no
 * parameters, which the shell sends as `RoundCommitted`.
 *
 * The whole death chain lives in `declareBatch`, in the order of DESIGN.md §3.2. The state and its
 * queries are in `state.ts`, epoch planning in `epochs.ts`, mid-run joins in `joins.ts` (issue 17), the shared verbs in `emit.ts`, and the
 * input, command and outcome types in `inputs.ts` and `outcome.ts`; this module re-exports what
 * users need, so `Coordinator.*` is the whole public API.
 *
 * @since 0.1.0
 */
import * as Alerts from "./alerts.ts"
import * as Assignments from "./assignments.ts"
import * as Audit from "./audit.ts"
import * as ChunkPool from "./chunk-pool.ts"
import * as Config from "./config.ts"
import * as Liveness from "./liveness.ts"
import * as Membership from "./membership.ts"
import type { Rank, SaveReason, ToCoordinator, ToRank } from "./messages.ts"
import * as Roles from "./roles.ts"
import * as Split from "./split.ts"

import { alert, broadcast, causeText, extendLive, formRing, hasUncommitted, leaveRound, memberCount, path, send, tracked } from "./emit.ts"
import { epochDone, startEpoch, wake } from "./epochs.ts"
import type { Command, Input } from "./inputs.ts"
import { enterRounds, lowestEligible, onJoin, vacateAbsent } from "./joins.ts"
import type { Death, EpochSummary, Outcome } from "./outcome.ts"
import type { Resume, State } from "./state.ts"

export { causeText } from "./emit.ts"
export type { Command, DeathCause, Input, JoinRefusal } from "./inputs.ts"
export type { Counters, Death, EpochSummary, EvalRecord, JoinRecord, Outcome, RepeatedCrash } from "./outcome.ts"
export { joinVerdict } from "./joins.ts"
export { zeroCounters } from "./outcome.ts"
export type { Resume, State } from "./state.ts"
export { activeCount, assignment, committedSamples, expiring, failures, forEachSurvivor, isDead, isJoining, isLive, isVacant, make, nextSurvivor, ringMembers, scanWork, survivors } from "./state.ts"

// ---------------------------------------------------------------------------------------------
// Ending epochs and the run
// ---------------------------------------------------------------------------------------------

const finish = (
  state: State,
  cmds: Array<Command>,
  status: Outcome["status"],
  reason: SaveReason | undefined,
  detail: string,
  midEpoch: boolean
): void => {
  state.phase = status
  for (const record of Alerts.flush(state.lane, state.clockMs)) cmds.push({ _tag: "Alert", alert: record })
  const outcome: Outcome = {
    status,
    reason,
    detail,
    endedAtMs: state.clockMs,
    epochsCompleted: state.firstEpoch + state.summaries.length,
    failures: Membership.deadRanks(state.membership),
    exits: [...state.exits],
    deaths: [...state.deaths],
    epochs: [...state.summaries],
    evals: [...state.evals],
    uncommitted: midEpoch ? { epoch: state.epoch, ranges: Audit.uncommitted(state.log) } : undefined,
    counters: { ...state.counters },
    repeatedCrash: state.repeatedCrash,
    ...(state.joins.length > 0 ? { joins: [...state.joins] } : {})
  }
  state.outcome = outcome
  cmds.push({ _tag: "RunEnded", outcome })
}

const endEpoch = (state: State, cmds: Array<Command>): void => {
  const { config } = state
  const result = Audit.audit(state.log)
  const summary: EpochSummary = {
    ...result,
    deaths: [...state.epochDeaths],
    exits: [...state.epochExits],
    startedAtMs: state.epochStartedMs,
    endedAtMs: state.clockMs
  }
  state.summaries.push(summary)
  cmds.push({ _tag: "EpochEnded", summary })
  const ended = state.epoch
  const number = ended + 1
  if (config.evalEveryEpochs > 0 && number % config.evalEveryEpochs === 0) {
    const holder = state.roles.eval
    if (Membership.isLive(state.membership, holder)) send(cmds, holder, { _tag: "Eval", epoch: ended }, `eval after epoch ${ended}`)
    else alert(state, cmds, "CallbackSkipped", path(state, holder), `eval after epoch ${ended} skipped: its pinned rank ${holder} is not live`)
  }
  if (config.checkpointEveryEpochs > 0 && number % config.checkpointEveryEpochs === 0) {
    // A newer checkpoint supersedes a pending one; a late result for the old one counts as stale.
    const holder = state.roles.checkpoint
    state.checkpoint = { version: ended, rank: holder, tried: new Set([holder]) }
    if (Membership.isLive(state.membership, holder)) send(cmds, holder, { _tag: "Checkpoint", version: ended }, `checkpoint after epoch ${ended}`)
    else failoverCheckpoint(state, cmds, `its holder ${holder} is not live`, true)
  }
  if (number >= config.epochs) {
    const trained = config.epochs === 1 ? "the one epoch trained" : `all ${config.epochs} epochs trained`
    broadcast(cmds, { _tag: "Shutdown" }, trained)
    finish(state, cmds, "completed", undefined, `${trained} and audited`, false)
    return
  }
  state.epoch = number
  startEpoch(state, cmds)
}

// ---------------------------------------------------------------------------------------------
// Averaging rounds
// ---------------------------------------------------------------------------------------------

/**
 * Commits a contribution's samples (DESIGN.md §3.3): the rank's static list up to `samplesDone`
 * (clamped and counted above the assignment; never backwards), or every chunk it completed
 * (progressive). Shared by `Params` (cpu, at receipt) and ring rounds (at the close).
 */
const commitContribution = (state: State, rank: Rank, samplesDone: number, cmds: Array<Command>): void => {
  const log = state.log
  tracked(state, rank, () => {
    if (state.pool !== undefined) {
      ChunkPool.commit(state.pool, rank, (range) => Audit.record(log, rank, range.offset, range.size))
    } else if (state.assignments !== undefined) {
      const result = Assignments.commit(state.assignments, rank, samplesDone, (o, s) => Audit.record(log, rank, o, s))
      if (result.clamped) {
        state.counters.samplesDoneClamped += 1
        alert(state, cmds, "Overflow", path(state, rank), `samplesDone ${samplesDone} above the ${Assignments.assignedLength(state.assignments, rank)} samples assigned; clamped`)
      }
    }
  })
}

/**
 * Ring backend (issue 15): the open round closes once every ring member (every survivor: each
 * death or exit re-forms the ring) reported `RoundDone` for the current generation. Only then are
 * the reporters' samples committed, all in one go through the same path as `Params`, so a sample
 * counts exactly when its parameters were folded into a completed round (DESIGN.md §3.3).
 */
const maybeCloseRingRound = (state: State, cmds: Array<Command>): void => {
  const ring = state.ring!
  const reports = state.ringReports
  if (state.phase !== "running" || reports.size === 0 || reports.size < memberCount(state)) return
  const contributors = [...reports.keys()]
  for (const [rank, samplesDone] of reports) commitContribution(state, rank, samplesDone, cmds)
  cmds.push({
    _tag: "AverageRound",
    epoch: state.epoch,
    round: state.round,
    openedAtMs: state.roundOpenedMs ?? state.clockMs,
    contributors,
    params: [],
    generation: ring.generation,
    reason: `round ${state.round} closed: every member of ring generation ${ring.generation} reported RoundDone`
  })
  for (const rank of contributors) state.contributed[rank] = 0
  reports.clear()
  state.round += 1
  state.roundOpenedMs = undefined
  state.pendingRequired = state.uncommittedLive
  enterRounds(state, cmds)
  if (epochDone(state)) endEpoch(state, cmds)
}

/**
 * A death or exit discards the open ring round's reports (issue 15): the collective they finished
 * is never applied (no `RoundCommitted` follows), nothing of it was committed, and the new
 * generation redoes the round from each rank's pre-round parameters.
 */
const discardRingRound = (state: State): void => {
  if (state.ringReports.size === 0) return
  for (const rank of state.ringReports.keys()) state.contributed[rank] = 0
  state.ringReports.clear()
  state.roundOpenedMs = undefined
}

const onRoundDone = (state: State, rank: Rank, round: number, generation: number, samplesDone: number, cmds: Array<Command>): void => {
  const ring = state.ring
  if (ring === undefined || generation !== ring.generation || round !== state.round || state.ringReports.has(rank) || state.joining.has(rank)) {
    state.counters.staleRoundDone += 1
    return
  }
  state.ringReports.set(rank, samplesDone)
  state.contributed[rank] = 1 // waiting on the round (the launcher's progress shows it)
  state.roundOpenedMs ??= state.clockMs
  maybeCloseRingRound(state, cmds)
}

/** Closes the open round with the contributions it has: `AverageRound`, and the next round opens. */
const closeRound = (state: State, cmds: Array<Command>, reason: string): void => {
  const contributors = [...state.contributions.keys()]
  const params = [...state.contributions.values()].filter((p): p is Float32Array => p !== undefined)
  cmds.push({ _tag: "AverageRound", epoch: state.epoch, round: state.round, openedAtMs: state.roundOpenedMs ?? state.clockMs, contributors, params, reason })
  for (const rank of contributors) state.contributed[rank] = 0
  state.contributions.clear()
  state.round += 1
  state.roundOpenedMs = undefined
  enterRounds(state, cmds)
  state.pendingRequired = state.uncommittedLive
}

const maybeCloseRound = (state: State, cmds: Array<Command>): void => {
  if (state.ring !== undefined) return maybeCloseRingRound(state, cmds)
  if (state.phase !== "running" || state.pendingRequired > 0 || state.contributions.size === 0) return
  closeRound(state, cmds, `round ${state.round} closed: every survivor holding uncommitted work contributed`)
  if (epochDone(state)) endEpoch(state, cmds)
}

/**
 * A run that stops mid-epoch first closes its open round with the contributions it has (issue 13):
 * their samples are committed already, so the survivors' last `Update` (what they save as the
 * resumable model) must hold them, and `Outcome.uncommitted` is exactly what it lacks.
 */
const closeOpenRound = (state: State, cmds: Array<Command>, reason: string): void => {
  // A ring round that did not complete is not a round: nothing of it is committed (issue 15).
  if (state.ring !== undefined) return discardRingRound(state)
  if (state.started && state.contributions.size > 0) closeRound(state, cmds, reason)
}

const onParams = (state: State, rank: Rank, samplesDone: number, params: Float32Array, cmds: Array<Command>): void => {
  commitContribution(state, rank, samplesDone, cmds)
  if (state.contributed[rank] === 0) {
    state.contributed[rank] = 1
    if (hasUncommitted(state, rank)) state.pendingRequired -= 1
  }
  state.paramsLength ??= params.length
  let usable = params.length === state.paramsLength
  for (let i = 0; usable && i < params.length; i++) usable = Number.isFinite(params[i]!)
  if (!usable) {
    state.counters.paramsRejected += 1
    const why = params.length === state.paramsLength ? "non-finite values" : `${params.length} values instead of ${state.paramsLength}`
    alert(state, cmds, "BadParams", path(state, rank), `rank ${rank}'s parameters for round ${state.round} left out of the average: ${why}`)
  }
  // The samples are committed either way: they were trained; only the parameters are not averaged.
  state.contributions.set(rank, usable ? params : undefined)
  state.roundOpenedMs ??= state.clockMs
  maybeCloseRound(state, cmds)
}

// ---------------------------------------------------------------------------------------------
// Roles and checkpoints
// ---------------------------------------------------------------------------------------------

/** Moves the roles away from a rank that died or exited (DESIGN.md §3.5; joiners: issue 17). */
const moveRoles = (state: State, gone: Rank): void => {
  const { roles, membership } = state
  if (state.config.rolePolicy === "fastest") {
    const holders = [roles.checkpoint, roles.eval, roles.epochFn]
    if (!holders.includes(gone)) return
    const next = state.calibration.calibratedLive < membership.activeCount ? lowestEligible(state) : Roles.resolveFastest(state.calibration, membership)
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
const failoverCheckpoint = (state: State, cmds: Array<Command>, why: string, sendNow: boolean): boolean => {
  const pending = state.checkpoint
  if (pending === undefined) return false
  const m = state.membership
  let next = Membership.nextLive(m, 0)
  // A pinned policy's checkpoint never fails over to a rank that joined mid-run (issue 17).
  const pinned = state.config.rolePolicy !== "fastest"
  while (next < m.worldSize && (pending.tried.has(next) || (pinned && state.lateJoiner[next] === 1))) next = Membership.nextLive(m, next + 1)
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

const maybeResolveFastest = (state: State): boolean => {
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
  // but the role moves with the resolution: the next checkpoint goes to the fastest (DESIGN.md §3.5).
  return Roles.differ(before, state.roles)
}

// ---------------------------------------------------------------------------------------------
// Unrecoverable runs
// ---------------------------------------------------------------------------------------------

const unrecoverableReason = (state: State, checkFailureLimit: boolean): { reason: SaveReason; detail: string } | undefined => {
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
    // A fraction is of the ranks that ever joined (issue 17): `worldSize` for a run that never grows.
    const limit = Config.failureLimitCount(config.failureLimit, membership.joined)
    if (limit !== undefined && membership.failures >= limit) {
      const failures = `${membership.failures} ${membership.failures === 1 ? "failure" : "failures"}`
      return { reason: "FailureLimitReached", detail: `${failures} reached the failure limit of ${limit}` }
    }
  }
  // Joiners not yet in the ring do not count: the ring re-forms without them (issue 17).
  if (config.backend === "ring" && memberCount(state) < 2) {
    return { reason: "SingleSurvivor", detail: `the ring backend needs 2 survivors in the ring, ${memberCount(state)} left` }
  }
  if (config.backend === "cpu" && membership.activeCount === 0) {
    return { reason: "AllRanksLost", detail: "no survivor left" }
  }
  return undefined
}

/** Sends `ShutdownWithSave` at most once per run and ends it (DESIGN.md §3.6). */
const saveAndStop = (state: State, cmds: Array<Command>, reason: SaveReason, detail: string): void => {
  if (state.shutdownSent || state.phase !== "running") return
  state.shutdownSent = true
  closeOpenRound(state, cmds, `round ${state.round} closed early: the run stops (${reason})`)
  if (state.membership.activeCount > 0) broadcast(cmds, { _tag: "ShutdownWithSave", reason }, detail)
  finish(state, cmds, "unrecoverable", reason, detail, true)
}

/**
 * An external shutdown request (DESIGN.md §1 save reason `GracefulShutdown`): the survivors save
 * and stop, through the same once-per-run `ShutdownWithSave` as an unrecoverable run (§3.6).
 */
const onShutdownRequested = (state: State, cmds: Array<Command>, detail: string): void => {
  if (state.shutdownSent || state.phase !== "running") return
  state.shutdownSent = true
  closeOpenRound(state, cmds, `round ${state.round} closed early: the run stops (GracefulShutdown)`)
  if (state.started && state.membership.activeCount > 0) broadcast(cmds, { _tag: "ShutdownWithSave", reason: "GracefulShutdown" }, detail)
  finish(state, cmds, "interrupted", "GracefulShutdown", detail, state.started)
}

// ---------------------------------------------------------------------------------------------
// The death chain (DESIGN.md §3.2)
// ---------------------------------------------------------------------------------------------

interface Departure {
  readonly rank: Rank
  readonly kind: "death" | "exit"
  readonly detector: "supervisor" | "heartbeat"
  readonly cause: string
  readonly reportedAtMs: number
  /** A `Crashed` report's error, stack and fingerprint. */
  readonly crash?: { readonly error: string; readonly stack: string | undefined; readonly fingerprint: string | undefined }
}

/** Records a crash while the run goes on; the first one seen on a second rank is the repeat. */
const noteCrash = (state: State, rank: Rank, crash: NonNullable<Departure["crash"]>): void => {
  if (crash.fingerprint === undefined) return
  const first = state.crashes.get(crash.fingerprint)
  if (first === undefined) state.crashes.set(crash.fingerprint, { rank, error: crash.error, stack: crash.stack })
  else state.repeatedCrash ??= { ranks: [first.rank, rank], error: first.error, stack: first.stack ?? crash.stack }
}

/**
 * Declares one batch of departures: deaths found in one tick (reports first, then stale ranks), or
 * a single clean exit mid-run. Commands come out in the order of DESIGN.md §3.10.
 */
const declareBatch = (state: State, batch: ReadonlyArray<Departure>, cmds: Array<Command>): void => {
  const { membership, config } = state
  const running = state.phase === "running"
  const rolesBefore = { ...state.roles }
  const alerts: Array<Command> = []
  const remainders: Array<{ readonly rank: Rank; readonly death: Death | undefined; readonly ranges: Array<readonly [number, number]> }> = []
  let checkpointMoved = false
  const anyDeath = batch.some((d) => d.kind === "death")

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
    remainders.push({ rank: d.rank, death, ranges })
    if (Membership.isLive(membership, d.rank)) leaveRound(state, d.rank)
    state.joining.delete(d.rank)
    Roles.forget(state.calibration, d.rank)
    Liveness.unwatch(state.liveness, d.rank)
    if (d.kind === "death") Membership.declareDead(membership, d.rank)
    else Membership.markExited(membership, d.rank)
    if (!running) continue
    moveRoles(state, d.rank)
    if (state.checkpoint !== undefined && state.checkpoint.rank === d.rank) {
      checkpointMoved = failoverCheckpoint(state, alerts, `rank ${d.rank} ${d.kind === "death" ? "died" : "exited"} with it pending`, false) ||
        checkpointMoved
    }
  }
  cmds.push(...alerts)
  if (!running) return
  if (state.ring !== undefined) discardRingRound(state)
  maybeResolveFastest(state)

  // 3. (decided before anything is sent) Is the run now unrecoverable?
  const verdict = unrecoverableReason(state, anyDeath)
  if (verdict === undefined && Roles.differ(rolesBefore, state.roles)) {
    broadcast(cmds, { _tag: "SetRoles", ...state.roles }, `roles move away from ${batch.length === 1 ? "rank" : "ranks"} ${batch.map((d) => d.rank).join(", ")}`)
  }
  // 2. Ring: abort in-flight collectives.
  if (state.ring !== undefined) {
    for (const d of batch) if (d.kind === "death") broadcast(cmds, { _tag: "DeclareDead", rank: d.rank }, `rank ${d.rank} is dead`)
  }
  if (verdict !== undefined) {
    saveAndStop(state, cmds, verdict.reason, verdict.detail)
    return
  }

  // 4. Redistribute every remainder over the survivors as they stand after the whole batch.
  const a = state.assignments
  if (a !== undefined) {
    // Joiners take remainders from the round after their welcome (issue 17), unless no one else is left.
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
    // One command per dead rank, its ranges' slices in range order: a remainder of thousands of
    // small ranges (deaths chained on deaths) is still one command.
    for (const { rank: from, death, ranges } of remainders) {
      const reason = `remainder of rank ${from} in ${ranges.length} ${ranges.length === 1 ? "range" : "ranges"} (${throughput ? "throughput" : "equal"} split over ${survivorCount} ${survivorCount === 1 ? "survivor" : "survivors"})`
      const parts: Array<Split.Slices> = []
      for (const [offset, size] of ranges) {
        const slices = throughput
          ? Split.splitProportional(offset, size, ranks, weights)
          : Split.splitEqual(offset, size, survivorCount, membership.worldSize, nextLive)
        for (let i = 0; i < slices.ranks.length; i++) extendLive(state, a, slices.ranks[i]!, slices.offsets[i]!, slices.sizes[i]!)
        parts.push(slices)
      }
      if (parts.length === 0) continue
      const all = Split.concat(parts)
      if (all.ranks.length > 0) cmds.push({ _tag: "SendRanges", kind: "ExtendPartition", epoch: state.epoch, ...all, reason })
      if (death !== undefined) death.extensions += all.ranks.length
    }
  }
  if (state.pool !== undefined) {
    for (const { rank, death } of remainders) {
      const moved = ChunkPool.forfeit(state.pool, rank)
      ChunkPool.retire(state.pool, rank)
      if (death !== undefined) death.remainderSamples = moved.reduce((sum, r) => sum + r.size, 0)
    }
  }

  // 5. Re-rendezvous the ring; wake idle survivors; re-send a moved checkpoint.
  if (state.ring !== undefined) formRing(state, cmds, `re-rendezvous without ranks ${batch.map((d) => d.rank).join(", ")}`)
  wake(state, cmds, `take the chunks reclaimed from ranks ${batch.map((d) => d.rank).join(", ")}`)
  if (checkpointMoved && state.checkpoint !== undefined) {
    send(cmds, state.checkpoint.rank, { _tag: "Checkpoint", version: state.checkpoint.version }, `checkpoint ${state.checkpoint.version} fails over to rank ${state.checkpoint.rank}`)
  }
  // A round may now close without the departed ranks.
  maybeCloseRound(state, cmds)
}

// ---------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------

/**
 * Options of `start`. `paramsLength`: the parameter count agreed at formation (DESIGN.md §4
 * `Hello`); a contribution with another count is left out of the average (`BadParams`). Default:
 * the first contribution's count. `resume`: where a resumed run begins (issue 13). `absent`
 * (issue 17): indices of `[0, worldSize)` that had not joined when formation started (with
 * `minRanks < worldSize`); they are vacant and may join later through `Join`. Entries outside
 * `[0, worldSize)` and repeats are ignored; when fewer than `minRanks` ranks would be left, the
 * whole list is ignored and a `BadStart` alert says so (the shell starts only once `minRanks`
 * joined). Default: none absent.
 *
 * @since 0.1.0
 * @category steps
 */
export interface StartOptions {
  readonly paramsLength?: number
  readonly resume?: Resume
  readonly absent?: ReadonlyArray<Rank>
}

/**
 * `resume` checked against `config`: the same point with its ranges sorted, clipped to
 * `[0, epochSamples)` and merged, or one line saying what is wrong (`epoch` outside
 * `[0, epochs)`, `firstRound` not a non-negative safe integer, a range that is not two
 * non-negative safe integers). O(n log n) in the ranges.
 *
 * @since 0.1.0
 * @category steps
 */
export const normalizeResume = (config: Config.Config, resume: Resume): Resume | string => {
  if (!Number.isSafeInteger(resume.epoch) || resume.epoch < 0 || resume.epoch >= config.epochs) {
    return `resume epoch ${resume.epoch} is outside [0, ${config.epochs})`
  }
  if (!Number.isSafeInteger(resume.firstRound) || resume.firstRound < 0) return `resume firstRound ${resume.firstRound} must be an integer >= 0`
  for (const range of resume.committed) {
    if (range.length !== 2 || !range.every((v) => Number.isSafeInteger(v) && v >= 0)) {
      return `committed range [${range.join(", ")}] must be two integers >= 0`
    }
  }
  const committed = Audit.complement(Audit.complement(resume.committed, config.epochSamples), config.epochSamples)
  return { epoch: resume.epoch, firstRound: resume.firstRound, committed }
}

/**
 * Starts the run at `nowMs` (default: the time given to `make`): every rank counts as seen then,
 * the roles are announced to every rank, the ring is formed (ring backend), and epoch 0 is planned
 * (`StartEpoch` per rank, or the first chunks). Call once, before any `step`; a second call
 * returns nothing. The shell calls it when every rank has joined (`minRanks` of them, issue 17:
 * the others are `absent` and join later), so that slow starts (loading a dataset) never look like
 * stale ranks.
 *
 * @since 0.1.0
 * @category steps
 */
export const start = (state: State, nowMs?: number, options: StartOptions = {}): Array<Command> => {
  const cmds: Array<Command> = []
  if (state.started) return cmds
  if (nowMs !== undefined && nowMs > state.clockMs) {
    state.clockMs = nowMs
    state.liveness.lastSeenMs.fill(nowMs - state.liveness.pausedMs) // all equal: the list order stays valid
    state.epochStartedMs = nowMs
  }
  if (options.paramsLength !== undefined && Number.isSafeInteger(options.paramsLength) && options.paramsLength >= 0) {
    state.paramsLength = options.paramsLength
  }
  if (options.resume !== undefined) {
    const resume = normalizeResume(state.config, options.resume)
    if (typeof resume === "string") {
      alert(state, cmds, "BadResume", "root", `${resume}: the run starts at epoch 0`)
    } else {
      state.resume = resume
      state.epoch = resume.epoch
      state.firstEpoch = resume.epoch
      state.round = resume.firstRound
    }
  }
  if (options.absent !== undefined && options.absent.length > 0) vacateAbsent(state, cmds, options.absent)
  broadcast(cmds, { _tag: "SetRoles", ...state.roles }, `initial roles (${state.config.rolePolicy === "fastest" ? "fastest" : "pinned"} policy)`)
  formRing(state, cmds, "initial ring")
  state.started = true
  startEpoch(state, cmds)
  // A resumed epoch whose every sample the parent committed ends at once.
  if (epochDone(state) && state.phase === "running") endEpoch(state, cmds)
  return cmds
}

const onFrame = (state: State, rank: Rank, message: ToCoordinator, cmds: Array<Command>): void => {
  const { counters, membership } = state
  if (!Membership.inRange(membership, rank) || Membership.isVacant(membership, rank)) {
    // Out of range, or an index no rank has joined as yet (issue 17): not a rank of the run.
    counters.framesOutOfRange += 1
    return
  }
  if (Membership.isDead(membership, rank)) {
    counters.framesFromDead += 1
    return
  }
  if (Membership.isExited(membership, rank)) {
    counters.framesFromExited += 1
    return
  }
  Liveness.touch(state.liveness, rank, state.clockMs)
  if (state.phase !== "running") {
    // After the end, exits and the last eval are recorded; everything else decides nothing.
    if (message._tag === "Exiting") declareBatch(state, [{ rank, kind: "exit", detector: "supervisor", cause: "clean exit", reportedAtMs: state.clockMs }], cmds)
    else if (message._tag === "EvalResult") state.evals.push({ epoch: message.epoch, rank, accuracy: message.accuracy, loss: message.loss })
    else if (message._tag !== "Heartbeat" && message._tag !== "Hello") counters.framesAfterEnd += 1
    return
  }
  switch (message._tag) {
    case "Hello":
    case "Heartbeat":
    case "Crashing": // the coordinator actor folds it into the rank's death report
      return
    case "Progress": {
      if (message.epoch !== state.epoch) {
        counters.framesWrongEpoch += 1
        return
      }
      Roles.report(state.calibration, rank, message.msPerBatch)
      if (maybeResolveFastest(state)) {
        broadcast(cmds, { _tag: "SetRoles", ...state.roles }, `every live rank calibrated: roles go to the fastest, rank ${state.roles.eval}`)
      }
      return
    }
    case "ChunkDone": {
      const pool = state.pool
      if (message.epoch !== state.epoch) {
        counters.framesWrongEpoch += 1
        return
      }
      if (pool === undefined || !ChunkPool.complete(pool, rank, message.offset, message.size)) {
        counters.chunkDoneUnmatched += 1
        return
      }
      // A refill is at most chunksInflightMax chunks for one rank: plain Sends are cheaper than typed arrays here.
      const { chunkSamples, chunksInflightMax } = state.config
      while (ChunkPool.inflight(pool, rank) < chunksInflightMax) {
        const chunk = tracked(state, rank, () => ChunkPool.take(pool, rank, chunkSamples))
        if (chunk === undefined) break
        send(cmds, rank, { _tag: "AssignChunk", epoch: state.epoch, offset: chunk.offset, size: chunk.size }, "refill after ChunkDone")
      }
      return
    }
    case "Params": {
      if (message.epoch !== state.epoch) {
        counters.framesWrongEpoch += 1
        return
      }
      if (state.ring !== undefined) {
        // The ring backend's contributions are RoundDone reports (issue 15).
        counters.staleRoundDone += 1
        return
      }
      // The wire guarantees a safe integer; through the library API a fraction is rounded down.
      onParams(state, rank, Math.floor(message.samplesDone), message.params, cmds)
      return
    }
    case "RoundDone": {
      // Progressive mode commits by chunk, not by samplesDone: a ring member that never got a
      // chunk of this epoch (more survivors than samples) still knows only an older epoch, and its
      // report of the current (generation, round) is what the round waits for.
      if (message.epoch !== state.epoch && state.pool === undefined) {
        counters.framesWrongEpoch += 1
        return
      }
      onRoundDone(state, rank, message.round, message.generation, Math.floor(message.samplesDone), cmds)
      return
    }
    case "RingData":
      // Relayed by the shell before the core sees it (issue 15); never an input here.
      return
    case "Exiting": {
      declareBatch(state, [{ rank, kind: "exit", detector: "supervisor", cause: "clean exit", reportedAtMs: state.clockMs }], cmds)
      return
    }
    case "CheckpointResult": {
      const pending = state.checkpoint
      if (pending === undefined || pending.version !== message.version || pending.rank !== rank) {
        counters.staleCallbackResults += 1
        return
      }
      if (message.ok) state.checkpoint = undefined
      else failoverCheckpoint(state, cmds, `rank ${rank} failed: ${message.detail}`, true)
      return
    }
    case "EvalResult": {
      state.evals.push({ epoch: message.epoch, rank, accuracy: message.accuracy, loss: message.loss })
      return
    }
    case "RingReady": {
      const ring = state.ring
      if (ring === undefined || !ring.pending || message.generation !== ring.generation || ring.ready[rank] === 1 || state.joining.has(rank)) {
        counters.staleRingReady += 1
        return
      }
      ring.ready[rank] = 1
      ring.readyCount += 1
      if (ring.readyCount >= memberCount(state)) {
        ring.pending = false
        ring.attempts = 0
      }
      return
    }
  }
}

const onTick = (state: State, cmds: Array<Command>): void => {
  const { membership, counters, config } = state
  const batch: Array<Departure> = []
  const inBatch = new Set<Rank>()
  for (const report of state.pendingReports.splice(0)) {
    if (!Membership.isLive(membership, report.rank) || inBatch.has(report.rank)) {
      counters.reportsDropped += 1
      continue
    }
    inBatch.add(report.rank)
    const cause = report.cause
    batch.push({
      rank: report.rank,
      kind: "death",
      detector: "supervisor",
      cause: causeText(cause),
      reportedAtMs: report.nowMs,
      ...(cause._tag === "Crashed" ? { crash: { error: cause.error, stack: cause.stack, fingerprint: cause.fingerprint } } : {})
    })
  }
  for (const rank of Liveness.expired(state.liveness, state.clockMs, config.heartbeatTimeoutMs)) {
    if (inBatch.has(rank)) continue
    inBatch.add(rank)
    const silentMs = Liveness.silentMs(state.liveness, rank, state.clockMs)
    batch.push({ rank, kind: "death", detector: "heartbeat", cause: `no frame for ${silentMs} ms (timeout ${config.heartbeatTimeoutMs} ms)`, reportedAtMs: state.clockMs })
  }
  if (batch.length > 0) declareBatch(state, batch, cmds)
  if (state.phase !== "running") return
  const ring = state.ring
  if (ring !== undefined && ring.pending && state.clockMs - ring.startedMs > config.ringRendezvousTimeoutMs) {
    ring.attempts += 1
    if (ring.attempts >= config.ringRendezvousAttemptsMax) {
      saveAndStop(state, cmds, "ReduceStall", `ring rendezvous of generation ${ring.generation} failed ${ring.attempts} times`)
      return
    }
    formRing(state, cmds, `ring rendezvous of generation ${ring.generation} timed out (attempt ${ring.attempts})`)
  }
  if (config.roundStallMs > 0 && state.roundOpenedMs !== undefined && state.clockMs - state.roundOpenedMs > config.roundStallMs) {
    saveAndStop(state, cmds, "ReduceStall", `round ${state.round} open for more than ${config.roundStallMs} ms`)
  }
}

/**
 * The coordinator itself did not run for `gapMs` (its thread was blocked or its process stopped):
 * whatever the ranks sent meanwhile is still on its way in, so their silence during the gap is not
 * theirs. Liveness pauses for the gap; the rest of the core is unchanged (DESIGN.md §3.10).
 */
const onStall = (state: State, gapMs: number, cmds: Array<Command>): void => {
  Liveness.pause(state.liveness, gapMs)
  state.counters.coordinatorStalls += 1
  alert(state, cmds, "CoordinatorStall", "root", `the coordinator did not run for ${gapMs} ms (stall threshold ${state.config.coordinatorStallMs} ms); ranks' silence during it is not counted`)
}

const onSendFailed = (state: State, rank: Rank, message: ToRank, reason: string, cmds: Array<Command>): void => {
  state.counters.sendFailures += 1
  alert(state, cmds, "ControlDrop", Membership.inRange(state.membership, rank) ? path(state, rank) : "root", `${message._tag} to rank ${rank} failed: ${reason}`)
  if (message._tag === "AssignChunk" && state.pool !== undefined && message.epoch === state.epoch && state.phase === "running") {
    const pool = state.pool
    if (tracked(state, rank, () => ChunkPool.rollback(pool, rank, message.offset, message.size))) {
      wake(state, cmds, `take chunk (${message.offset},${message.size}) back from rank ${rank}`, rank)
    }
  }
}

/**
 * Applies one input and returns the commands to carry out, in order. Never throws for bad input:
 * frames from dead, exited or out-of-range ranks, frames for another epoch, unmatched chunks and
 * duplicate death reports are ignored and counted in `state.counters`.
 *
 * @since 0.1.0
 * @category steps
 */
export const step = (state: State, input: Input): Array<Command> => {
  const cmds: Array<Command> = []
  // The clock never runs back, and a time that is not a finite number is ignored (NaN > x is false).
  if (input.nowMs > state.clockMs && Number.isFinite(input.nowMs)) {
    const gapMs = input.nowMs - state.clockMs
    state.clockMs = input.nowMs
    const stallMs = state.config.coordinatorStallMs
    if (stallMs > 0 && gapMs > stallMs && state.started) onStall(state, gapMs, cmds)
  }
  switch (input._tag) {
    case "Frame":
      onFrame(state, input.rank, input.message, cmds)
      break
    case "BadFrame":
      state.counters.badFrames += 1
      if (Membership.isLive(state.membership, input.rank)) Liveness.touch(state.liveness, input.rank, state.clockMs)
      break
    case "DeathReport":
      if (Membership.isLive(state.membership, input.rank)) state.pendingReports.push({ rank: input.rank, nowMs: state.clockMs, cause: input.cause })
      else state.counters.reportsDropped += 1
      break
    case "SendFailed":
      onSendFailed(state, input.rank, input.message, input.reason, cmds)
      break
    case "Seen":
      if (Membership.isLive(state.membership, input.rank)) Liveness.touch(state.liveness, input.rank, state.clockMs)
      break
    case "Tick":
      onTick(state, cmds)
      break
    case "ShutdownRequested":
      onShutdownRequested(state, cmds, input.detail)
      break
    case "Join":
      onJoin(state, input.rank, cmds)
      break
  }
  return cmds
}
