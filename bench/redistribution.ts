/**
 * Static-mode redistribution at large world sizes: deaths reported one per tick, each
 * handing a remainder of R samples to the survivors. Per death: the core's time (report + tick),
 * the baseline's time on the same inputs, their ratio, ExtendPartition messages per second, and the
 * core's typed-array state per rank. Every death's messages are checked equal to the baseline's.
 *
 * Run: `node --import tsx bench/redistribution.ts [--quick]`, `bun bench/redistribution.ts`.
 */
import * as Coordinator from "../src/core/coordinator.ts"
import { FlodlStyle } from "./baseline.ts"
import * as Lib from "./lib.ts"

export interface Row {
  readonly worldSize: number
  readonly remainder: number
  readonly deaths: number
  readonly coreMedianMs: number
  readonly coreP99Ms: number
  readonly baselineMedianMs: number
  readonly baselineP99Ms: number
  readonly speedup: number
  readonly extensionsPerSecond: number
  readonly stateBytesPerRank: number
  readonly messagesChecked: number
}

const NEVER_STALE_MS = 1e15

/** Measures one cell of the grid: `deathsWanted` deaths at `worldSize` with remainders of `remainder`. */
export const measure = (worldSize: number, remainder: number, deathsWanted: number): Row => {
  const deaths = Math.min(deathsWanted, worldSize - 1)
  const epochSamples = worldSize * remainder
  const options = { worldSize, epochSamples, epochs: 1, heartbeatTimeoutMs: NEVER_STALE_MS, evalEveryEpochs: 0, checkpointEveryEpochs: 0 }
  const state = Coordinator.make(options, 0)
  if ("_tag" in state) throw new Error(state.reason)
  Coordinator.start(state)
  const stateBytesPerRank = Lib.typedArrayBytes(state) / worldSize
  const baseline = new FlodlStyle(worldSize, epochSamples, NEVER_STALE_MS, 0)
  const coreMs: Array<number> = []
  const baselineMs: Array<number> = []
  let messages = 0
  let messagesChecked = 0
  let coreTotalMs = 0
  for (let k = 0; k < deaths; k++) {
    const rank = (k * 7919) % worldSize // 7919 is prime, so the victims are distinct
    const t = k + 1
    const t0 = Lib.nowMs()
    Coordinator.step(state, { _tag: "DeathReport", rank, nowMs: t, cause: { _tag: "Killed", signal: "SIGKILL" } })
    const cmds = Coordinator.step(state, { _tag: "Tick", nowMs: t })
    const t1 = Lib.nowMs()
    baseline.report(rank)
    const expected = baseline.tick(t)
    const t2 = Lib.nowMs()
    coreMs.push(t1 - t0)
    baselineMs.push(t2 - t1)
    coreTotalMs += t1 - t0
    let i = 0
    for (const cmd of cmds) {
      if (cmd._tag !== "SendRanges" || cmd.kind !== "ExtendPartition") continue
      for (let j = 0; j < cmd.ranks.length; j++, i++) {
        const want = expected[i]
        if (want === undefined || want[0] !== cmd.ranks[j] || want[1] !== cmd.offsets[j] || want[2] !== cmd.sizes[j]) {
          throw new Error(`W=${worldSize} R=${remainder} death ${k}: message ${i} differs from the baseline`)
        }
      }
    }
    if (i !== expected.length) throw new Error(`W=${worldSize} R=${remainder} death ${k}: ${i} messages, baseline ${expected.length}`)
    messages += i
    messagesChecked += i
  }
  const core = Lib.percentiles(coreMs)
  const base = Lib.percentiles(baselineMs)
  return {
    worldSize,
    remainder,
    deaths,
    coreMedianMs: core.median,
    coreP99Ms: core.p99,
    baselineMedianMs: base.median,
    baselineP99Ms: base.p99,
    speedup: base.median / core.median,
    extensionsPerSecond: messages / (coreTotalMs / 1000),
    stateBytesPerRank,
    messagesChecked
  }
}

/** Runs the grid; `quick` keeps it to a few seconds. */
export const run = (quick: boolean): { readonly rows: ReadonlyArray<Row>; readonly markdown: string } => {
  const sizes = quick ? [1_000, 10_000] : [1_000, 10_000, 100_000, 1_000_000]
  const remainders = quick ? [16, 4_096] : [16, 4_096, 1_000_000]
  const rows: Array<Row> = []
  // Warm up the JIT on the same code paths, so that the first cells do not time the compiler.
  measure(1_000, 16, 300)
  measure(1_000, 4_096, 100)
  for (const worldSize of sizes) {
    for (const remainder of remainders) {
      // 100 deaths, fewer where each death sends a million messages (keeps the run under a minute).
      const deaths = Math.min(quick ? 20 : 100, Math.max(3, Math.floor(2e7 / Math.min(remainder, worldSize))))
      Lib.collectGarbage()
      Lib.note(`redistribution: worldSize ${worldSize}, remainder ${remainder}, ${deaths} deaths`)
      rows.push(measure(worldSize, remainder, deaths))
    }
  }
  const markdown = Lib.table(
    [
      "worldSize",
      "remainder",
      "deaths",
      "core median ms",
      "core p99 ms",
      "baseline median ms",
      "speedup",
      "ExtendPartition/s",
      "state B/rank"
    ],
    rows.map((r) => [
      r.worldSize,
      r.remainder,
      r.deaths,
      r.coreMedianMs,
      r.coreP99Ms,
      r.baselineMedianMs,
      `${Lib.fmt(r.speedup)}x`,
      r.extensionsPerSecond,
      r.stateBytesPerRank
    ])
  )
  return { rows, markdown }
}

if (Lib.isMain("redistribution")) {
  const { markdown } = run(Lib.isQuick())
  console.log(markdown)
}
