/**
 * Silent ranks the run waits on (`Config.blockingSilenceMs`, docs/design.md §3.1). A rank that
 * left without a word holds its uncommitted work until the heartbeat timeout; meanwhile the open
 * round, or the epoch's last chunks, wait for it. Under churn after every round that wait is most
 * of the run. Such a rank is declared dead once it was silent for `blockingSilenceMs` while the
 * run waited on it; ranks the run does not wait on keep the heartbeat timeout. Internal to
 * `src/core`.
 *
 * @since 0.1.0
 */
import * as ChunkPool from "./chunk-pool.ts"
import { hasUncommitted } from "./emit.ts"
import * as Liveness from "./liveness.ts"
import * as Membership from "./membership.ts"
import type { Rank } from "./messages.ts"
import type { State } from "./state.ts"

/**
 * Whether the run waits on live `rank` (never while it holds a call the coordinator asked for):
 *
 * - `ring`: the formed ring's round is open (a member reported `RoundDone`) and `rank`, a member
 *   (not joining, not owed a model), did not report;
 * - `cpu`: `rank` holds uncommitted work and did not contribute to the open round, and the round
 *   is open (a contribution is in) or nobody can work without it (progressive: no chunk left to
 *   hand out).
 */
const waitsOn = (state: State, rank: Rank): boolean => {
  // A rank running a save or an eval the coordinator asked for may send nothing meanwhile.
  if (state.contributed[rank] !== 0 || state.liveness.holds.has(rank)) return false
  const ring = state.ring
  if (ring !== undefined) {
    return !ring.pending && state.ringReports.size > 0 && !state.joining.has(rank) && !state.modelOwed.has(rank)
  }
  if (!hasUncommitted(state, rank)) return false
  if (state.contributions.size > 0) return true
  const pool = state.pool
  return pool !== undefined && pool.residueTotal + pool.reclaimedTotal === 0 && ChunkPool.holdsUncommitted(pool, rank)
}

/**
 * The live ranks silent for more than `blockingSilenceMs` that the run waits on (`waitsOn`),
 * at the core's clock. Empty when the option is off or the run is not running. O(k + s): k ranks
 * silent that long in the liveness list, s suspects.
 */
export const blockingSilent = (state: State): Array<Rank> => {
  const ms = state.config.blockingSilenceMs
  if (ms <= 0 || state.phase !== "running" || !state.started) return []
  return Liveness.silentBeyond(state.liveness, state.clockMs, ms).filter(
    (rank) => Membership.isLive(state.membership, rank) && waitsOn(state, rank)
  )
}
