// Served ranks on links that misbehave (harness: ./netns.ts; docs/liveness-links.md): a rank whose
// own link goes down (`ip link set eth0 down` in its host) for 8 s, then 9 s, with the
// default timeouts, resumes its link and is never lost; a cut that outlasts the heartbeat timeout
// (down until the coordinator declares the rank, then a second more) gets it declared once and
// refused with RankDead on its return while the others go on; a rank on a 1 Mbit/s link with the
// bundled 407,050-parameter model (1.6 MB a Params or Update) is never declared dead; with rank 0
// at 30% packet loss both ways and rounds with a deadline, no healthy rank dies and audits are clean.
//
// The coordinator (`cohort serve`) is in host A, rank 0 in host B (the link that misbehaves), the
// other ranks in host C (./cluster.ts starts them). The cut, timed against the heartbeat timeout,
// runs alone; then the slow link and the lossy one run side by side, each in namespaces of its own
// (their ranks mostly wait on the link). Node only (vitest.config.ts): about 1.5 minutes, and the
// three runtimes' servers already meet cut links in serve-join.test.ts; the resume itself runs on
// all three in test/transport/web-socket-resume.test.ts.
import { existsSync, rmSync, unlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as Cluster from "./cluster.ts"
import * as Netns from "./netns.ts"

const runtime = Runtime.detect()
// 40 ms a batch while the hold file exists, then 4 ms: the run lasts as long as the test acts on it.
const heldTrainer = fileURLToPath(new URL("../fixtures/trainers/steady-held.ts", import.meta.url))
// 40 ms a batch of 32: an epoch of 3 ranks (1,600 samples each) lasts about 2 s.
const steadySlow = fileURLToPath(new URL("../fixtures/trainers/steady-slow.ts", import.meta.url))
const wideTrainer = fileURLToPath(new URL("./fixtures/wide-model.ts", import.meta.url))
const scratch = Cluster.scratch("cohort-links-")
afterAll(() => rmSync(scratch.dir, { recursive: true, force: true }))
const port = 7100
const { audits, readRun, sleep } = Cluster

/** `cohort serve` in A, and one `cohort join` per rank in `hostOf(rank)`. */
const start = (
  network: Netns.Network,
  name: string,
  options: {
    readonly trainer: string
    readonly worldSize: number
    readonly epochs: number
    readonly hostOf: (rank: number) => string
    readonly lifetimeMs: number
    readonly env?: Readonly<Record<string, string>>
    readonly serveArgs?: ReadonlyArray<string>
  }
) => Cluster.start(network, { ...options, scratch, name, port })

describe(`served ranks on links that misbehave (${runtime})`, () => {
  it("rank 0's link down for 8 s, then 9 s, with default timeouts: resumed each time, never lost, audits clean; down until declared: declared once, refused with RankDead on its return, the others go on", async () => {
    const lifetimeMs = 170_000
    const hold = join(scratch.dir, "cut-hold")
    writeFileSync(hold, "")
    const network = Netns.create(["a", "b", "c"])
    try {
      const { serve, ranks, out } = await start(network, "cut", {
        trainer: heldTrainer,
        worldSize: 3,
        // Rounds wait for rank 0 while its link is down, so the held run trains only between cuts
        // (epochs of 2 s at the least: 9 or fewer before the long cut ends); 24 outlast that over
        // twice, and the rest runs fast.
        epochs: 24,
        hostOf: (rank) => (rank === 0 ? "b" : "c"),
        lifetimeMs,
        env: { COHORT_TEST_HOLD: hold }
      })
      const startedAt = Date.now()
      const mark = (what: string) => console.log(`[links] ${((Date.now() - startedAt) / 1000).toFixed(1)} s: ${what}`)
      await serve.waitFor(/epoch 0 done/, 60_000)
      const cuts = [8000, 9000]
      for (const cutMs of cuts) {
        network.down("b")
        mark("down")
        await sleep(cutMs)
        network.up("b")
        mark("up")
        // Resumed within a fraction of a second; a few more rounds before the next cut.
        await sleep(3000)
        expect(serve.stdout() + serve.stderr()).not.toMatch(/rank 0 lost/)
      }
      // Mid-epoch, not at an epoch's end: a cut there can catch rank 0 inside the checkpoint it
      // was just asked for, and a served rank without --beat-links is then held for its save's
      // bound (docs/liveness.md), which is not what this cut checks. Epochs take about 2 s now.
      const epochsDone = () => (serve.stdout() + serve.stderr()).match(/epoch \d+ done/g)?.length ?? 0
      const before = epochsDone()
      for (const waitUntil = Date.now() + 30_000; epochsDone() === before && Date.now() < waitUntil; ) await sleep(50)
      await sleep(700)
      network.down("b")
      mark("down until declared")
      const cutAt = Date.now()
      await serve.waitFor(/rank 0 lost/, 30_000)
      const declaredAfterMs = Date.now() - cutAt
      // Back a second after its declaration (what a longer cut adds is more of the same silence).
      await sleep(1000)
      network.up("b")
      const zeroExit = await ranks[0]!.exited
      mark(
        `rank 0 exited ${zeroExit}; the coordinator said:\n${(serve.stdout() + serve.stderr())
          .split("\n")
          .filter((l) => /rank 0 lost|refused|formed/.test(l))
          .join("\n")}`
      )
      unlinkSync(hold)
      expect(await serve.exited).toBe(0)
      expect(await Promise.all([ranks[1]!.exited, ranks[2]!.exited])).toEqual([0, 0])
      const said = `${ranks[0]!.stdout()}${ranks[0]!.stderr()}`.trim().split("\n")
      console.log(
        `[links ${runtime}] long cut: rank 0 declared ${declaredAfterMs} ms after it, then exited ${zeroExit}: ${JSON.stringify(said)}`
      )
      expect(zeroExit).toBe(13)
      expect(said.at(-1)).toMatch(/^cohort rank 0: the coordinator declared this rank dead \(close code 4011\)/)
      const { summary, events } = readRun(out)
      // Declared once, by the heartbeat timeout (10 s by default), during the long cut only.
      expect(summary.deaths.map((d) => [d.rank, d.detector])).toEqual([[0, "heartbeat"]])
      expect(declaredAfterMs).toBeGreaterThanOrEqual(8000)
      expect(declaredAfterMs).toBeLessThan(20_000)
      expect(summary.refusals?.[4011] ?? 0).toBeGreaterThanOrEqual(1)
      expect(audits(summary)).toEqual(Array.from({ length: 24 }, () => [4800, 0, 0]))
      // Each short cut was resumed, after a silence of the cut's length and at most about half a
      // second more (the last ping before it, the first attempt after it).
      const resumes = events.filter((e) => e.type === "resumed" && e.rank === 0).map((e) => e.silentMs as number)
      console.log(`[links ${runtime}] rank 0 resumed after silences of ${JSON.stringify(resumes)} ms (cuts of ${JSON.stringify(cuts)} ms)`)
      expect(resumes.filter((ms) => ms >= 7000).length).toBe(cuts.length)
      expect(resumes.every((ms) => ms < 10_000)).toBe(true)
      // Every round took all three until the death; the other two went on with rounds of two.
      const contributors = events.filter((e) => e.type === "round").map((e) => e.contributors as number)
      const firstOfTwo = contributors.indexOf(2)
      expect(firstOfTwo).toBeGreaterThan(0)
      expect(contributors.slice(0, firstOfTwo).every((n) => n === 3)).toBe(true)
      expect(contributors.slice(firstOfTwo).every((n) => n === 2)).toBe(true)
    } finally {
      network.destroy()
      if (existsSync(hold)) unlinkSync(hold)
    }
  }, 180_000)

  it.concurrent("rank 0 on a 1 Mbit/s link both ways with the bundled 407,050-parameter model: no death, audits clean; the epoch time is reported", async () => {
    const network = Netns.create(["a", "b", "c"])
    try {
      network.rateLimitBoth("b", { rateKbit: 1000, burstBytes: 4096, latencyMs: 400 })
      const { serve, ranks, out } = await start(network, "slow", {
        trainer: wideTrainer,
        worldSize: 2,
        epochs: 1,
        hostOf: (rank) => (rank === 0 ? "b" : "c"),
        lifetimeMs: 110_000
      })
      expect(await serve.exited).toBe(0)
      expect(await Promise.all(ranks.map((r) => r.exited))).toEqual([0, 0])
      const { summary, events } = readRun(out)
      expect(summary.deaths).toEqual([])
      expect(audits(summary)).toEqual([[1024, 0, 0]])
      const formedMs = events.find((e) => e.type === "formed")?.ms ?? 0
      const epochMs = (events.find((e) => e.type === "epoch")?.ms ?? Number.NaN) - formedMs
      // 1.6 MB each way at 1 Mbit/s is about 13 s each: longer than the 10 s heartbeat timeout.
      expect(epochMs).toBeGreaterThan(10_000)
      console.log(
        `[links ${runtime}] 1 Mbit/s link, 407,050 parameters, 2 ranks: epoch 0 took ${epochMs} ms; rounds ${JSON.stringify(
          events.filter((e) => e.type === "round").map((e) => [e.contributors, e.openMs])
        )}`
      )
    } finally {
      network.destroy()
    }
  }, 120_000)

  let lossyAttempts = 0
  // Once in about ten CI runs the run did not end within 110 s (serve killed at its lifetime;
  // alone, 4 runs of 4 ended in 15 to 24 s): not understood yet. The story of such a run is
  // printed (Cluster.story); one retry keeps the tier about everything else meanwhile.
  it.concurrent("rank 0 at 30% packet loss both ways, rounds with a deadline: no healthy rank dies, audits clean; rank 0 is declared at most once", {
    timeout: 120_000,
    retry: 1
  }, async () => {
    const network = Netns.create(["a", "b", "c"])
    try {
      network.dropPercentBoth("b", 30)
      // Each attempt in a folder of its own: a retry must not take the killed run over.
      lossyAttempts += 1
      const cluster = await start(network, `lossy-${lossyAttempts}`, {
        trainer: steadySlow,
        worldSize: 3,
        epochs: 3,
        hostOf: (rank) => (rank === 0 ? "b" : "c"),
        lifetimeMs: 110_000,
        serveArgs: ["--round-deadline-ms", "500"]
      })
      const { serve, ranks, out } = cluster
      const served = await serve.exited
      // Printed, not only in the assertion: a retried test's first failure shows in the log too.
      if (served !== 0) console.log(`[links ${runtime}] rank 0 at 30% loss: serve ended ${served}\n${await Cluster.story(cluster)}`)
      expect(served).toBe(0)
      expect(await Promise.all([ranks[1]!.exited, ranks[2]!.exited])).toEqual([0, 0])
      const zeroExit = await ranks[0]!.exited
      const { summary, events } = readRun(out)
      expect(summary.deaths.filter((d) => d.rank !== 0)).toEqual([])
      expect(summary.deaths.length).toBeLessThanOrEqual(1)
      expect(audits(summary)).toEqual([
        [4800, 0, 0],
        [4800, 0, 0],
        [4800, 0, 0]
      ])
      const rounds = events.filter((e) => e.type === "round")
      const resumes = events.filter((e) => e.type === "resumed").map((e) => e.silentMs)
      console.log(
        `[links ${runtime}] rank 0 at 30% loss: exited ${zeroExit}, deaths ${JSON.stringify(summary.deaths.map((d) => [d.rank, d.cause]))}; ` +
          `round times ${JSON.stringify(Cluster.roundTimes(events))} ms, contributors ${JSON.stringify(rounds.map((e) => e.contributors))}; ` +
          `resumes after ${JSON.stringify(resumes)} ms; packets dropped ${network.dropped("b")} at B`
      )
    } finally {
      network.destroy()
    }
  })
})
