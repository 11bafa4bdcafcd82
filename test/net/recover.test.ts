// A served run outlives its coordinator (docs/recovery.md): `cohort serve` in host A with four
// `cohort join` ranks in hosts B and C (network namespaces, ./netns.ts) is SIGKILLed mid-epoch and
// started again in A within 10 s, on the same address and token: once with `--recover`, and
// killed again once the run went on, then with its first command (`serve` takes the run over by
// itself). The run completes in its one run directory: every epoch audited exactly once with
// nothing lost or duplicated, no epoch trained again, and the samples trained again at most the
// open round's. A rank killed while the coordinator is down is declared once the recovery window
// passed, with the cause "did not return after the coordinator's restart", and the run completes
// without it.
//
// The same with the ring backend in progressive mode: each takeover confirms the last ring round
// committed and forms its ring past every generation before it.
//
// Node only (vitest.config.ts): the runtimes differ in the recovered join, which
// test/transport/web-socket-recover.test.ts covers on all three. Linux and root only, as CI runs.
import { readdirSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Cluster from "./cluster.ts"
import * as Netns from "./netns.ts"

// 40 ms per batch of 32: an epoch of 4 ranks (1,200 samples each) lasts about 1.5 s.
const trainer = fileURLToPath(new URL("../fixtures/trainers/steady-slow.ts", import.meta.url))
const scratch = Cluster.scratch("cohort-recover-")
afterAll(() => rmSync(scratch.dir, { recursive: true, force: true }))

const port = 7000
const lifetimeMs = 110_000
const testTimeoutMs = lifetimeMs + 10_000
const hostOf = (rank: number) => (rank < 2 ? "b" : "c")
const worldSize = 4
// Rounds close every 32 batches of 32 samples (the default `averageEverySteps`): the open round
// is at most this many samples.
const openRoundSamplesMax = worldSize * 32 * 32

/** Every event of the run's journal, a line cut short by the kill left out. */
const journal = (runDir: string): ReadonlyArray<Cluster.Event> =>
  readFileSync(join(runDir, "events.ndjson"), "utf8")
    .split("\n")
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Cluster.Event]
      } catch {
        return []
      }
    })

const auditsOf = (events: ReadonlyArray<Cluster.Event>) =>
  events
    .filter((e) => e.type === "epoch")
    .map((e) => e.summary as { epoch: number; samplesCommitted: number; lost: number; duplicated: number })
    .map((s) => [s.epoch, s.samplesCommitted, s.lost, s.duplicated])

/**
 * Serves a run of 2 epochs across A, B and C and kills its coordinator once rank 1 trains in
 * epoch 1 (then `whileDown`); each of `restarts` then starts a coordinator in A within 10 s of
 * the kill before it, and every one but the last is killed again once the run went on
 * (`recovered`) and a random 0-400 ms more. `restart` is `["--recover", dir, ...]` or the first
 * command again (`serve` takes the run over by itself).
 */
const killAndRecover = async (
  name: string,
  whileDown: (ranks: ReadonlyArray<Netns.Proc>) => Promise<void>,
  restarts: ReadonlyArray<(runDir: string, first: ReadonlyArray<string>) => ReadonlyArray<string>>,
  check: (result: { readonly events: ReadonlyArray<Cluster.Event>; readonly ranks: ReadonlyArray<Netns.Proc> }) => Promise<void>,
  serveArgs: ReadonlyArray<string> = []
) => {
  const network = Netns.create(["a", "b", "c"])
  try {
    const { serve, ranks, out } = await Cluster.start(network, {
      scratch,
      name,
      trainer,
      worldSize,
      epochs: 2,
      port,
      hostOf,
      lifetimeMs,
      serveArgs
    })
    const first = serve.child.spawnargs.slice(serve.child.spawnargs.indexOf("serve"))
    await serve.waitFor(/rank 1 epoch 1: \d+ samples done/, 60_000)
    await Cluster.sleep(Math.floor(Math.random() * 600))
    let running = serve
    let runDir = ""
    for (const [index, restart] of restarts.entries()) {
      running.kill("SIGKILL")
      await running.exited
      const killedMs = Date.now()
      if (index === 0) await whileDown(ranks)
      await Cluster.sleep(Math.floor(Math.random() * 3000))
      const [runId] = readdirSync(out)
      runDir = join(out, runId!)
      running = network.script("a", Cluster.cli, restart(runDir, first), { lifetimeMs })
      expect(Date.now() - killedMs).toBeLessThan(10_000)
      if (index < restarts.length - 1) {
        await running.waitFor(/the run goes on after/, 60_000)
        await Cluster.sleep(Math.floor(Math.random() * 400))
      }
    }
    expect(await running.exited, `${running.stdout()}${running.stderr()}`).toBe(0)
    await check({ events: journal(runDir), ranks })
  } finally {
    network.destroy()
  }
}

describe("cohort serve --recover across network namespaces", () => {
  it.concurrent(
    "serve SIGKILLed twice in epoch 1 and taken over within 10 s each time (by --recover, then by the same serve command): every epoch audited once in the one run directory, at most the open round trained again",
    async () => {
      await killAndRecover(
        "killed-twice",
        async () => {},
        [
          (runDir) => ["serve", "--recover", runDir, "--token-file", scratch.tokenFile, "--recovery-window-ms", "20000"],
          (_, first) => [...first, "--recovery-window-ms", "20000"]
        ],
        async ({ events, ranks }) => {
          expect(auditsOf(events).sort()).toEqual([
            [0, 4800, 0, 0],
            [1, 4800, 0, 0]
          ])
          const losses = events.filter((e) => e.type === "coordinatorLost")
          const recoveries = events.filter((e) => e.type === "recovered")
          expect(losses.length).toBe(2)
          expect(recoveries.map((r) => [r.returned, r.missing])).toEqual([
            [[0, 1, 2, 3], []],
            [[0, 1, 2, 3], []]
          ])
          expect(losses[0]!.epoch).toBe(1)
          // Redone at the first takeover: what the ranks had trained of the open epoch by their
          // last progress before the kill, past what was committed.
          const before = events.slice(0, events.indexOf(losses[0]!))
          const trained = [0, 1, 2, 3].map(
            (rank) =>
              (before.filter((e) => e.type === "progress" && e.rank === rank && e.epoch === 1).at(-1)?.samplesDone as number | undefined) ??
              0
          )
          const redone = trained.reduce((a, b) => a + b, 0) - (losses[0]!.committedSamples as number)
          expect(redone).toBeLessThanOrEqual(openRoundSamplesMax)
          expect(events.filter((e) => e.type === "death")).toEqual([])
          expect(await Promise.all(ranks.map((r) => r.exited))).toEqual([0, 0, 0, 0])
          console.log(
            `[net recover] killed in epochs ${losses.map((l) => l.epoch).join(" and ")}; without a coordinator ${recoveries
              .map((r) => r.withoutCoordinatorMs)
              .join(" and ")} ms; about ${Math.max(0, redone)} samples trained again at the first`
          )
        }
      )
    },
    testTimeoutMs
  )

  it.concurrent(
    "ring backend, progressive mode: serve SIGKILLed twice in epoch 1 (taken over by --recover, then by the same serve command): the ring re-forms past every earlier generation and every epoch is audited once",
    async () => {
      await killAndRecover(
        "ring-progressive",
        async () => {},
        [
          (runDir) => ["serve", "--recover", runDir, "--token-file", scratch.tokenFile, "--recovery-window-ms", "20000"],
          (_, first) => [...first, "--recovery-window-ms", "20000"]
        ],
        async ({ events, ranks }) => {
          expect(auditsOf(events).sort()).toEqual([
            [0, 4800, 0, 0],
            [1, 4800, 0, 0]
          ])
          const losses = events.filter((e) => e.type === "coordinatorLost")
          expect(losses.length).toBe(2)
          expect(losses[0]!.epoch).toBe(1)
          expect(events.filter((e) => e.type === "recovered").map((r) => [r.returned, r.missing])).toEqual([
            [[0, 1, 2, 3], []],
            [[0, 1, 2, 3], []]
          ])
          // Each coordinator formed its ring in a generation past every one before it (a rank
          // ignores a FormRing not newer than its own).
          const generations: Array<number> = []
          let newest = -1
          let lostSince = false
          for (const e of events) {
            if (e.type === "coordinatorLost") lostSince = true
            const found = typeof e.detail === "string" ? /^FormRing generation (\d+)/.exec(e.detail) : null
            if (found === null) continue
            const generation = Number(found[1])
            if (lostSince) expect(generation).toBeGreaterThan(newest)
            lostSince = false
            newest = Math.max(newest, generation)
            generations.push(generation)
          }
          expect(events.filter((e) => e.type === "death")).toEqual([])
          expect(await Promise.all(ranks.map((r) => r.exited))).toEqual([0, 0, 0, 0])
          console.log(
            `[net recover ring] ring generations ${generations.join(", ")}; killed in epochs ${losses.map((l) => l.epoch).join(" and ")}`
          )
        },
        ["--backend", "ring", "--mode", "progressive"]
      )
    },
    testTimeoutMs
  )

  it.concurrent(
    "a rank killed while the coordinator is down is declared after the recovery window; the others complete the run with exact audits",
    async () => {
      await killAndRecover(
        "rank-killed",
        async (ranks) => {
          ranks[3]!.kill("SIGKILL")
          await ranks[3]!.exited
        },
        [(runDir) => ["serve", "--recover", runDir, "--token-file", scratch.tokenFile, "--recovery-window-ms", "4000"]],
        async ({ events }) => {
          expect(auditsOf(events).sort()).toEqual([
            [0, 4800, 0, 0],
            [1, 4800, 0, 0]
          ])
          expect(events.find((e) => e.type === "recovered")).toMatchObject({ returned: [0, 1, 2], missing: [3] })
          const deaths = events.filter((e) => e.type === "death").map((e) => e.death as { rank: number; cause: string })
          expect(deaths.map((d) => d.rank)).toEqual([3])
          expect(deaths[0]!.cause).toContain("did not return after the coordinator's restart")
        }
      )
    },
    testTimeoutMs
  )
})
