/**
 * The coordinator core's inputs and commands: what the actor shell feeds `Coordinator.step` and
 * what it carries out (docs/design.md §3). Re-exported by `coordinator.ts`, where they are documented
 * for users.
 *
 * @since 0.1.0
 */
import type * as Alerts from "./alerts.ts"
import type { Rank, ToCoordinator, ToRank } from "./messages.ts"
import type { EpochSummary, Outcome } from "./outcome.ts"
import type * as Roles from "./roles.ts"

/**
 * Why a mid-run join was refused; the transport maps each to its own close code.
 *
 * - `Full`: no vacant index left below `maxRanks`, or an explicit index `>= maxRanks`.
 * - `BadIndex`: an explicit index that is not an integer `>= 0`.
 * - `DeadIndex`: the index belongs to a rank that died (indices are never reused).
 * - `ExitedIndex`: the index belongs to a rank that exited cleanly.
 * - `LiveIndex`: a live rank holds the index.
 * - `NotStarted`: the core has not started; joins before formation go through the formation.
 * - `ShuttingDown`: the run is saving and stopping (`ShutdownWithSave` sent).
 * - `RunOver`: the run completed.
 *
 * @since 0.1.0
 * @category commands
 */
export type JoinRefusal = "Full" | "BadIndex" | "DeadIndex" | "ExitedIndex" | "LiveIndex" | "NotStarted" | "ShuttingDown" | "RunOver"

/**
 * How a supervisor saw a rank end (docs/design.md §5).
 *
 * @since 0.1.0
 * @category inputs
 */
export type DeathCause =
  | { readonly _tag: "Exited"; readonly code: number }
  | {
      readonly _tag: "Crashed"
      readonly error: string
      /** The error's stack trace, when the supervisor learnt it. */
      readonly stack?: string
      /** What makes two crashes the same error (message and top stack frame), computed by the supervisor. */
      readonly fingerprint?: string
    }
  | { readonly _tag: "Killed"; readonly signal: string }
  | { readonly _tag: "Disconnected"; readonly closeCode: number }
  | { readonly _tag: "Refused"; readonly reason: string }

/**
 * One input to the core. `nowMs` is the arrival time stamped by the transport (monotonic ms);
 * the core never lets its clock run backwards (an earlier stamp is read as the latest one seen).
 *
 * - `Frame`: a decoded frame from `rank`.
 * - `BadFrame`: a frame from `rank` that failed to decode; it still shows the rank is alive.
 * - `DeathReport`: a supervisor saw `rank` end; queued and declared by the next `Tick`.
 * - `SendFailed`: the shell could not deliver `message` to `rank`.
 * - `Seen`: the transport received a frame from `rank` at `nowMs` that is still queued behind other
 *   links' frames, or bytes of one (a piece, a ping); it refreshes the rank's liveness as of `nowMs`
 *   (not later than the core's clock), so that its silence counts from that arrival
 *   (docs/design.md §3.10: frames that arrived are applied before the staleness scan). The shell sends it before a `Tick` for the
 *   ranks `expiring` names.
 * - `Tick`: drain queued death reports, then scan for stale ranks, then time-outs.
 * - `Join`: a rank asks to join the running run (the rules: `joins.ts`): `rank` is the index
 *   it asks for, or `undefined` for the lowest vacant one (`--rank auto`). The shell checks the
 *   joiner's `Hello` (protocol, model size) as at formation before it sends `Join`. The outcome is
 *   one `Welcome` or one `JoinRefused` command (after a `CoordinatorStall` alert, if any), ahead of
 *   any command to the joiner.
 * - `ShutdownRequested`: someone outside the run asked it to stop (an operator's Ctrl-C or
 *   SIGTERM, an aborted `AbortSignal`; `detail` says which). The core decides: a running run
 *   sends `ShutdownWithSave{GracefulShutdown}` to the survivors (once per run, docs/design.md §3.6)
 *   and ends `interrupted` with the epoch's uncommitted ranges; a run not yet started ends
 *   `interrupted` with nothing sent; a run already over ignores it.
 * - `CoordinatorResource`: the coordinator's own process ran short of something (a listener's
 *   connection cap reached, file descriptors exhausted; `detail` says what and how often). A
 *   `CoordinatorResource` alert at `root`, folded like any alert; no rank is blamed and nothing
 *   else changes.
 * - `Outlier`: the shell's aggregation found `rank`'s contribution to round `round` far outside
 *   the others (`detail`: by how much; docs/edge-averaging.md). An `OutlierParams` warn alert on
 *   the rank's path; with `outlierRoundsMax` on, the rank is declared dead (cause `Refused`) in
 *   the same step once that many of its rounds were outliers. Its samples stay committed: they were
 *   trained, only what it sent was distrusted (the audit is unchanged).
 *
 * Any input arriving more than `coordinatorStallMs` after the previous one (when that option is on)
 * is first read as a stall of the coordinator itself: liveness pauses for the gap and a
 * `CoordinatorStall` warn alert says how long it was.
 *
 * @since 0.1.0
 * @category inputs
 */
export type Input =
  | { readonly _tag: "Frame"; readonly rank: Rank; readonly nowMs: number; readonly message: ToCoordinator }
  | { readonly _tag: "BadFrame"; readonly rank: Rank; readonly nowMs: number; readonly reason: string }
  | { readonly _tag: "DeathReport"; readonly rank: Rank; readonly nowMs: number; readonly cause: DeathCause }
  | { readonly _tag: "SendFailed"; readonly rank: Rank; readonly nowMs: number; readonly message: ToRank; readonly reason: string }
  | { readonly _tag: "Seen"; readonly rank: Rank; readonly nowMs: number }
  | { readonly _tag: "Tick"; readonly nowMs: number }
  | { readonly _tag: "ShutdownRequested"; readonly nowMs: number; readonly detail: string }
  | { readonly _tag: "Join"; readonly rank: Rank | undefined; readonly nowMs: number }
  | { readonly _tag: "CoordinatorResource"; readonly nowMs: number; readonly detail: string }
  | { readonly _tag: "Outlier"; readonly rank: Rank; readonly nowMs: number; readonly round: number; readonly detail: string }

/**
 * One command for the shell, with the reason it was decided.
 *
 * - `Send`: deliver `message` to rank `to`.
 * - `Broadcast`: deliver `message` to every survivor as of this step (`survivors(state)`).
 * - `SendRanges`: deliver `{_tag: kind, epoch, offset: offsets[i], size: sizes[i]}` to `ranks[i]`
 *   for each `i` in order (`kind` is `StartEpoch`, `ExtendPartition` or `AssignChunk`). Range
 *   messages travel in bulk as typed arrays, so that a death costs O(min(R, S)) and an epoch start
 *   O(worldSize) without an object per message: one command per epoch start, per chunk fill, and
 *   per dead rank's remainder (all its ranges).
 * - `Alert`: record and show an alert.
 * - `AverageRound`: round `round` closed; average `params` (the usable contributions, in
 *   contribution order; possibly none) with the averaging backend and broadcast
 *   `Update{round, mean}` to the survivors (an empty `params` when there is nothing to average).
 *   `openedAtMs` is when its first contribution arrived (core ms): the round was open from then to
 *   this step.
 *   With the ring backend `generation` is set and `params` is empty (the ranks averaged among
 *   themselves): broadcast `RoundCommitted{round, generation}` instead.
 * - `EpochEnded`: the epoch's audit and summary. An `EpochModel` for the same epoch follows, in
 *   the same step (`cpu`) or once a ring member handed the model over (`ring`).
 * - `EpochModel`: the committed model after epoch `epoch` (the mean of round `round`, its last),
 *   for the shell to write on the coordinator's host before the epoch's audit counts as final.
 *   `cpu`: `params` is `undefined` and means the mean the shell itself broadcast for `round`.
 *   `ring`: `params` is what member `from` handed over (checked: the run's parameter count,
 *   finite), or `undefined` with `from` `undefined` when no member could (none was left).
 * - `RunEnded`: the run is over (completed or unrecoverable); the outcome.
 * - `Welcome`: the joiner `rank` is in. Deliver, before anything else to it: the
 *   `roles`; the model (`model: "coordinator"`: the shell's last `Update` params, of round
 *   `firstRound - 1`, or the initial/resumed model when no round closed; `model: "peer"`: nothing
 *   now, a `SendModel` follows when its ring generation forms). `epoch` is the current epoch;
 *   `firstRound` the first round that waits on it (rounds before it close without it). Commands
 *   to the rank that follow in the same step (its first `AssignChunk`s, an empty `StartEpoch`)
 *   come after the welcome; broadcasts of this step and later include it.
 * - `JoinRefused`: the join is refused for `reason`; close the joiner's link with the reason's
 *   close code. `rank` is the index asked for (`undefined` for auto).
 * - `SendModel` (ring backend): rank `to` takes part in ring generation `generation`
 *   (its `FormRing` follows in the same step, unless `to` is already a member of it: a re-issue
 *   after a refused model); have rank `from` (a member that holds the model) send its parameters
 *   as of round `round` (the last round that closed: `from` applied its `RoundCommitted{round}`),
 *   before `to` takes part in the ring. The shell sends `from` a `RequestParams{round}` and holds
 *   back every frame for `to` (a `CoordHeartbeat` excepted) until the core's `Send` of
 *   `Update{round, params}` to `to` (the answer, checked: `joins.ts` "Model hand-over"), or the
 *   run's shutdown. A later `SendModel` for the same `to` replaces the asked member.
 *
 * @since 0.1.0
 * @category commands
 */
export type Command =
  | { readonly _tag: "Send"; readonly to: Rank; readonly message: ToRank; readonly reason: string }
  | { readonly _tag: "Broadcast"; readonly message: ToRank; readonly reason: string }
  | {
      readonly _tag: "SendRanges"
      readonly kind: "StartEpoch" | "ExtendPartition" | "AssignChunk"
      readonly epoch: number
      readonly ranks: Int32Array
      readonly offsets: Float64Array
      readonly sizes: Float64Array
      readonly reason: string
    }
  | { readonly _tag: "Alert"; readonly alert: Alerts.Alert }
  | {
      readonly _tag: "AverageRound"
      readonly epoch: number
      readonly round: number
      readonly openedAtMs: number
      readonly contributors: ReadonlyArray<Rank>
      /** The ranges of the epoch's permutation this round committed, `[offset, size]` in commit order. */
      readonly committed: ReadonlyArray<readonly [number, number]>
      readonly params: ReadonlyArray<Float32Array>
      /** The rank that sent each entry of `params` (same order and length; empty with the ring backend). */
      readonly paramRanks: ReadonlyArray<Rank>
      readonly generation?: number
      readonly reason: string
    }
  | { readonly _tag: "EpochEnded"; readonly summary: EpochSummary }
  | {
      readonly _tag: "EpochModel"
      readonly epoch: number
      readonly round: number
      readonly params: Float32Array | undefined
      readonly from: Rank | undefined
      readonly reason: string
    }
  | { readonly _tag: "RunEnded"; readonly outcome: Outcome }
  | {
      readonly _tag: "Welcome"
      readonly rank: Rank
      readonly epoch: number
      readonly firstRound: number
      readonly roles: Roles.Roles
      readonly model: "coordinator" | "peer"
      readonly reason: string
    }
  | { readonly _tag: "JoinRefused"; readonly rank: Rank | undefined; readonly reason: JoinRefusal; readonly detail: string }
  | {
      readonly _tag: "SendModel"
      readonly to: Rank
      readonly from: Rank
      readonly round: number
      readonly generation: number
      readonly reason: string
    }
