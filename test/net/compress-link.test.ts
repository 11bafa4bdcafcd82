// Compressed averaging on slow links (harness: ./netns.ts; docs/edge-averaging.md): the coordinator
// (`cohort serve`) in host A, rank 0 in host B and rank 1 in host C, each rank's link capped at
// 2 Mbit/s both ways by `tbf`. The same served run twice in one test, float32 then `--compress
// int8`: the epoch's wall time with int8 is at most 0.4 of float32's, and both audits are exact.
//
// Bounded: the bench trainer `bench/trainers/params-only.ts` (no arithmetic, so the epoch's time is
// the links'), 120,000 parameters (a float32 contribution or update is 480 KB, 1.9 s at 2 Mbit/s;
// int8 128 KB, 0.51 s), 8,192 samples over 2 ranks: 4 rounds of 32 batches a rank. About 14 s of
// float32 epoch and 4 s of int8 epoch (0.28x at load 11, 0.36x at load 50), about 30 s in all at
// load 11. Node only (vitest.config.ts): the packing is the codec's, the same on every runtime, and
// the served runs' links are tested on all three in serve-join.test.ts.
import { rmSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as Cluster from "./cluster.ts"
import * as Netns from "./netns.ts"

const runtime = Runtime.detect()
const paramsOnly = fileURLToPath(new URL("../../bench/trainers/params-only.ts", import.meta.url))
const scratch = Cluster.scratch("cohort-compress-link-")
afterAll(() => rmSync(scratch.dir, { recursive: true, force: true }))
const env = { COHORT_BENCH_SAMPLES: "8192", COHORT_BENCH_PARAMS: "120000" }

/** One served run of 2 ranks on 2 Mbit/s links: its epoch's wall time (formation to the epoch's end), audits and round bytes. */
const epochOn2Mbit = async (network: Netns.Network, compress: "none" | "int8") => {
  const { serve, ranks, out } = await Cluster.start(network, {
    scratch,
    name: compress,
    trainer: paramsOnly,
    worldSize: 2,
    epochs: 1,
    port: 7300,
    hostOf: (rank) => (rank === 0 ? "b" : "c"),
    lifetimeMs: 100_000,
    env,
    // The epoch's time must be the links': at nice -10 the machine's other work (a loaded CI host)
    // does not stretch the int8 run's packing, which would count against it.
    nice: -10,
    serveArgs: ["--compress", compress]
  })
  expect(await serve.exited, serve.stderr()).toBe(0)
  expect(await Promise.all(ranks.map((r) => r.exited))).toEqual([0, 0])
  const { summary, events } = Cluster.readRun(out)
  const formedMs = events.find((e) => e.type === "formed")?.ms ?? Number.NaN
  const epochMs = (events.find((e) => e.type === "epoch")?.ms ?? Number.NaN) - formedMs
  const rounds = events.filter((e) => e.type === "round")
  const received = rounds.reduce((sum, e) => sum + (e.receivedBytes as number), 0)
  const timeline = `formed at ${formedMs} ms, rounds closed at ${JSON.stringify(rounds.map((e) => [e.ms, e.openMs]))} (ms, open ms), epoch at ${formedMs + epochMs} ms`
  return { summary, epochMs, rounds: rounds.length, received, timeline }
}

describe(`compressed averaging on 2 Mbit/s links (${runtime})`, () => {
  it("every rank on a 2 Mbit/s tbf link: the epoch takes at most 0.4 of float32's wall time with int8; both audits exact", async () => {
    const network = Netns.create(["a", "b", "c"])
    try {
      for (const host of ["b", "c"]) network.rateLimitBoth(host, { rateKbit: 2000, burstBytes: 4096, latencyMs: 400 })
      const plain = await epochOn2Mbit(network, "none")
      const int8 = await epochOn2Mbit(network, "int8")
      console.log(
        `[compress-link ${runtime}] 2 Mbit/s, 120,000 parameters, 2 ranks, ${plain.rounds} rounds: epoch ${plain.epochMs} ms float32, ` +
          `${int8.epochMs} ms int8 (${(int8.epochMs / plain.epochMs).toFixed(2)}x); contributions ${plain.received} and ${int8.received} bytes; float32 ${plain.timeline}; int8 ${int8.timeline}`
      )
      for (const run of [plain, int8]) {
        expect(Cluster.audits(run.summary)).toEqual([[8192, 0, 0]])
        expect(run.summary.deaths).toEqual([])
        expect(run.rounds).toBe(4)
      }
      expect(plain.received / int8.received).toBeGreaterThanOrEqual(3.5)
      // 4 rounds of 480 KB up and down each at 2 Mbit/s: the float32 epoch cannot be shorter.
      expect(plain.epochMs).toBeGreaterThan(12_000)
      expect(int8.epochMs).toBeLessThanOrEqual(0.4 * plain.epochMs)
    } finally {
      network.destroy()
    }
  }, 200_000)
})
