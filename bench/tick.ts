/**
 * Tick cost when nothing expires, and heartbeats ingested per second, against worldSize.
 * The baseline scans every rank each tick, as floDl does; the core looks only at the
 * front of its liveness list.
 *
 * Run: `node --import tsx bench/tick.ts [--quick]`.
 */
import * as Coordinator from "../src/core/coordinator.ts"
import { FlodlStyle } from "./baseline.ts"
import * as Lib from "./lib.ts"

export interface Row {
  readonly worldSize: number
  readonly coreTickNs: number
  readonly baselineTickNs: number
  readonly speedup: number
  readonly heartbeatsPerSecond: number
  readonly coreExaminedPerTick: number
}

const measure = (worldSize: number, ticks: number, heartbeats: number): Row => {
  const state = Coordinator.make({ worldSize, epochSamples: worldSize, epochs: 1, heartbeatTimeoutMs: 1e12 }, 0)
  if ("_tag" in state) throw new Error(state.reason)
  Coordinator.start(state)
  const baseline = new FlodlStyle(worldSize, worldSize, 1e12, 0)
  const examinedBefore = Coordinator.scanWork(state)
  let t0 = Lib.nowMs()
  for (let t = 1; t <= ticks; t++) Coordinator.step(state, { _tag: "Tick", nowMs: t })
  const coreMs = Lib.nowMs() - t0
  const examined = (Coordinator.scanWork(state) - examinedBefore) / ticks
  const baselineTicks = Math.max(3, Math.min(ticks, Math.floor(2e7 / worldSize)))
  t0 = Lib.nowMs()
  for (let t = 1; t <= baselineTicks; t++) if (baseline.tick(t).length !== 0) throw new Error("baseline declared a death")
  const baselineMs = Lib.nowMs() - t0
  const heartbeat = { _tag: "Heartbeat" } as const
  let rank = 0
  t0 = Lib.nowMs()
  for (let i = 0; i < heartbeats; i++) {
    rank = (rank + 7919) % worldSize
    Coordinator.step(state, { _tag: "Frame", rank, nowMs: ticks + 1 + i, message: heartbeat })
  }
  const heartbeatMs = Lib.nowMs() - t0
  const coreTickNs = (coreMs * 1e6) / ticks
  const baselineTickNs = (baselineMs * 1e6) / baselineTicks
  return {
    worldSize,
    coreTickNs,
    baselineTickNs,
    speedup: baselineTickNs / coreTickNs,
    heartbeatsPerSecond: heartbeats / (heartbeatMs / 1000),
    coreExaminedPerTick: examined
  }
}

/** Runs the sizes; `quick` keeps it to a second or two. */
export const run = (quick: boolean): { readonly rows: ReadonlyArray<Row>; readonly markdown: string } => {
  const sizes = quick ? [1_000, 10_000] : [1_000, 10_000, 100_000, 1_000_000]
  measure(1_000, 100_000, 200_000) // warm-up
  const rows = sizes.map((worldSize) => {
    Lib.collectGarbage()
    Lib.note(`tick: worldSize ${worldSize}`)
    return measure(worldSize, quick ? 20_000 : 200_000, quick ? 100_000 : 1_000_000)
  })
  const markdown = Lib.table(
    ["worldSize", "core tick ns", "baseline tick ns", "speedup", "ranks examined per tick", "heartbeats/s"],
    rows.map((r) => [r.worldSize, r.coreTickNs, r.baselineTickNs, `${Lib.fmt(r.speedup)}x`, r.coreExaminedPerTick, r.heartbeatsPerSecond])
  )
  return { rows, markdown }
}

if (Lib.isMain("tick")) {
  console.log(run(Lib.isQuick()).markdown)
}
