import { describe, expect, it } from "vitest"
import * as Compression from "../../bench/compression.ts"
import * as Forfeit from "../../bench/forfeit.ts"
import * as Join from "../../bench/join.ts"
import * as Redistribution from "../../bench/redistribution.ts"
import * as Tick from "../../bench/tick.ts"

// The quick benches run in CI so that they never rot; they check results, never speed. The ones
// that train real workers for a minute are in runs.full.test.ts.
describe("quick benchmarks", () => {
  it("tick: the core examines one list entry per tick at every size", () => {
    const { rows, markdown } = Tick.run(true)
    expect(rows.map((r) => [r.worldSize, r.coreExaminedPerTick])).toEqual([
      [1_000, 1],
      [10_000, 1]
    ])
    expect(markdown).toContain("| worldSize |")
  })

  it("compression: fp16 halves a round's bytes and int8 cuts them 3.5× or more, each within its quantizer's error", () => {
    const { rows, markdown } = Compression.run(true, [])
    expect(rows.map((r) => r.compress)).toEqual(["none", "fp16", "int8"])
    expect(rows[0]!.maxError).toBe(0)
    expect(rows[1]!.ratio).toBeGreaterThanOrEqual(1.99)
    expect(rows[2]!.ratio).toBeGreaterThanOrEqual(3.5)
    // The values are within ±0.1: fp16 keeps 11 bits, int8 half a step of 0.1 / 127.
    expect(rows[1]!.maxError).toBeLessThanOrEqual(0.1 * 2 ** -11)
    expect(rows[2]!.maxError).toBeLessThanOrEqual(0.1 / 254 + 1e-7)
    expect(markdown).toContain("| compress |")
  })

  it("redistribution: every death's messages equal the baseline's", () => {
    const { rows } = Redistribution.run(true)
    expect(rows.map((r) => [r.worldSize, r.remainder, r.deaths])).toEqual([
      [1_000, 16, 20],
      [1_000, 4_096, 20],
      [10_000, 16, 20],
      [10_000, 4_096, 20]
    ])
    expect(rows.filter((r) => r.remainder === 16).map((r) => r.messagesChecked)).toEqual([320, 320])
    // With 4,096 samples over 9,980 to 9,999 survivors, each death sends 4,096 one-sample slices of
    // its partition, plus one slice per one-sample extension it had received from earlier deaths (88).
    expect(rows.find((r) => r.worldSize === 10_000 && r.remainder === 4_096)?.messagesChecked).toBe(20 * 4_096 + 88)
    // The core's typed arrays: a few dozen bytes a rank (64.3 with the blocking-silence flag, 69.3 with
    // round silence's last-round flag and hand-out time).
    for (const r of rows) expect(r.stateBytesPerRank).toBeLessThanOrEqual(72)
  })

  it("forfeit: every forfeited chunk is reclaimed and re-dispatched, and the epoch audit is clean", () => {
    const { rows } = Forfeit.run(true)
    expect(rows.map((r) => [r.worldSize, r.inflight, r.chunksReclaimed, r.redispatchCompletions, r.lost, r.duplicated])).toEqual([
      [1_000, 1, 100, 100, 0, 0],
      [1_000, 8, 800, 800, 0, 0]
    ])
  })

  it("join: 100 ranks join a progressive run of 1,000 live ranks one by one, each handed 2 chunks of 128 samples", async () => {
    const { rows, markdown } = await Join.run(true)
    expect(rows.map((r) => [r.liveRanks, r.joins, r.samplesHanded])).toEqual([[1_000, 100, 100 * 256]])
    expect(rows[0]!.firstFrameToChunkMs.median).toBeGreaterThan(0)
    expect(markdown).toContain("| live ranks |")
  }, 60_000)
})
