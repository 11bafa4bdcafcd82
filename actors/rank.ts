/**
 * The rank actor: one training rank's loop, run inside its worker thread or child process
 * (docs/design.md §3.3, §3.5, §3.7, §4).
 *
 * It takes `StartEpoch`, `ExtendPartition` and `AssignChunk`, trains batch by batch through the
 * user's trainer, reports `Progress` at most every `progressIntervalMs` (so that many fast ranks do
 * not flood the coordinator) and `ChunkDone` after every chunk, and
 * contributes `Params` every `averageEverySteps` batches or when it runs out of work, then waits
 * for the round's `Update`. A contribution is what commits its samples. It sends a `Heartbeat`
 * whenever it sent nothing for `heartbeatIntervalMs`. It runs checkpoint and eval callbacks when
 * asked, and on `ShutdownWithSave` saves through the trainer, announces `Exiting` and leaves.
 *
 * With the ring backend (`RankData.backend` `ring`) a contribution point does not send
 * `Params`: the rank keeps its pre-round parameters and samples done, runs `Ring.allReduce` for
 * (generation, round) with its ring neighbours (over direct `MessageChannel` links between worker
 * threads, handed over per generation, or relayed through the coordinator as `RingData`), sends
 * `RoundDone{epoch, round, generation, samplesDone}` and waits for
 * `RoundCommitted{round, generation}` (or, in a shared all-reduce area, the commit the coordinator
 * writes there, which it looks at before anything the coordinator sent after) before it applies
 * the mean (which then becomes `lastAverage`, the model every save writes). `DeclareDead` interrupts a running collective and
 * discards a finished but unconfirmed one; no collective of that generation starts again. A newer
 * `FormRing` supersedes the older generation (its ports are closed) and the rank redoes the round
 * from its pre-round parameters, so no partial average is ever applied and a round's samples
 * commit exactly once (the coordinator commits them at the round's close). A rank with no work
 * left joins its neighbours' collective of its round as soon as their first step reaches it (a
 * message of that round waiting in its inbox), contributing its current parameters and the
 * samples it already reported, so that neighbours never wait on an idle rank, at an epoch's end
 * included. Faults for tests fire between two steps (`RankData.collectiveFault`). A rank joining a
 * running ring run gets its model as an `Update` before anything else of the ring; a
 * member asked for it (`RequestParams{round}`) answers `Params{round, params}` with `lastAverage`
 * when that is the model of `round`, else with no parameters.
 *
 * A rank never outlives its coordinator: when the coordinator's link
 * ends (the channel closed: its process died, its socket dropped) or the coordinator sent nothing
 * for `coordinatorTimeoutMs`, the rank saves through the trainer under `<saveDir>/rank<r>` with an
 * `emergency.json` beside the model (`EmergencySave`), the save bounded by `coordinatorTimeoutMs`
 * too, prints one line on the coordinator's stderr (a child process) or its own, and exits with
 * `coordinatorGoneExitCode`.
 *
 * This file holds the training loop (`run`) and the entry body (`main`); its parts live beside it:
 * `rank-data.ts` (what a rank is given and writes: `RankData`, `Link`, exit codes, save files; all
 * re-exported here), `rank-reports.ts` (frames the rank sends of its own accord: heartbeats,
 * progress, the memory check, an injected flood), `rank-ring.ts` (the ring collective) and
 * `rank-coordinator-gone.ts` (the coordinator watch and the emergency save).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Ring from "../src/averaging/ring.ts"
import * as DeathReport from "../src/actor/death-report.ts"
import type { ToCoordinator, ToRank } from "../src/core/messages.ts"
import * as Files from "../src/platform/files.ts"
import * as Permutation from "../src/train/permutation.ts"
import * as SavedModel from "../src/train/saved-model.ts"
import * as Trainer from "../src/train/trainer.ts"
import * as Transport from "../src/transport/transport.ts"
import * as Codec from "../src/wire/codec.ts"
import * as Frame from "../src/wire/frame.ts"
import * as CoordinatorGone from "./rank-coordinator-gone.ts"
import { savedMarker } from "./rank-data.ts"
import type { Link, RankData } from "./rank-data.ts"
import * as RankReports from "./rank-reports.ts"
import * as RankRing from "./rank-ring.ts"

// The rank's model, faults, exit codes and save files live in rank-data.ts; importers take them from here.
export {
  collectiveFaultExitCode,
  coordinatorGoneExitCode,
  coordinatorTimeoutMsDefault,
  isJoinedRun,
  rankDataOf,
  savedMarker
} from "./rank-data.ts"
export type { CollectiveFault, EmergencySave, JoinedRun, Link, RankData } from "./rank-data.ts"

/** A stack without the frames of Effect's own runtime, which say nothing about the trainer's bug. */
const trainerStack = (stack: string): string =>
  stack.split("\n").filter((line) => !/[\\/]node_modules[\\/]effect[\\/]/.test(line)).join("\n")

/** `text` cut to at most `max` UTF-16 code units, saying how much was cut. */
const clip = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} characters cut)`

interface Chunk {
  readonly offset: number
  readonly size: number
  progress: number
}

const toCoordinator = Transport.coordinatorPeer

/**
 * Runs the rank until the coordinator says stop (then calls `leave(0)`), or the coordinator is
 * gone: its link ends or it is silent for `coordinatorTimeoutMs` (then saves, see `EmergencySave`,
 * and calls `leave(coordinatorGoneExitCode)`). An injected hang stops the rank responding; it
 * still leaves, without a save, once the coordinator is gone.
 * `loadTrainer` imports the trainer module (a bundled entry passes the module it has built in).
 * A trainer that fails to load or throws ends the rank with a defect: its supervisor reports it.
 *
 * @since 0.1.0
 * @category rank
 */
export const run = (
  link: Link,
  leave: (code: number) => void,
  loadTrainer: (url: string) => Promise<unknown> = (url) => import(url)
): Effect.Effect<void> =>
  Effect.gen(function*() {
    // Long because it is still one closure over the rank's state: splitting it into named steps is pending.
    const { transport, rank } = link
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
    if (!(firstParams instanceof Float32Array)) return yield* Effect.die(new Error(`rank ${rank}: ${Trainer.paramsProblem(firstParams, undefined)}`))
    const paramsLength = firstParams.length
    const getParams = (): Float32Array => {
      const current = checked.getParams()
      const problem = current instanceof Float32Array && current.length === paramsLength ? undefined : Trainer.paramsProblem(current, paramsLength)
      if (problem !== undefined) throw new Error(problem)
      return current
    }
    let lastAverage = new Float32Array(firstParams)
    let lastAverageRound = -1
    const writeModel = (dir: string) => SavedModel.write(dir, lastAverage, { epoch, round: lastAverageRound, rank })

    const reports = RankReports.make(link, data)
    const send = reports.send
    const ringBackend = data.backend === "ring"
    // The training loss since the last contribution (sample-weighted over its batches), carried by
    // the contribution for the journal's round loss: `Params.loss`, or the ring's `RoundDone.loss`
    // (the ring sends it when its all-reduce completes, a redo included).
    let lossSum = 0
    let lossSamples = 0
    let ringLoss: number | undefined
    const takeLoss = (): number | undefined => {
      const mean = lossSamples > 0 ? lossSum / lossSamples : undefined
      lossSum = 0
      lossSamples = 0
      return mean !== undefined && Number.isFinite(mean) && Math.abs(mean) <= 1e12 ? mean : undefined
    }
    const ringSend: typeof send = (message) =>
      message._tag === "RoundDone" && ringLoss !== undefined ? send({ ...message, loss: ringLoss }) : send(message)
    const ring = RankRing.make({ data, link, send: ringSend, leave, hang: () => void (hangAtMs = 0) })

    // Training state for the current epoch.
    let epoch = -1
    let order: Uint32Array = new Uint32Array(0)
    const entries: Array<readonly [number, number]> = [] // static: partition, then extensions
    let trained = 0
    let contributedUpTo = 0
    const chunks: Array<Chunk> = [] // progressive: chunks held, in order
    let chunksDoneSinceContribution = 0
    let batchesSinceContribution = 0
    let waitingUpdate = false
    let round = 0
    let stopping: { readonly save: boolean; readonly reason: string } | undefined
    let hangAtMs = Number.POSITIVE_INFINITY
    // The hang's deadline is read against `Clock` below: both sides from the same clock.
    const clock = yield* Clock.Clock
    let samplesTotal = 0
    let samplesInEpoch = 0

    // The coordinator's liveness, as the rank sees it: its link's end, or its silence.
    const coordinator = CoordinatorGone.watch({
      link,
      rank,
      saveDir: data.saveDir,
      coordinatorTimeoutMs: data.coordinatorTimeoutMs,
      startedMs: yield* Clock.currentTimeMillis,
      save: async (dir) => {
        await trainer.save(dir)
        await writeModel(dir)
      },
      epoch: () => epoch,
      leave
    })
    const { gone, silence, channelClosed } = coordinator

    const enterEpoch = (next: number): void => {
      if (epoch < 0 && data.hangAfterMs !== undefined) hangAtMs = clock.currentTimeMillisUnsafe() + data.hangAfterMs
      if (epoch < 0 && data.flood !== undefined) reports.flood(data.flood.afterMs, data.flood.framesPerSecond)
      epoch = next
      order = Permutation.permutation(data.seed, next, module.trainSamples)
      entries.length = 0
      chunks.length = 0
      trained = 0
      samplesInEpoch = 0
      contributedUpTo = 0
      chunksDoneSinceContribution = 0
      batchesSinceContribution = 0
    }
    const listLength = (): number => entries.reduce((sum, [, size]) => sum + size, 0)
    const hasWork = (): boolean => chunks.length > 0 || trained < listLength()

    /**
     * Applies a committed ring round's mean. Copied once into our own array, which the trainer then
     * copies (`Trainer.setParams`): the mean may be the shared all-reduce area's result row, which
     * the trainer must never hold (other members read it). No allocation a round: saves run inside
     * this loop, so none sees the array change under it.
     */
    const applyCommitted = (committedRound: number, mean: Float32Array): void => {
      if (lastAverage.length === mean.length) lastAverage.set(mean)
      else lastAverage = mean.slice()
      trainer.setParams(lastAverage)
      lastAverageRound = committedRound
      round = committedRound + 1
      waitingUpdate = false
    }
    /** A commit the coordinator wrote into the ring's shared area: applied before anything it sent after. */
    const applyAreaCommit = (): void => {
      const committed = ring.areaCommitted()
      if (committed !== undefined) applyCommitted(committed.round, committed.mean)
    }

    const handle = (message: ToRank) =>
      Effect.gen(function*() {
        switch (message._tag) {
          case "StartEpoch":
            enterEpoch(message.epoch)
            if (message.size > 0) entries.push([message.offset, message.size])
            return
          case "ExtendPartition":
            if (message.epoch === epoch) entries.push([message.offset, message.size])
            return
          case "AssignChunk":
            if (message.epoch > epoch) enterEpoch(message.epoch)
            if (message.epoch === epoch) chunks.push({ offset: message.offset, size: message.size, progress: 0 })
            return
          case "Update":
            if (message.params.length > 0) {
              // A copy of our own: a trainer that keeps the array it was given may train in place on it.
              lastAverage = message.params.slice()
              trainer.setParams(message.params)
              lastAverageRound = message.round
            }
            round = message.round + 1
            waitingUpdate = false
            return
          case "Checkpoint": {
            const dir = `${data.checkpointDir}/v${message.version}`
            const savingMs = yield* Clock.currentTimeMillis
            const saved = yield* Effect.tryPromise(async () => {
              await trainer.save(dir)
              await writeModel(dir)
            }).pipe(Effect.result)
            coordinator.asked(savingMs, yield* Clock.currentTimeMillis)
            yield* send({
              _tag: "CheckpointResult",
              version: message.version,
              ok: Result.isSuccess(saved),
              detail: Result.isSuccess(saved) ? dir : String(saved.failure.cause ?? saved.failure)
            })
            return
          }
          case "Eval": {
            if (trainer.evaluate === undefined) return
            const evaluate = trainer.evaluate.bind(trainer)
            const evaluatingMs = yield* Clock.currentTimeMillis
            const result = yield* Effect.promise(async () => evaluate())
            coordinator.asked(evaluatingMs, yield* Clock.currentTimeMillis)
            yield* send({ _tag: "EvalResult", epoch: message.epoch, accuracy: result.accuracy, loss: result.loss })
            return
          }
          case "FormRing":
            return yield* ring.formRing(message, round)
          case "DeclareDead":
            // Abort at once: no rank waits on a dead neighbour. A newer FormRing follows (or a shutdown).
            if (!ringBackend) return
            return yield* ring.declareDead
          case "RoundCommitted": {
            const mean = ring.committed(message)
            if (mean !== undefined) applyCommitted(message.round, mean)
            return
          }
          case "RingData":
            ring.relayed(message)
            return
          case "ShutdownWithSave":
            stopping = { save: true, reason: message.reason }
            return
          case "Shutdown":
            stopping = { save: false, reason: "Shutdown" }
            return
          case "RequestParams":
            // Ring: a joiner's model, the mean this rank applied when `round` committed;
            // empty when it holds another round's (the coordinator then asks another member).
            if (!ringBackend) return
            yield* send({
              _tag: "Params",
              epoch: Math.max(epoch, 0),
              round: message.round,
              samplesDone: 0,
              params: lastAverageRound === message.round ? lastAverage : new Float32Array(0)
            })
            return
          case "SetRoles":
          case "CoordHeartbeat":
            return
        }
      })

    /** Applies one transport event; returns false when the coordinator's link ended. */
    const apply = (event: Transport.Event) =>
      Effect.gen(function*() {
        applyAreaCommit()
        if (event._tag === "Ended") {
          if (event.peer === toCoordinator) coordinator.ended(event.cause)
          return event.peer !== toCoordinator
        }
        if (event._tag !== "Frame") return true
        const decoded = Codec.decode(event.bytes, { from: "coordinator" })
        if (Result.isFailure(decoded)) return true // counted by the transport's inspector
        yield* handle(decoded.success.message as ToRank)
        return true
      })

    const contribute = (samplesDone: number) =>
      Effect.gen(function*() {
        // A ring member that trained nothing since its last round keeps the ring whole but adds
        // nothing to the mean (as cpu's round, which only averages its contributors); nor does one
        // whose parameters are not all finite (as cpu's BadParams): the mean then replaces them.
        const trainedSince = batchesSinceContribution > 0
        batchesSinceContribution = 0
        waitingUpdate = true
        const loss = takeLoss()
        if (ringBackend) {
          ringLoss = loss
          // The pre-round parameters: what every collective of this round (and its redo) averages.
          const current = getParams()
          const params = ring.contributionBuffer(current.length)
          params.set(current)
          return yield* ring.contribute({ epoch, samplesDone, params, contributes: trainedSince && Ring.isContribution(params) }, round)
        }
        yield* send({ _tag: "Params", epoch, round, samplesDone, params: getParams(), ...(loss === undefined ? {} : { loss }) })
      })

    const trainOne = Effect.gen(function*() {
      const started = yield* Clock.currentTimeMillis
      const chunk = chunks[0]
      let indices: Uint32Array
      if (chunk !== undefined) {
        const n = Math.min(data.batchSize, chunk.size - chunk.progress)
        indices = order.subarray(chunk.offset + chunk.progress, chunk.offset + chunk.progress + n)
        chunk.progress += n
      } else {
        // Map the next batch of list positions to permutation positions, across entries.
        const n = Math.min(data.batchSize, listLength() - trained)
        indices = new Uint32Array(n)
        let position = 0
        let filled = 0
        for (const [offset, size] of entries) {
          const from = Math.max(trained, position)
          const to = Math.min(trained + n, position + size)
          for (let p = from; p < to; p++) indices[filled++] = order[offset + (p - position)]!
          position += size
        }
        trained += n
      }
      const result = yield* Effect.promise(async () => trainer.trainBatch(indices))
      // A trainer that returns no finite loss leaves its rank's contributions without one.
      const batchLoss = (result as { readonly loss?: unknown } | undefined)?.loss
      if (typeof batchLoss === "number" && Number.isFinite(batchLoss) && indices.length > 0) {
        lossSum += batchLoss * indices.length
        lossSamples += indices.length
      }
      batchesSinceContribution += 1
      samplesTotal += indices.length
      samplesInEpoch += indices.length
      const finished = yield* Clock.currentTimeMillis
      yield* reports.afterBatch(started, finished, { epoch, samplesDone: trained, samplesInEpoch, samplesTotal })
      if (chunk !== undefined && chunk.progress >= chunk.size) {
        chunks.shift()
        chunksDoneSinceContribution += 1
        yield* send({ _tag: "ChunkDone", epoch, offset: chunk.offset, size: chunk.size })
      }
      const outOfWork = !hasWork()
      if (chunk !== undefined || chunksDoneSinceContribution > 0) {
        if (chunksDoneSinceContribution > 0 && (outOfWork || batchesSinceContribution >= data.averageEverySteps)) {
          chunksDoneSinceContribution = 0
          yield* contribute(0)
        }
      } else if (trained > contributedUpTo && (outOfWork || batchesSinceContribution >= data.averageEverySteps)) {
        contributedUpTo = trained
        yield* contribute(trained)
      }
    })

    yield* send({ _tag: "Hello", paramsLength })
    while (true) {
      if ((yield* Clock.currentTimeMillis) >= hangAtMs) {
        // Stop responding (the worker stays alive), but never outlive the coordinator.
        while (true) {
          const event = yield* Queue.take(transport.inbox).pipe(
            Effect.timeoutOption(data.heartbeatIntervalMs),
            Effect.catch(() => Effect.succeed(undefined))
          )
          if (event === undefined || (event._tag === "Some" && event.value._tag === "Ended" && event.value.peer === toCoordinator)) {
            if (event?._tag === "Some" && event.value._tag === "Ended") coordinator.ended(event.value.cause)
            return yield* gone(channelClosed(), false)
          }
          const silent = silence(yield* Clock.currentTimeMillis)
          if (silent !== undefined) return yield* gone(silent, false)
        }
      }
      applyAreaCommit()
      // Apply everything already delivered.
      for (let event = Queue.takeUnsafe(transport.inbox); event !== undefined; event = Queue.takeUnsafe(transport.inbox)) {
        if (event._tag === "Failure" || !(yield* apply(event.value))) {
          if (stopping !== undefined) break // told to stop: it goes as told, below
          return yield* gone(channelClosed())
        }
      }
      if (stopping !== undefined) {
        if (stopping.save) {
          // The marker says the trainer's save resolved (a save may write nothing of its own).
          const dir = `${data.saveDir}/rank${rank}`
          yield* Effect.tryPromise(async () => {
            await trainer.save(dir)
            await writeModel(dir)
            await Files.writeFile(`${dir}/${savedMarker}`, `${JSON.stringify({ rank, reason: stopping?.reason, savedAtMs: Date.now() })}\n`)
          }).pipe(Effect.ignore)
        }
        yield* send({ _tag: "Exiting" })
        yield* transport.flush
        leave(0)
        return
      }
      const ringFailure = ring.failure()
      if (ringFailure !== undefined) {
        // The coordinator shows the crash too, but only as one rank's cause among others: the rank's
        // own output says why it left, where its neighbour's bad step or closed link is visible.
        console.error(`cohort rank ${rank}: ring collective failed (${ring.linkName()}): ${ringFailure.message}`)
        return yield* Effect.die(new Error(`rank ${rank}: ring collective failed: ${ringFailure.message}`))
      }
      // A rank with no work left joins its neighbours' collective of its round as soon as their
      // first message reaches it, so that they never wait on an idle rank (epoch ends included).
      if (ringBackend && ring.view() !== undefined) {
        if (!waitingUpdate && !hasWork() && ring.neighboursWaiting(round)) {
          yield* contribute(trained)
        }
        // A contribution whose direct links arrived after its FormRing starts now.
        yield* ring.startCollective(round)
      }
      const now = yield* Clock.currentTimeMillis
      const silent = silence(now)
      if (silent !== undefined) return yield* gone(silent)
      yield* reports.heartbeatIfDue(now)
      if (!waitingUpdate && hasWork()) {
        yield* trainOne
        yield* Effect.sleep(0) // let the event loop deliver frames and timers between batches
        continue
      }
      // Nothing to do until the coordinator (or a direct ring link) speaks: wait, heartbeating on time.
      const event = yield* Effect.raceFirst(
        Queue.take(transport.inbox).pipe(
          Effect.timeoutOption(data.heartbeatIntervalMs),
          Effect.catch(() => Effect.succeed(undefined))
        ),
        ring.woken()
      )
      if (event === "woken") {
        ring.rearm()
        continue
      }
      if (event === undefined || (event._tag === "Some" && !(yield* apply(event.value)))) {
        if (stopping !== undefined) continue // told to stop first: it goes as told
        return yield* gone(channelClosed())
      }
    }
  })

/**
 * A rank entry's whole body: connects with `connect` (a transport's rank-side `connect()`), runs
 * the rank, and leaves the process or worker with its exit code through `exit` (default
 * `process.exit`; a WebSocket rank closes its socket first, so that its last frames arrive before
 * its end). `stop` aborted interrupts the rank where it is, without a leave or a last frame (a
 * process that runs many ranks stops one that way to make it leave, crash or go silent). `loadTrainer` imports the trainer module (bundled entries pass the module they
 * contain). A failure to connect is a defect: the rank ends and its supervisor reports it.
 *
 * A rank that fails (its trainer throws, a defect) reports the error as its last frame,
 * `Crashing{error, stack}`, and exits with code 1: its supervisor then declares it
 * `Crashed{error, stack}`. This is how a child process reports its error at all, and how a
 * worker's stack reaches the coordinator under Deno, whose worker `error` event carries none.
 * Nothing is printed: the coordinator shows the error once; only a ring collective that
 * failed (a neighbour's bad step, a closed link) also prints one line on the rank's own stderr,
 * `cohort rank N: ring collective failed (direct link): ...`.
 *
 * @since 0.1.0
 * @category rank
 */
export const main = (
  connect: Effect.Effect<Link, Transport.TransportError>,
  loadTrainer?: (url: string) => Promise<unknown>,
  leave: (code: number) => void = (code) => process.exit(code),
  stop?: AbortSignal
): Promise<void> =>
  Effect.runPromise(
    Effect.gen(function*() {
      const link = yield* Effect.orDie(connect)
      const exit = yield* Effect.exit(run(link, leave, loadTrainer))
      if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return
      const error = Cause.squash(exit.cause)
      // Each text field must fit the wire's `textBytesMax` (64 KiB): 8 K characters of message and
      // 16 K of stack are at most 24 KiB and 48 KiB in UTF-8.
      const crashing: ToCoordinator = {
        _tag: "Crashing",
        error: clip(DeathReport.errorMessage(error), 8 * 1024),
        stack: clip(trainerStack(DeathReport.errorStack(error) ?? ""), 16 * 1024)
      }
      yield* link.transport.send(toCoordinator, Codec.encode(Frame.fromRank(link.rank, crashing))).pipe(Effect.ignore)
      yield* link.transport.flush
      leave(1)
    }),
    stop === undefined ? undefined : { signal: stop }
  )
