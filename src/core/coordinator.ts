/**
 * The coordinator as a deterministic state machine: `step(state, input)` applies one input and
 * returns the commands to carry out (DESIGN.md §3). No I/O, no clock, no randomness: time enters
 * as `nowMs`, and the actor shell in `actors/coordinator.ts` runs the commands.
 *
 * The whole death chain lives in `declareBatch`, in the order of DESIGN.md §3.2.
 *
 * @since 0.1.0
 */
import * as Alerts from "./alerts.ts"
import * as Assignments from "./assignments.ts"
import * as Audit from "./audit.ts"
import * as ChunkPool from "./chunk-pool.ts"
import * as Config from "./config.ts"
import * as Liveness from "./liveness.ts"
import * as Membership from "./membership.ts"
import type { Rank, SaveReason, ToCoordinator, ToRank } from "./messages.ts"
import * as Roles from "./roles.ts"
import * as Split from "./split.ts"

// ---------------------------------------------------------------------------------------------
// Inputs and commands
// ---------------------------------------------------------------------------------------------

/**
 * How a supervisor saw a rank end (DESIGN.md §5).
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
 *   links' frames; it refreshes the rank's liveness like a frame (DESIGN.md §3.10: frames that
 *   arrived are applied before the staleness scan). The shell sends it before a `Tick` for the
 *   ranks `expiring` names.
 * - `Tick`: drain queued death reports, then scan for stale ranks, then time-outs.
 * - `ShutdownRequested`: someone outside the run asked it to stop (an operator's Ctrl-C or
 *   SIGTERM, an aborted `AbortSignal`; `detail` says which). The core decides: a running run
 *   sends `ShutdownWithSave{GracefulShutdown}` to the survivors (once per run, DESIGN.md §3.6)
 *   and ends `interrupted` with the epoch's uncommitted ranges; a run not yet started ends
 *   `interrupted` with nothing sent; a run already over ignores it.
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
 * - `EpochEnded`: the epoch's audit and summary.
 * - `RunEnded`: the run is over (completed or unrecoverable); the outcome.
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
    readonly params: ReadonlyArray<Float32Array>
    readonly reason: string
  }
  | { readonly _tag: "EpochEnded"; readonly summary: EpochSummary }
  | { readonly _tag: "RunEnded"; readonly outcome: Outcome }

/**
 * A declared death. `detector` is `supervisor` (a death report) or `heartbeat` (staleness);
 * `reportedAtMs` is the report's arrival (or the tick that found it stale), `declaredAtMs` the
 * tick that declared it; `remainderSamples` and `extensions` describe what moved to survivors.
 * `afterEnd` is true for a death declared after the run ended: it is recorded (alert, ledger,
 * `State.deaths`) but belongs to no epoch and decides nothing (DESIGN.md §3.6).
 * `stack` is the error's stack trace of a `Crashed` death whose report carried one.
 *
 * @since 0.1.0
 * @category outcome
 */
export interface Death {
  readonly rank: Rank
  readonly epoch: number
  readonly detector: "supervisor" | "heartbeat"
  readonly cause: string
  readonly stack?: string | undefined
  readonly reportedAtMs: number
  readonly declaredAtMs: number
  remainderSamples: number
  extensions: number
  readonly afterEnd: boolean
}

/**
 * One finished epoch: the audit (`lost` and `duplicated` must be 0), its deaths and clean exits,
 * and its start and end times in core ms. Once emitted (`EpochEnded`) a summary never changes: its
 * lists are copies, not the live state's.
 *
 * @since 0.1.0
 * @category outcome
 */
export interface EpochSummary extends Audit.Result {
  readonly deaths: ReadonlyArray<Death>
  readonly exits: ReadonlyArray<Rank>
  readonly startedAtMs: number
  readonly endedAtMs: number
}

/**
 * Counters of everything the core ignored or corrected, so that nothing is dropped silently.
 *
 * @since 0.1.0
 * @category outcome
 */
export interface Counters {
  framesFromDead: number
  framesFromExited: number
  framesOutOfRange: number
  framesWrongEpoch: number
  framesAfterEnd: number
  badFrames: number
  reportsDropped: number
  samplesDoneClamped: number
  chunkDoneUnmatched: number
  staleCallbackResults: number
  staleRingReady: number
  sendFailures: number
  paramsRejected: number
  coordinatorStalls: number
}

/**
 * The first repeated crash of a run: `ranks` are the earlier rank and the one that crashed the same
 * way (same message and top stack frame), in the order they were declared; `error` the message and
 * `stack` the earlier rank's stack trace, if known (issue C1).
 *
 * @since 0.1.0
 * @category outcome
 */
export interface RepeatedCrash {
  readonly ranks: readonly [first: Rank, second: Rank]
  readonly error: string
  readonly stack: string | undefined
}

/**
 * The run's outcome: `completed`, `unrecoverable` with the save `reason`, or `interrupted` (an
 * external shutdown request, `ShutdownRequested`; reason `GracefulShutdown`); the failures (ranks
 * in the ledger, ascending), clean exits, every death of the run in declaration order (as of the
 * end; a shell that reports later deaths reads `State.deaths`, where they carry `afterEnd`),
 * per-epoch summaries, eval results, and, when the run ended mid-epoch, that epoch's uncommitted
 * ranges so that a resumed run can train exactly those.
 * `repeatedCrash` is the first crash seen on two ranks before the end (whatever
 * `onRepeatedCrash` made of it), else `undefined`.
 *
 * @since 0.1.0
 * @category outcome
 */
export interface Outcome {
  readonly status: "completed" | "unrecoverable" | "interrupted"
  readonly reason: SaveReason | undefined
  readonly detail: string
  readonly endedAtMs: number
  readonly epochsCompleted: number
  readonly failures: ReadonlyArray<Rank>
  readonly exits: ReadonlyArray<Rank>
  readonly deaths: ReadonlyArray<Death>
  readonly epochs: ReadonlyArray<EpochSummary>
  readonly evals: ReadonlyArray<EvalRecord>
  readonly uncommitted: { readonly epoch: number; readonly ranges: ReadonlyArray<readonly [offset: number, size: number]> } | undefined
  readonly counters: Readonly<Counters>
  readonly repeatedCrash?: RepeatedCrash | undefined
}

/** An `EvalResult` as received. @since 0.1.0 @category outcome */
export interface EvalRecord {
  readonly epoch: number
  readonly rank: Rank
  readonly accuracy: number
  readonly loss: number
}

/**
 * Counters with every count at zero.
 *
 * @since 0.1.0
 * @category outcome
 */
export const zeroCounters = (): Counters => ({
  framesFromDead: 0,
  framesFromExited: 0,
  framesOutOfRange: 0,
  framesWrongEpoch: 0,
  framesAfterEnd: 0,
  badFrames: 0,
  reportsDropped: 0,
  samplesDoneClamped: 0,
  chunkDoneUnmatched: 0,
  staleCallbackResults: 0,
  staleRingReady: 0,
  sendFailures: 0,
  paramsRejected: 0,
  coordinatorStalls: 0
})

// ---------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------

interface CrashRecord {
  readonly rank: Rank
  readonly error: string
  readonly stack: string | undefined
}

interface PendingReport {
  readonly rank: Rank
  readonly nowMs: number
  readonly cause: DeathCause
}

interface PendingCheckpoint {
  readonly version: number
  rank: Rank
  readonly tried: Set<Rank>
}

interface Ring {
  generation: number
  pending: boolean
  startedMs: number
  attempts: number
  readyCount: number
  readonly ready: Uint8Array
}

/**
 * The coordinator's whole state. Mutable, owned by one actor; read it through the query functions.
 *
 * Per rank it holds about 55 bytes in static mode (liveness 17, membership 5, calibration 22,
 * assignment 12, round flag 1); extensions, contributions and audit ranges are sparse.
 *
 * @since 0.1.0
 * @category model
 */
export interface State {
  readonly config: Config.Config
  readonly membership: Membership.Membership
  readonly liveness: Liveness.Liveness
  readonly calibration: Roles.Calibration
  readonly lane: Alerts.Lane
  readonly multiHost: boolean
  readonly counters: Counters
  readonly contributed: Uint8Array
  /** The open round's contributions; `undefined` for one left out of the average (`BadParams`). */
  readonly contributions: Map<Rank, Float32Array | undefined>
  readonly deaths: Array<Death>
  readonly exits: Array<Rank>
  readonly summaries: Array<EpochSummary>
  readonly evals: Array<EvalRecord>
  readonly pendingReports: Array<PendingReport>
  /** The first rank declared crashed with each crash fingerprint (sparse: crashed ranks only). */
  readonly crashes: Map<string, CrashRecord>
  repeatedCrash: RepeatedCrash | undefined
  readonly ring: Ring | undefined
  clockMs: number
  started: boolean
  phase: "running" | "completed" | "unrecoverable" | "interrupted"
  shutdownSent: boolean
  outcome: Outcome | undefined
  epoch: number
  epochStartedMs: number
  epochDeaths: Array<Death>
  epochExits: Array<Rank>
  assignments: Assignments.Assignments | undefined
  pool: ChunkPool.Pool | undefined
  log: Audit.Log
  roles: Roles.Roles
  fastestResolved: boolean
  round: number
  roundOpenedMs: number | undefined
  /** Live ranks holding uncommitted work. */
  uncommittedLive: number
  /** Live ranks holding uncommitted work that have not contributed to the open round. */
  pendingRequired: number
  checkpoint: PendingCheckpoint | undefined
  /**
   * Parameter count every contribution must have: agreed at formation (`start`'s `paramsLength`,
   * from the ranks' `Hello`s), else the first contribution's.
   */
  paramsLength: number | undefined
}

/**
 * A coordinator for `options` whose ranks all count as seen at `nowMs` (DESIGN.md §3.10 "Before
 * the first frame"). Returns `Config.Invalid` for bad options. O(worldSize).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Config.Options, nowMs: number): State | Config.Invalid => {
  if (!Number.isFinite(nowMs)) return { _tag: "Invalid", option: "nowMs", reason: `must be a finite number of ms, got ${nowMs}` }
  const config = Config.make(options)
  if ("_tag" in config) return config
  const w = config.worldSize
  const initialRole = config.rolePolicy === "fastest" ? 0 : Math.min(config.rolePolicy.rank, w - 1)
  const hosts = config.rankHosts
  return {
    config,
    membership: Membership.make(w),
    liveness: Liveness.make(w, nowMs),
    calibration: Roles.makeCalibration(w),
    lane: Alerts.make(config.alertCollapseMs),
    multiHost: hosts !== undefined && new Set(hosts).size > 1,
    counters: zeroCounters(),
    contributed: new Uint8Array(w),
    contributions: new Map(),
    deaths: [],
    exits: [],
    summaries: [],
    evals: [],
    pendingReports: [],
    crashes: new Map(),
    repeatedCrash: undefined,
    ring: config.backend === "ring"
      ? { generation: 0, pending: false, startedMs: nowMs, attempts: 0, readyCount: 0, ready: new Uint8Array(w) }
      : undefined,
    clockMs: nowMs,
    started: false,
    phase: "running",
    shutdownSent: false,
    outcome: undefined,
    epoch: 0,
    epochStartedMs: nowMs,
    epochDeaths: [],
    epochExits: [],
    assignments: undefined,
    pool: undefined,
    log: Audit.make(0, config.epochSamples),
    roles: { checkpoint: initialRole, eval: initialRole, epochFn: initialRole },
    fastestResolved: false,
    round: 0,
    roundOpenedMs: undefined,
    uncommittedLive: 0,
    pendingRequired: 0,
    checkpoint: undefined,
    paramsLength: undefined
  }
}

// ---------------------------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------------------------

/** Survivors in ascending order: the recipients of a `Broadcast`. @since 0.1.0 @category queries */
export const survivors = (state: State): Array<Rank> => Membership.survivors(state.membership)

/** Calls `f` for each survivor, ascending, without allocating. @since 0.1.0 @category queries */
export const forEachSurvivor = (state: State, f: (rank: Rank) => void): void => Membership.forEachSurvivor(state.membership, f)

/**
 * The live ranks a `Tick` at `nowMs` would find stale, least recently seen first: the shell asks its
 * transport whether a frame from any of them is already in and, if so, sends `Seen` first
 * (DESIGN.md §3.10). O(expired + 1).
 *
 * @since 0.1.0
 * @category queries
 */
export const expiring = (state: State, nowMs: number): Array<Rank> =>
  state.started ? Liveness.expired(state.liveness, Math.max(nowMs, state.clockMs), state.config.heartbeatTimeoutMs) : []

/** Ranks neither dead nor exited. @since 0.1.0 @category queries */
export const activeCount = (state: State): number => state.membership.activeCount

/** Ranks in the dead-rank ledger, ascending. @since 0.1.0 @category queries */
export const failures = (state: State): Array<Rank> => Membership.deadRanks(state.membership)

/** @since 0.1.0 @category queries */
export const isDead = (state: State, rank: Rank): boolean => Membership.isDead(state.membership, rank)

/** @since 0.1.0 @category queries */
export const isLive = (state: State, rank: Rank): boolean => Membership.isLive(state.membership, rank)

/** Samples of `rank`'s current static list committed so far (0 in progressive mode). @since 0.1.0 @category queries */
export const committedSamples = (state: State, rank: Rank): number =>
  state.assignments === undefined ? 0 : Assignments.committed(state.assignments, rank)

/** `rank`'s current static list: partition then extensions, as `[offset, size]`. @since 0.1.0 @category queries */
export const assignment = (state: State, rank: Rank): Array<readonly [number, number]> => {
  const out: Array<readonly [number, number]> = []
  if (state.assignments !== undefined) Assignments.forEachEntry(state.assignments, rank, (o, s) => void out.push([o, s]))
  return out
}

/** Work counter: liveness list entries examined by staleness scans. @since 0.1.0 @category queries */
export const scanWork = (state: State): number => state.liveness.examined

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const send = (cmds: Array<Command>, to: Rank, message: ToRank, reason: string): void => {
  cmds.push({ _tag: "Send", to, message, reason })
}

const broadcast = (cmds: Array<Command>, message: ToRank, reason: string): void => {
  cmds.push({ _tag: "Broadcast", message, reason })
}

const path = (state: State, rank: Rank): string =>
  Alerts.rankPath(rank, state.config.worldSize, state.config.rankHosts, state.multiHost)

const alert = (state: State, cmds: Array<Command>, alertClass: Alerts.AlertClass, alertPath: string, detail: string): void => {
  const record = Alerts.raise(state.lane, state.clockMs, alertClass, alertPath, detail)
  if (record !== undefined) cmds.push({ _tag: "Alert", alert: record })
}

/**
 * How a death cause reads in a death's `cause` and in messages: `crashed: <error>`,
 * `killed by SIGKILL`, `exited with code 1 without Exiting`, `disconnected (close code 1006)`,
 * `refused: <reason>`.
 *
 * @since 0.1.0
 * @category outcome
 */
export const causeText = (cause: DeathCause): string => {
  switch (cause._tag) {
    case "Exited":
      return `exited with code ${cause.code} without Exiting`
    case "Crashed":
      return `crashed: ${cause.error}`
    case "Killed":
      return `killed by ${cause.signal}`
    case "Disconnected":
      return `disconnected (close code ${cause.closeCode})`
    case "Refused":
      return `refused: ${cause.reason}`
  }
}

const hasUncommitted = (state: State, rank: Rank): boolean => {
  if (state.pool !== undefined) return ChunkPool.holdsUncommitted(state.pool, rank)
  if (state.assignments !== undefined) return Assignments.hasUncommitted(state.assignments, rank)
  return false
}

/** Runs `mutate` and keeps `uncommittedLive` and `pendingRequired` right for a live `rank`. */
const tracked = <A>(state: State, rank: Rank, mutate: () => A): A => {
  const before = hasUncommitted(state, rank)
  const result = mutate()
  const after = hasUncommitted(state, rank)
  if (before !== after && Membership.isLive(state.membership, rank)) {
    const delta = after ? 1 : -1
    state.uncommittedLive += delta
    if (state.contributed[rank] === 0) state.pendingRequired += delta
  }
  return result
}

/** Appends an extension to a survivor's list, keeping the round counters right. O(1). */
const extendLive = (state: State, a: Assignments.Assignments, rank: Rank, offset: number, size: number): void => {
  const had = Assignments.hasUncommitted(a, rank)
  Assignments.extend(a, rank, offset, size)
  if (!had && size > 0) {
    state.uncommittedLive += 1
    if (state.contributed[rank] === 0) state.pendingRequired += 1
  }
}

/** A live rank leaves the live set: it no longer holds up rounds. Call before unlinking it. */
const leaveRound = (state: State, rank: Rank): void => {
  if (hasUncommitted(state, rank)) {
    state.uncommittedLive -= 1
    if (state.contributed[rank] === 0) state.pendingRequired -= 1
  }
}

// ---------------------------------------------------------------------------------------------
// Epochs
// ---------------------------------------------------------------------------------------------

const announceEpochFn = (state: State, cmds: Array<Command>): void => {
  const holder = state.roles.epochFn
  if (!Membership.isLive(state.membership, holder)) {
    alert(state, cmds, "CallbackSkipped", path(state, holder), `epochFn for epoch ${state.epoch} skipped: its pinned rank ${holder} is not live`)
  }
}

const sendRanges = (state: State, cmds: Array<Command>, kind: "StartEpoch" | "AssignChunk", out: Split.SliceBuilder, reason: string): void => {
  if (out.count > 0) cmds.push({ _tag: "SendRanges", kind, epoch: state.epoch, ...out.build(), reason })
}

/** Tops `rank` up to `chunksInflightMax` outstanding chunks. */
const fill = (state: State, out: Split.SliceBuilder, rank: Rank): void => {
  const pool = state.pool!
  const { chunkSamples, chunksInflightMax } = state.config
  while (ChunkPool.inflight(pool, rank) < chunksInflightMax) {
    const chunk = tracked(state, rank, () => ChunkPool.take(pool, rank, chunkSamples))
    if (chunk === undefined) return
    out.push(rank, chunk.offset, chunk.size)
  }
}

/** Refills every idle survivor (nothing in flight) in ascending rank order. */
const wake = (state: State, cmds: Array<Command>, reason: string, except?: Rank): void => {
  if (state.pool === undefined || ChunkPool.remaining(state.pool) === 0) return
  const pool = state.pool
  const out = new Split.SliceBuilder()
  for (let rank = ChunkPool.nextIdle(pool, 0); rank < pool.worldSize && ChunkPool.remaining(pool) > 0; rank = ChunkPool.nextIdle(pool, rank + 1)) {
    if (rank !== except) fill(state, out, rank)
  }
  sendRanges(state, cmds, "AssignChunk", out, reason)
}

const startEpoch = (state: State, cmds: Array<Command>): void => {
  const { config, membership } = state
  state.epochStartedMs = state.clockMs
  state.epochDeaths = []
  state.epochExits = []
  state.log = Audit.make(state.epoch, config.epochSamples)
  state.uncommittedLive = 0
  state.pendingRequired = 0
  const planned = Membership.survivors(membership)
  announceEpochFn(state, cmds)
  if (config.mode === "static") {
    state.pool = undefined
    const a = Assignments.make(state.epoch, config.epochSamples, config.worldSize, planned, config.partitionRatios)
    state.assignments = a
    const out = new Split.SliceBuilder()
    for (const rank of planned) {
      const [offset, size] = Assignments.partition(a, rank)
      if (size > 0) state.uncommittedLive += 1
      out.push(rank, offset, size) // an empty partition still gets its StartEpoch (DESIGN.md §3.10)
    }
    sendRanges(state, cmds, "StartEpoch", out, `plan epoch ${state.epoch} over ${planned.length} ${planned.length === 1 ? "survivor" : "survivors"}`)
  } else {
    state.assignments = undefined
    const spans = new Array<number>(config.worldSize).fill(0)
    planned.forEach((rank, i) => {
      spans[rank] = Split.equalPart(config.epochSamples, planned.length, i)[1]
    })
    const gone: Array<Rank> = []
    for (let r = 0; r < config.worldSize; r++) if (!Membership.isLive(membership, r)) gone.push(r)
    state.pool = ChunkPool.make(state.epoch, spans, gone)
    const out = new Split.SliceBuilder()
    for (const rank of planned) fill(state, out, rank)
    sendRanges(state, cmds, "AssignChunk", out, `open epoch ${state.epoch}: fill every survivor up to ${config.chunksInflightMax} chunks`)
  }
  state.pendingRequired = state.uncommittedLive
}

const epochDone = (state: State): boolean => {
  if (state.pool !== undefined) return ChunkPool.isDone(state.pool)
  return state.assignments !== undefined && state.assignments.committedTotal >= state.config.epochSamples
}

const finish = (
  state: State,
  cmds: Array<Command>,
  status: Outcome["status"],
  reason: SaveReason | undefined,
  detail: string,
  midEpoch: boolean
): void => {
  state.phase = status
  for (const record of Alerts.flush(state.lane, state.clockMs)) cmds.push({ _tag: "Alert", alert: record })
  const outcome: Outcome = {
    status,
    reason,
    detail,
    endedAtMs: state.clockMs,
    epochsCompleted: state.summaries.length,
    failures: Membership.deadRanks(state.membership),
    exits: [...state.exits],
    deaths: [...state.deaths],
    epochs: [...state.summaries],
    evals: [...state.evals],
    uncommitted: midEpoch ? { epoch: state.epoch, ranges: Audit.uncommitted(state.log) } : undefined,
    counters: { ...state.counters },
    repeatedCrash: state.repeatedCrash
  }
  state.outcome = outcome
  cmds.push({ _tag: "RunEnded", outcome })
}

const endEpoch = (state: State, cmds: Array<Command>): void => {
  const { config } = state
  const result = Audit.audit(state.log)
  const summary: EpochSummary = {
    ...result,
    deaths: [...state.epochDeaths],
    exits: [...state.epochExits],
    startedAtMs: state.epochStartedMs,
    endedAtMs: state.clockMs
  }
  state.summaries.push(summary)
  cmds.push({ _tag: "EpochEnded", summary })
  const ended = state.epoch
  const number = ended + 1
  if (config.evalEveryEpochs > 0 && number % config.evalEveryEpochs === 0) {
    const holder = state.roles.eval
    if (Membership.isLive(state.membership, holder)) send(cmds, holder, { _tag: "Eval", epoch: ended }, `eval after epoch ${ended}`)
    else alert(state, cmds, "CallbackSkipped", path(state, holder), `eval after epoch ${ended} skipped: its pinned rank ${holder} is not live`)
  }
  if (config.checkpointEveryEpochs > 0 && number % config.checkpointEveryEpochs === 0) {
    // A newer checkpoint supersedes a pending one; a late result for the old one counts as stale.
    const holder = state.roles.checkpoint
    state.checkpoint = { version: ended, rank: holder, tried: new Set([holder]) }
    if (Membership.isLive(state.membership, holder)) send(cmds, holder, { _tag: "Checkpoint", version: ended }, `checkpoint after epoch ${ended}`)
    else failoverCheckpoint(state, cmds, `its holder ${holder} is not live`, true)
  }
  if (number >= config.epochs) {
    const trained = config.epochs === 1 ? "the one epoch trained" : `all ${config.epochs} epochs trained`
    broadcast(cmds, { _tag: "Shutdown" }, trained)
    finish(state, cmds, "completed", undefined, `${trained} and audited`, false)
    return
  }
  state.epoch = number
  startEpoch(state, cmds)
}

// ---------------------------------------------------------------------------------------------
// Averaging rounds
// ---------------------------------------------------------------------------------------------

const maybeCloseRound = (state: State, cmds: Array<Command>): void => {
  if (state.phase !== "running" || state.pendingRequired > 0 || state.contributions.size === 0) return
  const contributors = [...state.contributions.keys()]
  const params = [...state.contributions.values()].filter((p): p is Float32Array => p !== undefined)
  cmds.push({
    _tag: "AverageRound",
    epoch: state.epoch,
    round: state.round,
    openedAtMs: state.roundOpenedMs ?? state.clockMs,
    contributors,
    params,
    reason: `round ${state.round} closed: every survivor holding uncommitted work contributed`
  })
  for (const rank of contributors) state.contributed[rank] = 0
  state.contributions.clear()
  state.round += 1
  state.roundOpenedMs = undefined
  state.pendingRequired = state.uncommittedLive
  if (epochDone(state)) endEpoch(state, cmds)
}

const onParams = (state: State, rank: Rank, samplesDone: number, params: Float32Array, cmds: Array<Command>): void => {
  const log = state.log
  tracked(state, rank, () => {
    if (state.pool !== undefined) {
      ChunkPool.commit(state.pool, rank, (range) => Audit.record(log, rank, range.offset, range.size))
    } else if (state.assignments !== undefined) {
      const result = Assignments.commit(state.assignments, rank, samplesDone, (o, s) => Audit.record(log, rank, o, s))
      if (result.clamped) {
        state.counters.samplesDoneClamped += 1
        alert(state, cmds, "Overflow", path(state, rank), `samplesDone ${samplesDone} above the ${Assignments.assignedLength(state.assignments, rank)} samples assigned; clamped`)
      }
    }
  })
  if (state.contributed[rank] === 0) {
    state.contributed[rank] = 1
    if (hasUncommitted(state, rank)) state.pendingRequired -= 1
  }
  state.paramsLength ??= params.length
  let usable = params.length === state.paramsLength
  for (let i = 0; usable && i < params.length; i++) usable = Number.isFinite(params[i]!)
  if (!usable) {
    state.counters.paramsRejected += 1
    const why = params.length === state.paramsLength ? "non-finite values" : `${params.length} values instead of ${state.paramsLength}`
    alert(state, cmds, "BadParams", path(state, rank), `rank ${rank}'s parameters for round ${state.round} left out of the average: ${why}`)
  }
  // The samples are committed either way: they were trained; only the parameters are not averaged.
  state.contributions.set(rank, usable ? params : undefined)
  state.roundOpenedMs ??= state.clockMs
  maybeCloseRound(state, cmds)
}

// ---------------------------------------------------------------------------------------------
// Roles and checkpoints
// ---------------------------------------------------------------------------------------------

/** Moves the roles away from a rank that died or exited (DESIGN.md §3.5). */
const moveRoles = (state: State, gone: Rank): void => {
  const { roles, membership } = state
  if (state.config.rolePolicy === "fastest") {
    const holders = [roles.checkpoint, roles.eval, roles.epochFn]
    if (!holders.includes(gone)) return
    const next = Roles.resolveFastest(state.calibration, membership)
    if (next === undefined) return
    if (roles.checkpoint === gone) roles.checkpoint = next
    if (roles.eval === gone) roles.eval = next
    if (roles.epochFn === gone) roles.epochFn = next
  } else if (roles.checkpoint === gone) {
    const next = Membership.lowestLive(membership)
    if (next !== undefined) roles.checkpoint = next
  }
}

/** Picks the next checkpoint rank after a failure; returns true when one was found. */
const failoverCheckpoint = (state: State, cmds: Array<Command>, why: string, sendNow: boolean): boolean => {
  const pending = state.checkpoint
  if (pending === undefined) return false
  const m = state.membership
  let next = Membership.nextLive(m, 0)
  while (next < m.worldSize && pending.tried.has(next)) next = Membership.nextLive(m, next + 1)
  if (next >= m.worldSize) {
    alert(state, cmds, "CheckpointFailed", "root", `checkpoint ${pending.version} not saved: ${why}; no untried live rank left`)
    state.checkpoint = undefined
    return false
  }
  pending.tried.add(next)
  pending.rank = next
  state.roles.checkpoint = next
  if (sendNow) {
    broadcast(cmds, { _tag: "SetRoles", ...state.roles }, `checkpoint role moves to rank ${next} with checkpoint ${pending.version}`)
    send(cmds, next, { _tag: "Checkpoint", version: pending.version }, `checkpoint ${pending.version} fails over to rank ${next}: ${why}`)
  }
  return true
}

const maybeResolveFastest = (state: State): boolean => {
  if (state.config.rolePolicy !== "fastest" || state.fastestResolved) return false
  const { calibration, membership } = state
  if (membership.activeCount === 0 || calibration.calibratedLive < membership.activeCount) return false
  state.fastestResolved = true
  const next = Roles.resolveFastest(calibration, membership)!
  const before = { ...state.roles }
  state.roles.checkpoint = next
  state.roles.eval = next
  state.roles.epochFn = next
  // A pending checkpoint may finish where it is (its result is matched against `checkpoint.rank`),
  // but the role moves with the resolution: the next checkpoint goes to the fastest (DESIGN.md §3.5).
  return Roles.differ(before, state.roles)
}

// ---------------------------------------------------------------------------------------------
// Unrecoverable runs
// ---------------------------------------------------------------------------------------------

const unrecoverableReason = (state: State, checkFailureLimit: boolean): { reason: SaveReason; detail: string } | undefined => {
  const { config, membership } = state
  // A trainer that fails the same way on two ranks has a bug: name it before the limits it trips.
  const repeated = state.repeatedCrash
  if (checkFailureLimit && repeated !== undefined && config.onRepeatedCrash === "stop") {
    return {
      reason: "TrainerFault",
      detail: `the trainer failed the same way on ranks ${repeated.ranks[0]} and ${repeated.ranks[1]}: ${repeated.error}`
    }
  }
  if (checkFailureLimit) {
    const limit = Config.failureLimitCount(config.failureLimit, config.worldSize)
    if (limit !== undefined && membership.failures >= limit) {
      const failures = `${membership.failures} ${membership.failures === 1 ? "failure" : "failures"}`
      return { reason: "FailureLimitReached", detail: `${failures} reached the failure limit of ${limit}` }
    }
  }
  if (config.backend === "ring" && membership.activeCount < 2) {
    return { reason: "SingleSurvivor", detail: `the ring backend needs 2 survivors, ${membership.activeCount} left` }
  }
  if (config.backend === "cpu" && membership.activeCount === 0) {
    return { reason: "AllRanksLost", detail: "no survivor left" }
  }
  return undefined
}

/** Sends `ShutdownWithSave` at most once per run and ends it (DESIGN.md §3.6). */
const saveAndStop = (state: State, cmds: Array<Command>, reason: SaveReason, detail: string): void => {
  if (state.shutdownSent || state.phase !== "running") return
  state.shutdownSent = true
  if (state.membership.activeCount > 0) broadcast(cmds, { _tag: "ShutdownWithSave", reason }, detail)
  finish(state, cmds, "unrecoverable", reason, detail, true)
}

/**
 * An external shutdown request (DESIGN.md §1 save reason `GracefulShutdown`): the survivors save
 * and stop, through the same once-per-run `ShutdownWithSave` as an unrecoverable run (§3.6).
 */
const onShutdownRequested = (state: State, cmds: Array<Command>, detail: string): void => {
  if (state.shutdownSent || state.phase !== "running") return
  state.shutdownSent = true
  if (state.started && state.membership.activeCount > 0) broadcast(cmds, { _tag: "ShutdownWithSave", reason: "GracefulShutdown" }, detail)
  finish(state, cmds, "interrupted", "GracefulShutdown", detail, state.started)
}

// ---------------------------------------------------------------------------------------------
// Ring rendezvous
// ---------------------------------------------------------------------------------------------

/** Sends `FormRing` to every survivor; every call after the first bumps the generation. */
const formRing = (state: State, cmds: Array<Command>, reason: string): void => {
  const ring = state.ring
  if (ring === undefined) return
  if (state.started) ring.generation += 1
  ring.pending = true
  ring.startedMs = state.clockMs
  ring.readyCount = 0
  ring.ready.fill(0)
  const peers = Membership.survivors(state.membership)
  peers.forEach((rank, ringRank) => {
    send(cmds, rank, { _tag: "FormRing", generation: ring.generation, ringRank, ringSize: peers.length, peers }, reason)
  })
}

// ---------------------------------------------------------------------------------------------
// The death chain (DESIGN.md §3.2)
// ---------------------------------------------------------------------------------------------

interface Departure {
  readonly rank: Rank
  readonly kind: "death" | "exit"
  readonly detector: "supervisor" | "heartbeat"
  readonly cause: string
  readonly reportedAtMs: number
  /** A `Crashed` report's error, stack and fingerprint. */
  readonly crash?: { readonly error: string; readonly stack: string | undefined; readonly fingerprint: string | undefined }
}

/** Records a crash while the run goes on; the first one seen on a second rank is the repeat. */
const noteCrash = (state: State, rank: Rank, crash: NonNullable<Departure["crash"]>): void => {
  if (crash.fingerprint === undefined) return
  const first = state.crashes.get(crash.fingerprint)
  if (first === undefined) state.crashes.set(crash.fingerprint, { rank, error: crash.error, stack: crash.stack })
  else state.repeatedCrash ??= { ranks: [first.rank, rank], error: first.error, stack: first.stack ?? crash.stack }
}

/**
 * Declares one batch of departures: deaths found in one tick (reports first, then stale ranks), or
 * a single clean exit mid-run. Commands come out in the order of DESIGN.md §3.10.
 */
const declareBatch = (state: State, batch: ReadonlyArray<Departure>, cmds: Array<Command>): void => {
  const { membership, config } = state
  const running = state.phase === "running"
  const rolesBefore = { ...state.roles }
  const alerts: Array<Command> = []
  const remainders: Array<{ readonly rank: Rank; readonly death: Death | undefined; readonly ranges: Array<readonly [number, number]> }> = []
  let checkpointMoved = false
  const anyDeath = batch.some((d) => d.kind === "death")

  // 1. For each departing rank, in order: alert, remainder, ledger, activeCount, roles.
  for (const d of batch) {
    let death: Death | undefined
    if (d.kind === "death") {
      death = {
        rank: d.rank,
        epoch: state.epoch,
        detector: d.detector,
        cause: d.cause,
        stack: d.crash?.stack,
        reportedAtMs: d.reportedAtMs,
        declaredAtMs: state.clockMs,
        remainderSamples: 0,
        extensions: 0,
        afterEnd: !running
      }
      state.deaths.push(death)
      // After the end the epoch is closed (completed) or stopped (its deaths are in the outcome).
      if (running) state.epochDeaths.push(death)
      if (running && d.crash !== undefined) noteCrash(state, d.rank, d.crash)
      alert(state, alerts, "RankLost", path(state, d.rank), `rank ${d.rank} lost (${d.detector}): ${d.cause}`)
    } else {
      state.exits.push(d.rank)
      if (running) state.epochExits.push(d.rank)
    }
    const ranges = running && state.assignments !== undefined ? Assignments.remainder(state.assignments, d.rank) : []
    if (death !== undefined) death.remainderSamples = ranges.reduce((sum, [, size]) => sum + size, 0)
    remainders.push({ rank: d.rank, death, ranges })
    if (Membership.isLive(membership, d.rank)) leaveRound(state, d.rank)
    Roles.forget(state.calibration, d.rank)
    Liveness.unwatch(state.liveness, d.rank)
    if (d.kind === "death") Membership.declareDead(membership, d.rank)
    else Membership.markExited(membership, d.rank)
    if (!running) continue
    moveRoles(state, d.rank)
    if (state.checkpoint !== undefined && state.checkpoint.rank === d.rank) {
      checkpointMoved = failoverCheckpoint(state, alerts, `rank ${d.rank} ${d.kind === "death" ? "died" : "exited"} with it pending`, false) ||
        checkpointMoved
    }
  }
  cmds.push(...alerts)
  if (!running) return
  maybeResolveFastest(state)

  // 3. (decided before anything is sent) Is the run now unrecoverable?
  const verdict = unrecoverableReason(state, anyDeath)
  if (verdict === undefined && Roles.differ(rolesBefore, state.roles)) {
    broadcast(cmds, { _tag: "SetRoles", ...state.roles }, `roles move away from ${batch.length === 1 ? "rank" : "ranks"} ${batch.map((d) => d.rank).join(", ")}`)
  }
  // 2. Ring: abort in-flight collectives.
  if (state.ring !== undefined) {
    for (const d of batch) if (d.kind === "death") broadcast(cmds, { _tag: "DeclareDead", rank: d.rank }, `rank ${d.rank} is dead`)
  }
  if (verdict !== undefined) {
    saveAndStop(state, cmds, verdict.reason, verdict.detail)
    return
  }

  // 4. Redistribute every remainder over the survivors as they stand after the whole batch.
  const a = state.assignments
  if (a !== undefined) {
    const survivorCount = membership.activeCount
    const throughput = config.redistribution === "throughput" && state.calibration.calibratedLive === survivorCount
    const ranks = throughput ? Membership.survivors(membership) : []
    const weights = throughput ? ranks.map((r) => 1 / Roles.smoothedMsPerBatch(state.calibration, r)!) : []
    const nextLive = (from: number) => Membership.nextLive(membership, from)
    // One command per dead rank, its ranges' slices in range order: a remainder of thousands of
    // small ranges (deaths chained on deaths) is still one command.
    for (const { rank: from, death, ranges } of remainders) {
      const reason = `remainder of rank ${from} in ${ranges.length} ${ranges.length === 1 ? "range" : "ranges"} (${throughput ? "throughput" : "equal"} split over ${survivorCount} ${survivorCount === 1 ? "survivor" : "survivors"})`
      const parts: Array<Split.Slices> = []
      for (const [offset, size] of ranges) {
        const slices = throughput
          ? Split.splitProportional(offset, size, ranks, weights)
          : Split.splitEqual(offset, size, survivorCount, config.worldSize, nextLive)
        for (let i = 0; i < slices.ranks.length; i++) extendLive(state, a, slices.ranks[i]!, slices.offsets[i]!, slices.sizes[i]!)
        parts.push(slices)
      }
      if (parts.length === 0) continue
      const all = Split.concat(parts)
      if (all.ranks.length > 0) cmds.push({ _tag: "SendRanges", kind: "ExtendPartition", epoch: state.epoch, ...all, reason })
      if (death !== undefined) death.extensions += all.ranks.length
    }
  }
  if (state.pool !== undefined) {
    for (const { rank, death } of remainders) {
      const moved = ChunkPool.forfeit(state.pool, rank)
      ChunkPool.retire(state.pool, rank)
      if (death !== undefined) death.remainderSamples = moved.reduce((sum, r) => sum + r.size, 0)
    }
  }

  // 5. Re-rendezvous the ring; wake idle survivors; re-send a moved checkpoint.
  if (state.ring !== undefined) formRing(state, cmds, `re-rendezvous without ranks ${batch.map((d) => d.rank).join(", ")}`)
  wake(state, cmds, `take the chunks reclaimed from ranks ${batch.map((d) => d.rank).join(", ")}`)
  if (checkpointMoved && state.checkpoint !== undefined) {
    send(cmds, state.checkpoint.rank, { _tag: "Checkpoint", version: state.checkpoint.version }, `checkpoint ${state.checkpoint.version} fails over to rank ${state.checkpoint.rank}`)
  }
  // A round may now close without the departed ranks.
  maybeCloseRound(state, cmds)
}

// ---------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------

/**
 * Options of `start`. `paramsLength`: the parameter count agreed at formation (DESIGN.md §4
 * `Hello`); a contribution with another count is left out of the average (`BadParams`). Default:
 * the first contribution's count.
 *
 * @since 0.1.0
 * @category steps
 */
export interface StartOptions {
  readonly paramsLength?: number
}

/**
 * Starts the run at `nowMs` (default: the time given to `make`): every rank counts as seen then,
 * the roles are announced to every rank, the ring is formed (ring backend), and epoch 0 is planned
 * (`StartEpoch` per rank, or the first chunks). Call once, before any `step`; a second call
 * returns nothing. The shell calls it when every rank has joined, so that slow starts (loading a
 * dataset) never look like stale ranks.
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
  }
  if (options.paramsLength !== undefined && Number.isSafeInteger(options.paramsLength) && options.paramsLength >= 0) {
    state.paramsLength = options.paramsLength
  }
  broadcast(cmds, { _tag: "SetRoles", ...state.roles }, `initial roles (${state.config.rolePolicy === "fastest" ? "fastest" : "pinned"} policy)`)
  formRing(state, cmds, "initial ring")
  state.started = true
  startEpoch(state, cmds)
  return cmds
}

const onFrame = (state: State, rank: Rank, message: ToCoordinator, cmds: Array<Command>): void => {
  const { counters, membership } = state
  if (!Membership.inRange(membership, rank)) {
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
  Liveness.touch(state.liveness, rank, state.clockMs)
  if (state.phase !== "running") {
    // After the end, exits and the last eval are recorded; everything else decides nothing.
    if (message._tag === "Exiting") declareBatch(state, [{ rank, kind: "exit", detector: "supervisor", cause: "clean exit", reportedAtMs: state.clockMs }], cmds)
    else if (message._tag === "EvalResult") state.evals.push({ epoch: message.epoch, rank, accuracy: message.accuracy, loss: message.loss })
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
      if (maybeResolveFastest(state)) {
        broadcast(cmds, { _tag: "SetRoles", ...state.roles }, `every live rank calibrated: roles go to the fastest, rank ${state.roles.eval}`)
      }
      return
    }
    case "ChunkDone": {
      const pool = state.pool
      if (message.epoch !== state.epoch) {
        counters.framesWrongEpoch += 1
        return
      }
      if (pool === undefined || !ChunkPool.complete(pool, rank, message.offset, message.size)) {
        counters.chunkDoneUnmatched += 1
        return
      }
      // A refill is at most chunksInflightMax chunks for one rank: plain Sends are cheaper than typed arrays here.
      const { chunkSamples, chunksInflightMax } = state.config
      while (ChunkPool.inflight(pool, rank) < chunksInflightMax) {
        const chunk = tracked(state, rank, () => ChunkPool.take(pool, rank, chunkSamples))
        if (chunk === undefined) break
        send(cmds, rank, { _tag: "AssignChunk", epoch: state.epoch, offset: chunk.offset, size: chunk.size }, "refill after ChunkDone")
      }
      return
    }
    case "Params": {
      if (message.epoch !== state.epoch) {
        counters.framesWrongEpoch += 1
        return
      }
      // The wire guarantees a safe integer; through the library API a fraction is rounded down.
      onParams(state, rank, Math.floor(message.samplesDone), message.params, cmds)
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
      return
    }
    case "EvalResult": {
      state.evals.push({ epoch: message.epoch, rank, accuracy: message.accuracy, loss: message.loss })
      return
    }
    case "RingReady": {
      const ring = state.ring
      if (ring === undefined || !ring.pending || message.generation !== ring.generation || ring.ready[rank] === 1) {
        counters.staleRingReady += 1
        return
      }
      ring.ready[rank] = 1
      ring.readyCount += 1
      if (ring.readyCount >= membership.activeCount) {
        ring.pending = false
        ring.attempts = 0
      }
      return
    }
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
    const cause = report.cause
    batch.push({
      rank: report.rank,
      kind: "death",
      detector: "supervisor",
      cause: causeText(cause),
      reportedAtMs: report.nowMs,
      ...(cause._tag === "Crashed" ? { crash: { error: cause.error, stack: cause.stack, fingerprint: cause.fingerprint } } : {})
    })
  }
  for (const rank of Liveness.expired(state.liveness, state.clockMs, config.heartbeatTimeoutMs)) {
    if (inBatch.has(rank)) continue
    inBatch.add(rank)
    const silentMs = Liveness.silentMs(state.liveness, rank, state.clockMs)
    batch.push({ rank, kind: "death", detector: "heartbeat", cause: `no frame for ${silentMs} ms (timeout ${config.heartbeatTimeoutMs} ms)`, reportedAtMs: state.clockMs })
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
    formRing(state, cmds, `ring rendezvous of generation ${ring.generation} timed out (attempt ${ring.attempts})`)
  }
  if (config.roundStallMs > 0 && state.roundOpenedMs !== undefined && state.clockMs - state.roundOpenedMs > config.roundStallMs) {
    saveAndStop(state, cmds, "ReduceStall", `round ${state.round} open for more than ${config.roundStallMs} ms`)
  }
}

/**
 * The coordinator itself did not run for `gapMs` (its thread was blocked or its process stopped):
 * whatever the ranks sent meanwhile is still on its way in, so their silence during the gap is not
 * theirs. Liveness pauses for the gap; the rest of the core is unchanged (DESIGN.md §3.10).
 */
const onStall = (state: State, gapMs: number, cmds: Array<Command>): void => {
  Liveness.pause(state.liveness, gapMs)
  state.counters.coordinatorStalls += 1
  alert(state, cmds, "CoordinatorStall", "root", `the coordinator did not run for ${gapMs} ms (stall threshold ${state.config.coordinatorStallMs} ms); ranks' silence during it is not counted`)
}

const onSendFailed = (state: State, rank: Rank, message: ToRank, reason: string, cmds: Array<Command>): void => {
  state.counters.sendFailures += 1
  alert(state, cmds, "ControlDrop", Membership.inRange(state.membership, rank) ? path(state, rank) : "root", `${message._tag} to rank ${rank} failed: ${reason}`)
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
      if (Membership.isLive(state.membership, input.rank)) state.pendingReports.push({ rank: input.rank, nowMs: state.clockMs, cause: input.cause })
      else state.counters.reportsDropped += 1
      break
    case "SendFailed":
      onSendFailed(state, input.rank, input.message, input.reason, cmds)
      break
    case "Seen":
      if (Membership.isLive(state.membership, input.rank)) Liveness.touch(state.liveness, input.rank, state.clockMs)
      break
    case "Tick":
      onTick(state, cmds)
      break
    case "ShutdownRequested":
      onShutdownRequested(state, cmds, input.detail)
      break
  }
  return cmds
}
