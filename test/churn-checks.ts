// What every churn run must show, whatever its size (test/bench/churn.full.test.ts at 8 ranks,
// test/browser/churn-page.test.ts at 64): results, never speed.
import { expect } from "vitest"
import type * as Churn from "../bench/churn.ts"

/**
 * The run completed with exact audits over `epochs`, churned, and every rank the bench made leave
 * while the run trained has its cost line, of the kind it left by, with nothing lost or
 * duplicated; one made to leave as the run ends may come after the last audit (nothing to cost
 * then): within a second of it, or the heartbeat timeout and a second for a silent one.
 */
export const expectEveryDepartureCosted = (row: Churn.Row, epochs: number, heartbeatTimeoutMs: number): void => {
  expect(row.exitCode).toBe(0)
  expect(row.audits).toMatchObject({ epochs, lost: 0, duplicated: 0 })
  expect(row.churns).toBeGreaterThan(0)
  const margins: Record<string, number> = { graceful: 1000, crash: 1000, silent: heartbeatTimeoutMs + 1000 }
  for (const [rank, kind, atMs] of row.faults) {
    const line = row.leaves.find((l) => l.rank === rank)
    if (line === undefined && atMs > row.lastAuditAtMs - margins[kind]!) continue
    expect([rank, line?.kind]).toEqual([rank, kind])
  }
  expect(new Set(row.leaves.map((l) => l.kind))).toEqual(new Set(["graceful", "crash", "silent"]))
  for (const line of row.leaves) expect([line.lostSamples, line.duplicatedSamples]).toEqual([0, 0])
  expect(row.joins.length).toBeGreaterThan(0)
}
