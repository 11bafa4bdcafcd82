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
 * carried out (with the `cpu` backend's averaging) are `coordinator-commands.ts`; the options and one
 * core step carried out are `coordinator-shell.ts`, the formation `coordinator-formation.ts`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Queue from "effect/Queue"
import * as Actor from "../../src/actor/actor.ts"
import * as Deltas from "../../src/averaging/deltas.ts"
import * as Core from "../../src/core/coordinator.ts"
import * as Supervisor from "../../src/transport/supervisor.ts"
import * as CoordinatorInbound from "./coordinator-inbound.ts"
import { execute } from "./coordinator-commands.ts"
import { form } from "./coordinator-formation.ts"
import type { Message, Options, Shell } from "./coordinator-shell.ts"
import { FormationError, stepAndExecute, stepNow } from "./coordinator-shell.ts"

export type { Hooks } from "./coordinator-inbound.ts"
export { FormationError } from "./coordinator-shell.ts"
export type { Options } from "./coordinator-shell.ts"

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
 * The coordinator's mailbox holds this many messages (a batch of inbound events is one) before the
 * transport waits (back-pressure), and a batch holds at most `inboundBatchMax` events. Two keep
 * the actor fed while the next batch is taken; every batch more is one more a death report
 * waits behind (at 256 ranks, 64 `Params` of 10,000 parameters take a few ms).
 */
const mailboxCapacity = 2
const inboundBatchMax = 64

/** The shortest tick a round deadline asks for: 5 ms. @since 0.1.0 @category constructors */
export const roundDeadlineTickMsMin = 5

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
    // The run's inbound batches, most of the mailbox, skip the generator below.
    message._tag === "Inbound" && shell.state.started
      ? inboundBatch(shell, message.events, 0)
      : Effect.gen(function* () {
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
          return yield* inboundBatch(shell, message.events, 0)
        })

/**
 * A batch of inbound events once the run started, from `from` on: each stepped in order, the
 * effect of one (if any) run before the next is stepped. Built from plain calls, not a
 * generator: a round at 256 ranks brings a few hundred batches, most of them with nothing to run.
 */
const inboundBatch = (shell: Shell, events: ReadonlyArray<Supervisor.Inbound>, from: number): Effect.Effect<void> => {
  for (let i = from; i < events.length; i++) {
    const effect = shell.io.inbound(events[i]!)
    if (effect !== undefined) return Effect.flatMap(effect, () => inboundBatch(shell, events, i + 1))
  }
  // The tick a death report asked for (`wake`), a stale rank's, or the schedule's, runs now,
  // not behind the batches still in the mailbox: every frame that arrived before the report is
  // applied by then (the inbox is in arrival order), and a silent rank is declared at its
  // timeout, not up to a tick period later.
  return Effect.flatMap(Clock.currentTimeMillis, (nowMs) => {
    const { state } = shell
    const due = state.pendingReports.length > 0 || nowMs - shell.lastTickMs >= shell.tickMs || Core.expiring(state, nowMs).length > 0
    return due ? tick(shell) : Effect.void
  })
}

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
        const batch: Message = { _tag: "Inbound", events: events.map(Supervisor.classify) }
        // Queued at once when the mailbox has room: no effect built for it.
        if (!actor.tryTell(batch)) yield* actor.tell(batch)
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
