import { describe, expect, it } from "vitest"
import * as Straggler from "../../bench/straggler.ts"

// The straggler bench's quick version (full tier, Node only: its rounds, deadlines and audits are
// the coordinator's arithmetic, the same on every runtime, and its worker ranks run on all three
// in test/bench/runs.full.test.ts's failover runs and test/actors/launcher.test.ts's round deadline).
describe("the straggler bench's quick version", () => {
  it("straggler: a healthy run, a straggler whose rounds wait for it, and one with a round deadline, each with a clean audit; only the last closes rounds at the deadline", async () => {
    const { rows, markdown } = await Straggler.run(true)
    expect(rows.map((r) => [r.run, r.lost, r.duplicated, r.roundsAtDeadline > 0])).toEqual([
      ["healthy", 0, 0, false],
      ["straggler, rounds wait", 0, 0, false],
      ["straggler, round deadline", 0, 0, true]
    ])
    expect(markdown).toContain("| run |")
  }, 120_000)
})
