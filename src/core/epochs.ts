/**
 * Planning an epoch (docs/design.md §3.3, §3.7): static partitions, the progressive chunk pool and its
 * refills, and a resumed epoch. Internal to `src/core`; `coordinator.ts` decides when.
 *
 * @since 0.1.0
 */
import * as Assignments from "./assignments.ts"
import * as Audit from "./audit.ts"
import * as ChunkPool from "./chunk-pool.ts"
import { alert, handed, path, tracked } from "./emit.ts"
import type { Command } from "./inputs.ts"
import * as Membership from "./membership.ts"
import type { Rank } from "./messages.ts"
import * as Split from "./split.ts"
import type { State } from "./state.ts"

export const announceEpochFn = (state: State, cmds: Array<Command>): void => {
  const holder = state.roles.epochFn
  if (!Membership.isLive(state.membership, holder)) {
    alert(
      state,
      cmds,
      "CallbackSkipped",
      path(state, holder),
      `epochFn for epoch ${state.epoch} skipped: rank ${holder}, which holds the epochFn role, is not live`
    )
  }
}

export const sendRanges = (
  state: State,
  cmds: Array<Command>,
  kind: "StartEpoch" | "AssignChunk",
  out: Split.SliceBuilder,
  reason: string
): void => {
  if (out.count > 0) cmds.push({ _tag: "SendRanges", kind, epoch: state.epoch, ...out.build(), reason })
}

/**
 * Whether `rank` is saving a checkpoint the coordinator asked for (it holds the pending one). Such
 * a rank is handed no new chunk until the checkpoint is settled: a chunk given to it would make
 * the next round wait for its save, and a rank that left silently during the save is held for
 * `saveTimeoutMs` (docs/liveness.md), so the whole run would stand still that long. The others
 * train meanwhile; it is filled as soon as its result arrives or the checkpoint moves on.
 */
export const isSaving = (state: State, rank: Rank): boolean => state.checkpoint !== undefined && state.checkpoint.rank === rank

/**
 * Tops `rank` up to `chunksInflightMax` outstanding chunks (none while it saves: `isSaving`; none of
 * an epoch whose chunks were taken back from it: `State.takenBack`).
 */
export const fill = (state: State, out: Split.SliceBuilder, rank: Rank): void => {
  const pool = state.pool!
  if (isSaving(state, rank) || state.takenBack.has(rank)) return
  const { chunkSamples, chunksInflightMax } = state.config
  while (ChunkPool.inflight(pool, rank) < chunksInflightMax) {
    const chunk = tracked(state, rank, () => ChunkPool.take(pool, rank, chunkSamples))
    if (chunk === undefined) return
    handed(state, rank)
    out.push(rank, chunk.offset, chunk.size)
  }
}

/** Refills every idle survivor (nothing in flight) in ascending rank order. */
export const wake = (state: State, cmds: Array<Command>, reason: string, except?: Rank): void => {
  if (state.pool === undefined || ChunkPool.remaining(state.pool) === 0) return
  const pool = state.pool
  const out = new Split.SliceBuilder()
  for (
    let rank = ChunkPool.nextIdle(pool, 0);
    rank < pool.worldSize && ChunkPool.remaining(pool) > 0;
    rank = ChunkPool.nextIdle(pool, rank + 1)
  ) {
    if (rank !== except && !state.unreachable.has(rank)) fill(state, out, rank)
  }
  sendRanges(state, cmds, "AssignChunk", out, reason)
}

/**
 * Plans a resumed epoch: the parent run's `committed` ranges go into the epoch's audit
 * log as rank -1, so that the audit covers both runs; only the rest is trained. Static: the
 * uncommitted ranges, laid end to end, are split equally over the survivors (each gets a
 * `StartEpoch` with its first range, or an empty one, and an `ExtendPartition` per further range;
 * ratio plans start again at the next epoch). Progressive: the ranges are served as chunks from the
 * pool's reclaimed queue, the spans being empty.
 */
export const planResumed = (
  state: State,
  cmds: Array<Command>,
  planned: ReadonlyArray<Rank>,
  committed: ReadonlyArray<readonly [number, number]>
): void => {
  const { config } = state
  for (const [offset, size] of committed) Audit.record(state.log, -1, offset, size)
  const free = Audit.uncommitted(state.log)
  const reason = `resume epoch ${state.epoch}: ${free.reduce((sum, [, size]) => sum + size, 0)} uncommitted samples in ${free.length} ${free.length === 1 ? "range" : "ranges"} over ${planned.length} ${planned.length === 1 ? "survivor" : "survivors"}`
  if (config.mode === "static") {
    state.pool = undefined
    const a = Assignments.make(state.epoch, config.epochSamples, state.membership.worldSize, [], undefined)
    a.committedTotal = state.log.committedSamples
    state.assignments = a
    const total = free.reduce((sum, [, size]) => sum + size, 0)
    const starts = new Split.SliceBuilder()
    const extensions = new Split.SliceBuilder()
    // Positions [0, total) of the free ranges laid end to end; survivor i takes its equal part.
    let range = 0
    let used = 0 // of free[range]
    planned.forEach((rank, i) => {
      let left = Split.equalPart(total, planned.length, i)[1]
      let first = true
      if (left > 0) state.uncommittedLive += 1
      while (left > 0) {
        const [offset, size] = free[range]!
        const take = Math.min(left, size - used)
        Assignments.extend(a, rank, offset + used, take)
        ;(first ? starts : extensions).push(rank, offset + used, take)
        first = false
        left -= take
        used += take
        if (used === size) {
          range += 1
          used = 0
        }
      }
      if (first) starts.push(rank, 0, 0) // an empty partition still gets its StartEpoch (docs/design.md §3.10)
    })
    sendRanges(state, cmds, "StartEpoch", starts, reason)
    if (extensions.count > 0) cmds.push({ _tag: "SendRanges", kind: "ExtendPartition", epoch: state.epoch, ...extensions.build(), reason })
  } else {
    state.assignments = undefined
    const gone: Array<Rank> = []
    const capacity = state.membership.worldSize
    for (let r = 0; r < capacity; r++) if (!Membership.isLive(state.membership, r)) gone.push(r)
    state.pool = ChunkPool.make(state.epoch, new Array<number>(capacity).fill(0), gone)
    ChunkPool.reclaim(state.pool, free)
    const out = new Split.SliceBuilder()
    for (const rank of planned) fill(state, out, rank)
    sendRanges(state, cmds, "AssignChunk", out, reason)
  }
}

export const startEpoch = (state: State, cmds: Array<Command>): void => {
  const { config, membership } = state
  state.epochStartedMs = state.clockMs
  state.epochDeaths = []
  state.epochExits = []
  state.takenBack.clear()
  state.log = Audit.make(state.epoch, config.epochSamples)
  state.uncommittedLive = 0
  state.pendingRequired = 0
  const planned = Membership.survivors(membership)
  announceEpochFn(state, cmds)
  if (state.resume !== undefined && state.resume.epoch === state.epoch) {
    planResumed(state, cmds, planned, state.resume.committed)
    state.resume = undefined
  } else if (config.mode === "static") {
    state.pool = undefined
    const a = Assignments.make(state.epoch, config.epochSamples, membership.worldSize, planned, config.partitionRatios)
    state.assignments = a
    const out = new Split.SliceBuilder()
    for (const rank of planned) {
      const [offset, size] = Assignments.partition(a, rank)
      if (size > 0) state.uncommittedLive += 1
      out.push(rank, offset, size) // an empty partition still gets its StartEpoch (docs/design.md §3.10)
    }
    sendRanges(
      state,
      cmds,
      "StartEpoch",
      out,
      `plan epoch ${state.epoch} over ${planned.length} ${planned.length === 1 ? "survivor" : "survivors"}`
    )
  } else {
    state.assignments = undefined
    // Spans over the capacity: vacant indices get none, and a joiner's grows when it joins.
    const spans = new Array<number>(membership.worldSize).fill(0)
    planned.forEach((rank, i) => {
      spans[rank] = Split.equalPart(config.epochSamples, planned.length, i)[1]
    })
    const gone: Array<Rank> = []
    for (let r = 0; r < membership.worldSize; r++) if (!Membership.isLive(membership, r)) gone.push(r)
    state.pool = ChunkPool.make(state.epoch, spans, gone)
    const out = new Split.SliceBuilder()
    for (const rank of planned) fill(state, out, rank)
    sendRanges(state, cmds, "AssignChunk", out, `open epoch ${state.epoch}: fill every survivor up to ${config.chunksInflightMax} chunks`)
  }
  state.pendingRequired = state.uncommittedLive
}

export const epochDone = (state: State): boolean => {
  if (state.pool !== undefined) return ChunkPool.isDone(state.pool)
  return state.assignments !== undefined && state.assignments.committedTotal >= state.config.epochSamples
}
