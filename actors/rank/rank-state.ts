/**
 * A rank's state as it runs (`rank-training.ts` makes and changes it): what is fixed once it
 * started (`Running`) and what changes as it trains (`Training`).
 *
 * @since 0.1.0
 */
import type * as Clock from "effect/Clock"
import type * as Effect from "effect/Effect"
import type * as Trainer from "../../src/train/trainer.ts"
import type * as RankCalls from "./rank-calls.ts"
import type * as RankReports from "./rank-reports.ts"
import type * as RankRing from "./rank-ring.ts"
import type * as RankWake from "./rank-wake.ts"

export interface Chunk {
  readonly offset: number
  readonly size: number
  progress: number
}

/** What a rank changes as it trains: its epoch's work, its round, its last model and its loss. */
export interface Training {
  /** The last averaged parameters (the initial model until the first Update) and their round. */
  lastAverage: Float32Array
  /** Whether `lastAverage` is a row of a shared all-reduce area (`applyCommitted`): never written into. */
  lastAverageShared: boolean
  lastAverageRound: number
  /**
   * Ring: the last round whose mean the rank applied (-1 before any). Unlike `lastAverageRound`,
   * which a takeover's `Update` renumbers, it is the round that ran: what a takeover checks.
   */
  ringRound: number
  // The training loss since the last contribution (sample-weighted over its batches), carried by
  // the contribution for the journal's round loss: `Params.loss`, or the ring's `RoundDone.loss`
  // (the ring sends it when its all-reduce completes, a redo included).
  lossSum: number
  lossSamples: number
  ringLoss: number | undefined
  epoch: number
  order: Uint32Array
  /** Static: partition, then extensions. */
  readonly entries: Array<readonly [number, number]>
  trained: number
  contributedUpTo: number
  /** Progressive: chunks held, in order. */
  readonly chunks: Array<Chunk>
  chunksDoneSinceContribution: number
  batchesSinceContribution: number
  waitingUpdate: boolean
  round: number
  stopping: { readonly save: boolean; readonly reason: string } | undefined
  hangAtMs: number
  samplesTotal: number
  /** `cpu` with `compress`: what packing dropped from the last contribution, added to the next (error feedback). */
  residual: Float32Array | undefined
  samplesInEpoch: number
  /** The link's recoveries seen so far (`Link.recoveries`). */
  recoveries: number
  /**
   * Ring, from a takeover until the new coordinator's first `Update` (`recovered`): the finished
   * round the rank held unconfirmed, if any, and the round the new coordinator confirmed (its
   * `RoundCommitted`; -1 while none came: no round was committed).
   */
  ringRecovery: { readonly held: RingHeld | undefined; committed: number } | undefined
}

export type RingHeld = NonNullable<Effect.Success<RankRing.RankRing["reset"]>>

/**
 * A running rank: what is fixed once it started (beside what the calls read, `RankCalls.CallRank`:
 * its link, data, rank, trainer, sends and coordinator watch), and its `training` state.
 */
export interface Running extends RankCalls.CallRank {
  readonly module: Trainer.TrainerModule
  readonly paramsLength: number
  /** The trainer's parameters, checked on every read (see `start`). */
  readonly getParams: () => Float32Array
  readonly reports: RankReports.Reports
  readonly ring: RankRing.RankRing
  /** The loop's wait when it has nothing to train (`RankWake`). */
  readonly wake: RankWake.Wake
  readonly ringBackend: boolean
  /** The hang's deadline is read against `Clock`: both sides from the same clock. */
  readonly clock: Clock.Clock
  readonly s: Training
}
