/**
 * The coordinator actor's shell: its options, the state its steps share beside the core's, and
 * one core step carried out (`coordinator.ts` runs the mailbox; `coordinator-formation.ts` forms
 * the run).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as References from "effect/References"
import * as Actor from "../../src/actor/actor.ts"
import * as Deltas from "../../src/averaging/deltas.ts"
import * as Outer from "../../src/averaging/outer.ts"
import * as Core from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"
import * as Supervisor from "../../src/transport/supervisor.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Packed from "../../src/wire/packed.ts"
import { observe } from "./coordinator-inbound.ts"
import type { Hooks } from "./coordinator-inbound.ts"
import { executeNow } from "./coordinator-commands.ts"
import type { CommandShell } from "./coordinator-commands.ts"

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

export type Message =
  | { readonly _tag: "Start" }
  | { readonly _tag: "Inbound"; readonly events: ReadonlyArray<Supervisor.Inbound> }
  | { readonly _tag: "Tick" }
  | { readonly _tag: "Interrupt"; readonly detail: string }
  | { readonly _tag: "Resource"; readonly detail: string }

/**
 * The coordinator shell's state beside the core's: what its steps share (what its commands keep
 * is `CommandShell`'s).
 */
export interface Shell extends CommandShell {
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
export const settle = (shell: Shell): Effect.Effect<void> =>
  Effect.suspend(() => (shell.ended === undefined ? Effect.void : Deferred.succeed(shell.outcome, shell.ended)))

// One step's commands go out without yielding to the event loop in between, so that a death's
// extensions reach the transport together, before any further input is read. They go out at the
// call as far as they need no clock (`executeNow`): the effect that does the rest (a refused send,
// an outlier, a death or departure told, the run's end), `undefined` when none is left.
const afterStep = (
  shell: Shell,
  commands: ReadonlyArray<Core.Command>,
  deathsBefore: number,
  leavesBefore: number
): Effect.Effect<void> | undefined => {
  const { state, hooks } = shell
  const bytesBefore = shell.io.controlBytes()
  const rest = executeNow(shell, commands)
  if (rest === undefined && state.deaths.length === deathsBefore && state.leaves.length === leavesBefore && shell.ended === undefined)
    return undefined
  return Effect.gen(function* () {
    if (rest !== undefined) yield* rest
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
}

/**
 * Steps the core now and carries out what it decided as far as that needs no clock (`afterStep`);
 * returns the effect that does the rest, or `undefined` when nothing is left (most frames: a
 * heartbeat, a progress report, a `ChunkDone` and its next chunk), so that a stream of such frames
 * costs no effect per frame. Run the effect at once: the commands after it wait for it.
 */
export const stepNow = (shell: Shell, input: Core.Input): Effect.Effect<void> | undefined => {
  const deathsBefore = shell.state.deaths.length
  const leavesBefore = shell.state.leaves.length
  const commands = Core.step(shell.state, input)
  return commands.length === 0 && shell.state.deaths.length === deathsBefore && shell.state.leaves.length === leavesBefore
    ? undefined
    : afterStep(shell, commands, deathsBefore, leavesBefore)
}

export const stepAndExecute = (shell: Shell, input: Core.Input): Effect.Effect<void> =>
  Effect.suspend(() => stepNow(shell, input) ?? Effect.void)
