/**
 * What the launcher does with what the coordinator reports (`Coordinator.Hooks`): the journal's
 * events (progress with samples per second, evals, the epoch's lines, decisions, joins, rounds
 * with their loss), the alerts, and each declared death, timed from its fault.
 *
 * @since 0.1.0
 */
import * as Core from "../../src/core/coordinator.ts"
import * as Liveness from "../../src/core/liveness.ts"
import type { Rank, ToCoordinator } from "../../src/core/messages.ts"
import * as Transport from "../../src/transport/transport.ts"
import type * as Coordinator from "../coordinator/coordinator.ts"
import type { Context } from "./launcher-context.ts"
import * as Recover from "./recover.ts"
import type { DeathTiming, JoinCost, LeaveCost, RankState, RunEvent } from "../record/run-types.ts"
import * as StorageFault from "./storage-fault.ts"

/**
 * The journal's one decision for a ring generation's `FormRing`s (docs/design.md §3.10), which the core
 * sends one per member with the same reason: `FormRing generation G to ranks 0, 1, 3: <reason>`
 * (at most 16 ranks named, then how many more).
 */
const formRingDecision = (message: { readonly generation: number; readonly peers: ReadonlyArray<number> }, reason: string): string =>
  `FormRing generation ${message.generation} to ranks ${message.peers.slice(0, 16).join(", ")}${
    message.peers.length > 16 ? ` and ${message.peers.length - 16} more` : ""
  }: ${reason}`

const rankState = (state: Core.State, rank: Rank): RankState => {
  if (Core.isDead(state, rank)) return "dead"
  if (!Core.isLive(state, rank)) return "exited"
  return state.contributed[rank] === 1 ? "waiting" : "training"
}

/**
 * A rank asked for an epoch's eval answers before it reads the next epoch's start (the two come in
 * that order, and it handles one message at a time): a frame of a later epoch, or its exit, with
 * the eval unanswered says its trainer has no `evaluate`. The epochs whose line said "pending"
 * are told so (`noEval`), and later epoch lines say it at once.
 */
const noticeNoEval = (ctx: Context, rank: Rank, message: ToCoordinator, nowMs: number): void => {
  const later =
    message._tag === "Progress" || message._tag === "Params" || message._tag === "ChunkDone" || message._tag === "RoundDone"
      ? message.epoch
      : undefined
  const skipped = [...ctx.state.evalsAsked].filter(
    ([epoch, asked]) => asked === rank && (message._tag === "Exiting" || (later !== undefined && later > epoch))
  )
  if (skipped.length === 0) return
  ctx.vars.noEval = true
  for (const [epoch] of skipped) ctx.emit({ type: "noEval", ms: ctx.sinceStart(nowMs), epoch, rank })
}

/** A decoded frame from a rank: its progress (with samples per second), its eval, a failed checkpoint's disk. */
const onFrame =
  (ctx: Context) =>
  (rank: Rank, message: ToCoordinator, nowMs: number): void => {
    const { state, emit, roundLoss, roundLinks, trainedInEpoch, lastProgressEventMs, lastRate, sinceStart, storageFailed, runDir, vars } =
      ctx
    const { mode } = ctx.resolved
    // A frame from a rank that is not live (an admitted joiner before its Hello, a dead or
    // exited rank) changes nothing in the core: nor in the journal, the bars or the losses.
    if (!Core.isLive(state, rank)) return
    roundLoss.onFrame(rank, message)
    roundLinks.onFrame(rank, message)
    if (!vars.noEval && state.evalsAsked.size > 0) noticeNoEval(ctx, rank, message, nowMs)
    if (message._tag === "Progress" && message.epoch === state.epoch) {
      if (mode === "static") trainedInEpoch.set(rank, message.samplesDone)
      // A progressive rank's samplesDone (its static list's position) stays 0: its samples are
      // the chunks it completed in the epoch.
      const samplesDone = mode === "static" ? message.samplesDone : (trainedInEpoch.get(rank) ?? 0)
      const last = lastProgressEventMs.get(rank) ?? 0
      // Samples per second from successive reports (a batch's own time says nothing about the
      // waits between batches).
      const previous = lastRate.get(rank)
      // The first report of an epoch counts from the epoch's start (a batch's own time leaves
      // out every wait, and a tiny model trains a batch in microseconds).
      // (A progressive rank's samples grow a chunk at a time: its rate is the epoch's average.)
      const rate =
        mode === "static" && previous !== undefined && previous.epoch === message.epoch && nowMs > previous.ms
          ? ((samplesDone - previous.samples) * 1000) / (nowMs - previous.ms)
          : nowMs > vars.epochStartedMs
            ? (samplesDone * 1000) / (nowMs - vars.epochStartedMs)
            : 0
      lastRate.set(rank, { epoch: message.epoch, samples: samplesDone, ms: nowMs, rate: Math.max(0, rate) })
      const progress: RunEvent = {
        type: "progress",
        ms: sinceStart(nowMs),
        rank,
        epoch: message.epoch,
        samplesDone,
        samplesPerSecond: Math.max(0, rate),
        state: rankState(state, rank)
      }
      // The log keeps at most one progress line per rank per second; observers see them all.
      emit(progress, nowMs - last >= 1000)
      if (nowMs - last >= 1000) lastProgressEventMs.set(rank, nowMs)
    } else if ((message._tag === "Params" || message._tag === "RoundDone") && message.epoch === state.epoch && mode === "static") {
      trainedInEpoch.set(rank, Math.max(trainedInEpoch.get(rank) ?? 0, message.samplesDone))
    } else if (message._tag === "ChunkDone" && message.epoch === state.epoch) {
      trainedInEpoch.set(rank, (trainedInEpoch.get(rank) ?? 0) + message.size)
    } else if (message._tag === "EvalResult" && state.evalsAsked.get(message.epoch) === rank) {
      // The epoch's line went out with its accuracy pending; this is the accuracy. Only the
      // rank asked for that epoch's eval gives it (the core records no other: a rank that
      // holds the token must not put an accuracy in the journal for an eval nobody asked).
      emit({ type: "eval", ms: sinceStart(nowMs), epoch: message.epoch, rank, accuracy: message.accuracy, loss: message.loss })
    } else if (message._tag === "CheckpointResult" && !message.ok && StorageFault.isStorageError(message.detail)) {
      // The core fails the checkpoint over to another rank; the operator hears of the disk now.
      // A rank that joined from elsewhere saves on its own host, under its own --save-dir.
      const where =
        ctx.served === undefined
          ? `${runDir}/checkpoints/v${message.version}`
          : `checkpoints/v${message.version} under rank ${rank}'s --save-dir on its own host`
      storageFailed(StorageFault.of(where, message.detail), false)
    }
  }

/** A command the coordinator carried out, as the journal's event (or none). */
const onCommand =
  (ctx: Context) =>
  (command: Core.Command): void => {
    const { state, emit, journal, epochModels, roundLoss, trainedInEpoch, lastRate, alerts, sinceStart, refusedLate, vars } = ctx
    const { worldSize } = ctx.resolved
    const ms = sinceStart(ctx.nowMs())
    if (!vars.formedEmitted && state.started) {
      vars.formedEmitted = true
      vars.server?.markFormed()
      const present = Core.activeCount(state)
      emit({ type: "formed", ms, worldSize, ...(present < worldSize ? { joined: present } : {}) })
      if (ctx.served?.recovery !== undefined) Recover.formed(ctx, ctx.served.recovery)
      ctx.onFormed?.({ runId: ctx.runId, runDir: ctx.runDir }, (path, error) => ctx.storageFailed(StorageFault.of(path, error), false))
    }
    switch (command._tag) {
      case "Alert":
        alerts.push(command.alert)
        emit({ type: "alert", ms, alert: command.alert })
        return
      case "EpochEnded": {
        // Progress reports are spaced (progressIntervalMs): the last one may be batches short.
        // What each live rank trained of the epoch goes to the observers (the bars, the live
        // page) before the epoch's line, so that a finished bar shows it, whole.
        for (const [rank, samplesDone] of trainedInEpoch) {
          if (!Core.isLive(state, rank)) continue
          const last = lastRate.get(rank)
          const samplesPerSecond = last !== undefined && last.epoch === command.summary.epoch ? last.rate : 0
          emit(
            { type: "progress", ms, rank, epoch: command.summary.epoch, samplesDone, samplesPerSecond, state: rankState(state, rank) },
            false
          )
        }
        trainedInEpoch.clear()
        // Final once the epoch's model is written here: the line, and all after it, wait for it.
        journal.hold(epochModels.written(command.summary.epoch))
        // Final as written: the accuracy comes in its own `eval` event, unless the trainer has none.
        emit({ type: "epoch", ms, summary: command.summary, accuracy: undefined, ...(vars.noEval ? { noEval: true as const } : {}) })
        return
      }
      case "Welcome": {
        // The core recorded the join when it decided it (its first chunks' samples included).
        // The latest record is the last one: found from the end, without a copy of every join so far.
        let record: Core.JoinRecord | undefined
        for (let i = state.joins.length - 1; i >= 0 && record === undefined; i--)
          if (state.joins[i]!.rank === command.rank) record = state.joins[i]
        ctx.welcomedAtMs.set(command.rank, ctx.nowMs())
        emit({
          type: "welcomed",
          ms,
          rank: command.rank,
          epoch: command.epoch,
          firstRound: command.firstRound,
          samples: record?.samples ?? 0,
          given: command.reason
        })
        return
      }
      case "JoinRefused":
        refusedLate(command.rank, Transport.joinRefusalCloseCode[command.reason], command.detail)
        return
      case "RunEnded":
        if (command.outcome.status !== "completed") vars.askedToSave = Core.survivors(state)
        // The `ended` event closes the journal once the run is over, survivors' exits included.
        return
      case "Send":
        // A generation's FormRings (one per member, same reason) are one decision, naming its members.
        if (command.message._tag === "FormRing") {
          if (command.message.ringRank === 0) emit({ type: "decision", ms, detail: formRingDecision(command.message, command.reason) })
          return
        }
        // Chunk refills after every ChunkDone are routine, not decisions worth a line each.
        if (command.message._tag !== "AssignChunk") {
          emit({ type: "decision", ms, detail: `${command.message._tag} to rank ${command.to}: ${command.reason}` })
        }
        return
      case "Broadcast":
        if (command.message._tag !== "CoordHeartbeat" && command.message._tag !== "Update") {
          emit({ type: "decision", ms, detail: `${command.message._tag} to every survivor: ${command.reason}` })
        }
        return
      case "SendRanges":
        if (command.kind === "StartEpoch") vars.epochStartedMs = ctx.nowMs()
        emit({ type: "decision", ms, detail: `${command.ranks.length} × ${command.kind}: ${command.reason}` })
        return
      case "AverageRound": {
        const loss = roundLoss.onRound(command.contributors)
        const links = ctx.roundLinks.onRound(command.round)
        const line: Extract<RunEvent, { type: "round" }> = {
          type: "round",
          ms,
          epoch: command.epoch,
          round: command.round,
          contributors: command.contributors.length,
          openMs: Math.max(0, state.clockMs - command.openedAtMs),
          ...(loss === undefined ? {} : { loss }),
          ...(vars.roundBytes === undefined ? {} : { receivedBytes: vars.roundBytes.received, sentBytes: vars.roundBytes.sent }),
          ...(links === undefined ? {} : { linkSentBytes: links.sent, linkReceivedBytes: links.received })
        }
        emit(line)
        ctx.traffic.add(line)
        vars.roundBytes = undefined
        vars.churn?.afterRound(command.round)
        return
      }
    }
  }

/**
 * The coordinator's hooks for a launch: its journal, alerts and death timings. `stop` ends a rank
 * this process started once the coordinator declared it dead (default: nothing to stop).
 *
 * @since 0.1.0
 * @category launcher
 */
export const hooks = (ctx: Context, stop: (rank: Rank) => void = () => {}): Coordinator.Hooks => {
  const { state, journal, epochModels, refusedLate, vars } = ctx
  return {
    onFrame: onFrame(ctx),
    onCommand: onCommand(ctx),
    onTurnedAway: (rank, closeCode, reason) => refusedLate(rank, closeCode, reason),
    onLeft: (left, recoveredMs, controlBytes) => {
      for (const leave of left) {
        ctx.connectedAtMs.delete(leave.rank)
        ctx.welcomedAtMs.delete(leave.rank)
        const cost = leaveCost(ctx, leave, recoveredMs, Math.round(controlBytes / left.length))
        ctx.leaveCosts.push(cost)
        ctx.emit({ type: "leave", ms: cost.declaredMs, leave: cost })
      }
    },
    onJoinerTraining: (rank, helloAtMs, trainingAtMs, bytes) => {
      const connectedAtMs = ctx.connectedAtMs.get(rank) ?? helloAtMs
      ctx.connectedAtMs.delete(rank)
      const welcomedAtMs = ctx.welcomedAtMs.get(rank) ?? helloAtMs
      ctx.welcomedAtMs.delete(rank)
      const cost: JoinCost = {
        rank,
        epoch: state.epoch,
        connectedMs: ctx.sinceStart(connectedAtMs),
        welcomeMs: Math.max(0, welcomedAtMs - connectedAtMs),
        trainingMs: Math.max(0, trainingAtMs - connectedAtMs),
        bytes
      }
      ctx.joinCosts.push(cost)
      ctx.emit({ type: "join", ms: ctx.sinceStart(trainingAtMs), join: cost })
    },
    onEpochModel: (epoch, model) => epochModels.deliver(epoch, model),
    onRoundBytes: (_round, bytes) => {
      vars.roundBytes = bytes
    },
    onDeclared: (declared, recoveredMs) => {
      // Called right after the declaring step: if the run is over, that batch moved nothing.
      const redistributed = state.phase === "running"
      for (const death of declared) recordDeath(ctx, death, recoveredMs, redistributed)
      journal.releaseHeld()
      // A rank declared dead over WebSocket hears it: its socket closes with RankDead (a hung or
      // cut-off rank's socket may still be open; a rank elsewhere then leaves with one line).
      if (vars.server !== undefined)
        for (const death of declared) vars.server.transport.disconnect(death.rank, Transport.CloseCode.RankDead)
      // A rank declared dead that still runs here (stopped by the OS, hung) must never act again:
      // once it resumed it would wait out the coordinator's silence and write into the live run.
      for (const death of declared) stop(death.rank)
    }
  }
}

/** A departure's cost line (`LeaveCost`), from the core's record and the step's wall time and bytes. */
const leaveCost = (ctx: Context, leave: Core.Leave, recoveredMs: number, bytesMoved: number): LeaveCost => ({
  rank: leave.rank,
  epoch: leave.epoch,
  kind: leave.kind,
  cause: leave.cause,
  declaredMs: ctx.sinceStart(leave.declaredAtMs),
  detectionMs: Math.max(0, leave.declaredAtMs - leave.lastSeenAtMs),
  recoveryMs: leave.redistributed ? Math.max(0, recoveredMs - leave.declaredAtMs) : undefined,
  remainderSamples: leave.remainderSamples,
  lostSamples: leave.redistributed ? 0 : leave.remainderSamples,
  duplicatedSamples: 0,
  redoneSamples: leave.redistributed ? leave.redoneSamples : 0,
  bytesMoved
})

/**
 * Times a declared death and logs it, once per death.
 *
 * @since 0.1.0
 * @category launcher
 */
export const recordDeath = (ctx: Context, death: Core.Death, recoveredMs: number, redistributed: boolean): void => {
  const { state, emit, timings, faultAt, sinceStart } = ctx
  if (timings.has(death)) return
  // A hung rank's fault is best timed by its last frame: the moment it went silent.
  const faultMs =
    death.detector === "heartbeat" && faultAt.has(death.rank)
      ? death.declaredAtMs - Liveness.silentMs(state.liveness, death.rank, death.declaredAtMs)
      : faultAt.get(death.rank)
  const timing: DeathTiming = {
    rank: death.rank,
    epoch: death.epoch,
    detector: death.detector,
    cause: death.cause,
    ...(death.stack === undefined ? {} : { stack: death.stack }),
    faultMs: faultMs === undefined ? undefined : sinceStart(faultMs),
    declaredMs: sinceStart(death.declaredAtMs),
    recoveredMs: sinceStart(recoveredMs),
    detectedAfterFaultMs: faultMs === undefined ? undefined : death.declaredAtMs - faultMs,
    recoveredAfterFaultMs: faultMs === undefined || !redistributed ? undefined : recoveredMs - faultMs,
    remainderSamples: death.remainderSamples,
    redistributed
  }
  timings.set(death, timing)
  emit({ type: "death", ms: sinceStart(death.declaredAtMs), death: timing })
}
