/**
 * The coordinator as a deterministic state machine: `step(state, input)` applies one input and
 * returns the commands to carry out (docs/design.md §3). No I/O, no clock, no randomness: time enters
 * as `nowMs`, and the actor shell in `actors/coordinator/coordinator.ts` runs the commands.
 *
 * Averaging rounds (docs/design.md §3.3, §3.10): with the `cpu` backend a round's contributions are
 * `Params` frames, committed as they arrive, and the round closes when every survivor holding
 * uncommitted work contributed. With the `ring` backend they are `RoundDone` frames of
 * the current ring generation and round (others are counted in `staleRoundDone`); the round closes
 * when every ring member (every survivor: each death or exit re-forms the ring) reported, and only
 * then are the reports committed, all at once, through the same path as `Params`; a death or exit
 * before that discards them (the new generation redoes the round) and a run that stops commits
 * nothing of an incomplete ring round. The close emits `AverageRound` with the generation and no
 * parameters, which the shell sends as `RoundCommitted`.
 *
 * This module holds the steps (`start`, `step` and the handling of each input); the rest of the
 * core is one room per responsibility: the death chain in `deaths.ts` (`declareBatch`, in the order
 * of docs/design.md §3.2), averaging rounds in `rounds.ts`, roles and the checkpoint's failover in
 * `role-moves.ts`, the calls asked of ranks (their liveness holds) in `calls.ts`, ending epochs
 * and the run in `ending.ts`, unrecoverable runs in `stops.ts`,
 * epoch planning in `epochs.ts`, mid-run joins in `joins.ts`, the state and its queries
 * in `state.ts`, the shared verbs in `emit.ts`, and the input, command and outcome types in
 * `inputs.ts` and `outcome.ts`. This module re-exports what users need, so `Coordinator.*` is the
 * whole public API.
 *
 * @since 0.1.0
 */
import * as Audit from "./audit.ts"
import { blockingSilent, noteWork } from "./blocking-silence.ts"
import * as ChunkPool from "./chunk-pool.ts"
import * as Config from "./config.ts"
import * as Liveness from "./liveness.ts"
import * as Membership from "./membership.ts"
import type { Rank, ToCoordinator, ToRank } from "./messages.ts"
import * as Roles from "./roles.ts"

import { type Departure, declareBatch } from "./deaths.ts"
import { alert, broadcast, causeText, formRing, handed, memberCount, path, send, tracked } from "./emit.ts"
import { endEpoch } from "./ending.ts"
import { epochDone, isSaving, startEpoch, wake } from "./epochs.ts"
import type { Command, Input } from "./inputs.ts"
import { onJoin, vacateAbsent } from "./joins.ts"
import { onModel, reaskModels } from "./model-handover.ts"
import { holdCalls, releaseCall, staleCause } from "./calls.ts"
import { failoverCheckpoint, maybeResolveFastest } from "./role-moves.ts"
import { afterEpochModel, maybeCloseAtDeadline, maybeCloseRound, onOutlier, onParams, onRoundDone } from "./rounds.ts"
import { heardFrom, onParamsTakenBack, takeBackSilent } from "./take-back.ts"
import * as EpochModel from "./epoch-model.ts"
import type { PendingReport, Resume, State } from "./state.ts"
import { onShutdownRequested, saveAndStop } from "./stops.ts"

export { blockingSilent } from "./blocking-silence.ts"
export { causeText } from "./emit.ts"
export type { Command, DeathCause, Input, JoinRefusal } from "./inputs.ts"
export type { Counters, Death, EpochSummary, EvalRecord, JoinRecord, Leave, LeaveKind, Outcome, RepeatedCrash } from "./outcome.ts"
export { joinVerdict } from "./joins.ts"
export { zeroCounters } from "./outcome.ts"
export type { Resume, State } from "./state.ts"
export {
  activeCount,
  assignment,
  committedSamples,
  deadlineOf,
  expiring,
  failures,
  forEachSurvivor,
  isDead,
  isJoining,
  isLive,
  isOwedModel,
  isVacant,
  make,
  nextSurvivor,
  ringMembers,
  scanWork,
  setBeatsDuringCalls,
  survivors
} from "./state.ts"

// ---------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------

/**
 * Options of `start`. `paramsLength`: the parameter count agreed at formation (docs/design.md §4
 * `Hello`); a contribution with another count is left out of the average (`BadParams`). Default:
 * the first contribution's count. `resume`: where a resumed run begins. `absent`:
 * indices of `[0, worldSize)` that had not joined when formation started (with
 * `minRanks < worldSize`); they are vacant and may join later through `Join`. Entries outside
 * `[0, worldSize)` and repeats are ignored; when fewer than `minRanks` ranks would be left, the
 * whole list is ignored and a `BadStart` alert says so (the shell starts only once `minRanks`
 * joined). Default: none absent. `owedModel` (ring backend): an epoch that ended before a
 * takeover whose model the coordinator's host lacks while every member still holds it, as the
 * mean of round `round`: it is asked of a member at the start, as at an epoch's end (no ring
 * round closes until it is in). Default none.
 *
 * @since 0.1.0
 * @category steps
 */
export interface StartOptions {
  readonly paramsLength?: number
  readonly resume?: Resume
  readonly absent?: ReadonlyArray<Rank>
  readonly owedModel?: { readonly epoch: number; readonly round: number }
}

/**
 * `resume` checked against `config`: the same point with its ranges sorted, clipped to
 * `[0, epochSamples)` and merged, or one line saying what is wrong (`epoch` outside
 * `[0, epochs)`, `firstRound` or a given `generation` not a non-negative safe integer, a range
 * that is not two non-negative safe integers). O(n log n) in the ranges.
 *
 * @since 0.1.0
 * @category steps
 */
export const normalizeResume = (config: Config.Config, resume: Resume): Resume | string => {
  if (!Number.isSafeInteger(resume.epoch) || resume.epoch < 0 || resume.epoch >= config.epochs) {
    return `resume epoch ${resume.epoch} is outside [0, ${config.epochs})`
  }
  if (!Number.isSafeInteger(resume.firstRound) || resume.firstRound < 0)
    return `resume firstRound ${resume.firstRound} must be an integer >= 0`
  const generation = resume.generation
  if (generation !== undefined && (!Number.isSafeInteger(generation) || generation < 0))
    return `resume generation ${generation} must be an integer >= 0`
  for (const range of resume.committed) {
    if (range.length !== 2 || !range.every((v) => Number.isSafeInteger(v) && v >= 0)) {
      return `committed range [${range.join(", ")}] must be two integers >= 0`
    }
  }
  const committed = Audit.complement(Audit.complement(resume.committed, config.epochSamples), config.epochSamples)
  return { epoch: resume.epoch, firstRound: resume.firstRound, committed, ...(generation === undefined ? {} : { generation }) }
}

/**
 * Starts the run at `nowMs` (default: the time given to `make`): every rank counts as seen then,
 * the roles are announced to every rank, the ring is formed (ring backend), and epoch 0 is planned
 * (`StartEpoch` per rank, or the first chunks). Call once, before any `step`; a second call
 * returns nothing. The shell calls it when every rank has joined (`minRanks` of them:
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
    state.roundClosedMs = nowMs
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
      state.firstRound = resume.firstRound
      state.round = resume.firstRound
      if (state.ring !== undefined && resume.generation !== undefined) state.ring.generation = resume.generation
    }
  }
  if (options.absent !== undefined && options.absent.length > 0) vacateAbsent(state, cmds, options.absent)
  broadcast(
    cmds,
    { _tag: "SetRoles", ...state.roles },
    `initial roles (${state.config.rolePolicy === "fastest" ? "fastest" : "pinned"} policy)`
  )
  formRing(state, cmds, "initial ring")
  state.started = true
  if (options.owedModel !== undefined && state.ring !== undefined)
    EpochModel.ask(state, cmds, options.owedModel.epoch, options.owedModel.round)
  startEpoch(state, cmds)
  // A resumed epoch whose every sample the parent committed ends at once.
  if (epochDone(state) && state.phase === "running") endEpoch(state, cmds)
  holdCalls(state, cmds)
  return cmds
}

/** Records an eval's result when `rank` was asked for that epoch's eval and has not answered yet. */
const onEvalResult = (state: State, rank: Rank, message: Extract<ToCoordinator, { _tag: "EvalResult" }>): void => {
  if (state.evalsAsked.get(message.epoch) !== rank) {
    state.counters.staleCallbackResults += 1
    return
  }
  state.evalsAsked.delete(message.epoch)
  state.evals.push({ epoch: message.epoch, rank, accuracy: message.accuracy, loss: message.loss })
}

/**
 * A `CheckpointResult` after the run ended (the last epoch's checkpoint is asked as the run
 * completes): the pending checkpoint's result is recorded, a failure as a `CheckpointFailed` alert
 * (nothing fails over after the end); any other is a stale callback result.
 */
const onLateCheckpointResult = (
  state: State,
  rank: Rank,
  message: Extract<ToCoordinator, { _tag: "CheckpointResult" }>,
  cmds: Array<Command>
): void => {
  const pending = state.checkpoint
  if (pending === undefined || pending.version !== message.version || pending.rank !== rank) {
    state.counters.staleCallbackResults += 1
    return
  }
  state.checkpoint = undefined
  if (!message.ok)
    alert(
      state,
      cmds,
      "CheckpointFailed",
      "root",
      `checkpoint ${pending.version} not saved: rank ${rank} failed after the run ended: ${message.detail}`
    )
}

const onFrame = (state: State, rank: Rank, message: ToCoordinator, cmds: Array<Command>): void => {
  // Long because it is the one dispatch over every frame a rank sends; each case is a few lines.
  const { counters, membership } = state
  if (!Membership.inRange(membership, rank) || Membership.isVacant(membership, rank)) {
    // Out of range, or an index no rank has joined as yet: not a rank of the run.
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
  if (state.takenBackSilentMs.size > 0) heardFrom(state, rank)
  Liveness.touch(state.liveness, rank, state.clockMs)
  // A rank a send failed to is heard from again: it takes chunks again, at once if it is idle.
  const reachedAgain = state.unreachable.size > 0 && state.unreachable.delete(rank)
  if (reachedAgain && state.phase === "running") wake(state, cmds, `rank ${rank} is reachable again`)
  if (state.phase !== "running") {
    // After the end, exits and the last eval are recorded; everything else decides nothing.
    if (message._tag === "Exiting")
      declareBatch(state, [{ rank, kind: "exit", detector: "supervisor", cause: "clean exit", reportedAtMs: state.clockMs }], cmds)
    else if (message._tag === "EvalResult") onEvalResult(state, rank, message)
    else if (message._tag === "CheckpointResult") onLateCheckpointResult(state, rank, message, cmds)
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
      const reported = state.reportedDone.get(rank)
      if (reported === undefined) state.reportedDone.set(rank, { epoch: message.epoch, samplesDone: message.samplesDone })
      else {
        reported.epoch = message.epoch
        reported.samplesDone = message.samplesDone
      }
      if (maybeResolveFastest(state)) {
        broadcast(
          cmds,
          { _tag: "SetRoles", ...state.roles },
          `every live rank calibrated: roles go to the fastest, rank ${state.roles.eval}`
        )
      }
      return
    }
    case "ChunkDone": {
      const pool = state.pool
      if (message.epoch !== state.epoch) {
        counters.framesWrongEpoch += 1
        return
      }
      if (state.takenBack.get(rank)?.owed.delete(message.offset) === true) return
      if (pool === undefined || !ChunkPool.complete(pool, rank, message.offset, message.size)) {
        counters.chunkDoneUnmatched += 1
        return
      }
      // A refill is at most chunksInflightMax chunks for one rank: plain Sends are cheaper than typed arrays here.
      const { chunkSamples, chunksInflightMax } = state.config
      while (ChunkPool.inflight(pool, rank) < chunksInflightMax && !isSaving(state, rank)) {
        const chunk = tracked(state, rank, () => ChunkPool.take(pool, rank, chunkSamples))
        if (chunk === undefined) break
        handed(state, rank)
        send(cmds, rank, { _tag: "AssignChunk", epoch: state.epoch, offset: chunk.offset, size: chunk.size }, "refill after ChunkDone")
      }
      return
    }
    case "Params": {
      if (state.ring !== undefined) {
        // The ring backend's contributions are RoundDone reports; a Params is the ended
        // epoch's model, or a joiner's model, from the member asked for it.
        const answered = EpochModel.onAnswer(state, rank, message.round, message.params, cmds)
        if (answered._tag === "Ignored" || [...state.modelOwed.values()].some((owed) => owed.from === rank)) {
          onModel(state, rank, message.round, message.params, cmds)
        }
        afterEpochModel(state, cmds, answered)
        return
      }
      if (message.epoch !== state.epoch) {
        counters.framesWrongEpoch += 1
        return
      }
      if (message.round < state.firstRound) {
        counters.staleRoundDone += 1
        return
      }
      if (state.takenBack.has(rank)) return onParamsTakenBack(state, rank)
      // The wire guarantees a safe integer; through the library API a fraction is rounded down.
      onParams(state, rank, Math.floor(message.samplesDone), message.params, cmds)
      return
    }
    case "RoundDone": {
      // Progressive mode commits by chunk, not by samplesDone: a ring member that never got a
      // chunk of this epoch (more survivors than samples) still knows only an older epoch, and its
      // report of the current (generation, round) is what the round waits for. So is, in static
      // mode, the report of a member that joined its neighbours' first round of this epoch as an
      // idle member before its StartEpoch reached it: it trained nothing of this epoch (the older
      // one's samples were all committed before this one started), so it counts with 0 samples.
      // Dropping it left the round waiting for a report that never came.
      if (message.epoch > state.epoch && state.pool === undefined) {
        counters.framesWrongEpoch += 1
        return
      }
      const samplesDone = message.epoch < state.epoch && state.pool === undefined ? 0 : Math.floor(message.samplesDone)
      onRoundDone(state, rank, message.round, message.generation, samplesDone, cmds)
      return
    }
    case "RingData": {
      // Relayed by the shell before the core sees it. A step of the open round in the
      // current generation shows its collective started: the round counts as open from then
      // (`roundStallMs`), as a cpu round from its first Params. Else a member that keeps sending
      // heartbeats but never its own steps would hold every other member's collective forever.
      const ring = state.ring
      if (
        ring !== undefined &&
        message.generation === ring.generation &&
        message.round === state.round &&
        !state.joining.has(rank) &&
        !state.modelOwed.has(rank)
      ) {
        state.roundOpenedMs ??= state.clockMs
      }
      return
    }
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
      // It took no chunk while it saved (`isSaving`): it takes them now.
      wake(state, cmds, `rank ${rank} is done with checkpoint ${message.version}`)
      return
    }
    case "EvalResult":
      onEvalResult(state, rank, message)
      return
    case "RingReady": {
      const ring = state.ring
      if (
        ring === undefined ||
        !ring.pending ||
        message.generation !== ring.generation ||
        ring.ready[rank] === 1 ||
        state.joining.has(rank) ||
        state.modelOwed.has(rank)
      ) {
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

/** A supervisor's death report (or an outlier verdict) as a departure of the death chain. */
const reportedDeath = (report: PendingReport): Departure => {
  const cause = report.cause
  return {
    rank: report.rank,
    kind: "death",
    detector: "supervisor",
    cause: causeText(cause),
    reportedAtMs: report.nowMs,
    ...(cause._tag === "Crashed" ? { crash: { error: cause.error, stack: cause.stack, fingerprint: cause.fingerprint } } : {})
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
    batch.push(reportedDeath(report))
  }
  for (const rank of Liveness.expired(state.liveness, state.clockMs)) {
    if (inBatch.has(rank)) continue
    inBatch.add(rank)
    batch.push({ rank, kind: "death", detector: "heartbeat", cause: staleCause(state, rank, cmds), reportedAtMs: state.clockMs })
  }
  for (const rank of blockingSilent(state)) {
    if (inBatch.has(rank)) continue
    inBatch.add(rank)
    const silentMs = Liveness.silentMs(state.liveness, rank, state.clockMs)
    const cause = `no frame for ${silentMs} ms while the run waited on it (blockingSilenceMs ${config.blockingSilenceMs})`
    batch.push({ rank, kind: "death", detector: "heartbeat", cause, reportedAtMs: state.clockMs })
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
    const timedOut = `ring rendezvous of generation ${ring.generation} timed out (attempt ${ring.attempts})`
    // A joiner whose asked member never answered holds the rendezvous up: ask another.
    if (state.modelOwed.size > 0) reaskModels(state, cmds, ring.generation + 1)
    formRing(state, cmds, timedOut)
  }
  maybeCloseAtDeadline(state, cmds)
  // A round that leaves silent ranks out may close as one turns silent, and the epoch's last
  // chunks go on without their silent holders.
  if (config.roundSilenceMs > 0 && state.phase === "running") {
    takeBackSilent(state, cmds)
    maybeCloseRound(state, cmds)
  }
  if (state.phase !== "running") return
  if (config.roundStallMs > 0 && state.roundOpenedMs !== undefined && state.clockMs - state.roundOpenedMs > config.roundStallMs) {
    saveAndStop(state, cmds, "ReduceStall", `round ${state.round} open for more than ${config.roundStallMs} ms`)
  }
}

/**
 * The coordinator itself did not run for `gapMs` (its thread was blocked or its process stopped):
 * whatever the ranks sent meanwhile is still on its way in, so their silence during the gap is not
 * theirs. Liveness pauses for the gap; the rest of the core is unchanged (docs/design.md §3.10).
 * The alert names the longest stall so far too: repeats fold into one record that keeps only the
 * last one's detail, which must not hide a long stall among short ones.
 */
const onStall = (state: State, gapMs: number, cmds: Array<Command>): void => {
  Liveness.pause(state.liveness, gapMs)
  state.counters.coordinatorStalls += 1
  state.longestStallMs = Math.max(state.longestStallMs, gapMs)
  alert(
    state,
    cmds,
    "CoordinatorStall",
    "root",
    `the coordinator did not run for ${gapMs} ms (stall threshold ${state.config.coordinatorStallMs} ms, longest so far ${state.longestStallMs} ms); ` +
      "ranks' silence during it is not counted"
  )
}

const onSendFailed = (state: State, rank: Rank, message: ToRank, reason: string, cmds: Array<Command>): void => {
  state.counters.sendFailures += 1
  if (Membership.isLive(state.membership, rank)) state.unreachable.add(rank)
  alert(
    state,
    cmds,
    "ControlDrop",
    Membership.inRange(state.membership, rank) ? path(state, rank) : "root",
    `${message._tag} to rank ${rank} failed: ${reason}`
  )
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
      if (Membership.isLive(state.membership, input.rank))
        state.pendingReports.push({ rank: input.rank, nowMs: state.clockMs, cause: input.cause })
      else state.counters.reportsDropped += 1
      break
    case "SendFailed":
      onSendFailed(state, input.rank, input.message, input.reason, cmds)
      break
    case "Seen":
      // The bytes arrived at `input.nowMs`, usually before the clock (the shell asks at a tick):
      // the rank's silence counts from then. A pinging link whose actor fell silent must not
      // get a whole timeout more from the tick that asked.
      if (Membership.isLive(state.membership, input.rank)) Liveness.seen(state.liveness, input.rank, Math.min(input.nowMs, state.clockMs))
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
    case "CoordinatorResource":
      alert(state, cmds, "CoordinatorResource", "root", input.detail)
      break
    case "Outlier": {
      const condemned = onOutlier(state, input.rank, input.round, input.detail, cmds)
      if (condemned !== undefined) declareBatch(state, [reportedDeath(condemned)], cmds)
      break
    }
  }
  if (input._tag === "Frame") {
    releaseCall(state, input.rank, input.message)
    noteWork(state, input.rank, input.message)
  }
  holdCalls(state, cmds)
  return cmds
}
