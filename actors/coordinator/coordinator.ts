/**
 * The coordinator actor: the shell around the core state machine (docs/design.md §3, §3.10).
 *
 * It owns the core's state and reads one mailbox in order: frames, bad frames and death reports
 * from the supervised transport, and ticks from a schedule (`tickMs`). Each input is one
 * `Coordinator.step`; the commands that come out are carried out over the transport at once.
 * A death report wakes the coordinator: the batch of inputs that holds it ends with a tick, so
 * every frame that arrived before it is applied first (the inbox keeps arrival order), the
 * batch's reports are declared together, and none waits behind the later batches in the mailbox.
 * A batch after which a rank's timeout ran out, or that ends a tick period or more after the last
 * tick, ticks too: under a backlog, the scheduled tick would wait behind the mailbox. A send that fails goes back to the core as `SendFailed`.
 *
 * Its own stalls never kill ranks (docs/design.md §3.10): the core pauses liveness for any gap between
 * inputs longer than `coordinatorStallMs` (the actor ticks at least twice per that period), and
 * before each tick the ranks the core is about to find stale are checked against the transport's
 * arrival times: a rank whose frame already arrived but still waits behind other links' frames is
 * `Seen`, not declared.
 *
 * At formation every rank's `Hello` gives its parameter count; the count most ranks gave (ties to
 * the lowest rank's) is the run's, and a rank that gave another is refused: declared dead at once
 * (`Refused`) and its link closed with `CloseCode.ParamsMismatch`.
 *
 * Growing runs (the rules: `src/core/joins.ts`). Formation starts once `minRanks` ranks
 * sent their `Hello` (the core's `minRanks`, default the world size); the formation ranks still
 * missing are `absent` (vacant). After the start, a `Hello` from a vacant index (a formation rank
 * that came late, or a rank the transport let in through its `admit` check) is that rank's join:
 * its parameter count is checked as at formation (another count closes its link with
 * `ParamsMismatch`, 4009, and it never joins), then the core gets `Join{rank}`. Its commands:
 *
 * - `Welcome`: the joiner gets `SetRoles` (the roles) and then `Update{round, params}`: the last
 *   round's mean (`round` the round that produced it), or the resumed model, or, before any round
 *   closed, no parameters (the rank keeps its own initial model, built from the run's seed). Both
 *   are existing messages, so the wire's structures table is unchanged; the rank learns the epoch
 *   from its first `AssignChunk` or (static) its empty `StartEpoch`.
 * - `JoinRefused`: the joiner's link closes with `Transport.joinRefusalCloseCode[reason]`
 *   (4013-4020); its end is not a death of the run (the core never admitted it).
 *   With the ring backend (`model: "peer"`) the joiner gets only `SetRoles` here: its model comes
 *   from a ring member when it enters the ring (`SendModel`).
 * - `SendModel{to, from, round}` (ring backend): the shell asks `from` with `RequestParams{round}`;
 *   the rank answers with `Params{round, params}` (its parameters as of that round's commit), which
 *   goes to the core like any frame; the core checks it (only from the member it asked, for that
 *   round, of the run's parameter count, finite) and forwards it to `to` as `Update{round, params}`
 *   (`src/core/joins.ts` "Model hand-over"). The coordinator keeps no copy: it relays, so a ring
 *   coordinator still holds no model, and the frames are the existing `RequestParams`, `Params`
 *   and `Update` (the wire's structures table is unchanged and every peer version still reads
 *   them). From `SendModel` until that `Update` (or the run's shutdown) the shell holds back every
 *   frame for `to` but `CoordHeartbeat`: its `FormRing`, ring steps relayed to it, chunks and
 *   partitions go out right after its model, in order, so the joiner never takes part in a
 *   collective, nor trains, before it holds the model. The frames held are those of one hand-over
 *   (at most a re-form per rendezvous attempt and one round's ring steps): the core bounds its
 *   length by re-asking another member when the asked one leaves, and by `ReduceStall` when none
 *   is left or the rendezvous times out (`ringRendezvousTimeoutMs` x `ringRendezvousAttemptsMax`).
 *
 * The frames in once the run started (joins, the ring relay, bad frames, death reports) and the
 * frames out (with a ring joiner's held back) are `coordinator-inbound.ts`; the core's commands
 * carried out (with the `cpu` backend's averaging) are `coordinator-commands.ts`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as References from "effect/References"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Queue from "effect/Queue"
import * as Actor from "../../src/actor/actor.ts"
import * as Deltas from "../../src/averaging/deltas.ts"
import * as Outer from "../../src/averaging/outer.ts"
import * as Core from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Supervisor from "../../src/transport/supervisor.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import * as Packed from "../../src/wire/packed.ts"
import * as CoordinatorInbound from "./coordinator-inbound.ts"
import { decodeFrame, observe } from "./coordinator-inbound.ts"
import type { Hooks } from "./coordinator-inbound.ts"
import { execute } from "./coordinator-commands.ts"
import type { CommandShell } from "./coordinator-commands.ts"

export type { Hooks } from "./coordinator-inbound.ts"

/**
 * - `state`: a core state made with `Core.make` (not started).
 * - `transport`: the coordinator's endpoint (a worker or process host's).
 * - `tickMs`: tick period in ms (default 100); at most half the core's `coordinatorStallMs` when
 *   that is on, and at most a quarter of its `roundDeadlineMs` or `roundSilenceMs` when on (but not under
 *   `roundDeadlineTickMsMin`, 5 ms): a longer period is shortened to it.
 * - `coordHeartbeatMs`: how often survivors get a `CoordHeartbeat` (default 1000), and, while
 *   the run forms, every rank that already sent its `Hello`: a rank process takes
 *   `coordinatorTimeoutMs` without a frame for a coordinator that is gone.
 * - `formationTimeoutMs`: how long every rank has to send `Hello` (it does once its trainer is
 *   ready) before the run fails to form (default 120000). The core starts when the last one did
 *   (when the core's `minRanks`-th one did; the rest join the running run).
 * - `resume`: a resumed run's starting point (`Core.Resume`) and the parent's model.
 *   At formation every rank gets `Update{round: firstRound - 1, params}` (ranks `setParams` it)
 *   before the core's first commands; a model whose length is not the agreed parameter count
 *   fails the formation (`FormationError`: another trainer than the parent's).
 *
 * @since 0.1.0
 * @category options
 */
export interface Options {
  readonly state: Core.State
  readonly transport: Transport.TransportShape
  readonly tickMs?: number
  readonly coordHeartbeatMs?: number
  readonly formationTimeoutMs?: number
  /**
   * Ranks that join from elsewhere (a served run): a rank that ends before the run formed does
   * not fail it but leaves its index free; this is called with the rank and why it left (its
   * `Crashing` error, else its end's cause), once its end was taken, and the formation keeps
   * waiting (`formationTimeoutMs`). Without it (ranks this launcher started, which would not come
   * back), such an end fails the formation (`FormationError`).
   */
  readonly vacate?: (rank: Rank, reason: string) => void
  readonly hooks?: Hooks
  /**
   * Ranks gone silent by injection (`serve --churn`): their frames are dropped unread, so only
   * the heartbeat timeout takes them out. The set may grow while the run goes on.
   */
  readonly muted?: ReadonlySet<Rank>
  readonly resume?: { readonly point: Core.Resume; readonly params: Float32Array | undefined }
  /**
   * A run a restarted coordinator took over (docs/recovery.md): it forms once every rank of
   * `expected` sent its `Hello` (ranks coming back send it again on their recovered link), or
   * `windowMs` after the formation began with at least one; then each rank of `[0, worldSize)` that
   * did not is declared dead at once, with the reason `causeOf(rank)` (a `Refused` cause).
   * `ringCommitted` (ring backend): the last round the lost coordinator committed and its
   * generation; each rank gets `RoundCommitted` of it before its `Update`, so that every rank
   * holds that round's mean (a member that finished the round but never had its confirmation
   * applies it now; one that finished a later round drops it).
   */
  readonly recovery?: {
    readonly windowMs: number
    readonly expected: ReadonlyArray<Rank>
    readonly causeOf: (rank: Rank) => string
    readonly ringCommitted?: { readonly round: number; readonly generation: number } | undefined
    /** Ring: an ended epoch whose model the members hold, asked of one at the start (`Core.StartOptions.owedModel`). */
    readonly owedModel?: { readonly epoch: number; readonly round: number } | undefined
  }
  /**
   * Ring backend with direct links (worker threads): called once per generation, just
   * before its `FormRing`s go out, with the ring's ranks in ring order; it hands each rank its
   * links (`WorkerHost.formRing`). Without it, ring steps are relayed as `RingData` frames. When
   * the generation averages in a shared all-reduce area it returns how to commit a round there
   * (`SharedAllReduce.commit`): that generation's rounds are then committed through it, not sent
   * as `RoundCommitted` frames (one store and one wake-up instead of a frame per member).
   */
  readonly formRingLinks?: (
    generation: number,
    peers: ReadonlyArray<Rank>,
    paramsLength: number | undefined
  ) => ((round: number) => void) | undefined
  /**
   * Ring backend: the ranks link to their ring neighbours directly over sockets they were given
   * (child processes, `--ring-links direct`), not through listeners they advertise; a rank whose
   * link closes mid-collective relays the rest of it (`Ring.RelayOrder`). Default false.
   */
  readonly ringPeerLinks?: boolean
  /**
   * `cpu` backend: how each round's `Update` travels (docs/edge-averaging.md): `none` (default,
   * float32), `fp16` or `int8` (`Packed`, with error feedback: what packing dropped is added to
   * the next round's mean before it is packed). Every rank then holds the unpacked mean, and so
   * does this coordinator (its epoch models, its joiners' model).
   */
  readonly compress?: Packed.Compression
  /**
   * `cpu` backend: the outer optimizer (docs/edge-averaging.md): each round's mean change from
   * the last committed model goes through SGD with Nesterov momentum (`Outer.step`) before it is
   * sent. `undefined`, or `lr` 1 with `momentum` 0: plain averaging.
   */
  readonly outer?: Outer.Settings
  /** The outer optimizer's momentum to start from (a resumed run's parent's, `EpochModels`). */
  readonly outerMomentum?: Float32Array
  /**
   * `cpu` backend: ranks contribute their change since the model last sent (`RankData.deltas`),
   * turned back into parameters as each arrives (`Deltas`; docs/edge-averaging.md "Deltas").
   * Default false: contributions are parameters.
   */
  readonly deltas?: boolean
}

/**
 * The run did not form: a rank ended before every rank joined, or the formation timed out. Every
 * rank is then stopped: a half-formed run has nothing to recover.
 *
 * @since 0.1.0
 * @category errors
 */
export class FormationError extends Error {
  readonly _tag = "FormationError"
}

/**
 * A running coordinator: `outcome` completes when the run ends (completed or unrecoverable), after
 * the hooks saw every command and declared death of the step that ended it, or
 * fails with `FormationError` when the run never formed;
 * `state` is the live core state (read it, never write it).
 *
 * @since 0.1.0
 * @category model
 */
export interface Handle {
  readonly outcome: Deferred.Deferred<Core.Outcome, FormationError>
  readonly state: Core.State
  readonly stats: Effect.Effect<Actor.MailboxStats>
  /** Ring steps this coordinator relayed (`RingData`) and dropped (an older generation, a gone sender). */
  readonly relayStats: () => { readonly relayed: number; readonly dropped: number }
  /**
   * Asks the run to stop (an operator's interrupt; `detail` says which, e.g. `SIGINT`): the core
   * decides (`ShutdownRequested`: `ShutdownWithSave{GracefulShutdown}` to the survivors and the
   * outcome `interrupted`, docs/design.md §1, §3.6); a run already over ignores it. Queued behind the
   * mailbox's inputs, so that every frame already received counts first.
   */
  readonly interrupt: (detail: string) => Effect.Effect<void>
  /**
   * Reports a shortage of the coordinator's own process (`detail`: what and how often; a
   * listener's connection cap, file descriptors): a `CoordinatorResource` alert, never a rank's
   * fault (`Core.Input` `CoordinatorResource`).
   */
  readonly resource: (detail: string) => Effect.Effect<void>
}

/**
 * The run's parameter count from the ranks' `Hello`s: the count most ranks gave, ties to the one
 * the lowest rank gave. One rank cannot impose its count on the others.
 */
const agreedParamsLength = (joined: ReadonlyMap<Rank, number>): number | undefined => {
  const votes = new Map<number, { count: number; lowestRank: Rank }>()
  for (const [rank, length] of joined) {
    const vote = votes.get(length)
    if (vote === undefined) votes.set(length, { count: 1, lowestRank: rank })
    else {
      vote.count += 1
      vote.lowestRank = Math.min(vote.lowestRank, rank)
    }
  }
  let best: { length: number; count: number; lowestRank: Rank } | undefined
  for (const [length, vote] of votes) {
    if (best === undefined || vote.count > best.count || (vote.count === best.count && vote.lowestRank < best.lowestRank)) {
      best = { length, ...vote }
    }
  }
  return best?.length
}

/**
 * The coordinator's mailbox holds this many messages (a batch of inbound events is one) before the
 * transport waits (back-pressure), and a batch holds at most `inboundBatchMax` events. Two keep
 * the actor fed while the next batch is taken; every batch more is one more a death report
 * waits behind (at 256 ranks, 64 `Params` of 10,000 parameters take a few ms).
 */
const mailboxCapacity = 2
const inboundBatchMax = 64

/** The shortest tick a round deadline asks for: 5 ms. @since 0.1.0 @category constructors */
export const roundDeadlineTickMsMin = 5

type Message =
  | { readonly _tag: "Start" }
  | { readonly _tag: "Inbound"; readonly events: ReadonlyArray<Supervisor.Inbound> }
  | { readonly _tag: "Tick" }
  | { readonly _tag: "Interrupt"; readonly detail: string }
  | { readonly _tag: "Resource"; readonly detail: string }

/**
 * The coordinator shell's state beside the core's: what its steps share (what its commands keep
 * is `CommandShell`'s).
 */
interface Shell extends CommandShell {
  readonly options: Options
  readonly outcome: Deferred.Deferred<Core.Outcome, FormationError>
  readonly formationTimeoutMs: number
  readonly coordHeartbeatMs: number
  /** Each joined rank's parameter count, from its `Hello`. */
  readonly joined: Map<Rank, number>
  formingSinceMs: number | undefined
  lastBeatMs: number
  /** When the last tick ran, and the tick period (ms): a batch of inputs ticks once one is due. */
  lastTickMs: number
  readonly tickMs: number
  self: Actor.ActorRef<Message, never> | undefined
  /** With deltas on: which ranks hold a model sent, to tell a change from parameters (`Deltas`). */
  readonly deltas: Deltas.Deltas | undefined
}

/** Resolves `outcome` once the run ended and the observers saw every command of its step. */
const settle = (shell: Shell): Effect.Effect<void> =>
  Effect.suspend(() => (shell.ended === undefined ? Effect.void : Deferred.succeed(shell.outcome, shell.ended)))

// One step's commands go out without yielding to the event loop in between, so that a death's
// extensions reach the transport together, before any further input is read.
const afterStep = (shell: Shell, commands: ReadonlyArray<Core.Command>, deathsBefore: number, leavesBefore: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { state, hooks } = shell
    const bytesBefore = shell.io.controlBytes()
    yield* execute(shell, commands)
    if (state.deaths.length > deathsBefore && hooks.onDeclared !== undefined) {
      const declared = state.deaths.slice(deathsBefore)
      const nowMs = yield* Clock.currentTimeMillis
      observe(() => hooks.onDeclared?.(declared, nowMs))
    }
    if (state.leaves.length > leavesBefore && hooks.onLeft !== undefined) {
      const left = state.leaves.slice(leavesBefore)
      const nowMs = yield* Clock.currentTimeMillis
      observe(() => hooks.onLeft?.(left, nowMs, shell.io.controlBytes() - bytesBefore))
    }
    yield* settle(shell)
  }).pipe(Effect.provideService(References.PreventSchedulerYield, true))

/**
 * Steps the core now; returns the effect that carries out what it decided, or `undefined`
 * when it decided nothing (most frames: a heartbeat, a progress report), so that a stream of
 * such frames costs no effect per frame.
 */
const stepNow = (shell: Shell, input: Core.Input): Effect.Effect<void> | undefined => {
  const deathsBefore = shell.state.deaths.length
  const leavesBefore = shell.state.leaves.length
  const commands = Core.step(shell.state, input)
  return commands.length === 0 && shell.state.deaths.length === deathsBefore && shell.state.leaves.length === leavesBefore
    ? undefined
    : afterStep(shell, commands, deathsBefore, leavesBefore)
}

const stepAndExecute = (shell: Shell, input: Core.Input): Effect.Effect<void> => Effect.suspend(() => stepNow(shell, input) ?? Effect.void)

/**
 * Before the run starts: wait for every rank's Hello; any end of a rank fails the run (or, in a
 * served run, frees its index: `Options.vacate`). The run
 * starts at the Hello that completes it; the rest of its batch is then ordinary input.
 */
const form = (shell: Shell, message: Message): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { state, outcome, joined, io } = shell
    if (message._tag !== "Inbound") return yield* checkFormation(shell, yield* Clock.currentTimeMillis)
    for (const event of message.events) {
      if (state.started || (yield* Deferred.isDone(outcome))) {
        const effect = state.started ? io.inbound(event) : undefined
        if (effect !== undefined) yield* effect
        continue
      }
      if (event._tag === "DeathReport") {
        const cause = io.causeOf(event.rank, event.cause)
        const vacate = shell.options.vacate
        if (vacate !== undefined) {
          joined.delete(event.rank)
          io.crashes.delete(event.rank)
          io.ringNeighbours.advertised(event.rank, undefined)
          vacate(event.rank, cause._tag === "Crashed" ? cause.error : Core.causeText(cause))
          continue
        }
        const at = cause._tag === "Crashed" && cause.stack !== undefined ? DeathReport.topFrame(cause.stack) : ""
        yield* Deferred.fail(
          outcome,
          new FormationError(`rank ${event.rank} ${Core.causeText(cause)} before the run formed${at === "" ? "" : ` (${at})`}`)
        )
        return
      }
      if (event._tag === "Frame") {
        const decoded = decodeFrame(event, state.paramsLength)
        const frameMessage = Result.isSuccess(decoded) ? decoded.success.message : undefined
        if (frameMessage?._tag === "Hello" && !joined.has(event.peer)) {
          joined.set(event.peer, frameMessage.paramsLength)
          shell.io.ringNeighbours.advertised(event.peer, frameMessage.ringAddress)
        }
        if (frameMessage?._tag === "Crashing") io.crashes.set(event.peer, { error: frameMessage.error, stack: frameMessage.stack })
      }
      yield* checkFormation(shell, yield* Clock.currentTimeMillis)
    }
  })

/** Starts the core once enough ranks joined: the resumed model first, then a rank whose count differs is refused. */
const startRun = (shell: Shell, nowMs: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { state, transport, joined, outcome } = shell
    const paramsLength = agreedParamsLength(joined)
    const resume = shell.options.resume
    if (resume?.params !== undefined) {
      if (resume.params.length !== paramsLength) {
        const error = new FormationError(
          `the saved model has ${resume.params.length} parameters; the trainer's model has ${paramsLength ?? "no agreed count of"} parameters`
        )
        return yield* Deferred.fail(outcome, error)
      }
      const round = Math.max(0, resume.point.firstRound - 1)
      const update = Codec.encode(Frame.fromCoordinator({ _tag: "Update", round, params: resume.params }))
      for (const rank of joined.keys()) if (transport.sendUnsafe(rank, update) === undefined) shell.deltas?.modelSent(rank, round)
    } else if (resume !== undefined && shell.options.recovery !== undefined) {
      // A run taken over before any round closed, or a ring run: its ranks went back to their last
      // averaged model and wait for an Update; one without parameters has them keep it. A ring's
      // ranks first learn which round's mean that must be (`recovery.ringCommitted`).
      const committed = shell.options.recovery.ringCommitted
      const confirm = committed === undefined ? undefined : Codec.encode(Frame.fromCoordinator({ _tag: "RoundCommitted", ...committed }))
      const update = Codec.encode(
        Frame.fromCoordinator({ _tag: "Update", round: Math.max(0, resume.point.firstRound - 1), params: new Float32Array(0) })
      )
      for (const rank of joined.keys()) {
        if (confirm !== undefined) transport.sendUnsafe(rank, confirm)
        transport.sendUnsafe(rank, update)
      }
    }
    // Formation ranks not here yet are vacant; they join later (`minRanks`). A recovered run's are
    // declared dead once it started (below).
    const recovery = shell.options.recovery
    const missing = Array.from({ length: state.config.worldSize }, (_, r) => r).filter((r) => !joined.has(r))
    const absent = recovery === undefined ? missing : []
    const startOptions = {
      ...(paramsLength === undefined ? {} : { paramsLength }),
      ...(resume === undefined ? {} : { resume: resume.point }),
      ...(absent.length === 0 ? {} : { absent }),
      ...(recovery?.owedModel === undefined ? {} : { owedModel: recovery.owedModel })
    }
    yield* execute(shell, Core.start(state, nowMs, startOptions))
    for (const rank of recovery === undefined ? [] : missing) {
      yield* stepAndExecute(shell, { _tag: "DeathReport", rank, nowMs, cause: DeathReport.refused(recovery!.causeOf(rank)) })
    }
    if (missing.length > 0 && recovery !== undefined) yield* stepAndExecute(shell, { _tag: "Tick", nowMs })
    for (const [rank, length] of joined) {
      if (length === paramsLength) continue
      const reason = `its Hello gave ${length} parameter${length === 1 ? "" : "s"}; the run agreed on ${paramsLength} (the count most ranks gave)`
      yield* stepAndExecute(shell, { _tag: "DeathReport", rank, nowMs, cause: DeathReport.refused(reason) })
      transport.disconnect(rank, Transport.CloseCode.ParamsMismatch)
    }
    if ([...joined.values()].some((length) => length !== paramsLength)) yield* stepAndExecute(shell, { _tag: "Tick", nowMs })
    yield* settle(shell)
  })

/**
 * Where the formation stands: starts the run once `minRanks` ranks joined, fails it once the
 * formation timed out, and otherwise beats for the ranks that wait.
 */
const checkFormation = (shell: Shell, nowMs: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { state, transport, joined, outcome, formationTimeoutMs } = shell
    if (yield* Deferred.isDone(outcome)) return
    const recovery = shell.options.recovery
    const waited = shell.formingSinceMs !== undefined && nowMs - shell.formingSinceMs > (recovery?.windowMs ?? 0)
    if (
      recovery === undefined
        ? joined.size >= state.config.minRanks
        : recovery.expected.every((r) => joined.has(r)) || (waited && joined.size > 0)
    ) {
      yield* startRun(shell, nowMs)
    } else if (shell.formingSinceMs !== undefined && nowMs - shell.formingSinceMs > formationTimeoutMs) {
      const missing = Array.from({ length: state.config.worldSize }, (_, r) => r).filter((r) => !joined.has(r))
      yield* Deferred.fail(
        outcome,
        new FormationError(`${missing.length === 1 ? "rank" : "ranks"} ${missing.join(", ")} did not join within ${formationTimeoutMs} ms`)
      )
    } else if (nowMs - shell.lastBeatMs >= shell.coordHeartbeatMs) {
      // Ranks that joined wait for the others: beat for them too, so that a rank process
      // never takes a slow formation for a coordinator that is gone (`coordinatorTimeoutMs`).
      shell.lastBeatMs = nowMs
      const beat = Codec.encode(Frame.fromCoordinator({ _tag: "CoordHeartbeat" }))
      for (const rank of joined.keys()) transport.sendUnsafe(rank, beat)
    }
  })

/** A tick of the running run: late frames counted, the core ticked, survivors heartbeated. */
const tick = (shell: Shell): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { state, transport } = shell
    const nowMs = yield* Clock.currentTimeMillis
    shell.lastTickMs = nowMs
    // Frames that arrived but wait behind other links' frames count before the scan.
    for (const rank of [...Core.expiring(state, nowMs), ...Core.blockingSilent(state, nowMs)]) {
      // A muted rank's frames are dropped unread: they are no sighting either.
      const arrivedMs = shell.options.muted?.has(rank) === true ? undefined : transport.lastArrivalMs(rank)
      if (arrivedMs !== undefined && nowMs - arrivedMs <= state.config.heartbeatTimeoutMs) {
        yield* stepAndExecute(shell, { _tag: "Seen", rank, nowMs: arrivedMs })
      }
    }
    yield* stepAndExecute(shell, { _tag: "Tick", nowMs })
    if (nowMs - shell.lastBeatMs >= shell.coordHeartbeatMs && state.phase === "running") {
      shell.lastBeatMs = nowMs
      yield* execute(shell, [{ _tag: "Broadcast", message: { _tag: "CoordHeartbeat" }, reason: "coordinator heartbeat" }])
    }
  })

/** The actor's one handler: every message of its mailbox, in order. */
const receive =
  (shell: Shell) =>
  (_: void, message: Message): Effect.Effect<void> =>
    Effect.gen(function* () {
      if (message._tag === "Start") {
        shell.formingSinceMs = yield* Clock.currentTimeMillis
        return
      }
      if (message._tag === "Resource") {
        // The coordinator's own resources, whatever the phase: an alert, never a rank's fault.
        yield* stepAndExecute(shell, { _tag: "CoordinatorResource", nowMs: yield* Clock.currentTimeMillis, detail: message.detail })
        return
      }
      if (message._tag === "Interrupt") {
        // Before formation too: the core ends the run (nothing to save yet) and it never starts.
        yield* stepAndExecute(shell, { _tag: "ShutdownRequested", nowMs: yield* Clock.currentTimeMillis, detail: message.detail })
        return
      }
      if (!shell.state.started) {
        yield* form(shell, message)
        return
      }
      if (message._tag === "Tick") return yield* tick(shell)
      for (const event of message.events) {
        const effect = shell.io.inbound(event)
        if (effect !== undefined) yield* effect
      }
      // The tick a death report asked for (`wake`), a stale rank's, or the schedule's, runs now,
      // not behind the batches still in the mailbox: every frame that arrived before the report is
      // applied by then (the inbox is in arrival order), and a silent rank is declared at its
      // timeout, not up to a tick period later.
      const nowMs = yield* Clock.currentTimeMillis
      const { state } = shell
      if (state.pendingReports.length > 0 || nowMs - shell.lastTickMs >= shell.tickMs || Core.expiring(state, nowMs).length > 0) {
        return yield* tick(shell)
      }
    })

/**
 * Starts the coordinator in the current scope: sends the run's first commands, then serves its
 * mailbox until the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = (options: Options): Effect.Effect<Handle, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { state, transport } = options
    const hooks = options.hooks ?? {}
    const scope = yield* Effect.scope
    const stallMs = state.config.coordinatorStallMs
    // A round closes at the first tick past its deadline: the tick is at most a quarter of it, so a
    // round the deadline closes waits for a slow rank that deadline, not a whole tick more. The
    // same for a round that leaves out ranks silent past `roundSilenceMs`.
    const bounds = [state.config.roundDeadlineMs, state.config.roundSilenceMs].filter((ms) => ms > 0)
    const deadlineMs = bounds.length === 0 ? 0 : Math.min(...bounds)
    const askedTickMs =
      deadlineMs > 0 ? Math.min(options.tickMs ?? 100, Math.max(roundDeadlineTickMsMin, deadlineMs / 4)) : (options.tickMs ?? 100)
    const tickMs = stallMs > 0 ? Math.min(askedTickMs, stallMs / 2) : askedTickMs
    const deltas = options.deltas === true ? Deltas.make() : undefined
    const shell: Shell = {
      options,
      state,
      transport,
      hooks,
      outcome: yield* Deferred.make<Core.Outcome, FormationError>(),
      formationTimeoutMs: options.formationTimeoutMs ?? 120_000,
      coordHeartbeatMs: options.coordHeartbeatMs ?? 1000,
      joined: new Map(),
      io: CoordinatorInbound.make({
        state,
        transport,
        hooks,
        stepNow: (input) => stepNow(shell, input),
        stepAndExecute: (input) => stepAndExecute(shell, input),
        muted: options.muted,
        ringPeerLinks: options.ringPeerLinks ?? false,
        ...(deltas === undefined ? {} : { deltas: { deltas, base: () => shell.lastModel?.params } }),
        // Wake: a tick queued behind everything already in the mailbox; when the mailbox is full
        // (a flood) it is told from a fiber of its own: the actor never waits on itself.
        wake: Effect.suspend(() =>
          shell.self !== undefined && !shell.self.tryTell({ _tag: "Tick" })
            ? Effect.asVoid(Effect.forkIn(shell.self.tell({ _tag: "Tick" }).pipe(Effect.ignore), scope))
            : Effect.void
        )
      }),
      lastModel:
        options.resume?.params === undefined
          ? undefined
          : { round: Math.max(0, options.resume.point.firstRound - 1), params: options.resume.params },
      formingSinceMs: undefined,
      lastBeatMs: 0,
      lastTickMs: 0,
      tickMs,
      self: undefined,
      ended: undefined,
      areaCommit: undefined,
      outliersFound: [],
      updateResidual: undefined,
      outerMomentum: options.outerMomentum,
      roundBytesFrom: { received: 0, sent: 0 },
      deltas
    }
    const actor = yield* Actor.spawn<void, Message>("coordinator", {
      initial: undefined,
      receive: receive(shell),
      // A small mailbox: inputs beyond it wait in the transport, per link, where one link's backlog
      // cannot hold back another's frames or a death report (Transport.Options).
      mailbox: { capacity: mailboxCapacity, whenFull: "suspend" }
    })
    shell.self = actor
    yield* actor.tell({ _tag: "Start" }).pipe(Effect.ignore)
    // Inbound events go to the mailbox in batches (one effect per batch, not per frame).
    yield* Effect.gen(function* () {
      while (true) {
        const events = yield* Queue.takeBetween(transport.inbox, 1, inboundBatchMax)
        yield* actor.tell({ _tag: "Inbound", events: events.map(Supervisor.classify) })
      }
    }).pipe(Effect.ignore, Effect.forkScoped)
    yield* actor.tell({ _tag: "Tick" }).pipe(Effect.ignore, Effect.repeat(Schedule.spaced(tickMs)), Effect.forkScoped)
    return {
      outcome: shell.outcome,
      state,
      stats: actor.stats,
      relayStats: shell.io.relayStats,
      interrupt: (detail: string) => actor.tell({ _tag: "Interrupt", detail }).pipe(Effect.ignore),
      resource: (detail: string) => actor.tell({ _tag: "Resource", detail }).pipe(Effect.ignore)
    }
  })
