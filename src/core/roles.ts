/**
 * Callback roles (`checkpoint`, `eval`, `epochFn`) and the throughput calibration that the
 * `fastest` policy and the `throughput` redistribution read (docs/design.md §3.5, §3.4).
 *
 * Kept from floDl: a smoothed ms-per-batch as the mean of the last 5 reports; sticky roles that
 * re-resolve when their rank dies. Changed from it: `fastest` resolves once every live rank is
 * calibrated, not only after a death; exits move roles like deaths.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"
import * as Membership from "./membership.ts"

/** Reports are clamped to `[msPerBatchMin, msPerBatchMax]` (1 µs to about 11.6 days). @since 0.1.0 @category calibration */
export const msPerBatchMin = 0.001

/** @since 0.1.0 @category calibration */
export const msPerBatchMax = 1e9

/** Reports averaged into a rank's smoothed ms per batch. @since 0.1.0 @category calibration */
export const windowSize = 5

/**
 * Per-rank calibration: the last `windowSize` ms-per-batch reports in a ring (`window`), and
 * `reports[r]` = min(reports so far, windowSize) in the low bits plus the ring position.
 *
 * @since 0.1.0
 * @category model
 */
export interface Calibration {
  readonly window: Float32Array
  readonly filled: Uint8Array
  readonly position: Uint8Array
  /** Live ranks with at least one report. */
  calibratedLive: number
}

/** @since 0.1.0 @category constructors */
export const makeCalibration = (worldSize: number): Calibration => ({
  window: new Float32Array(worldSize * windowSize),
  filled: new Uint8Array(worldSize),
  position: new Uint8Array(worldSize),
  calibratedLive: 0
})

/** True when `rank` has reported at least one `msPerBatch`. O(1). @since 0.1.0 @category calibration */
export const isCalibrated = (c: Calibration, rank: Rank): boolean => c.filled[rank]! > 0

/**
 * Records one positive, finite `msPerBatch` report of a live rank (clamped, see `msPerBatchMin`). Returns true when this made the
 * rank calibrated for the first time. O(1).
 *
 * @since 0.1.0
 * @category calibration
 */
export const report = (c: Calibration, rank: Rank, msPerBatch: number): boolean => {
  if (!(msPerBatch > 0 && Number.isFinite(msPerBatch))) return false
  const position = c.position[rank]!
  // Clamped into what a float32 holds without reaching 0 or Infinity, so throughputs stay finite.
  c.window[rank * windowSize + position] = Math.min(msPerBatchMax, Math.max(msPerBatchMin, msPerBatch))
  c.position[rank] = (position + 1) % windowSize
  const first = c.filled[rank] === 0
  if (c.filled[rank]! < windowSize) c.filled[rank]! += 1
  if (first) c.calibratedLive += 1
  return first
}

/** A calibrated rank left the live set. O(1). @since 0.1.0 @category calibration */
export const forget = (c: Calibration, rank: Rank): void => {
  if (isCalibrated(c, rank)) c.calibratedLive -= 1
}

/** Mean of `rank`'s last reports in ms per batch, or `undefined` when uncalibrated. O(1). @since 0.1.0 @category calibration */
export const smoothedMsPerBatch = (c: Calibration, rank: Rank): number | undefined => {
  const filled = c.filled[rank]!
  if (filled === 0) return undefined
  let sum = 0
  for (let i = 0; i < filled; i++) sum += c.window[rank * windowSize + i]!
  return sum / filled
}

/**
 * Who holds each role.
 *
 * @since 0.1.0
 * @category model
 */
export interface Roles {
  checkpoint: Rank
  eval: Rank
  epochFn: Rank
}

/**
 * The live rank with the lowest smoothed ms per batch (ties to the lower rank), or the lowest live
 * rank while any live rank is uncalibrated; `undefined` when no rank is live. O(worldSize) when
 * calibrated, O(1) amortized otherwise.
 *
 * @since 0.1.0
 * @category roles
 */
export const resolveFastest = (c: Calibration, m: Membership.Membership): Rank | undefined => {
  if (c.calibratedLive < m.activeCount) return Membership.lowestLive(m)
  let best: Rank | undefined
  let bestMs = Number.POSITIVE_INFINITY
  Membership.forEachSurvivor(m, (rank) => {
    const ms = smoothedMsPerBatch(c, rank)!
    if (ms < bestMs) {
      best = rank
      bestMs = ms
    }
  })
  return best
}

/** True when two role assignments differ. @since 0.1.0 @category roles */
export const differ = (a: Roles, b: Roles): boolean => a.checkpoint !== b.checkpoint || a.eval !== b.eval || a.epochFn !== b.epochFn
