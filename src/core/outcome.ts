/**
 * What the coordinator core records about a run: declared deaths, epoch summaries, counters, eval
 * results and the outcome (docs/design.md §3.6, §3.8). Re-exported by `coordinator.ts`.
 *
 * @since 0.1.0
 */
import type * as Audit from "./audit.ts"
import type { Rank, SaveReason } from "./messages.ts"

/**
 * A declared death. `detector` is `supervisor` (a death report) or `heartbeat` (staleness);
 * `reportedAtMs` is the report's arrival (or the tick that found it stale), `declaredAtMs` the
 * tick that declared it; `remainderSamples` and `extensions` describe what moved to survivors.
 * `afterEnd` is true for a death declared after the run ended: it is recorded (alert, ledger,
 * `State.deaths`) but belongs to no epoch and decides nothing (docs/design.md §3.6).
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
 * How a rank left the running run (docs/churn.md): `graceful` (it announced `Exiting`), `crash`
 * (its supervisor reported its end: a process, worker or socket that ended without `Exiting`, a
 * `Crashing` frame), `silent` (nothing of it arrived for its heartbeat timeout).
 *
 * @since 0.1.0
 * @category outcome
 */
export type LeaveKind = "graceful" | "crash" | "silent"

/**
 * What one rank's leaving cost, for every departure while the run trains (exits included; not the
 * ranks that leave when the run ends): all times in core ms.
 *
 * - `lastSeenAtMs`: its last frame's arrival; `reportedAtMs`: its report's arrival (a death
 *   report, its `Exiting`, or the tick that found it stale); `declaredAtMs`: the step that took
 *   it out of the run (took its remainder, moved its roles).
 * - `remainderSamples`: its samples not committed, handed to the survivors (or, when
 *   `redistributed` is false, left uncommitted: the run stopped at this departure).
 * - `redoneSamples`: of those, the samples the coordinator knows it had trained (its last
 *   `Progress` beyond its committed position in static mode; its done but uncommitted chunks in
 *   progressive mode): the survivors train them again.
 *
 * @since 0.1.0
 * @category outcome
 */
export interface Leave {
  readonly rank: Rank
  readonly epoch: number
  readonly kind: LeaveKind
  readonly cause: string
  readonly lastSeenAtMs: number
  readonly reportedAtMs: number
  readonly declaredAtMs: number
  remainderSamples: number
  readonly redoneSamples: number
  redistributed: boolean
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
 * One welcomed mid-run join: when (`atMs`, core ms), which index, in which epoch and
 * from which round it trains, and what it was given at its welcome: `samples` of the epoch (the
 * chunks' sizes, progressive; 0 in static mode, whose joiners train from the next epoch).
 *
 * @since 0.1.0
 * @category model
 */
export interface JoinRecord {
  readonly rank: Rank
  readonly atMs: number
  readonly epoch: number
  readonly firstRound: number
  readonly samples: number
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
  /**
   * Ring backend: `RoundDone`s for another generation or round than the open one, a
   * repeat from a rank that already reported, and contributions of the other backend's kind
   * (`Params` with `ring`, `RoundDone` with `cpu`), and a `Params` of a round before the run's
   * first (`State.firstRound`: sent to the coordinator a recovered run took over from), all ignored.
   */
  staleRoundDone: number
  sendFailures: number
  paramsRejected: number
  /** Contributions the aggregation found far outside the others (`OutlierParams`), every rank's. */
  outlierContributions: number
  coordinatorStalls: number
  /** Mid-run joins welcomed. */
  joins: number
  /** Mid-run joins refused, whatever the reason. */
  joinsRefused: number
  /**
   * Ring model hand-overs refused: a `Params` from the member asked for a joiner's
   * model with another round, another length than the run's, or non-finite values. The joiner is
   * then asked for from another member. A `Params` nobody asked for counts in `staleRoundDone`.
   */
  modelsRefused: number
  /**
   * Joiners that died while still joining: welcomed, but dead before the round open at
   * their welcome closed, so never a member of any round. Each is in the ledger and raised
   * `RankLost` like any death, but the failure limit counts neither it nor its index
   * (`Config.FailureLimit`, docs/design.md §3.6).
   */
  joinersLost: number
  /** `cpu` rounds closed at `roundDeadlineMs` without every survivor's contribution. */
  roundsClosedAtDeadline: number
  /** `cpu` rounds closed without ranks silent for more than `roundSilenceMs`. */
  roundsClosedWithoutSilent: number
  /**
   * Progressive `cpu` with `roundSilenceMs`: ranks whose uncommitted chunks were taken back at an
   * epoch's end while they were silent (each time counts), the samples those chunks held, the part
   * of them the ranks had reported done (trained again by others), and `Params` of such ranks
   * dropped because they may hold training of the chunks taken back.
   */
  takeBacks: number
  samplesTakenBack: number
  samplesRedoneAfterTakeBack: number
  paramsTakenBack: number
}

/**
 * The first repeated crash of a run: `ranks` are the earlier rank and the one that crashed the same
 * way (same message and top stack frame), in the order they were declared; `error` the message and
 * `stack` the earlier rank's stack trace, if known.
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
 * `onRepeatedCrash` made of it), else `undefined`. `joins` lists the mid-run joins.
 *
 * @since 0.1.0
 * @category outcome
 */
export interface Outcome {
  readonly status: "completed" | "unrecoverable" | "interrupted"
  readonly reason: SaveReason | undefined
  readonly detail: string
  readonly endedAtMs: number
  /** Epochs completed, counting those a resumed run's parents completed (`resume.epoch` of them). */
  readonly epochsCompleted: number
  readonly failures: ReadonlyArray<Rank>
  readonly exits: ReadonlyArray<Rank>
  readonly deaths: ReadonlyArray<Death>
  readonly epochs: ReadonlyArray<EpochSummary>
  readonly evals: ReadonlyArray<EvalRecord>
  readonly uncommitted: { readonly epoch: number; readonly ranges: ReadonlyArray<readonly [offset: number, size: number]> } | undefined
  readonly counters: Readonly<Counters>
  readonly repeatedCrash?: RepeatedCrash | undefined
  /** The mid-run joins welcomed, in order; absent when there were none. */
  readonly joins?: ReadonlyArray<JoinRecord> | undefined
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
  staleRoundDone: 0,
  sendFailures: 0,
  paramsRejected: 0,
  outlierContributions: 0,
  coordinatorStalls: 0,
  joins: 0,
  joinsRefused: 0,
  modelsRefused: 0,
  joinersLost: 0,
  roundsClosedAtDeadline: 0,
  roundsClosedWithoutSilent: 0,
  takeBacks: 0,
  samplesTakenBack: 0,
  samplesRedoneAfterTakeBack: 0,
  paramsTakenBack: 0
})
