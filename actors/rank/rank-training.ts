/**
 * The rank's steps, which `Rank.run` loops over: `start` loads the trainer and makes the rank's
 * state (`Running`, its `Training` the part that changes), `apply` and `handle` carry out what the
 * coordinator sends, `trainOne` trains a batch and contributes when due, `turn` is one pass of
 * the loop. The calls the coordinator asks (a checkpoint, an eval), a shutdown and an injected
 * hang are in `rank-calls.ts`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Deltas from "../../src/averaging/deltas.ts"
import * as Ring from "../../src/averaging/ring.ts"
import type { ToCoordinator, ToRank } from "../../src/core/messages.ts"
import * as Permutation from "../../src/train/permutation.ts"
import * as SavedModel from "../../src/train/saved-model.ts"
import * as Trainer from "../../src/train/trainer.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Packed from "../../src/wire/packed.ts"
import * as RankCalls from "./rank-calls.ts"
import * as CoordinatorGone from "./rank-coordinator-gone.ts"
import * as RankModel from "./rank-model.ts"
import type { Link, RankData } from "./rank-data.ts"
import * as RankReports from "./rank-reports.ts"
import * as RankRing from "./rank-ring.ts"
import type { Chunk, Running, Training } from "./rank-state.ts"
import * as RankWake from "./rank-wake.ts"

const toCoordinator = Transport.coordinatorPeer

/**
 * Loads the trainer and makes the rank's state, its reports, its ring and its watch on the
 * coordinator. A trainer that fails to load or is not one is a defect.
 */
export const start = (link: Link, leave: (code: number) => void, loadTrainer: (url: string) => Promise<unknown>): Effect.Effect<Running> =>
  Effect.gen(function* () {
    const { rank } = link
    const data = link.data as RankData
    const module = Trainer.validateTrainerModule(yield* Effect.promise(() => loadTrainer(data.trainer)))
    if (typeof module === "string") return yield* Effect.die(new Error(`rank ${rank}: ${module}`))
    const trainer = yield* Effect.promise(async () => module.createTrainer({ rank, worldSize: data.worldSize, seed: data.seed }))
    const checked = Trainer.validateTrainer(trainer)
    if (typeof checked === "string") return yield* Effect.die(new Error(`rank ${rank}: ${checked}`))

    // The last averaged parameters (the initial model until the first Update) and their round: what
    // every save writes as the resumable model (`SavedModel`), consistent with what was committed.
    // The trainer's parameters, checked on every read: a Float32Array of the length it had at the
    // start (docs/design.md §4 `Hello`). Anything else is the trainer's bug: the rank crashes with it
    // (and the run stops with TrainerFault when two ranks do), instead of sending frames the
    // coordinator must drop (a Float64Array) or refuse (another length).
    const firstParams = checked.getParams()
    if (!(firstParams instanceof Float32Array))
      return yield* Effect.die(new Error(`rank ${rank}: ${Trainer.paramsProblem(firstParams, undefined)}`))
    const paramsLength = firstParams.length
    const getParams = (): Float32Array => {
      const current = checked.getParams()
      const problem =
        current instanceof Float32Array && current.length === paramsLength ? undefined : Trainer.paramsProblem(current, paramsLength)
      if (problem !== undefined) throw new Error(problem)
      return current
    }
    const s: Training = {
      lastAverage: new Float32Array(firstParams),
      lastAverageShared: false,
      lastAverageRound: -1,
      ringRound: -1,
      lossSum: 0,
      lossSamples: 0,
      ringLoss: undefined,
      epoch: -1,
      order: new Uint32Array(0),
      entries: [],
      trained: 0,
      contributedUpTo: 0,
      chunks: [],
      chunksDoneSinceContribution: 0,
      batchesSinceContribution: 0,
      waitingUpdate: false,
      round: 0,
      stopping: undefined,
      hangAtMs: Number.POSITIVE_INFINITY,
      samplesTotal: 0,
      samplesInEpoch: 0,
      residual: undefined,
      recoveries: link.recoveries?.() ?? 0,
      ringRecovery: undefined
    }
    const writeModel = (dir: string) => SavedModel.write(dir, s.lastAverage, { epoch: s.epoch, round: s.lastAverageRound, rank })

    const reports = RankReports.make(link, data)
    const send = reports.send
    const withLoss = (message: ToCoordinator): ToCoordinator =>
      message._tag === "RoundDone" && s.ringLoss !== undefined ? { ...message, loss: s.ringLoss } : message
    const clock = yield* Clock.Clock
    const wake = RankWake.make(link.transport.inbox)
    yield* Effect.forkChild(wake.watch)
    const ring = RankRing.make({
      data,
      link,
      send: (message) => send(withLoss(message)),
      sendNow: (message) => reports.sendNow(withLoss(message), clock.currentTimeMillisUnsafe()),
      leave,
      hang: () => void (s.hangAtMs = 0),
      wake: wake.notify
    })

    // The coordinator's liveness, as the rank sees it: its link's end, or its silence.
    const coordinator = CoordinatorGone.watch({
      link,
      rank,
      saveDir: data.saveDir,
      coordinatorTimeoutMs: data.coordinatorTimeoutMs,
      startedMs: yield* Clock.currentTimeMillis,
      save: async (dir) => {
        await checked.save(dir)
        await writeModel(dir)
      },
      epoch: () => s.epoch,
      leave
    })
    return {
      link,
      data,
      rank,
      leave,
      module,
      trainer: checked,
      paramsLength,
      getParams,
      writeModel,
      reports,
      send,
      ring,
      wake,
      ringBackend: data.backend === "ring",
      coordinator,
      clock,
      s
    }
  })

/** The mean training loss since the last contribution, and a fresh start for the next. */
const takeLoss = (s: Training): number | undefined => {
  const mean = s.lossSamples > 0 ? s.lossSum / s.lossSamples : undefined
  s.lossSum = 0
  s.lossSamples = 0
  return mean !== undefined && Number.isFinite(mean) && Math.abs(mean) <= 1e12 ? mean : undefined
}

const enterEpoch = (r: Running, next: number): void => {
  const { s, data } = r
  if (s.epoch < 0 && data.hangAfterMs !== undefined) s.hangAtMs = r.clock.currentTimeMillisUnsafe() + data.hangAfterMs
  if (s.epoch < 0 && data.flood !== undefined) r.reports.flood(data.flood.afterMs, data.flood.framesPerSecond)
  s.epoch = next
  // Shared with the process's other ranks in this epoch: read only (`nextBatch` copies what it hands out).
  s.order = Permutation.sharedPermutation(data.seed, next, r.module.trainSamples)
  s.entries.length = 0
  s.chunks.length = 0
  s.trained = 0
  s.samplesInEpoch = 0
  s.contributedUpTo = 0
  s.chunksDoneSinceContribution = 0
  s.batchesSinceContribution = 0
}

const listLength = (s: Training): number => s.entries.reduce((sum, [, size]) => sum + size, 0)
const hasWork = (s: Training): boolean => s.chunks.length > 0 || s.trained < listLength(s)

/** Carries out one message of the coordinator's. */
const handle = (r: Running, message: ToRank) =>
  Effect.gen(function* () {
    const { s, ring, ringBackend, send } = r
    switch (message._tag) {
      case "StartEpoch":
        enterEpoch(r, message.epoch)
        if (message.size > 0) s.entries.push([message.offset, message.size])
        return
      case "ExtendPartition":
        if (message.epoch === s.epoch) s.entries.push([message.offset, message.size])
        return
      case "AssignChunk":
        if (message.epoch > s.epoch) {
          RankModel.dropTakenBack(r)
          enterEpoch(r, message.epoch)
        }
        if (message.epoch === s.epoch) s.chunks.push({ offset: message.offset, size: message.size, progress: 0 })
        return
      case "Update":
        // A takeover's Update carries no parameters (the ranks hold the model); one with them is a
        // model given outright (a joiner's, from a member): it replaces whatever the rank held.
        if (s.ringRecovery !== undefined && message.params.length === 0) return yield* RankModel.ringTakenOver(r, message.round)
        s.ringRecovery = undefined
        return yield* RankModel.applyUpdate(r, message)
      case "Checkpoint":
        return yield* RankCalls.checkpoint(r, message.version)
      case "Eval":
        return yield* RankCalls.evaluate(r, message.epoch)
      case "FormRing":
        return yield* ring.formRing(message, s.round)
      case "DeclareDead":
        // Abort at once: no rank waits on a dead neighbour. A newer FormRing follows (or a shutdown).
        if (!ringBackend) return
        return yield* ring.declareDead
      case "RoundCommitted": {
        if (s.ringRecovery !== undefined) return RankModel.ringConfirmed(r, s.ringRecovery, message)
        const mean = ring.committed(message)
        if (mean !== undefined) RankModel.applyCommitted(r, message.round, mean)
        return
      }
      case "RingData":
        ring.relayed(message)
        return
      case "ShutdownWithSave":
        s.stopping = { save: true, reason: message.reason }
        return
      case "Shutdown":
        s.stopping = { save: false, reason: "Shutdown" }
        return
      case "RequestParams":
        // Ring: a joiner's model, the mean this rank applied when `round` committed;
        // empty when it holds another round's (the coordinator then asks another member).
        if (!ringBackend) return
        yield* send({
          _tag: "Params",
          epoch: Math.max(s.epoch, 0),
          round: message.round,
          samplesDone: 0,
          params: s.lastAverageRound === message.round ? s.lastAverage : new Float32Array(0)
        })
        return
      case "SetRoles":
      case "CoordHeartbeat":
        return
    }
  })

/** Applies one transport event; returns false when the coordinator's link ended. */
export const apply = (r: Running, event: Transport.Event) =>
  Effect.gen(function* () {
    RankModel.applyAreaCommit(r)
    if (event._tag === "Ended") {
      if (event.peer === toCoordinator) r.coordinator.ended(event.cause)
      return event.peer !== toCoordinator
    }
    if (event._tag !== "Frame") return true
    yield* recovered(r)
    const decoded = Codec.decode(event.bytes, { from: "coordinator" })
    if (Result.isFailure(decoded)) return true // counted by the transport's inspector
    yield* handle(r, decoded.success.message as ToRank)
    return true
  })

/** Sends the rank's contribution to its round: `Params` to the coordinator, or the ring's collective. */
const contribute = (r: Running, samplesDone: number) =>
  Effect.gen(function* () {
    const { s, ring } = r
    // A ring member that trained nothing since its last round keeps the ring whole but adds
    // nothing to the mean (as cpu's round, which only averages its contributors); nor does one
    // whose parameters are not all finite (as cpu's BadParams): the mean then replaces them.
    const trainedSince = s.batchesSinceContribution > 0
    s.batchesSinceContribution = 0
    s.waitingUpdate = true
    const loss = takeLoss(s)
    if (r.ringBackend) {
      s.ringLoss = loss
      // The pre-round parameters: what every collective of this round (and its redo) averages.
      const current = r.getParams()
      const params = ring.contributionBuffer(current.length)
      params.set(current)
      // The committed model of the round before, which every member then holds (`--compress` sends changes from it).
      const base =
        s.lastAverageRound >= 0 && s.lastAverageRound === s.round - 1 ? { round: s.lastAverageRound, values: s.lastAverage } : undefined
      return yield* ring.contribute(
        { epoch: s.epoch, samplesDone, params, contributes: trainedSince && Ring.isContribution(params), base },
        s.round
      )
    }
    const message = {
      _tag: "Params",
      epoch: s.epoch,
      round: s.round,
      samplesDone,
      params: r.data.deltas === true && s.lastAverageRound >= 0 ? Deltas.minus(r.getParams(), s.lastAverage) : r.getParams(),
      ...(loss === undefined ? {} : { loss })
    } as const
    const compress = r.data.compress ?? "none"
    if (compress === "none") return yield* r.send(message)
    // Error feedback: what packing drops now is added to the next contribution.
    const packed = Packed.withFeedback(message.params, s.residual, compress)
    s.residual = packed.residual
    yield* r.send({ ...message, params: emptyParams }, packed.bytes)
  })

const emptyParams = new Float32Array(0)

/** The sample indices of the next batch: from the first chunk held, or the static list's next positions. */
const nextBatch = (r: Running, chunk: Chunk | undefined): Uint32Array => {
  const { s, data } = r
  if (chunk !== undefined) {
    const n = Math.min(data.batchSize, chunk.size - chunk.progress)
    // A copy: the order is shared with the process's other ranks, and a trainer may write into its indices.
    const indices = s.order.slice(chunk.offset + chunk.progress, chunk.offset + chunk.progress + n)
    chunk.progress += n
    return indices
  }
  // Map the next batch of list positions to permutation positions, across entries.
  const n = Math.min(data.batchSize, listLength(s) - s.trained)
  const indices = new Uint32Array(n)
  let position = 0
  let filled = 0
  for (const [offset, size] of s.entries) {
    const from = Math.max(s.trained, position)
    const to = Math.min(s.trained + n, position + size)
    for (let p = from; p < to; p++) indices[filled++] = s.order[offset + (p - position)]!
    position += size
  }
  s.trained += n
  return indices
}

/**
 * A `cpu` rank about to say `Exiting` in the middle of a run contributes what it trained and did
 * not contribute yet: the chunks it reported done (progressive), or its samples past its last
 * contribution (static). The coordinator folds every `Params` of a live rank and commits what
 * it carries, so the survivors need not train those samples again. A ring contribution needs
 * its neighbours' collective: a ring rank leaves without.
 */
export const contributeBeforeLeaving = (r: Running) =>
  Effect.gen(function* () {
    const { s } = r
    if (r.ringBackend) return
    if (s.chunksDoneSinceContribution > 0) {
      s.chunksDoneSinceContribution = 0
      return yield* contribute(r, 0)
    }
    if (s.chunks.length === 0 && s.trained > s.contributedUpTo) {
      s.contributedUpTo = s.trained
      return yield* contribute(r, s.trained)
    }
  })

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  typeof value === "object" && value !== null && typeof (value as { readonly then?: unknown }).then === "function"

/** Trains one batch, reports it, and contributes when the batch ends a chunk or an averaging step. */
const trainOne = (r: Running) =>
  Effect.gen(function* () {
    const { s, data } = r
    const started = r.clock.currentTimeMillisUnsafe()
    const chunk = s.chunks[0]
    const indices = nextBatch(r, chunk)
    // The trainer's step: its result as it returns it, awaited only when it returns a promise. A
    // synchronous trainer's batch then costs the loop's fiber no suspension (a promise, a microtask
    // and an async-hooks resource a batch, at every ring round), nor an effect. A throw is a defect
    // either way.
    const returned: unknown = r.trainer.trainBatch(indices)
    const result = isPromiseLike(returned) ? yield* Effect.promise(() => returned) : returned
    // A trainer that returns no finite loss leaves its rank's contributions without one.
    const batchLoss = (result as { readonly loss?: unknown } | undefined)?.loss
    if (typeof batchLoss === "number" && Number.isFinite(batchLoss) && indices.length > 0) {
      s.lossSum += batchLoss * indices.length
      s.lossSamples += indices.length
    }
    s.batchesSinceContribution += 1
    s.samplesTotal += indices.length
    s.samplesInEpoch += indices.length
    const finished = r.clock.currentTimeMillisUnsafe()
    yield* r.reports.afterBatch(started, finished, {
      epoch: s.epoch,
      samplesDone: s.trained,
      samplesInEpoch: s.samplesInEpoch,
      samplesTotal: s.samplesTotal
    })
    if (chunk !== undefined && chunk.progress >= chunk.size) {
      s.chunks.shift()
      s.chunksDoneSinceContribution += 1
      yield* r.send({ _tag: "ChunkDone", epoch: s.epoch, offset: chunk.offset, size: chunk.size })
    }
    const outOfWork = !hasWork(s)
    if (chunk !== undefined || s.chunksDoneSinceContribution > 0) {
      if (s.chunksDoneSinceContribution > 0 && (outOfWork || s.batchesSinceContribution >= data.averageEverySteps)) {
        s.chunksDoneSinceContribution = 0
        yield* contribute(r, 0)
      }
    } else if (s.trained > s.contributedUpTo && (outOfWork || s.batchesSinceContribution >= data.averageEverySteps)) {
      s.contributedUpTo = s.trained
      yield* contribute(r, s.trained)
    }
  })

/**
 * One turn of the rank's loop once the hang and the inbox are handled: a failed ring collective
 * ends the rank; an idle ring member joins its neighbours' collective; a silent coordinator ends
 * it; otherwise it trains a batch or waits for the next message. Returns `"stop"` when the rank's
 * run is over (it left, or was told to stop), else `"continue"`.
 */
export const turn = (r: Running) =>
  Effect.gen(function* () {
    const { s, ring, rank, coordinator } = r
    const ringFailure = ring.failure()
    if (ringFailure !== undefined) {
      // The coordinator shows the crash too, but only as one rank's cause among others: the rank's
      // own output says why it left, where its neighbour's bad step or closed link is visible.
      console.error(`cohort rank ${rank}: ring collective failed (${ring.linkName()}): ${ringFailure.message}`)
      return yield* Effect.die(new Error(`rank ${rank}: ring collective failed: ${ringFailure.message}`))
    }
    // A rank with no work left joins its neighbours' collective of its round as soon as their
    // first message reaches it, so that they never wait on an idle rank (epoch ends included).
    if (r.ringBackend && ring.view() !== undefined) {
      if (!s.waitingUpdate && !hasWork(s) && ring.neighboursWaiting(s.round)) {
        yield* contribute(r, s.trained)
      }
      // A contribution whose direct links arrived after its FormRing starts now.
      if (ring.contributionWaiting()) yield* ring.startCollective(s.round)
    }
    let now = r.clock.currentTimeMillisUnsafe()
    let silent = coordinator.silence(now)
    if (silent !== undefined) {
      yield* coordinator.gone(silent)
      return "stop" as const
    }
    yield* r.reports.heartbeatIfDue(now)
    if (!s.waitingUpdate && hasWork(s)) {
      yield* trainOne(r)
      // Let the event loop deliver frames and timers between batches.
      if (!s.waitingUpdate) {
        yield* Effect.sleep(0)
        return "continue" as const
      }
      // A batch that contributed waits for its round next, without another pass of the loop
      // first (a ring round's second pass, every round): nothing was delivered meanwhile, and
      // what a collective did meanwhile (failed: `notify`; an injected hang) is what the next
      // pass handles first. The coordinator's silence and the heartbeat are looked at again
      // after the batch, as that pass did.
      if (ring.failure() !== undefined) return "continue" as const
      now = r.clock.currentTimeMillisUnsafe()
      if (now >= s.hangAtMs) return "continue" as const
      silent = coordinator.silence(now)
      if (silent !== undefined) {
        yield* coordinator.gone(silent)
        return "stop" as const
      }
      yield* r.reports.heartbeatIfDue(now)
    }
    // Nothing to do until the coordinator (or a direct ring link, or the ring's area) speaks: wait,
    // heartbeating on time. The loop takes what arrived (`Rank.run`), its end included.
    yield* r.wake.wait(r.data.heartbeatIntervalMs)
    return "continue" as const
  })

/**
 * Whether a new coordinator took the run over since the last call (docs/recovery.md): then the
 * assignment, the chunks and the contribution this rank held were the old one's, and nothing of
 * them counts until the new one re-plans. The rank goes back to its last averaged model and waits
 * for the new `Update` (the last committed model) and its new share of the epoch. Called before
 * any frame is applied: the new coordinator's frames all come after its recovered welcome.
 */
export const recovered = (r: Running): Effect.Effect<void> => {
  // Asked before every frame and every turn of the loop: no generator unless there was a takeover.
  const seen = r.link.recoveries?.() ?? 0
  return seen === r.s.recoveries ? Effect.void : takeOver(r, seen)
}

/** `recovered` once a takeover was seen (`seen`: the link's count of them). */
const takeOver = (r: Running, seen: number) =>
  Effect.gen(function* () {
    const { s } = r
    s.recoveries = seen
    // Ring: which round's mean the rank must hold is the new coordinator's to say (`ringConfirmed`).
    // A finished round held from before an earlier takeover is kept: this one may confirm it.
    if (r.ringBackend) s.ringRecovery = { held: (yield* r.ring.reset) ?? s.ringRecovery?.held, committed: -1 }
    s.entries.length = 0
    s.chunks.length = 0
    s.trained = 0
    s.contributedUpTo = 0
    s.chunksDoneSinceContribution = 0
    s.batchesSinceContribution = 0
    s.lossSum = 0
    s.lossSamples = 0
    s.waitingUpdate = true
    r.trainer.setParams(s.lastAverage)
  })
