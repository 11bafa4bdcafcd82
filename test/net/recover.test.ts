// A served run outlives its coordinator (docs/recovery.md): `cohort serve` in host A with four
// `cohort join` ranks in hosts B and C (network namespaces, ./netns.ts) is SIGKILLed mid-epoch and
// `cohort serve --recover` starts again in A within 10 s, on the same address and token. The run
// completes in its one run directory: every epoch audited exactly once with nothing lost or
// duplicated, no epoch trained again, and the samples trained again at most the open round's. A
// rank killed while the coordinator is down is declared once the recovery window passed, with
// the cause "did not return after the coordinator's restart", and the run completes without it.
//
// Node only (vitest.config.ts): what is tested is the recovery, which the CLI tests cover on the
// other runtimes; both run at once, 90 s at a load average of 60 on 2 cores (their processes start slowly then). Linux and root only, as CI runs.
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
 * Serves a run of 2 epochs across A, B and C, kills its coordinator once rank 1 trains in epoch 1
 * (then `whileDown`), and starts `serve --recover` within 10 s.
 */
const killAndRecover = async (
  name: string,
  whileDown: (ranks: ReadonlyArray<Netns.Proc>) => Promise<void>,
  recoverArgs: ReadonlyArray<string>,
  check: (result: { readonly events: ReadonlyArray<Cluster.Event>; readonly serve: Netns.Proc; readonly downMs: number }) => void
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
      lifetimeMs
    })
    await serve.waitFor(/rank 1 epoch 1: \d+ samples done/, 60_000)
    await Cluster.sleep(Math.floor(Math.random() * 600))
    serve.kill("SIGKILL")
    await serve.exited
    const killedMs = Date.now()
    await whileDown(ranks)
    await Cluster.sleep(Math.floor(Math.random() * 3000))
    const [runId] = readdirSync(out)
    const runDir = join(out, runId!)
    const again = network.script("a", Cluster.cli, ["serve", "--recover", runDir, "--token-file", scratch.tokenFile, ...recoverArgs], {
      lifetimeMs
    })
    const downMs = Date.now() - killedMs
    expect(downMs).toBeLessThan(10_000)
    expect(await again.exited, `${again.stdout()}${again.stderr()}`).toBe(0)
    check({ events: journal(runDir), serve: again, downMs })
  } finally {
    network.destroy()
  }
}

describe("cohort serve --recover across network namespaces", () => {
  it.concurrent(
    "serve SIGKILLed mid-epoch and recovered within 10 s: every epoch audited once in the one run directory, at most the open round trained again",
    async () => {
      let ranksExit: Array<number | string> = []
      await killAndRecover(
        "killed",
        async (ranks) => {
          // Nothing to do while the coordinator is down; the ranks' exits are read at the end.
          void Promise.all(ranks.map((r) => r.exited)).then((codes) => (ranksExit = codes))
        },
        ["--recovery-window-ms", "20000"],
        ({ events }) => {
          expect(auditsOf(events).sort()).toEqual([
            [0, 4800, 0, 0],
            [1, 4800, 0, 0]
          ])
          const lost = events.find((e) => e.type === "coordinatorLost")
          const recovered = events.find((e) => e.type === "recovered")
          expect(lost?.epoch).toBe(1)
          expect(recovered).toMatchObject({ returned: [0, 1, 2, 3], missing: [] })
          // Redone: what the ranks had trained of the open epoch by their last progress before the
          // kill, past what was committed.
          const before = events.slice(0, events.indexOf(lost!))
          const trained = [0, 1, 2, 3].map(
            (rank) =>
              (before.filter((e) => e.type === "progress" && e.rank === rank && e.epoch === 1).at(-1)?.samplesDone as number | undefined) ??
              0
          )
          const redone = trained.reduce((a, b) => a + b, 0) - (lost!.committedSamples as number)
          expect(redone).toBeLessThanOrEqual(openRoundSamplesMax)
          expect(events.filter((e) => e.type === "death")).toEqual([])
          console.log(
            `[net recover] without a coordinator ${recovered!.withoutCoordinatorMs} ms; epoch 1 had ${lost!.committedSamples} samples committed, about ${Math.max(0, redone)} trained again`
          )
        }
      )
      expect(ranksExit).toEqual([0, 0, 0, 0])
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
        ["--recovery-window-ms", "4000"],
        ({ events }) => {
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
