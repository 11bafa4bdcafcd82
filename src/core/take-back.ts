/**
 * Taking a silent rank's chunks back at an epoch's end (`Config.roundSilenceMs`, progressive
 * `cpu`; docs/design.md §3.7). Rounds already go on without a rank silent past the bound, but an
 * epoch ends only once every chunk is committed: the chunks of a rank that left without a word
 * held the epoch's end until the rank was declared (its heartbeat timeout, or
 * `blockingSilenceMs`). Once nothing else is left to hand out, such a rank's uncommitted chunks go
 * back to the pool for the ranks that are idle, and the rank stays live.
 *
 * Exactly once: a chunk taken back was not committed, so only its new holder's contribution can
 * commit it. The old holder may still be alive (a stalled process, a slow link); it does not know,
 * trains what it holds and contributes, and that `Params` holds training of chunks now trained by
 * others. So until the rank is clean (`State.takenBack`) it gets no chunk and its `Params` are
 * dropped. A rank contributes once it runs out of work, and its frames arrive in order: the first
 * `Params` after the `ChunkDone` of the last chunk it still trained when they were taken back is
 * its last one with that training; after it, the rank waits for an `Update`, which replaces its
 * parameters. A rank that enters the next epoch with work of the last one left drops that training
 * itself (`rank-training.ts`). Internal to `src/core`.
 *
 * @since 0.1.0
 */
import * as ChunkPool from "./chunk-pool.ts"
import { tracked } from "./emit.ts"
import { isSaving, wake } from "./epochs.ts"
import type { Command } from "./inputs.ts"
import * as Liveness from "./liveness.ts"
import * as Membership from "./membership.ts"
import type { Rank } from "./messages.ts"
import { ownSilenceMs, skipAfterMs } from "./rounds.ts"
import type { State } from "./state.ts"

/**
 * Whether a live rank could train chunks taken back now: idle (nothing outstanding), reachable, not
 * saving and not itself taken back. Without one, taking back would only make the silent ranks' work
 * wait in the pool. An idle rank sends only its heartbeats, so its own silence says nothing here.
 * O(idle ranks looked at): the first that qualifies ends the search.
 */
const hasTaker = (state: State, pool: ChunkPool.Pool, silent: ReadonlyArray<Rank>): boolean => {
  for (let rank = ChunkPool.nextIdle(pool, 0); rank < pool.worldSize; rank = ChunkPool.nextIdle(pool, rank + 1)) {
    if (!Membership.isLive(state.membership, rank) || state.unreachable.has(rank) || isSaving(state, rank)) continue
    if (!state.takenBack.has(rank) && !silent.includes(rank)) return true
  }
  return false
}

/**
 * At a tick: when the epoch's pool has nothing left to hand out, takes back the uncommitted chunks
 * of every live rank the open round leaves out for its silence (`roundSkips`) and silent for more
 * than twice the longest silence of a rank taken back that turned out alive (`takeBackMistakeMs`:
 * under load, ranks of a busy process are silent for a while, and a bound below that handed chunks
 * from one live rank to the next, each taken back in turn), puts them in the reclaimed queue and
 * wakes the idle ranks. Counted in `takeBacks`, `samplesTakenBack` and
 * `samplesRedoneAfterTakeBack` (chunks the rank had reported done). No-op unless `roundSilenceMs`
 * is on, the backend is `cpu` and the mode progressive. O(k + chunks moved): k the ranks silent
 * past the bound.
 *
 * @since 0.1.0
 * @category mutations
 */
export const takeBackSilent = (state: State, cmds: Array<Command>): void => {
  const pool = state.pool
  if (pool === undefined || state.ring !== undefined || state.phase !== "running" || !state.started) return
  const skipMs = skipAfterMs(state)
  if (skipMs <= 0 || ChunkPool.remaining(pool) > 0 || ChunkPool.isDone(pool)) return
  const silentMs = Math.max(skipMs, 2 * state.takeBackMistakeMs)
  // Silent by its own doing past a bound at least the round's (`roundSkips`): the round leaves it out too.
  const silent = Liveness.silentBeyond(state.liveness, state.clockMs, silentMs).filter(
    (rank) => Membership.isLive(state.membership, rank) && ChunkPool.holdsUncommitted(pool, rank) && ownSilenceMs(state, rank) > silentMs
  )
  if (silent.length === 0 || !hasTaker(state, pool, silent)) return
  let samples = 0
  for (const rank of silent.sort((a, b) => a - b)) {
    const held = ChunkPool.held(pool, rank)
    const redone = held.reduce((sum, chunk) => sum + (chunk.done ? chunk.size : 0), 0)
    const owed = new Set(held.flatMap((chunk) => (chunk.done ? [] : [chunk.offset])))
    const moved = tracked(state, rank, () => ChunkPool.forfeit(pool, rank))
    const size = moved.reduce((sum, range) => sum + range.size, 0)
    state.takenBack.set(rank, { epoch: state.epoch, owed, settled: false })
    state.takenBackSilentMs.set(rank, ownSilenceMs(state, rank))
    state.roundDisturbed = true
    state.counters.takeBacks += 1
    state.counters.samplesTakenBack += size
    state.counters.samplesRedoneAfterTakeBack += redone
    samples += size
  }
  const ranks = silent.length === 1 ? `rank ${silent[0]}` : `ranks ${silent.join(", ")}`
  wake(
    state,
    cmds,
    `take back ${samples} uncommitted samples of ${ranks}, silent for more than ${Math.round(silentMs)} ms ` +
      `(roundSilenceMs ${state.config.roundSilenceMs}, twice the usual round, or twice the longest silence of a rank ` +
      `taken back that was alive) while the epoch's end waits on them`
  )
}

/**
 * A `Params` from a rank whose chunks were taken back (docs/design.md §3.7): dropped, since it may
 * hold training of those chunks. When the rank reported done every chunk it still trained, it was
 * the last such `Params`: the rank is settled. Like any contributor it now waits for an `Update`
 * before it trains again, so it takes chunks only once the open round closed
 * (`rounds.ts` `releaseSettled`): handed some now, it would be a rank the open round waits on (it
 * holds work and did not contribute to it, this `Params` being dropped) while it waits for that
 * round's close, beating all along, and the run stood still until `roundStallMs`.
 *
 * @since 0.1.0
 * @category mutations
 */
export const onParamsTakenBack = (state: State, rank: Rank): void => {
  state.counters.paramsTakenBack += 1
  const takenBack = state.takenBack.get(rank)
  if (takenBack !== undefined && takenBack.owed.size === 0) takenBack.settled = true
}

/**
 * A frame from live `rank`, before it refreshes the rank's liveness: if its chunks were taken back
 * while it was silent, it was alive after all, and a silence as long as the one this frame ends
 * does not tell a leaver from a busy rank in this run (`takeBackMistakeMs`). O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const heardFrom = (state: State, rank: Rank): void => {
  const silentMs = state.takenBackSilentMs.get(rank)
  if (silentMs === undefined) return
  state.takenBackSilentMs.delete(rank)
  const gapMs = Math.max(silentMs, Liveness.silentMs(state.liveness, rank, state.clockMs))
  state.takeBackMistakeMs = Math.max(state.takeBackMistakeMs, gapMs)
}
