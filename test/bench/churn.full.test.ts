// The churn bench's quick check, so that it never rots: 8 served ranks from two processes of
// `joinRanks` over loopback, 2 epochs, 30% of the live ranks leaving (graceful, crash, silent)
// and as many joining after rounds. It checks results, never speed: exact audits, and a cost line
// for every rank the bench made leave, of the kind it left by.
import { describe, expect, it } from "vitest"
import * as Churn from "../../bench/churn.ts"

describe("churn bench (quick)", () => {
  it("8 ranks with churn for 2 epochs: clean audits, every departure has its cost line and its kind", async () => {
    const row = await Churn.measure({
      ranks: 8,
      processes: 2,
      backend: "cpu",
      mode: "progressive",
      epochs: 2,
      fraction: 0.3,
      params: 1000,
      batchMs: 5,
      heartbeatTimeoutMs: 2000
    })
    expect(row.exitCode).toBe(0)
    expect(row.audits).toMatchObject({ epochs: 2, lost: 0, duplicated: 0 })
    expect(row.churns).toBeGreaterThan(0)
    // Every fault the bench made while the run trained was taken out of the run with a cost line
    // of its kind; one made as the run ends may come after its last audit (nothing to cost then).
    const margins: Record<string, number> = { graceful: 1000, crash: 1000, silent: 2000 + 1000 }
    for (const [rank, kind, atMs] of row.faults) {
      const line = row.leaves.find((l) => l.rank === rank)
      if (line === undefined && atMs > row.lastAuditAtMs - margins[kind]!) continue
      expect([rank, line?.kind]).toEqual([rank, kind])
    }
    // Every joiner that trained has its cost line: welcomed before it trained, and bytes sent to it.
    expect(row.joins.length).toBeGreaterThan(0)
    for (const join of row.joins) {
      expect(join.trainingMs).toBeGreaterThanOrEqual(join.welcomeMs)
      expect(join.bytes).toBeGreaterThan(0)
    }
    expect(new Set(row.leaves.map((l) => l.kind))).toEqual(new Set(["graceful", "crash", "silent"]))
    for (const line of row.leaves) {
      expect([line.lostSamples, line.duplicatedSamples]).toEqual([0, 0])
      expect(line.recoveryMs).toBeDefined()
    }
  }, 180_000)
})
