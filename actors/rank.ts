/**
 * The rank actor: one training rank's loop, run inside its worker thread or child process
 * (DESIGN.md §3.3, §3.5, §3.7, §4; issue 6).
 *
 * It takes `StartEpoch`, `ExtendPartition` and `AssignChunk`, trains batch by batch through the
 * user's trainer, reports `Progress` at most every `progressIntervalMs` (so that many fast ranks do
 * not flood the coordinator) and `ChunkDone` after every chunk, and
 * contributes `Params` every `averageEverySteps` batches or when it runs out of work, then waits
 * for the round's `Update`. A contribution is what commits its samples. It sends a `Heartbeat`
 * whenever it sent nothing for `heartbeatIntervalMs`. It runs checkpoint and eval callbacks when
 * asked, and on `ShutdownWithSave` saves through the trainer, announces `Exiting` and leaves.
 *
 * With the ring backend (`RankData.backend` `ring`, issue 15) a contribution point does not send
 * `Params`: the rank keeps its pre-round parameters and samples done, runs `Ring.allReduce` for
 * (generation, round) with its ring neighbours (over direct `MessageChannel` links between worker
 * threads, handed over per generation, or relayed through the coordinator as `RingData`), sends
 * `RoundDone{epoch, round, generation, samplesDone}` and waits for
 * `RoundCommitted{round, generation}` before it applies the mean (which then becomes
 * `lastAverage`, the model every save writes). `DeclareDead` interrupts a running collective and
 * discards a finished but unconfirmed one; no collective of that generation starts again. A newer
 * `FormRing` supersedes the older generation (its ports are closed) and the rank redoes the round
 * from its pre-round parameters, so no partial average is ever applied and a round's samples
 * commit exactly once (the coordinator commits them at the round's close). A rank with no work
 * left joins its neighbours' collective of its round as soon as their first step reaches it (a
 * message of that round waiting in its inbox), contributing its current parameters and the
 * samples it already reported, so that neighbours never wait on an idle rank, at an epoch's end
 * included. Faults for tests fire between two steps (`RankData.collectiveFault`).
 *
 * A rank never outlives its coordinator (issue "Never lose a run"): when the coordinator's link
 * ends (the channel closed: its process died, its socket dropped) or the coordinator sent nothing
 * for `coordinatorTimeoutMs`, the rank saves through the trainer under `<saveDir>/rank<r>` with an
 * `emergency.json` beside the model (`EmergencySave`), the save bounded by `coordinatorTimeoutMs`
 * too, prints one line on the coordinator's stderr (a child process) or its own, and exits with
 * `coordinatorGoneExitCode`.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as DeathReport from "../src/actor/death-report.ts"
import * as Ring from "../src/averaging/ring.ts"
import type { FormRing, Rank, ToCoordinator, ToRank } from "../src/core/messages.ts"
import * as BunRuntime from "../src/platform/bun.ts"
import * as Files from "../src/platform/files.ts"
import * as NodeRuntime from "../src/platform/node.ts"
import type * as RuntimeTypes from "../src/platform/types.ts"
import * as Permutation from "../src/train/permutation.ts"
import * as SavedModel from "../src/train/saved-model.ts"
import * as Trainer from "../src/train/trainer.ts"
import * as Transport from "../src/transport/transport.ts"
import * as Codec from "../src/wire/codec.ts"
import * as Frame from "../src/wire/frame.ts"

/**
 * The file a rank writes in its save folder (`<saveDir>/rank<r>/`) once the trainer's `save`
 * resolved after a `ShutdownWithSave`, and Cohort's own resumable model (`SavedModel`: the last
 * averaged parameters) was written beside it: `{rank, reason, savedAtMs}`. Its absence means the
 * save failed, hung or never ran. Checkpoints (`checkpoints/v<E>/`) and emergency saves hold a
 * `SavedModel` too.
 *
 * @since 0.1.0
 * @category model
 */
export const savedMarker = "cohort-saved.json"

/** A stack without the frames of Effect's own runtime, which say nothing about the trainer's bug. */
const trainerStack = (stack: string): string =>
  stack.split("\n").filter((line) => !/[\\/]node_modules[\\/]effect[\\/]/.test(line)).join("\n")

/** `text` cut to at most `max` UTF-16 code units, saying how much was cut. */
const clip = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} characters cut)`

/**
 * What the launcher hands each rank (structured-cloneable / JSON).
 *
 * - `trainer`: the trainer module's `file:` URL.
 * - `hangAfterMs`: ms after the run started (the rank's first epoch plan arrived) at which the rank
 *   stops responding while its worker stays alive (fault injection; `undefined` never).
 * - `saveDir`: where `ShutdownWithSave` saves (`<saveDir>/rank<r>`); `checkpointDir` likewise.
 *
 * @since 0.1.0
 * @category model
 */
export interface RankData {
  readonly trainer: string
  readonly worldSize: number
  readonly seed: number
  readonly batchSize: number
  readonly averageEverySteps: number
  readonly heartbeatIntervalMs: number
  /** A `Progress` goes out at most this often (ms); batches in between are reported by the next. */
  readonly progressIntervalMs: number
  readonly hangAfterMs: number | undefined
  /**
   * Fault injection of a hostile rank (`FloodSpec`): `afterMs` after the run started, send
   * `framesPerSecond` extra `Heartbeat` frames, in bursts every 10 ms; `undefined` never.
   */
  readonly flood?: { readonly afterMs: number; readonly framesPerSecond: number } | undefined
  /**
   * A memory limit in MiB that the rank enforces itself, checking its engine's memory (heap and
   * typed arrays, `engineMemoryBytes`) after each batch, at most every `progressIntervalMs`: over
   * it (after a full collection under Bun), the rank crashes with an out-of-memory error. It
   * complements V8's heap limit, which counts no typed array and which Bun lacks (issue C3);
   * `undefined`: no check.
   */
  readonly heapCheckMb?: number | undefined
  readonly saveDir: string
  readonly checkpointDir: string
  /**
   * Milliseconds without any frame from the coordinator (it sends `CoordHeartbeat` every
   * `coordHeartbeatMs`, 1000 by default, from formation on) after which the rank counts it gone,
   * saves (`EmergencySave`) and exits; also the bound on that save. Default
   * `coordinatorTimeoutMsDefault` (10000); `0`: no silence check (worker-thread ranks, which
   * share the coordinator's process: its silence is a stall, and its death is theirs).
   */
  readonly coordinatorTimeoutMs?: number | undefined
  /** The averaging backend (DESIGN.md §1): `cpu` (default, `Params`/`Update`) or `ring` (module doc). */
  readonly backend?: "cpu" | "ring" | undefined
  /**
   * Fault injection inside a ring collective (tests and benches, keyed by round and step like
   * torchft's): when the rank is about to send step `step` of round `round`, it `exit`s (its
   * worker or process ends with `collectiveFaultExitCode`, without `Exiting`: a death) or
   * `hang`s (stops responding with its worker alive; only staleness can catch it).
   */
  readonly collectiveFault?: CollectiveFault | undefined
  /**
   * How ring steps travel (ring backend): `relay` (default) as `RingData` frames through the
   * coordinator, which forwards them to the next ring rank; `port` over direct links the host
   * hands over per generation (`Link.onRingPorts`: `MessageChannel`s between worker threads).
   */
  readonly ringLinks?: "relay" | "port" | undefined
}

/**
 * What a rank that joins from another host learns of the run in the coordinator's welcome
 * (`WebSocket` join protocol 1, the welcome's `run`): the run-wide part of `RankData`, plus
 * `epochSamples`, the samples of one epoch by the coordinator's trainer module (a joining rank
 * whose own trainer module says otherwise refuses to train), and the averaging `backend` (absent:
 * `cpu`; a joined rank's ring links go through the coordinator's relay). Its own `trainer`,
 * `saveDir` and `checkpointDir` are the joining host's (`rankDataOf`).
 *
 * @since 0.1.0
 * @category model
 */
export interface JoinedRun {
  readonly worldSize: number
  readonly epochSamples: number
  readonly seed: number
  readonly batchSize: number
  readonly averageEverySteps: number
  readonly heartbeatIntervalMs: number
  readonly progressIntervalMs: number
  readonly coordinatorTimeoutMs: number
  readonly backend?: "cpu" | "ring"
}

/**
 * Whether a welcome's `run` value is a `JoinedRun` (every field a finite number, counts integers >
 * 0; `backend`, when present, `cpu` or `ring`).
 *
 * @since 0.1.0
 * @category model
 */
export const isJoinedRun = (value: unknown): value is JoinedRun => {
  if (typeof value !== "object" || value === null) return false
  const run = value as Record<string, unknown>
  const positiveInteger = (key: string) => typeof run[key] === "number" && Number.isSafeInteger(run[key]) && (run[key] as number) > 0
  const nonNegative = (key: string) => typeof run[key] === "number" && Number.isFinite(run[key]) && (run[key] as number) >= 0
  return ["worldSize", "epochSamples", "batchSize", "averageEverySteps"].every(positiveInteger) &&
    ["seed", "heartbeatIntervalMs", "progressIntervalMs", "coordinatorTimeoutMs"].every(nonNegative) &&
    (run.backend === undefined || run.backend === "cpu" || run.backend === "ring")
}

/**
 * The `RankData` of a rank that joined from elsewhere: the run's part from the welcome, the
 * rest from the joining host (`trainer` URL, `saveDir`, `checkpointDir`); no fault injection and
 * no memory check of its own.
 *
 * @since 0.1.0
 * @category model
 */
export const rankDataOf = (
  run: JoinedRun,
  local: { readonly trainer: string; readonly saveDir: string; readonly checkpointDir: string }
): RankData => ({
  trainer: local.trainer,
  worldSize: run.worldSize,
  seed: run.seed,
  batchSize: run.batchSize,
  averageEverySteps: run.averageEverySteps,
  heartbeatIntervalMs: run.heartbeatIntervalMs,
  progressIntervalMs: run.progressIntervalMs,
  hangAfterMs: undefined,
  saveDir: local.saveDir,
  checkpointDir: local.checkpointDir,
  coordinatorTimeoutMs: run.coordinatorTimeoutMs,
  ...(run.backend === "ring" ? { backend: "ring" as const, ringLinks: "relay" as const } : {})
})

/**
 * A fault at one step of one ring collective (`RankData.collectiveFault`).
 *
 * @since 0.1.0
 * @category model
 */
export interface CollectiveFault {
  readonly round: number
  readonly step: number
  readonly fault: "exit" | "hang"
}

/** The exit code of a rank that `exit`s by an injected `CollectiveFault`: 70. @since 0.1.0 @category rank */
export const collectiveFaultExitCode = 70

/** Default `RankData.coordinatorTimeoutMs`: 10000 ms. @since 0.1.0 @category defaults */
export const coordinatorTimeoutMsDefault = 10_000

/**
 * The exit code of a rank whose coordinator is gone (its link closed, or it went silent for
 * `coordinatorTimeoutMs`), after its emergency save: 3. A clean leave is 0 and a crash 1.
 *
 * @since 0.1.0
 * @category rank
 */
export const coordinatorGoneExitCode = 3

/**
 * What a rank writes as `emergency.json` beside its model (`<saveDir>/rank<r>/emergency.json`)
 * when it saved because its coordinator was gone, not because it was asked to:
 *
 * - `reason`: `ChannelClosed` (the link to the coordinator ended; `closeCode` says how, 1006 when
 *   it dropped) or `CoordinatorSilent` (no frame for `silentMs` >= `coordinatorTimeoutMs`).
 * - `detail`: the same in words, as the rank's line on stderr says it.
 * - `at`: when the rank noticed (ISO 8601); `epoch`: the epoch it was training (-1 before any).
 * - `saved`: whether the trainer's `save` finished within `coordinatorTimeoutMs`; `error`: why not.
 *
 * @since 0.1.0
 * @category model
 */
export interface EmergencySave {
  readonly emergency: true
  readonly rank: Rank
  readonly reason: "ChannelClosed" | "CoordinatorSilent"
  readonly closeCode?: number
  readonly silentMs?: number
  readonly detail: string
  readonly at: string
  readonly epoch: number
  readonly saved: boolean
  readonly error?: string
}

/**
 * The rank's link to the coordinator, as a transport's `connect()` gives it.
 *
 * @since 0.1.0
 * @category model
 */
export interface Link {
  readonly transport: Transport.TransportShape
  readonly rank: Rank
  readonly data: unknown
  /**
   * Called once the coordinator is gone; returns where the rank's last line goes. A child
   * process's link sends it (and whatever the process prints from then on) to the coordinator's
   * own stderr (`ChildProcess.ProcessRank.detach`); default: the rank's `console.error`.
   */
  readonly detach?: () => (line: string) => void
  /**
   * Told the rank's progress whenever it sends a `Progress` (at most every `progressIntervalMs`):
   * the epoch, the samples this rank trained in it, and the samples it trained in all. A browser rank shows it on its page; it must not throw.
   */
  readonly status?: (status: { readonly epoch: number; readonly samplesDone: number; readonly samplesTotal: number }) => void
  /** Worker threads: the direct ring links of each generation (`RankData.ringLinks` `port`). */
  readonly onRingPorts?: (callback: (ports: RuntimeTypes.RingPorts) => void) => void
  /**
   * Asked once when the coordinator's link ended without a close code (a dropped connection):
   * learns, bounded, the code the coordinator would have closed it with, if any (`cohort join`
   * asks the server whether it declared this rank dead: `RankDead`, 4011). Must not fail.
   */
  readonly whyEnded?: Effect.Effect<number | undefined>
}

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
    const { transport, rank } = link
    const data = link.data as RankData
    const module = Trainer.validateTrainerModule(yield* Effect.promise(() => loadTrainer(data.trainer)))
    if (typeof module === "string") return yield* Effect.die(new Error(`rank ${rank}: ${module}`))
    const trainer = yield* Effect.promise(async () => module.createTrainer({ rank, worldSize: data.worldSize, seed: data.seed }))
    const checked = Trainer.validateTrainer(trainer)
    if (typeof checked === "string") return yield* Effect.die(new Error(`rank ${rank}: ${checked}`))

    // The last averaged parameters (the initial model until the first Update) and their round: what
    // every save writes as the resumable model (`SavedModel`), consistent with what was committed.
    let lastAverage = new Float32Array(checked.getParams())
    let lastAverageRound = -1
    const writeModel = (dir: string) => SavedModel.write(dir, lastAverage, { epoch, round: lastAverageRound, rank })

    let lastSentMs = 0
    let lastProgressMs = 0
    const send = (message: ToCoordinator) =>
      Effect.gen(function*() {
        lastSentMs = yield* Clock.currentTimeMillis
        yield* transport.send(toCoordinator, Codec.encode(Frame.fromRank(rank, message))).pipe(Effect.ignore)
      })

    /** Sends one ring step with `deliver`, unless an injected fault (`collectiveFault`) fires first. */
    const faultOr = (message: Ring.RingMessage, deliver: Effect.Effect<void>): Effect.Effect<void, Ring.RingLinkError> =>
      Effect.suspend(() => {
        const fault = data.collectiveFault
        if (fault !== undefined && fault.round === message.round && fault.step === message.step) {
          if (fault.fault === "exit") leave(collectiveFaultExitCode)
          else hangAtMs = 0
          return Effect.never
        }
        return deliver
      })
    // Wakes the main loop when a direct link delivers (an idle rank may have to join a collective).
    let wake = Deferred.makeUnsafe<void>()
    const notify = (): void => void Deferred.doneUnsafe(wake, Effect.void)
    interface RingChannel {
      readonly link: Ring.BufferedLink
      readonly inbox: Ring.RingInbox
      readonly close: () => void
    }
    /** The relay (`RingData` through the coordinator): one link for every generation. */
    const relayLink = new Ring.BufferedLink((message) =>
      faultOr(message, send({ _tag: "RingData", generation: message.generation, round: message.round, step: message.step, data: message.data }))
    )
    const relay: RingChannel = { link: relayLink, inbox: new Ring.RingInbox(relayLink), close: () => {} }
    /** Direct links by generation (worker threads); superseded ones are closed and dropped. */
    const usePorts = data.ringLinks === "port" && link.onRingPorts !== undefined
    const portChannels = new Map<number, RingChannel>()
    const dropPortsBefore = (generation: number): void => {
      for (const [g, channel] of portChannels) {
        if (g >= generation) continue
        channel.close()
        portChannels.delete(g)
      }
    }
    if (usePorts) {
      link.onRingPorts!((ports) => {
        if (ringView !== undefined && ports.generation < ringView.generation) return ports.close()
        const direct = new Ring.BufferedLink((message) => faultOr(message, Effect.sync(() => ports.send(message))))
        ports.onMessage((message) => {
          direct.push(message)
          notify()
        })
        portChannels.set(ports.generation, { link: direct, inbox: new Ring.RingInbox(direct), close: ports.close })
        notify()
      })
    }
    const channelFor = (generation: number): RingChannel | undefined => (usePorts ? portChannels.get(generation) : relay)

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
    // The ring backend's state (module doc): the latest FormRing; a generation a DeclareDead
    // aborted (no collective of it starts again); the round's pre-round contribution; the running
    // collective; its mean, finished but not yet confirmed by RoundCommitted.
    const ringBackend = data.backend === "ring"
    let ringView: FormRing | undefined
    let blockedGeneration = -1
    let pending: { readonly epoch: number; readonly samplesDone: number; readonly params: Float32Array; readonly contributes: boolean } | undefined
    let collective: { readonly generation: number; readonly round: number; fiber: Fiber.Fiber<void> | undefined } | undefined
    let finished: { readonly generation: number; readonly round: number; readonly mean: Float32Array } | undefined
    let ringFailure: Ring.RingLinkError | undefined
    let stopping: { readonly save: boolean; readonly reason: string } | undefined
    let hangAtMs = Number.POSITIVE_INFINITY
    let samplesTotal = 0
    let samplesInEpoch = 0
    // A hostile rank's flood (fault injection): bursts of Heartbeats on a timer of its own.
    const floodFrom = (afterMs: number, framesPerSecond: number): void => {
      const heartbeat = Codec.encode(Frame.fromRank(rank, { _tag: "Heartbeat" }))
      const perBurst = Math.max(1, Math.round(framesPerSecond / 100))
      setTimeout(() => {
        const timer = setInterval(() => {
          for (let i = 0; i < perBurst; i++) {
            if (transport.sendUnsafe(toCoordinator, heartbeat) !== undefined) return clearInterval(timer)
          }
        }, 10)
      }, afterMs)
    }
    const heapCheckMb = data.heapCheckMb
    let lastHeapCheckMs = 0

    // The coordinator's liveness, as the rank sees it: its link's end, or its silence.
    const coordinatorTimeoutMs = data.coordinatorTimeoutMs ?? coordinatorTimeoutMsDefault
    const saveTimeoutMs = coordinatorTimeoutMs > 0 ? coordinatorTimeoutMs : coordinatorTimeoutMsDefault
    const startedMs = yield* Clock.currentTimeMillis
    let linkEnded: DeathReport.DeathCause | undefined
    type Gone =
      | { readonly reason: "ChannelClosed"; readonly closeCode: number | undefined }
      | { readonly reason: "CoordinatorSilent"; readonly silentMs: number }
    /** The coordinator's silence at `nowMs` past `coordinatorTimeoutMs`, if it is. */
    const silence = (nowMs: number): Gone | undefined => {
      if (coordinatorTimeoutMs <= 0) return undefined
      const silentMs = nowMs - Math.max(startedMs, transport.lastArrivalMs(toCoordinator) ?? startedMs)
      return silentMs > coordinatorTimeoutMs ? { reason: "CoordinatorSilent", silentMs } : undefined
    }
    const channelClosed = (): Gone => ({
      reason: "ChannelClosed",
      closeCode: linkEnded?._tag === "Disconnected" ? linkEnded.closeCode : undefined
    })
    const describe = (why: Gone): string =>
      why.reason === "CoordinatorSilent"
        ? `no frame for ${Math.round(why.silentMs)} ms, over coordinatorTimeoutMs ${coordinatorTimeoutMs}`
        : why.closeCode === undefined || why.closeCode === Transport.CloseCode.Abnormal
        ? "channel closed"
        : `channel closed with code ${why.closeCode}`
    /** The rank's last line's head: declared dead (the coordinator is still there), or the coordinator is gone. */
    const headOf = (why: Gone): string =>
      why.reason === "ChannelClosed" && why.closeCode === Transport.CloseCode.RankDead
        ? `the coordinator declared this rank dead (close code ${why.closeCode})`
        : `the coordinator is gone (${describe(why)})`
    /** A link that dropped without a code: what the link learns of why (`Link.whyEnded`), if it can. */
    const learnWhy = (why: Gone): Effect.Effect<Gone> =>
      why.reason === "ChannelClosed" && link.whyEnded !== undefined &&
        (why.closeCode === undefined || why.closeCode === Transport.CloseCode.Abnormal)
        ? Effect.map(link.whyEnded, (closeCode) => (closeCode === undefined ? why : { reason: "ChannelClosed", closeCode }))
        : Effect.succeed(why)
    /**
     * The coordinator is gone: save where we can (bounded), say so in one line, leave. Never
     * throws: a save that fails or takes too long is reported in the line and in emergency.json.
     */
    const gone = (first: Gone, save = true) =>
      Effect.gen(function*() {
        const why = yield* learnWhy(first)
        const say = link.detach?.() ?? ((line: string) => console.error(line))
        const detail = describe(why)
        const head = headOf(why)
        if (!save) {
          say(`cohort rank ${rank}: ${head}; no save (the rank was hung)`)
          return leave(coordinatorGoneExitCode)
        }
        const dir = `${data.saveDir}/rank${rank}`
        const saved = yield* Effect.tryPromise(async () => {
          await Files.mkdir(dir)
          await trainer.save(dir)
          await writeModel(dir)
        }).pipe(Effect.result, Effect.timeoutOption(saveTimeoutMs))
        const error = saved._tag === "None"
          ? `the save did not finish within ${saveTimeoutMs} ms`
          : Result.isFailure(saved.value)
          ? DeathReport.errorMessage(saved.value.failure.cause ?? saved.value.failure)
          : undefined
        const record: EmergencySave = {
          emergency: true,
          rank,
          reason: why.reason,
          ...(why.reason === "ChannelClosed"
            ? why.closeCode === undefined ? {} : { closeCode: why.closeCode }
            : { silentMs: Math.round(why.silentMs) }),
          detail,
          at: new Date().toISOString(),
          epoch,
          saved: error === undefined,
          ...(error === undefined ? {} : { error })
        }
        yield* Effect.tryPromise(async () => {
          await Files.mkdir(dir)
          await Files.writeFile(`${dir}/emergency.json`, `${JSON.stringify(record, null, 2)}\n`)
        }).pipe(Effect.ignore, Effect.timeoutOption(saveTimeoutMs))
        say(
          error === undefined
            ? `cohort rank ${rank}: ${head}; saved to ${dir} (emergency)`
            : `cohort rank ${rank}: ${head}; the emergency save to ${dir} failed: ${error}`
        )
        leave(coordinatorGoneExitCode)
      })

    const enterEpoch = (next: number): void => {
      if (epoch < 0 && data.hangAfterMs !== undefined) hangAtMs = Date.now() + data.hangAfterMs
      if (epoch < 0 && data.flood !== undefined) floodFrom(data.flood.afterMs, data.flood.framesPerSecond)
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
            const saved = yield* Effect.tryPromise(async () => {
              await trainer.save(dir)
              await writeModel(dir)
            }).pipe(Effect.result)
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
            const result = yield* Effect.promise(async () => evaluate())
            yield* send({ _tag: "EvalResult", epoch: message.epoch, accuracy: result.accuracy, loss: result.loss })
            return
          }
          case "FormRing": {
            // A newer generation supersedes the collective of an older one; an older FormRing is ignored.
            if (ringView !== undefined && message.generation <= ringView.generation) return
            ringView = message
            dropPortsBefore(message.generation)
            if (collective !== undefined && collective.generation < message.generation) yield* abortCollective
            if (finished !== undefined && finished.generation < message.generation) finished = undefined
            yield* send({ _tag: "RingReady", generation: message.generation })
            yield* startCollective // redo an unconfirmed round from the pre-round parameters
            return
          }
          case "DeclareDead":
            // Abort at once: no rank waits on a dead neighbour. A newer FormRing follows (or a shutdown).
            if (!ringBackend) return
            if (ringView !== undefined) blockedGeneration = Math.max(blockedGeneration, ringView.generation)
            yield* abortCollective
            finished = undefined
            return
          case "RoundCommitted": {
            const done = finished
            if (done === undefined || done.generation !== message.generation || done.round !== message.round) return
            // A copy of our own: a trainer that keeps the array it was given may train in place on it.
            lastAverage = done.mean.slice()
            trainer.setParams(done.mean)
            lastAverageRound = message.round
            round = message.round + 1
            finished = undefined
            pending = undefined
            waitingUpdate = false
            return
          }
          case "RingData":
            relayLink.push({ generation: message.generation, round: message.round, step: message.step, data: message.data })
            return
          case "ShutdownWithSave":
            stopping = { save: true, reason: message.reason }
            return
          case "Shutdown":
            stopping = { save: false, reason: "Shutdown" }
            return
          case "SetRoles":
          case "RequestParams":
          case "CoordHeartbeat":
            return
        }
      })

    /** Applies one transport event; returns false when the coordinator's link ended. */
    const apply = (event: Transport.Event) =>
      Effect.gen(function*() {
        if (event._tag === "Ended") {
          if (event.peer === toCoordinator) linkEnded = event.cause
          return event.peer !== toCoordinator
        }
        if (event._tag !== "Frame") return true
        const decoded = Codec.decode(event.bytes, { from: "coordinator" })
        if (Result.isFailure(decoded)) return true // counted by the transport's inspector
        yield* handle(decoded.success.message as ToRank)
        return true
      })

    /** Interrupts the running collective, if any: it changes nothing the rank holds. */
    const abortCollective = Effect.suspend(() => {
      const running = collective
      collective = undefined
      return running?.fiber === undefined ? Effect.void : Fiber.interrupt(running.fiber)
    })

    /**
     * Starts the all-reduce of the pending contribution in the current generation, unless one
     * runs or finished already, no ring is formed yet, or a `DeclareDead` aborted this generation.
     * When it completes the rank reports `RoundDone` and keeps the mean until `RoundCommitted`.
     */
    const startCollective: Effect.Effect<void> = Effect.suspend(() => {
      const view = ringView
      const contribution = pending
      if (contribution === undefined || view === undefined || collective !== undefined || finished !== undefined) return Effect.void
      if (view.generation <= blockedGeneration) return Effect.void
      const channel = channelFor(view.generation)
      if (channel === undefined) return Effect.void // its direct links have not arrived yet
      const entry: { readonly generation: number; readonly round: number; fiber: Fiber.Fiber<void> | undefined } = {
        generation: view.generation,
        round,
        fiber: undefined
      }
      collective = entry
      const shape = { ringRank: view.ringRank, ringSize: view.ringSize, generation: view.generation, round }
      const body = Ring.allReduce(channel.inbox, shape, contribution.params, contribution.contributes).pipe(
        Effect.flatMap((mean) =>
          Effect.suspend(() => {
            if (collective !== entry) return Effect.void
            collective = undefined
            finished = { generation: entry.generation, round: entry.round, mean }
            return send({ _tag: "RoundDone", epoch: Math.max(contribution.epoch, 0), round: entry.round, generation: entry.generation, samplesDone: contribution.samplesDone })
          })
        ),
        Effect.catch((error) =>
          Effect.sync(() => {
            if (collective === entry) ringFailure = error
          })
        )
      )
      return Effect.map(Effect.forkChild(body), (fiber) => {
        entry.fiber = fiber
      })
    })

    const contribute = (samplesDone: number) =>
      Effect.gen(function*() {
        // A ring member that trained nothing since its last round keeps the ring whole but adds
        // nothing to the mean (as cpu's round, which only averages its contributors).
        const trainedSince = batchesSinceContribution > 0
        batchesSinceContribution = 0
        waitingUpdate = true
        if (ringBackend) {
          // The pre-round parameters: what every collective of this round (and its redo) averages.
          pending = { epoch, samplesDone, params: Float32Array.from(trainer.getParams()), contributes: trainedSince }
          return yield* startCollective
        }
        yield* send({ _tag: "Params", epoch, round, samplesDone, params: trainer.getParams() })
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
      yield* Effect.promise(async () => trainer.trainBatch(indices))
      batchesSinceContribution += 1
      samplesTotal += indices.length
      samplesInEpoch += indices.length
      const finished = yield* Clock.currentTimeMillis
      if (heapCheckMb !== undefined && finished - lastHeapCheckMs >= data.progressIntervalMs) {
        lastHeapCheckMs = finished
        // Over the limit: measure again after a full collection, so garbage never kills a rank.
        const over = NodeRuntime.engineMemoryBytes() / 2 ** 20 > heapCheckMb
        if (over) BunRuntime.collectGarbage()
        const heapMb = NodeRuntime.engineMemoryBytes() / 2 ** 20
        if (over && heapMb > heapCheckMb) {
          return yield* Effect.die(
            Object.assign(new Error(`out of memory: ${Math.round(heapMb)} MiB in use, over the rank memory limit of ${heapCheckMb} MiB`), {
              code: NodeRuntime.outOfMemoryCode
            })
          )
        }
      }
      if (finished - lastProgressMs >= data.progressIntervalMs) {
        lastProgressMs = finished
        yield* send({ _tag: "Progress", epoch, samplesDone: trained, msPerBatch: Math.max(finished - started, 0.001) })
        link.status?.({ epoch, samplesDone: samplesInEpoch, samplesTotal })
      }
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

    yield* send({ _tag: "Hello", paramsLength: trainer.getParams().length })
    while (true) {
      if ((yield* Clock.currentTimeMillis) >= hangAtMs) {
        // Stop responding (the worker stays alive), but never outlive the coordinator.
        while (true) {
          const event = yield* Queue.take(transport.inbox).pipe(
            Effect.timeoutOption(data.heartbeatIntervalMs),
            Effect.catch(() => Effect.succeed(undefined))
          )
          if (event === undefined || (event._tag === "Some" && event.value._tag === "Ended" && event.value.peer === toCoordinator)) {
            if (event?._tag === "Some" && event.value._tag === "Ended") linkEnded = event.value.cause
            return yield* gone(channelClosed(), false)
          }
          const silent = silence(yield* Clock.currentTimeMillis)
          if (silent !== undefined) return yield* gone(silent, false)
        }
      }
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
      if (ringFailure !== undefined) {
        return yield* Effect.die(new Error(`rank ${rank}: ring collective failed: ${ringFailure.message}`))
      }
      // A rank with no work left joins its neighbours' collective of its round as soon as their
      // first message reaches it, so that they never wait on an idle rank (epoch ends included).
      if (ringBackend && ringView !== undefined) {
        const channel = channelFor(ringView.generation)
        if (!waitingUpdate && !hasWork() && channel?.inbox.holds(ringView.generation, round, channel.link.pending) === true) {
          yield* contribute(trained)
        }
        // A contribution whose direct links arrived after its FormRing starts now.
        if (pending !== undefined) yield* startCollective
      }
      const now = yield* Clock.currentTimeMillis
      const silent = silence(now)
      if (silent !== undefined) return yield* gone(silent)
      if (now - lastSentMs >= data.heartbeatIntervalMs) yield* send({ _tag: "Heartbeat" })
      if (!waitingUpdate && hasWork()) {
        yield* trainOne
        yield* Effect.sleep(0) // let the event loop deliver frames and timers between batches
        continue
      }
      // Nothing to do until the coordinator (or a direct ring link) speaks: wait, heartbeating on time.
      const woken = wake
      const event = yield* Effect.raceFirst(
        Queue.take(transport.inbox).pipe(
          Effect.timeoutOption(data.heartbeatIntervalMs),
          Effect.catch(() => Effect.succeed(undefined))
        ),
        Effect.as(Deferred.await(woken), "woken" as const)
      )
      if (event === "woken") {
        wake = Deferred.makeUnsafe<void>()
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
 * its end). `loadTrainer` imports the trainer module (bundled entries pass the module they
 * contain). A failure to connect is a defect: the rank ends and its supervisor reports it.
 *
 * A rank that fails (its trainer throws, a defect) reports the error as its last frame,
 * `Crashing{error, stack}`, and exits with code 1: its supervisor then declares it
 * `Crashed{error, stack}`. This is how a child process reports its error at all, and how a
 * worker's stack reaches the coordinator under Deno, whose worker `error` event carries none
 * (issue C1). Nothing is printed: the coordinator shows the error once.
 *
 * @since 0.1.0
 * @category rank
 */
export const main = (
  connect: Effect.Effect<Link, Transport.TransportError>,
  loadTrainer?: (url: string) => Promise<unknown>,
  leave: (code: number) => void = (code) => process.exit(code)
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
    })
  )
