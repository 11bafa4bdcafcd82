// The churn bench's quick check, so that it never rots: 8 served ranks from two processes of
// `joinRanks` over loopback, 2 epochs, 30% of the live ranks leaving (graceful, crash, silent)
// and as many joining after rounds. It checks results, never speed: exact audits, and a cost line
// for every rank the bench made leave, of the kind it left by.
import { describe, expect, it } from "vitest"
import * as Churn from "../../bench/churn.ts"
import { expectEveryDepartureCosted } from "../churn-checks.ts"

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
    expectEveryDepartureCosted(row, 2, 2000)
    // Every joiner that trained has its cost line: welcomed before it trained, and bytes sent to it.
    for (const join of row.joins) {
      expect(join.trainingMs).toBeGreaterThanOrEqual(join.welcomeMs)
      expect(join.bytes).toBeGreaterThan(0)
    }
    for (const line of row.leaves) expect(line.recoveryMs).toBeDefined()
  }, 180_000)
})
