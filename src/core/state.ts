/**
 * The coordinator core's state and its queries (docs/design.md §3): what `Coordinator.make` builds and
 * `Coordinator.step` mutates. Re-exported by `coordinator.ts`; the other core modules share it.
 *
 * @since 0.1.0
 */
import * as Alerts from "./alerts.ts"
import * as Assignments from "./assignments.ts"
import * as Audit from "./audit.ts"
import type * as ChunkPool from "./chunk-pool.ts"
import * as Config from "./config.ts"
import type { DeathCause } from "./inputs.ts"
import * as Liveness from "./liveness.ts"
import * as Membership from "./membership.ts"
import type { Rank } from "./messages.ts"
import {
  type Counters,
  type Death,
  type EpochSummary,
  type EvalRecord,
  type JoinRecord,
  type Leave,
  type Outcome,
  type RepeatedCrash,
  zeroCounters
} from "./outcome.ts"
import * as Roles from "./roles.ts"

/**
 * Where a resumed run begins: at `epoch` (in `[0, epochs)`), whose permutation
 * positions `committed` (`[offset, size]` ranges) the parent run committed; rounds are numbered
 * from `firstRound`. Ranges are clipped to the epoch and may come in any order; overlaps count
 * once (`normalizeResume`). Epochs before `epoch` count as completed (`Outcome.epochsCompleted`).
 * The shell gives the ranks the parent's model before `start` (an `Update{round: firstRound - 1}`).
 * `generation` (ring backend, optional): the generation of the run's first `FormRing`, for a run
 * taken over from a lost coordinator whose ranks saw generations up to `generation - 1` (a rank
 * ignores a `FormRing` not newer than the one it holds); default 0.
 *
 * @since 0.1.0
 * @category steps
 */
export interface Resume {
  readonly epoch: number
  readonly firstRound: number
  readonly committed: ReadonlyArray<readonly [offset: number, size: number]>
  readonly generation?: number
}

export interface CrashRecord {
  readonly rank: Rank
  readonly error: string
  readonly stack: string | undefined
}

export interface PendingReport {
  readonly rank: Rank
  readonly nowMs: number
  readonly cause: DeathCause
}

export interface PendingCheckpoint {
  readonly version: number
  rank: Rank
  readonly tried: Set<Rank>
}

export interface Ring {
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
 * assignment 12, round flag 1; the adaptive liveness detector adds 13); extensions, liveness
 * holds, contributions and audit ranges are sparse.
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
  /** Per rank: `1` when it contributed to the last round closed (`cpu`); `roundSilenceMs` reads it. */
  readonly inLastRound: Uint8Array
  /** The contributors of the last round closed: the ranks `inLastRound` marks. */
  lastRoundContributors: Array<Rank>
  /**
   * Per rank: when chunks were last handed to it (progressive), whole ms since `handedOriginMs`
   * (4 bytes a rank: the core keeps a few dozen); `roundSilenceMs` reads it.
   */
  readonly handedMs: Uint32Array
  /** The core's clock when it was made: what `handedMs` counts from. */
  readonly handedOriginMs: number
  /**
   * `1` for a rank that reported trained work (`Progress`, `ChunkDone`, `Params`, `RoundDone`) since
   * it joined: only such a rank is declared by `blockingSilenceMs` (a joiner may wait a while for
   * its model before its first batch).
   */
  readonly reportedWork: Uint8Array
  /**
   * The open round's contributions by contributor, in order of first contribution: the usable
   * parameters each sent (none for one left out of the average, `BadParams`). A rank contributes
   * twice to one round when a round deadline closed its previous round without it: its late
   * contribution and its next one are both folded in.
   */
  readonly contributions: Map<Rank, Array<Float32Array>>
  /**
   * Ring backend: the open round's `RoundDone` reports of the current generation, as
   * `samplesDone` by rank, with the number of done chunks the rank held when its report arrived
   * (progressive mode: exactly those are in its contribution); committed all together when every
   * ring member reported, discarded by a death or exit (the new generation redoes the round).
   */
  readonly ringReports: Map<Rank, { readonly samplesDone: number; readonly chunks: number }>
  /** Rounds in which each rank's contribution was an outlier (`Outlier` input; sparse). */
  readonly outlierRounds: Map<Rank, number>
  readonly deaths: Array<Death>
  readonly exits: Array<Rank>
  /** Every departure while the run trained, with what it cost (`Leave`), in declaration order. */
  readonly leaves: Array<Leave>
  /**
   * Live ranks a send to failed (`SendFailed`), not heard from since: no chunk is handed to them
   * until a frame of theirs arrives or they leave. Without it, two unreachable idle ranks would
   * hand a taken-back chunk to each other for ever within one step.
   */
  readonly unreachable: Set<Rank>
  /**
   * Live ranks whose uncommitted chunks were taken back while they were silent (`take-back.ts`),
   * with the epoch and the offsets of the chunks they had not reported done then (`owed`). Until
   * such a rank is clean, it gets no chunk and its `Params` of that epoch are dropped: they may hold
   * training of chunks now trained by others. That training ends with the first `Params` after its
   * last owed `ChunkDone` (it contributes once it runs out of work): then it is `settled`, and
   * waits for an `Update` like any contributor; it is clean, and takes chunks, once the round open
   * then closed. Cleared when an epoch starts.
   */
  readonly takenBack: Map<Rank, { readonly epoch: number; readonly owed: Set<number>; settled: boolean }>
  /** Ranks whose chunks were taken back, not heard from since: their silence then, ms. */
  readonly takenBackSilentMs: Map<Rank, number>
  /**
   * The longest silence, ms, of a rank whose chunks were taken back and that then spoke again: it
   * was alive. Chunks are taken back only from ranks silent for more than twice this (0: none yet).
   */
  takeBackMistakeMs: number
  /** Each rank's last `Progress.samplesDone` and its epoch (ranks that reported only). */
  readonly reportedDone: Map<Rank, { epoch: number; samplesDone: number }>
  readonly summaries: Array<EpochSummary>
  readonly evals: Array<EvalRecord>
  readonly pendingReports: Array<PendingReport>
  /** The first rank declared crashed with each crash fingerprint (sparse: crashed ranks only). */
  readonly crashes: Map<string, CrashRecord>
  repeatedCrash: RepeatedCrash | undefined
  readonly ring: Ring | undefined
  clockMs: number
  /** The longest stall of the coordinator itself so far (`CoordinatorStall`), in ms; 0 before any. */
  longestStallMs: number
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
  /** When the last `cpu` round closed (its `Update` went out), or the run started: `roundSilenceMs` counts from it. */
  roundClosedMs: number
  /**
   * The run's usual `cpu` round, ms: from one close to the next, over rounds that waited for every
   * rank and in which nobody left and nothing was taken back (smoothed, gain 1/8; 0 before the
   * first). `roundSilenceMs` leaves a rank out only once it was silent for twice that, if longer.
   */
  roundLengthMs: number
  /**
   * Whether a rank left or had its chunks taken back since the last close. Such a round waited on a
   * silence (a heartbeat timeout, blocking silence, `roundSilenceMs`), and counted in the usual
   * round it would lengthen the bound it waited on: under churn the bound doubled round after round.
   */
  roundDisturbed: boolean
  /** Live ranks holding uncommitted work. */
  uncommittedLive: number
  /** Live ranks holding uncommitted work that have not contributed to the open round. */
  pendingRequired: number
  checkpoint: PendingCheckpoint | undefined
  /**
   * The evals asked and not answered yet: epoch → the rank asked. Only that rank's `EvalResult`
   * for that epoch is recorded, once; any other is a stale callback result (a rank cannot write
   * the run's accuracy unasked).
   */
  evalsAsked: Map<number, Rank>
  /**
   * A rank went past an eval it was asked for without answering it (the run's trainer has no
   * `evaluate`): later evals are asked but hold nobody (`calls.ts`).
   */
  evalsUnanswered: boolean
  /**
   * Parameter count every contribution must have: agreed at formation (`start`'s `paramsLength`,
   * from the ranks' `Hello`s), else the first contribution's.
   */
  paramsLength: number | undefined
  /** The epoch the run began at: 0, or a resumed run's `resume.epoch`. */
  firstEpoch: number
  /**
   * The round the run began at: 0, or a resumed run's `resume.firstRound`. A `Params` of an
   * earlier round was sent to another coordinator (one that a recovered run took over from) and
   * counts against an assignment this core never made: it is ignored (`staleRoundDone`).
   */
  firstRound: number
  /**
   * The ranges committed since the open round opened, `[offset, size]` in commit order: the
   * `AverageRound` that closes it carries them (the journal's `commit` line), then they start over.
   */
  readonly roundCommitted: Array<readonly [number, number]>
  /** A resumed run's starting point, until its epoch is planned. */
  resume: Resume | undefined
  /**
   * Joiners welcomed since the open round opened: no round waits on them. With `cpu`
   * they count as having contributed to the open round; with `ring` they are not ring members
   * yet. Emptied when the open round closes (they enter the next round, and the ring's next
   * generation). Live ranks only.
   */
  readonly joining: Set<Rank>
  /** 1 for a rank that joined mid-run: a pinned role never moves to it. Per index. */
  readonly lateJoiner: Uint8Array
  /** No vacant index below this one: where `Join{rank: undefined}` starts looking. */
  vacantFrom: number
  /** Every mid-run join welcomed, in order. */
  readonly joins: Array<JoinRecord>
  /**
   * Ring joiners owed their model (`joins.ts` "Model hand-over"): joiner → the member
   * asked for it (`from`), the round of the model, and every member asked so far. An entry lives
   * from the joiner's `SendModel` until the coordinator forwards the model (`Update`), the joiner
   * leaves, or the run stops. Live ranks only.
   */
  readonly modelOwed: Map<Rank, ModelOwed>
  /**
   * Ring backend: the model of the epoch that just ended, asked of a member so that the shell can
   * write it on the coordinator's host before the epoch's audit is final (`epoch-model.ts`).
   * While it is owed no round closes, so the asked member still holds it. `undefined` otherwise.
   */
  epochModel: EpochModelOwed | undefined
}

/**
 * The model of epoch `epoch` (the mean of round `round`, its last) asked of ring member `from`;
 * `tried` holds every member asked so far; `finishing` when the run completes once it arrives.
 *
 * @since 0.1.0
 * @category model
 */
export interface EpochModelOwed {
  readonly epoch: number
  readonly round: number
  from: Rank
  readonly tried: Set<Rank>
  finishing: boolean
}

/**
 * A ring joiner's model hand-over in progress: `from` was asked (`SendModel`) for its
 * parameters of `round`; `tried` holds every member asked so far, `from` included.
 *
 * @since 0.1.0
 * @category model
 */
export interface ModelOwed {
  from: Rank
  readonly round: number
  readonly tried: Set<Rank>
}

/** Gaps a rank's adaptive timeout waits for before it applies (until then: `heartbeatTimeoutMs`). */
const adaptiveSamplesMin = 8

/** The liveness detector `config` asks for (`liveness.ts`). */
const detectorOf = (config: Config.Config): Liveness.Detector =>
  config.livenessDetector === "adaptive"
    ? {
        kind: "adaptive",
        timeoutMs: config.heartbeatTimeoutMs,
        floorMs: config.adaptiveTimeoutMinMs,
        deviations: config.adaptiveDeviations,
        samplesMin: adaptiveSamplesMin
      }
    : Liveness.fixed(config.heartbeatTimeoutMs)

/**
 * A coordinator for `options` whose ranks `[0, worldSize)` all count as seen at `nowMs` (docs/design.md
 * §3.10 "Before the first frame"); indices `[worldSize, maxRanks)` are vacant until a `Join`.
 * Returns `Config.Invalid` for bad options. O(maxRanks).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Config.Options, nowMs: number): State | Config.Invalid => {
  if (!Number.isFinite(nowMs)) return { _tag: "Invalid", option: "nowMs", reason: `must be a finite number of ms, got ${nowMs}` }
  const config = Config.make(options)
  if ("_tag" in config) return config
  // Per-rank arrays span the capacity: indices [worldSize, maxRanks) are vacant until a join.
  const w = config.maxRanks
  const initial = config.worldSize
  const initialRole = config.rolePolicy === "fastest" ? 0 : Math.min(config.rolePolicy.rank, initial - 1)
  const hosts = config.rankHosts
  return {
    config,
    membership: Membership.make(w, initial),
    liveness: Liveness.make(w, nowMs, initial, detectorOf(config)),
    calibration: Roles.makeCalibration(w),
    lane: Alerts.make(config.alertCollapseMs),
    multiHost: hosts !== undefined && new Set(hosts).size > 1,
    counters: zeroCounters(),
    contributed: new Uint8Array(w),
    inLastRound: new Uint8Array(w),
    lastRoundContributors: [],
    handedMs: new Uint32Array(w),
    handedOriginMs: nowMs,
    reportedWork: new Uint8Array(w),
    contributions: new Map(),
    ringReports: new Map(),
    outlierRounds: new Map(),
    deaths: [],
    exits: [],
    leaves: [],
    reportedDone: new Map(),
    unreachable: new Set(),
    takenBack: new Map(),
    takenBackSilentMs: new Map(),
    takeBackMistakeMs: 0,
    summaries: [],
    evals: [],
    pendingReports: [],
    crashes: new Map(),
    repeatedCrash: undefined,
    ring:
      config.backend === "ring"
        ? { generation: 0, pending: false, startedMs: nowMs, attempts: 0, readyCount: 0, ready: new Uint8Array(w) }
        : undefined,
    clockMs: nowMs,
    longestStallMs: 0,
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
    roundClosedMs: nowMs,
    roundLengthMs: 0,
    roundDisturbed: false,
    uncommittedLive: 0,
    pendingRequired: 0,
    checkpoint: undefined,
    evalsAsked: new Map(),
    evalsUnanswered: false,
    paramsLength: undefined,
    firstEpoch: 0,
    firstRound: 0,
    roundCommitted: [],
    resume: undefined,
    joining: new Set(),
    lateJoiner: new Uint8Array(w),
    vacantFrom: initial,
    joins: [],
    modelOwed: new Map(),
    epochModel: undefined
  }
}

// Queries

/** Survivors in ascending order: the recipients of a `Broadcast`. @since 0.1.0 @category queries */
export const survivors = (state: State): Array<Rank> => Membership.survivors(state.membership)

/** Calls `f` for each survivor, ascending, without allocating. @since 0.1.0 @category queries */
export const forEachSurvivor = (state: State, f: (rank: Rank) => void): void => Membership.forEachSurvivor(state.membership, f)

/**
 * The live ranks a `Tick` at `nowMs` would find stale, least recently seen first: the shell asks its
 * transport whether a frame from any of them is already in and, if so, sends `Seen` first
 * (docs/design.md §3.10). O(expired + 1).
 *
 * @since 0.1.0
 * @category queries
 */
export const expiring = (state: State, nowMs: number): Array<Rank> =>
  state.started ? Liveness.expired(state.liveness, Math.max(nowMs, state.clockMs)) : []

/**
 * When `rank` turns stale (ms, the core's clock): the later of its timeout after its last frame
 * and the end of the calls it is held for (`Liveness.deadlineOf`); stale strictly after it.
 *
 * @since 0.1.0
 * @category queries
 */
export const deadlineOf = (state: State, rank: Rank): number => Liveness.deadlineOf(state.liveness, rank)

/**
 * Marks whether live `rank` beats from a thread of its own while it runs a save or an eval the
 * coordinator asked for (the shell knows: its beat link is up, or went down). Calls asked of it
 * from then on are not held for their bounds; a stopped rank is declared at its timeout
 * (docs/liveness.md). The config's `beatsDuringCalls` marks every rank. Any index of the run
 * (a joiner's link may be up before its `Join`); a death clears the mark; no-op out of range.
 * O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const setBeatsDuringCalls = (state: State, rank: Rank, on: boolean): void => {
  if (Membership.inRange(state.membership, rank)) Liveness.setBeats(state.liveness, rank, on)
}

/**
 * The survivor after `rank` in ascending order, wrapping around: `rank`'s next neighbour in the
 * ring (ring order is ascending rank order, docs/design.md §4 `FormRing`). `undefined` with no survivor.
 * O(ranks skipped).
 *
 * @since 0.1.0
 * @category queries
 */
export const nextSurvivor = (state: State, rank: Rank): Rank | undefined => {
  const m = state.membership
  const after = Membership.nextLive(m, rank + 1)
  if (after < m.worldSize) return after
  const first = Membership.nextLive(m, 0)
  return first < m.worldSize ? first : undefined
}

/**
 * True for a joiner welcomed since the open round opened: no round waits on it yet, and
 * with the ring backend it is not a ring member yet. O(1).
 *
 * @since 0.1.0
 * @category queries
 */
export const isJoining = (state: State, rank: Rank): boolean => state.joining.has(rank)

/**
 * Whether ring joiner `rank` still waits for its model: it was sent `SendModel` and the
 * coordinator has not forwarded the model yet. O(1).
 *
 * @since 0.1.0
 * @category queries
 */
export const isOwedModel = (state: State, rank: Rank): boolean => state.modelOwed.has(rank)

/**
 * The survivors the ring's current generation was formed over, ascending: every survivor but the
 * joiners still waiting for the next generation. O(worldSize) at worst.
 *
 * @since 0.1.0
 * @category queries
 */
export const ringMembers = (state: State): Array<Rank> => {
  const out: Array<Rank> = []
  Membership.forEachSurvivor(state.membership, (r) => {
    if (!state.joining.has(r)) out.push(r)
  })
  return out
}

/** Ranks neither dead nor exited. @since 0.1.0 @category queries */
export const activeCount = (state: State): number => state.membership.activeCount

/** Ranks in the dead-rank ledger, ascending. @since 0.1.0 @category queries */
export const failures = (state: State): Array<Rank> => Membership.deadRanks(state.membership)

/** @since 0.1.0 @category queries */
export const isDead = (state: State, rank: Rank): boolean => Membership.isDead(state.membership, rank)

/** @since 0.1.0 @category queries */
export const isLive = (state: State, rank: Rank): boolean => Membership.isLive(state.membership, rank)

/** Whether `rank` is a vacant index below `maxRanks`: no rank took it yet. @since 0.1.0 @category queries */
export const isVacant = (state: State, rank: Rank): boolean => Membership.isVacant(state.membership, rank)

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
