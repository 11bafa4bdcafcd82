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
import type { Rank, ToCoordinator } from "./messages.ts"
import { roundSkips } from "./rounds.ts"
import type { State } from "./state.ts"

/**
 * Whether the run waits on live `rank` (never while it holds a call the coordinator asked for):
 *
 * - `ring`: `rank`, a member (not joining, not owed a model) that reported trained work once
 *   (`State.reportedWork`), did not say `RingReady` to the pending rendezvous, or did not report
 *   `RoundDone` to the formed ring's open round (a member reported);
 * - `cpu`: `rank` holds uncommitted work, and either the open round (a contribution is in) waits
 *   for its contribution (it did not contribute, reported trained work once, and the round does
 *   not leave it out: `roundSilenceMs`), or nobody can work without it (progressive: no chunk
 *   left to hand out). The latter whatever it did: a live rank beats while it waits for an
 *   `Update` or for its model, so only a rank gone or stalled is silent past the bound there, and
 *   the whole run waits for its chunks.
 */
const waitsOn = (state: State, rank: Rank): boolean => {
  // A rank running a save or an eval the coordinator asked for may send nothing meanwhile.
  if (state.liveness.holds.has(rank)) return false
  // A joiner may wait a while for its model before it trains.
  const trained = state.reportedWork[rank] === 1
  const ring = state.ring
  if (ring !== undefined) {
    if (state.contributed[rank] !== 0 || !trained || state.joining.has(rank) || state.modelOwed.has(rank)) return false
    // A rendezvous waits on every member's RingReady; a formed ring's open round on its RoundDone.
    return ring.pending ? ring.ready[rank] === 0 : state.ringReports.size > 0
  }
  if (!hasUncommitted(state, rank)) return false
  // An open round waits on it, unless it leaves silent ranks out (`roundSilenceMs`).
  if (state.contributed[rank] === 0 && trained && state.contributions.size > 0 && !roundSkips(state, rank)) return true
  const pool = state.pool
  return pool !== undefined && ChunkPool.remaining(pool) === 0
}

/**
 * The live ranks silent for more than `blockingSilenceMs` at `nowMs` (not before the core's
 * clock) that the run waits on: a tick then declares them. Not those that fell silent within
 * `blockingSilenceMs` of more than `blockingSilenceQuietMax` of the live ranks. The shell asks before a tick, as for
 * `expiring`, whether a frame of theirs already arrived. Empty when the option is off or the run
 * is not running. O(k + s): k ranks silent that long in the liveness list, s suspects (and
 * O(k log k) with `blockingSilenceQuietMax` below 1).
 *
 * @since 0.1.0
 * @category queries
 */
export const blockingSilent = (state: State, nowMs: number = state.clockMs): Array<Rank> => {
  const ms = state.config.blockingSilenceMs
  if (ms <= 0 || state.phase !== "running" || !state.started) return []
  const silent = Liveness.silentBeyond(state.liveness, Math.max(nowMs, state.clockMs), ms).filter((rank) =>
    Membership.isLive(state.membership, rank)
  )
  const waited = silent.filter((rank) => waitsOn(state, rank))
  const quietMax = state.config.blockingSilenceQuietMax
  if (quietMax >= 1 || waited.length === 0) return waited
  const together = fellSilentTogether(state, silent, ms, quietMax * state.membership.activeCount)
  return waited.filter((rank) => !together.has(rank))
}

/**
 * The ranks of `silent` that fell silent within `windowMs` of more than `most` of them, themselves
 * included (`blockingSilenceQuietMax`): a process of many ranks, a host or its network that went
 * quiet silences them all at about one time, and ranks that leave one by one fall silent apart.
 * Ranks that left long ago do not count against one that just fell silent. O(k log k).
 */
const fellSilentTogether = (state: State, silent: ReadonlyArray<Rank>, windowMs: number, most: number): Set<Rank> => {
  const seen = state.liveness.lastSeenMs
  const sorted = [...silent].sort((a, b) => seen[a]! - seen[b]!)
  const together = new Set<Rank>()
  // Two pointers: for each rank, the ranks whose last frame is within windowMs of its own.
  let from = 0
  let to = 0
  for (let i = 0; i < sorted.length; i++) {
    const at = seen[sorted[i]!]!
    while (seen[sorted[from]!]! < at - windowMs) from += 1
    while (to < sorted.length && seen[sorted[to]!]! <= at + windowMs) to += 1
    if (to - from > most) together.add(sorted[i]!)
  }
  return together
}

/** Marks `rank` as having reported trained work (`State.reportedWork`) when `message` says so. */
export const noteWork = (state: State, rank: Rank, message: ToCoordinator): void => {
  const tag = message._tag
  if (
    (tag === "Progress" || tag === "ChunkDone" || tag === "Params" || tag === "RoundDone") &&
    rank >= 0 &&
    rank < state.reportedWork.length
  ) {
    state.reportedWork[rank] = 1
  }
}
