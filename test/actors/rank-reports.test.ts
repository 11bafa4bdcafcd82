// When a rank sends `Progress` (rank-reports.ts): once it trained `progressIntervalMs` since the
// last one, and at least every `progressWaitingMs` of its clock, never more often than
// `progressIntervalMs`. A rank whose short batches sit between long waits for its round's
// `Update` reports about twice a second, not after every batch.
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { describe, expect, it } from "vitest"
import type { Link, RankData } from "../../actors/rank/rank-data.ts"
import * as RankReports from "../../actors/rank/rank-reports.ts"
import type * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"

const reportsOf = (progressIntervalMs: number) => {
  const sent: Array<string> = []
  const transport = {
    send: (_to: unknown, bytes: Uint8Array) =>
      Effect.sync(() => {
        const frame = Codec.decode(bytes)
        if (Result.isSuccess(frame)) sent.push(frame.success.message._tag)
      })
  } as unknown as Transport.TransportShape
  const link = { transport, rank: 0, data: undefined } as Link
  const data = { heartbeatIntervalMs: 1000, progressIntervalMs } as RankData
  return { reports: RankReports.make(link, data), sent }
}

const progress = { epoch: 0, samplesDone: 8, samplesInEpoch: 8, samplesTotal: 8 }

/** Batches of `batchMs` with `waitMs` between them, from `startMs`; the Progress count after each. */
const run = (progressIntervalMs: number, batches: number, batchMs: number, waitMs: number): Array<number> => {
  const { reports, sent } = reportsOf(progressIntervalMs)
  const counts: Array<number> = []
  let at = 1_000_000
  for (let i = 0; i < batches; i++) {
    Effect.runSync(reports.afterBatch(at, at + batchMs, progress))
    counts.push(sent.filter((tag) => tag === "Progress").length)
    at += batchMs + waitMs
  }
  return counts
}

describe("a rank's Progress reports", () => {
  it("the first batch reports at once", () => {
    expect(run(100, 1, 5, 0)).toEqual([1])
  })

  it("a rank that trains without waiting reports every progressIntervalMs of training", () => {
    // 10 ms batches back to back: one report per 10 batches after the first.
    const counts = run(100, 31, 10, 0)
    expect(counts.at(-1)).toBe(4)
  })

  it("a rank whose 5 ms batches sit between 100 ms waits reports every progressWaitingMs, not every batch", () => {
    // 105 ms a batch: 2 s is 19 batches; the old rule (100 ms of its clock) reported after each.
    const counts = run(100, 20, 5, 100)
    const reports = counts.at(-1)!
    expect(RankReports.progressWaitingMs).toBe(500)
    expect(reports).toBeGreaterThanOrEqual(4)
    expect(reports).toBeLessThanOrEqual(5)
  })

  it("never more often than progressIntervalMs when that is longer than progressWaitingMs", () => {
    // 2 s interval, 50 ms batches with 50 ms waits over 6 s: reports at 0 and then every 2 s of wall clock at most.
    const counts = run(2000, 60, 50, 50)
    expect(counts.at(-1)).toBeLessThanOrEqual(4)
    expect(counts.at(-1)).toBeGreaterThanOrEqual(2)
  })
})
