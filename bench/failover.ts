/**
 * Failover with real worker threads (issue 7): ranks are killed one at a time (their supervisor
 * reports the death) and others hang (only heartbeats catch them). Reports the time from each kill
 * to the survivors being handed its remainder (median, p99), and from each hang to its
 * declaration, against the heartbeat timeout. The full run measures the ranks at the default
 * priority and again at nice 10.
 *
 * The ranks run `bench/trainers/waiting.ts`, which waits 2 ms per batch instead of computing.
 *
 * Run: `node --import tsx bench/failover.ts [--quick]`, `bun bench/failover.ts`.
 */
import * as Launcher from "../actors/launcher.ts"
import type { HangSpec, KillSpec } from "../actors/run-types.ts"
import * as Lib from "./lib.ts"

export interface Result {
  readonly worldSize: number
  readonly rankNice: number
  readonly kills: number
  readonly hangs: number
  readonly heartbeatTimeoutMs: number
  readonly killToDeclaredMs: { readonly median: number; readonly p99: number }
  readonly killToRecoveredMs: { readonly median: number; readonly p99: number }
  readonly hangToDeclaredMs: { readonly median: number; readonly p99: number }
  readonly lost: number
  readonly duplicated: number
  readonly startupAndRunMs: number
}

/** One cluster with the faults, its ranks at nice `rankNice`; `quick` uses 6 ranks, 3 kills and 1 hang. */
const measure = async (quick: boolean, rankNice: number): Promise<Result> => {
  const kills = quick ? 3 : 20
  const hangs = quick ? 1 : 5
  const worldSize = kills + hangs + (quick ? 2 : 3)
  const heartbeatTimeoutMs = 2000
  const killSpecs: Array<KillSpec> = Array.from({ length: kills }, (_, i) => ({ rank: i, atSeconds: 0.5 + i * 0.25 }))
  const hangSpecs: Array<HangSpec> = Array.from({ length: hangs }, (_, i) => ({ rank: kills + i, atSeconds: 0.5 + i * 0.5 }))
  const started = Lib.nowMs()
  const outcome = await Launcher.run({
    trainer: "bench/trainers/waiting.ts",
    worldSize,
    epochs: quick ? 1 : 2,
    batchSize: 16,
    heartbeatTimeoutMs,
    heartbeatIntervalMs: 250,
    tickMs: 50,
    rankNice,
    kills: killSpecs,
    hangs: hangSpecs,
    outDir: "bench/results/runs"
  })
  const killed = outcome.deaths.filter((d) => d.detector === "supervisor")
  const hung = outcome.deaths.filter((d) => d.detector === "heartbeat")
  return {
    worldSize,
    rankNice,
    kills: killed.length,
    hangs: hung.length,
    heartbeatTimeoutMs,
    killToDeclaredMs: Lib.percentiles(killed.map((d) => d.detectedAfterFaultMs ?? Number.NaN)),
    killToRecoveredMs: Lib.percentiles(killed.map((d) => d.recoveredAfterFaultMs ?? Number.NaN)),
    hangToDeclaredMs: Lib.percentiles(hung.map((d) => d.detectedAfterFaultMs ?? Number.NaN)),
    lost: outcome.epochs.reduce((sum, e) => sum + e.lost, 0),
    duplicated: outcome.epochs.reduce((sum, e) => sum + e.duplicated, 0),
    startupAndRunMs: Lib.nowMs() - started
  }
}

/**
 * Runs the cluster with the ranks at the default priority (`result`) and, in the full run, again
 * with `rankNice: 10` (`niced`), where busy ranks yield the CPU to the coordinator's thread.
 */
export const run = async (quick: boolean): Promise<{ readonly result: Result; readonly niced?: Result; readonly markdown: string }> => {
  const result = await measure(quick, 0)
  const niced = quick ? undefined : await measure(quick, 10)
  const markdown = Lib.table(
    ["worldSize", "rank nice", "kills", "kill→declared median ms", "kill→remainder sent median ms", "p99 ms", "hangs", "hang→declared median ms (timeout)", "lost", "duplicated"],
    [result, ...(niced === undefined ? [] : [niced])].map((r) => [
      r.worldSize,
      r.rankNice,
      r.kills,
      r.killToDeclaredMs.median,
      r.killToRecoveredMs.median,
      r.killToRecoveredMs.p99,
      r.hangs,
      `${Lib.fmt(r.hangToDeclaredMs.median)} (${r.heartbeatTimeoutMs})`,
      r.lost,
      r.duplicated
    ])
  )
  return niced === undefined ? { result, markdown } : { result, niced, markdown }
}

if (Lib.isMain("failover")) {
  const quick = Lib.isQuick()
  const { markdown, ...data } = await run(quick)
  console.log(`## failover\n\n${markdown}\n`)
  console.log(`results: ${Lib.writeResults({ failover: data }, quick)}`)
}
