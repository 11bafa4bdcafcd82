// Joined ranks wait for their coordinator: real `cohort serve` and `cohort join` processes over
// 127.0.0.1. A coordinator stopped (SIGSTOP) for longer than the ranks' silence limit finds its
// ranks back when it continues, with nothing lost or trained twice; a coordinator killed (SIGKILL)
// leaves its ranks trying to reconnect for --coordinator-reconnect-ms before they save and exit 3,
// and `cohort resume` then completes the run.
// On Node, Bun and Deno: the CLI spawned is the runtime running the test.
import type { ChildProcess } from "node:child_process"
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { type CliProcess, freePort, startCli, waitFor } from "../cli-process.ts"

// 40 ms a batch while the test acts on the run (an epoch of 2 ranks: about 3 s), then 4 ms.
const held = fileURLToPath(new URL("../fixtures/trainers/steady-held.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-reconnect-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const tokenFile = join(dir, "token")
writeFileSync(tokenFile, "coordinator-reconnect-token-0123456789\n")

const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
})
const cohort = (args: ReadonlyArray<string>, env: Record<string, string> = {}): CliProcess =>
  startCli(args, { cwd: dir, env, started: children })
const signal = (child: ChildProcess, name: string): void => void spawnSync("kill", [`-${name}`, String(child.pid)])
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A run directory's epoch lines: epoch, samples committed, lost, duplicated. */
const epochLines = (runDir: string): Array<[number, number, number, number]> =>
  readFileSync(join(runDir, "events.ndjson"), "utf8")
    .split("\n")
    .flatMap((line) => {
      if (line.trim() === "") return []
      const event = JSON.parse(line) as {
        type: string
        summary?: { epoch: number; samplesCommitted: number; lost: number; duplicated: number }
      }
      return event.type === "epoch" && event.summary !== undefined
        ? [
            [event.summary.epoch, event.summary.samplesCommitted, event.summary.lost, event.summary.duplicated] as [
              number,
              number,
              number,
              number
            ]
          ]
        : []
    })

interface Summary {
  readonly epochs: ReadonlyArray<{ readonly samplesCommitted: number; readonly lost: number; readonly duplicated: number }>
  readonly deaths: ReadonlyArray<unknown>
}

/**
 * `cohort serve` of 2 ranks on a free port, and its 2 joined ranks (`joinArgs` added to each), paced
 * until `release` (and a resume given `hold`) runs the rest fast.
 */
const served = async (name: string, serveArgs: ReadonlyArray<string>, joinArgs: ReadonlyArray<string>) => {
  const holdFile = join(dir, `hold-${name}`)
  writeFileSync(holdFile, "")
  const hold = { COHORT_TEST_HOLD: holdFile }
  const port = await freePort()
  const url = `ws://127.0.0.1:${port}/`
  const serve = cohort(
    [
      "serve",
      "--trainer",
      held,
      "--world-size",
      "2",
      "--listen",
      `127.0.0.1:${port}`,
      "--token-file",
      tokenFile,
      "--out",
      `runs-${name}`,
      "--json",
      ...serveArgs
    ],
    hold
  )
  const ranks = [0, 1].map((rank) =>
    cohort(
      ["join", url, "--trainer", held, "--token-file", tokenFile, "--rank", String(rank), "--save-dir", `save-${name}`, ...joinArgs],
      hold
    )
  )
  // Mid-epoch: rank 1 has reported progress in epoch 1.
  await waitFor(() => / rank 1 epoch 1: \d+ samples done/.test(serve.err()), 90_000, "rank 1's progress in epoch 1")
  return { serve, ranks, hold, release: () => unlinkSync(holdFile) }
}

describe("joined ranks wait for their coordinator", () => {
  it.concurrent("a coordinator stopped for 5 s mid-epoch (over the ranks' 2 s silence limit): the ranks reconnect, nobody is declared, every audit is clean", async () => {
    const { serve, ranks, release } = await served("stopped", ["--epochs", "3", "--heartbeat-timeout-ms", "30000"], [])
    signal(serve.child, "STOP")
    await sleep(5000)
    signal(serve.child, "CONT")
    // Back in touch: the rest of the run need not be slow.
    await waitFor(() => /rank [01] resumed its link/.test(serve.err()), 60_000, "a rank's resumed link")
    release()
    expect(await Promise.all(ranks.map((r) => r.exit))).toEqual([0, 0])
    expect(await serve.exit, serve.err()).toBe(0)
    const summary = JSON.parse(serve.out()) as Summary
    expect(summary.deaths).toEqual([])
    expect(summary.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([
      [4800, 0, 0],
      [4800, 0, 0],
      [4800, 0, 0]
    ])
    // The ranks' links were lost and resumed, not replaced: the coordinator says so.
    expect(serve.err()).toMatch(/rank [01] resumed its link/)
  }, 180_000)

  it.concurrent("a coordinator killed mid-epoch and not restarted: the ranks keep trying for --coordinator-reconnect-ms 4000, then save an emergency copy and exit 3; cohort resume then completes the run, every epoch audited once across the chain", async () => {
    const reconnectMs = 4000
    const { serve, ranks, hold, release } = await served("killed", ["--epochs", "3"], ["--coordinator-reconnect-ms", String(reconnectMs)])
    signal(serve.child, "KILL")
    const killedAtMs = Date.now()
    const exits = await Promise.all(
      ranks.map(async (rank) => {
        const code = await rank.exit
        return { code, afterMs: Date.now() - killedAtMs }
      })
    )
    expect(exits.map((e) => e.code)).toEqual([3, 3])
    // Not before the window (a lower bound, safe under load); well before the 60 s default.
    for (const exit of exits) {
      expect(exit.afterMs).toBeGreaterThanOrEqual(reconnectMs)
      expect(exit.afterMs).toBeLessThan(40_000)
    }
    for (const rank of [0, 1]) {
      expect(ranks[rank]!.err()).toContain(`cohort rank ${rank}: the coordinator is gone`)
      const emergency = join(dir, "save-killed", `rank${rank}`, "emergency.json")
      expect(existsSync(emergency)).toBe(true)
      expect(JSON.parse(readFileSync(emergency, "utf8"))).toMatchObject({ emergency: true, rank, saved: true })
    }
    // Past the window nobody waits any more: the run is resumed as any lost run is.
    const [runId] = readdirSync(join(dir, "runs-killed"))
    const parentDir = join(dir, "runs-killed", runId!)
    // The resume's epochs run at 4 ms a batch: nothing is done to it.
    release()
    const resumed = cohort(["resume", parentDir], hold)
    expect(await resumed.exit, resumed.err()).toBe(0)
    const childId = readdirSync(join(dir, "runs-killed")).find((id) => id !== runId)!
    const chain = [...epochLines(parentDir), ...epochLines(join(dir, "runs-killed", childId))]
    expect(chain.sort()).toEqual([
      [0, 4800, 0, 0],
      [1, 4800, 0, 0],
      [2, 4800, 0, 0]
    ])
  }, 180_000)
})
