import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Averaging from "../../bench/averaging.ts"
import { measureBare } from "../../bench/bare-collective.ts"

// The averaging bench counts the rounds it times from the run's own round events; these runs are
// tiny (2 ranks, 64 parameters) and check counts, never speed.
const outDir = mkdtempSync(join(tmpdir(), "cohort-test-bench-averaging-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))
const tiny = { worldSize: 2, params: 64, transport: "worker", outDir } as const

describe("the averaging bench", () => {
  it("a run of R rounds after W warm-up rounds reports R rounds, each timed, for both backends", async () => {
    for (const backend of ["cpu", "ring"] as const) {
      const measured = await Averaging.measure({ ...tiny, backend, rounds: 4, warmupRounds: 2 })
      expect([measured.backend, measured.rounds, measured.warmupRounds, measured.roundMs.length]).toEqual([backend, 4, 2, 4])
      expect(measured.roundMs.every((ms) => ms >= 0)).toBe(true)
      expect(measured.p90Ms).toBeGreaterThanOrEqual(measured.medianMs)
    }
  }, 120_000)

  it("configurations in one process each run their own round count, a longer one after a shorter one", async () => {
    const short = await Averaging.measure({ ...tiny, backend: "cpu", rounds: 2, warmupRounds: 1 })
    const long = await Averaging.measure({ ...tiny, backend: "cpu", rounds: 6, warmupRounds: 1 })
    expect([short.rounds, long.rounds]).toEqual([2, 6])
  }, 120_000)

  it("the bare shared-memory collective beside the ring times exactly the rounds asked for, after the warm-up ones", async () => {
    const bare = await measureBare(2, 64, 4, 2)
    expect([bare.worldSize, bare.params, bare.rounds]).toEqual([2, 64, 4])
    expect(bare.medianMs).toBeGreaterThanOrEqual(0)
    expect(bare.p90Ms).toBeGreaterThanOrEqual(bare.medianMs)
  }, 60_000)

  it("refuses a configuration without a warm-up round (its first round would have no round before it)", async () => {
    await expect(Averaging.measure({ ...tiny, backend: "cpu", rounds: 3, warmupRounds: 0 })).rejects.toThrow(
      /warm-up rounds must be integers >= 1/
    )
  })
})
