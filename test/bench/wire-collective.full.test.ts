import { describe, expect, it } from "vitest"
import { measureWire } from "../../bench/wire-collective.ts"

// The averaging bench's floor for a direct ring round between processes: a tiny run (2 member
// processes, 64 parameters) that checks the rounds it counts, never speed.
describe("the bare collective over direct links", () => {
  it("times exactly the rounds asked for, after the warm-up ones, with the members' CPU time", async () => {
    const wire = await measureWire(2, 64, 4, 2)
    expect([wire.worldSize, wire.params, wire.rounds]).toEqual([2, 64, 4])
    expect(wire.p90Ms).toBeGreaterThanOrEqual(wire.medianMs)
    expect(wire.cpuMsPerRound).toBeGreaterThan(0)
  }, 60_000)
})
