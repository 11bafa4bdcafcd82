/**
 * The coordinator actor: the shell around the core state machine (docs/design.md §3, §3.10).
 *
 * It owns the core's state and reads one mailbox in order: frames, bad frames and death reports
 * from the supervised transport, and ticks from a schedule (`tickMs`). Each input is one
 * `Coordinator.step`; the commands that come out are carried out over the transport at once.
 * A death report wakes the coordinator: it queues a tick behind whatever is already in the
 * mailbox, so every frame that arrived before it is applied first and the whole drained set of
 * reports is declared in one batch. A send that fails goes back to the core as `SendFailed`.
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
 * frames out (with a ring joiner's held back) are `coordinator-inbound.ts`.
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
import * as Actor from "../src/actor/actor.ts"
import * as Cpu from "../src/averaging/cpu.ts"
import * as Core from "../src/core/coordinator.ts"
import type { Rank, ToCoordinator } from "../src/core/messages.ts"
import * as DeathReport from "../src/actor/death-report.ts"
import * as Supervisor from "../src/transport/supervisor.ts"
import * as Transport from "../src/transport/transport.ts"
import * as Codec from "../src/wire/codec.ts"
import * as Frame from "../src/wire/frame.ts"
import * as CoordinatorInbound from "./coordinator-inbound.ts"
import { decodeFrame, observe } from "./coordinator-inbound.ts"
import type { Hooks, Refused } from "./coordinator-inbound.ts"

export type { Hooks } from "./coordinator-inbound.ts"

/**
 * - `state`: a core state made with `Core.make` (not started).
 * - `transport`: the coordinator's endpoint (a worker or process host's).
 * - `tickMs`: tick period in ms (default 100); at most half the core's `coordinatorStallMs` when
 *   that is on (a longer period is shortened to it).
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
  readonly hooks?: Hooks
  readonly resume?: { readonly point: Core.Resume; readonly params: Float32Array | undefined }
  /**
   * Ring backend with direct links (worker threads): called once per generation, just
   * before its `FormRing`s go out, with the ring's ranks in ring order; it hands each rank its
   * links (`WorkerHost.formRing`). Without it, ring steps are relayed as `RingData` frames. When
   * the generation averages in a shared all-reduce area it returns how to commit a round there
   * (`SharedAllReduce.commit`): that generation's rounds are then committed through it, not sent
   * as `RoundCommitted` frames (one store and one wake-up instead of a frame per member).
   */
  readonly formRingLinks?: (generation: number, peers: ReadonlyArray<Rank>, paramsLength: number | undefined) => ((round: number) => void) | undefined
}

/**
 * The run did not form: a rank ended before every rank joined, or the formation timed out. floDl
 * kills every rank in this case too: a half-formed run has nothing to recover (reference §7.1.5).
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
 * transport waits (back-pressure), and a batch holds at most `inboundBatchMax` events.
 */
const mailboxCapacity = 8
const inboundBatchMax = 64

type Message =
  | { readonly _tag: "Start" }
  | { readonly _tag: "Inbound"; readonly events: ReadonlyArray<Supervisor.Inbound> }
  | { readonly _tag: "Tick" }
  | { readonly _tag: "Interrupt"; readonly detail: string }
  | { readonly _tag: "Resource"; readonly detail: string }

/**
 * Starts the coordinator in the current scope: sends the run's first commands, then serves its
 * mailbox until the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = (options: Options): Effect.Effect<Handle, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Long because it is still one closure over the coordinator's state: splitting it into named steps is pending.
    const { state, transport } = options
    const hooks = options.hooks ?? {}
    const scope = yield* Effect.scope
    const stallMs = state.config.coordinatorStallMs
    const tickMs = stallMs > 0 ? Math.min(options.tickMs ?? 100, stallMs / 2) : (options.tickMs ?? 100)
    const coordHeartbeatMs = options.coordHeartbeatMs ?? 1000
    const outcome = yield* Deferred.make<Core.Outcome, FormationError>()
    const formationTimeoutMs = options.formationTimeoutMs ?? 120_000
    /** Each joined rank's parameter count, from its `Hello`. */
    const joined = new Map<Rank, number>()
    /**
     * The model a joiner is welcomed with: the last closed round's mean (cpu), else the
     * resumed model; `undefined` before either.
     */
    let lastModel: { readonly round: number; readonly params: Float32Array } | undefined = options.resume?.params === undefined
      ? undefined
      : { round: Math.max(0, options.resume.point.firstRound - 1), params: options.resume.params }
    let formingSinceMs: number | undefined
    let lastBeatMs = 0
    let self: Actor.ActorRef<Message, never> | undefined
    let ended: Core.Outcome | undefined
    // Frames in, and the commands' frames out (a ring joiner's held back until its model is out).
    const { inbound, deliver, broadcast, hold, ringFormed, causeOf, crashes, turnedAway, relayStats, controlBytes } = CoordinatorInbound.make({
      state,
      transport,
      hooks,
      stepNow: (input) => stepNow(input),
      stepAndExecute: (input) => stepAndExecute(input),
      // Wake: a tick queued behind everything already in the mailbox; when the mailbox is full
      // (a flood) it is told from a fiber of its own: the actor never waits on itself.
      wake: Effect.suspend(() =>
        self !== undefined && !self.tryTell({ _tag: "Tick" })
          ? Effect.asVoid(Effect.forkIn(self.tell({ _tag: "Tick" }).pipe(Effect.ignore), scope))
          : Effect.void
      )
    })

    // The current ring generation's commit through its shared all-reduce area, when it has one.
    let areaCommit: { readonly generation: number; readonly commit: (round: number) => void } | undefined
    const carryOut = (command: Core.Command, refused: Array<Refused>): Effect.Effect<void> =>
      Effect.suspend(() => {
        switch (command._tag) {
          case "Send":
            // A generation's FormRings go out together, ring rank 0 first: its links go just ahead.
            if (command.message._tag === "FormRing") ringFormed(command.message)
            if (command.message._tag === "FormRing" && command.message.ringRank === 0) {
              const ring = command.message
              areaCommit = undefined
              observe(() => {
                const commit = options.formRingLinks?.(ring.generation, ring.peers, state.paramsLength)
                if (commit !== undefined) areaCommit = { generation: ring.generation, commit }
              })
            }
            deliver(command.to, command.message, refused)
            break
          case "Broadcast":
            broadcast(command.message, refused)
            break
          case "SendRanges":
            for (let i = 0; i < command.ranks.length; i++) {
              const message = { _tag: command.kind, epoch: command.epoch, offset: command.offsets[i]!, size: command.sizes[i]! }
              deliver(command.ranks[i]!, message, refused)
            }
            break
          case "AverageRound": {
            if (command.generation !== undefined) {
              // Ring backend: the ranks averaged among themselves; the round is confirmed,
              // in the generation's shared area when it has one (written before any later frame).
              if (areaCommit?.generation === command.generation) areaCommit.commit(command.round)
              else broadcast({ _tag: "RoundCommitted", round: command.round, generation: command.generation }, refused)
              break
            }
            // The core leaves unusable contributions out; with none left, the Update carries no
            // parameters and ranks keep their own.
            const averaged = Cpu.mean(command.params)
            const params = Cpu.isError(averaged) ? new Float32Array(0) : averaged
            if (params.length > 0) lastModel = { round: command.round, params }
            broadcast({ _tag: "Update", round: command.round, params }, refused)
            break
          }
          case "Welcome": {
            // The roles, then the model; its first chunks (or its empty StartEpoch) follow.
            deliver(command.rank, { _tag: "SetRoles", ...command.roles }, refused)
            // Ring: the model comes from a member when the joiner enters the ring (SendModel).
            if (command.model === "peer") break
            const round = lastModel?.round ?? Math.max(0, command.firstRound - 2)
            deliver(command.rank, { _tag: "Update", round, params: lastModel?.params ?? new Float32Array(0) }, refused)
            break
          }
          case "JoinRefused":
            if (command.rank !== undefined && !Core.isLive(state, command.rank)) {
              turnedAway.add(command.rank)
              transport.disconnect(command.rank, Transport.joinRefusalCloseCode[command.reason])
            }
            break
          case "SendModel":
            // Hold the joiner's frames until its model is out; ask the member for it (module docstring).
            hold(command.to)
            deliver(command.from, { _tag: "RequestParams", round: command.round }, refused)
            break
          case "EpochModel": {
            const model = command.params !== undefined
              ? { round: command.round, params: command.params }
              : state.ring === undefined ? lastModel : undefined
            observe(() => hooks.onEpochModel?.(command.epoch, model))
            break
          }
          case "Alert":
          case "EpochEnded":
            break
          case "RunEnded":
            // Resolved by `settle`, once the step's observers ran: whoever awaits the outcome may
            // close this actor's scope at once, and must not cut the last step short.
            ended = command.outcome
            break
        }
        return Effect.void
      })

    const execute = (commands: ReadonlyArray<Core.Command>): Effect.Effect<void> =>
      Effect.gen(function*() {
        for (const command of commands) {
          const refused: Array<Refused> = []
          yield* carryOut(command, refused)
          observe(() => hooks.onCommand?.(command, state))
          for (const { rank, message, reason } of refused) {
            const nowMs = yield* Clock.currentTimeMillis
            yield* execute(Core.step(state, { _tag: "SendFailed", rank, nowMs, message, reason }))
          }
        }
      })

    /** Resolves `outcome` once the run ended and the observers saw every command of its step. */
    const settle = Effect.suspend(() => (ended === undefined ? Effect.void : Deferred.succeed(outcome, ended)))

    // One step's commands go out without yielding to the event loop in between, so that a death's
    // extensions reach the transport together, before any further input is read.
    const afterStep = (commands: ReadonlyArray<Core.Command>, deathsBefore: number, leavesBefore: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        const bytesBefore = controlBytes()
        yield* execute(commands)
        if (state.deaths.length > deathsBefore && hooks.onDeclared !== undefined) {
          const declared = state.deaths.slice(deathsBefore)
          const nowMs = yield* Clock.currentTimeMillis
          observe(() => hooks.onDeclared?.(declared, nowMs))
        }
        if (state.leaves.length > leavesBefore && hooks.onLeft !== undefined) {
          const left = state.leaves.slice(leavesBefore)
          const nowMs = yield* Clock.currentTimeMillis
          observe(() => hooks.onLeft?.(left, nowMs, controlBytes() - bytesBefore))
        }
        yield* settle
      }).pipe(Effect.provideService(References.PreventSchedulerYield, true))

    /**
     * Steps the core now; returns the effect that carries out what it decided, or `undefined`
     * when it decided nothing (most frames: a heartbeat, a progress report), so that a stream of
     * such frames costs no effect per frame.
     */
    const stepNow = (input: Core.Input): Effect.Effect<void> | undefined => {
      const deathsBefore = state.deaths.length
      const leavesBefore = state.leaves.length
      const commands = Core.step(state, input)
      return commands.length === 0 && state.deaths.length === deathsBefore && state.leaves.length === leavesBefore
        ? undefined
        : afterStep(commands, deathsBefore, leavesBefore)
    }

    const stepAndExecute = (input: Core.Input): Effect.Effect<void> => Effect.suspend(() => stepNow(input) ?? Effect.void)

    /**
     * Before the run starts: wait for every rank's Hello; any end of a rank fails the run. The run
     * starts at the Hello that completes it; the rest of its batch is then ordinary input.
     */
    const form = (message: Message): Effect.Effect<void> =>
      Effect.gen(function*() {
        if (message._tag !== "Inbound") return yield* formed(yield* Clock.currentTimeMillis)
        for (const event of message.events) {
          if (state.started || (yield* Deferred.isDone(outcome))) {
            const effect = state.started ? inbound(event) : undefined
            if (effect !== undefined) yield* effect
            continue
          }
          if (event._tag === "DeathReport") {
            const cause = causeOf(event.rank, event.cause)
            const at = cause._tag === "Crashed" && cause.stack !== undefined ? DeathReport.topFrame(cause.stack) : ""
            yield* Deferred.fail(outcome, new FormationError(`rank ${event.rank} ${Core.causeText(cause)} before the run formed${at === "" ? "" : ` (${at})`}`))
            return
          }
          if (event._tag === "Frame") {
            const decoded = decodeFrame(event, state.paramsLength)
            const frameMessage = Result.isSuccess(decoded) ? decoded.success.message : undefined
            if (frameMessage?._tag === "Hello" && !joined.has(event.peer)) joined.set(event.peer, frameMessage.paramsLength)
            if (frameMessage?._tag === "Crashing") crashes.set(event.peer, { error: frameMessage.error, stack: frameMessage.stack })
          }
          yield* formed(yield* Clock.currentTimeMillis)
        }
      })

    /** Starts the run once every rank joined, or fails it once the formation timed out. */
    const formed = (nowMs: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        if (yield* Deferred.isDone(outcome)) return
        if (joined.size >= state.config.minRanks) {
          const paramsLength = agreedParamsLength(joined)
          const resume = options.resume
          if (resume?.params !== undefined) {
            if (resume.params.length !== paramsLength) {
              const error = new FormationError(`the saved model has ${resume.params.length} parameters; the trainer's model has ${paramsLength ?? "no agreed count of"} parameters`)
              return yield* Deferred.fail(outcome, error)
            }
            const update = Codec.encode(Frame.fromCoordinator({ _tag: "Update", round: Math.max(0, resume.point.firstRound - 1), params: resume.params }))
            for (const rank of joined.keys()) transport.sendUnsafe(rank, update)
          }
          // Formation ranks not here yet are vacant; they join later (`minRanks`).
          const absent = Array.from({ length: state.config.worldSize }, (_, r) => r).filter((r) => !joined.has(r))
          const startOptions = {
            ...(paramsLength === undefined ? {} : { paramsLength }),
            ...(resume === undefined ? {} : { resume: resume.point }),
            ...(absent.length === 0 ? {} : { absent })
          }
          yield* execute(Core.start(state, nowMs, startOptions))
          for (const [rank, length] of joined) {
            if (length === paramsLength) continue
            const reason = `its Hello gave ${length} parameter${length === 1 ? "" : "s"}; the run agreed on ${paramsLength} (the count most ranks gave)`
            yield* stepAndExecute({ _tag: "DeathReport", rank, nowMs, cause: DeathReport.refused(reason) })
            transport.disconnect(rank, Transport.CloseCode.ParamsMismatch)
          }
          if ([...joined.values()].some((length) => length !== paramsLength)) yield* stepAndExecute({ _tag: "Tick", nowMs })
          yield* settle
        } else if (formingSinceMs !== undefined && nowMs - formingSinceMs > formationTimeoutMs) {
          const missing = Array.from({ length: state.config.worldSize }, (_, r) => r).filter((r) => !joined.has(r))
          yield* Deferred.fail(outcome, new FormationError(`${missing.length === 1 ? "rank" : "ranks"} ${missing.join(", ")} did not join within ${formationTimeoutMs} ms`))
        } else if (nowMs - lastBeatMs >= coordHeartbeatMs) {
          // Ranks that joined wait for the others: beat for them too, so that a rank process
          // never takes a slow formation for a coordinator that is gone (`coordinatorTimeoutMs`).
          lastBeatMs = nowMs
          const beat = Codec.encode(Frame.fromCoordinator({ _tag: "CoordHeartbeat" }))
          for (const rank of joined.keys()) transport.sendUnsafe(rank, beat)
        }
      })

    const receive = (_: void, message: Message): Effect.Effect<void> =>
      Effect.gen(function*() {
        if (message._tag === "Start") {
          formingSinceMs = yield* Clock.currentTimeMillis
          return
        }
        if (message._tag === "Resource") {
          // The coordinator's own resources, whatever the phase: an alert, never a rank's fault.
          yield* stepAndExecute({ _tag: "CoordinatorResource", nowMs: yield* Clock.currentTimeMillis, detail: message.detail })
          return
        }
        if (message._tag === "Interrupt") {
          // Before formation too: the core ends the run (nothing to save yet) and it never starts.
          yield* stepAndExecute({ _tag: "ShutdownRequested", nowMs: yield* Clock.currentTimeMillis, detail: message.detail })
          return
        }
        if (!state.started) {
          yield* form(message)
          return
        }
        if (message._tag === "Tick") {
          const nowMs = yield* Clock.currentTimeMillis
          // Frames that arrived but wait behind other links' frames count before the scan.
          for (const rank of Core.expiring(state, nowMs)) {
            const arrivedMs = transport.lastArrivalMs(rank)
            if (arrivedMs !== undefined && nowMs - arrivedMs <= state.config.heartbeatTimeoutMs) {
              yield* stepAndExecute({ _tag: "Seen", rank, nowMs: arrivedMs })
            }
          }
          yield* stepAndExecute({ _tag: "Tick", nowMs })
          if (nowMs - lastBeatMs >= coordHeartbeatMs && state.phase === "running") {
            lastBeatMs = nowMs
            yield* execute([{ _tag: "Broadcast", message: { _tag: "CoordHeartbeat" }, reason: "coordinator heartbeat" }])
          }
          return
        }
        for (const event of message.events) {
          const effect = inbound(event)
          if (effect !== undefined) yield* effect
        }
      })

    const actor = yield* Actor.spawn<void, Message>("coordinator", {
      initial: undefined,
      receive,
      // A small mailbox: inputs beyond it wait in the transport, per link, where one link's backlog
      // cannot hold back another's frames or a death report (Transport.Options).
      mailbox: { capacity: mailboxCapacity, whenFull: "suspend" }
    })
    self = actor
    yield* actor.tell({ _tag: "Start" }).pipe(Effect.ignore)
    // Inbound events go to the mailbox in batches (one effect per batch, not per frame).
    yield* Effect.gen(function*() {
      while (true) {
        const events = yield* Queue.takeBetween(transport.inbox, 1, inboundBatchMax)
        yield* actor.tell({ _tag: "Inbound", events: events.map(Supervisor.classify) })
      }
    }).pipe(Effect.ignore, Effect.forkScoped)
    yield* actor.tell({ _tag: "Tick" }).pipe(Effect.ignore, Effect.repeat(Schedule.spaced(tickMs)), Effect.forkScoped)
    return {
      outcome,
      state,
      stats: actor.stats,
      relayStats,
      interrupt: (detail: string) => actor.tell({ _tag: "Interrupt", detail }).pipe(Effect.ignore),
      resource: (detail: string) => actor.tell({ _tag: "Resource", detail }).pipe(Effect.ignore)
    }
  })
