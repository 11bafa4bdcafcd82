/**
 * Progressive mode at large world sizes: every rank holds `inflight` chunks, ranks die
 * one per tick and forfeit theirs, then the survivors complete chunks until every reclaimed chunk
 * is re-dispatched, and finally the epoch is driven to its end and audited (lost 0, duplicated 0).
 *
 * Run: `node --import tsx bench/forfeit.ts [--quick]`.
 */
import * as Coordinator from "../src/core/coordinator.ts"
import * as Lib from "./lib.ts"

export interface Row {
  readonly worldSize: number
  readonly inflight: number
  readonly deaths: number
  readonly chunksReclaimed: number
  readonly deathMedianMs: number
  readonly reclaimedPerSecond: number
  readonly redispatchMs: number
  readonly redispatchCompletions: number
  readonly epochMs: number
  readonly lost: number
  readonly duplicated: number
}

const CHUNK = 4

const measure = (worldSize: number, inflight: number, deathsWanted: number): Row => {
  const deaths = Math.min(deathsWanted, worldSize - 1)
  // Every rank's span holds one fill and one more chunk.
  const epochSamples = worldSize * CHUNK * (inflight + 1)
  const state = Coordinator.make(
    {
      worldSize,
      epochSamples,
      epochs: 1,
      mode: "progressive",
      chunkSamples: CHUNK,
      chunksInflightMax: inflight,
      heartbeatTimeoutMs: 1e15,
      evalEveryEpochs: 0,
      checkpointEveryEpochs: 0
    },
    0
  )
  if ("_tag" in state) throw new Error(state.reason)
  // What each rank holds, in dispatch order, as the coordinator sent it: rank -> [offset, size, ...].
  const held = new Map<number, Array<number>>()
  const absorb = (cmds: ReadonlyArray<Coordinator.Command>): number => {
    let assigned = 0
    for (const cmd of cmds) {
      if (cmd._tag === "Send" && cmd.message._tag === "AssignChunk") {
        let list = held.get(cmd.to)
        if (list === undefined) held.set(cmd.to, (list = []))
        list.push(cmd.message.offset, cmd.message.size)
        assigned += 1
        continue
      }
      if (cmd._tag !== "SendRanges" || cmd.kind !== "AssignChunk") continue
      for (let i = 0; i < cmd.ranks.length; i++) {
        const rank = cmd.ranks[i]!
        let list = held.get(rank)
        if (list === undefined) held.set(rank, (list = []))
        list.push(cmd.offsets[i]!, cmd.sizes[i]!)
        assigned += 1
      }
    }
    return assigned
  }
  absorb(Coordinator.start(state))
  let t = 1
  const deathMs: Array<number> = []
  let reclaimed = 0
  let forfeitMs = 0
  for (let k = 0; k < deaths; k++, t++) {
    const rank = (k * 7919) % worldSize
    const t0 = Lib.nowMs()
    Coordinator.step(state, { _tag: "DeathReport", rank, nowMs: t, cause: { _tag: "Killed", signal: "SIGKILL" } })
    const cmds = Coordinator.step(state, { _tag: "Tick", nowMs: t })
    const elapsed = Lib.nowMs() - t0
    deathMs.push(elapsed)
    forfeitMs += elapsed
    reclaimed += (held.get(rank)?.length ?? 0) / 2
    held.delete(rank)
    absorb(cmds)
  }
  // Survivors complete their oldest chunk in rank order until the reclaimed queue is empty.
  const pool = state.pool!
  const reclaimedQueue = () => pool.reclaimedTotal
  let completions = 0
  const complete = (rank: number): void => {
    const list = held.get(rank)
    if (list === undefined || list.length === 0) return
    const offset = list.shift()!
    const size = list.shift()!
    completions += 1
    absorb(Coordinator.step(state, { _tag: "Frame", rank, nowMs: t, message: { _tag: "ChunkDone", epoch: 0, offset, size } }))
  }
  const t0 = Lib.nowMs()
  for (let rank = 0; reclaimedQueue() > 0; rank = (rank + 1) % worldSize) complete(rank)
  const redispatchMs = Lib.nowMs() - t0
  const redispatchCompletions = completions
  // Drive the epoch to its end: complete everything, then every survivor contributes once.
  const t1 = Lib.nowMs()
  // Round robin: each pass, every rank holding a chunk completes its oldest one.
  for (let active = [...held.keys()]; active.length > 0; ) {
    const next: Array<number> = []
    for (const rank of active) {
      complete(rank)
      if ((held.get(rank)?.length ?? 0) > 0) next.push(rank)
    }
    active = next
  }
  let summary: Coordinator.EpochSummary | undefined
  for (const rank of Coordinator.survivors(state)) {
    for (const cmd of Coordinator.step(state, {
      _tag: "Frame",
      rank,
      nowMs: t,
      message: { _tag: "Params", epoch: 0, round: 0, samplesDone: 0, params: new Float32Array(0) }
    })) {
      if (cmd._tag === "EpochEnded") summary = cmd.summary
    }
  }
  const epochMs = Lib.nowMs() - t1
  if (summary === undefined) throw new Error(`W=${worldSize} inflight=${inflight}: the epoch did not end`)
  return {
    worldSize,
    inflight,
    deaths,
    chunksReclaimed: reclaimed,
    deathMedianMs: Lib.percentiles(deathMs).median,
    reclaimedPerSecond: reclaimed / (forfeitMs / 1000),
    redispatchMs,
    redispatchCompletions,
    epochMs,
    lost: summary.lost,
    duplicated: summary.duplicated
  }
}

/** Runs the grid; `quick` keeps it to a few seconds. */
export const run = (quick: boolean): { readonly rows: ReadonlyArray<Row>; readonly markdown: string } => {
  const grid: Array<readonly [number, number]> = quick
    ? [
        [1_000, 1],
        [1_000, 8]
      ]
    : [
        [1_000, 1],
        [1_000, 2],
        [1_000, 4],
        [1_000, 8],
        [10_000, 1],
        [10_000, 2],
        [10_000, 4],
        [10_000, 8],
        [100_000, 1],
        [100_000, 8],
        [1_000_000, 1],
        [1_000_000, 8]
      ]
  measure(1_000, 2, 100) // warm-up
  const rows = grid.map(([worldSize, inflight]) => {
    Lib.collectGarbage()
    Lib.note(`forfeit: worldSize ${worldSize}, ${inflight} in flight`)
    return measure(worldSize, inflight, 100)
  })
  const markdown = Lib.table(
    [
      "worldSize",
      "in flight",
      "deaths",
      "chunks reclaimed",
      "death median ms",
      "reclaimed chunks/s",
      "re-dispatch ms",
      "completions to re-dispatch",
      "rest of epoch ms",
      "lost",
      "duplicated"
    ],
    rows.map((r) => [
      r.worldSize,
      r.inflight,
      r.deaths,
      r.chunksReclaimed,
      r.deathMedianMs,
      r.reclaimedPerSecond,
      r.redispatchMs,
      r.redispatchCompletions,
      r.epochMs,
      r.lost,
      r.duplicated
    ])
  )
  return { rows, markdown }
}

if (Lib.isMain("forfeit")) {
  console.log(run(Lib.isQuick()).markdown)
}
