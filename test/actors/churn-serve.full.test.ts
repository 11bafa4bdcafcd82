// `serve --churn F` (ServeOptions.churn, docs/churn.md): after every averaging round the served
// run makes a fraction of its live ranks leave, a third each way (Shutdown, a cut socket, frames
// dropped). 24 ranks joined from this process (`SocketRanks.joinRanks`, what `cohort join
// --ranks` runs) over loopback, 2 epochs: the run completes with exact audits, and the ranks made
// to leave have cost lines of all three kinds. Results only, never speed. Node only.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type * as SocketRanks from "../../actors/rank/socket-ranks.ts"
import { joinHere, writePacedTrainer } from "../served-ranks.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort-churn-serve-"))
afterAll(() => (process.env.KEEP ? console.error(dir) : rmSync(dir, { recursive: true, force: true })))

describe("serve --churn", () => {
  it("24 joined ranks, 15% made to leave after each round: exact audits, cost lines of the three kinds", async () => {
    const ranks = 24
    const trainer = join(dir, "trainer.ts")
    writePacedTrainer(trainer, { samples: ranks * 8 * 12, params: 1000 })
    const runToken = "churn-serve-test-token-0123456789abcdef"
    const joined: Array<SocketRanks.JoinedRank> = []
    const result = await Launcher.serve({
      trainer,
      worldSize: ranks,
      epochs: 2,
      mode: "progressive",
      batchSize: 8,
      averageEverySteps: 2,
      heartbeatTimeoutMs: 2000,
      failureLimit: { fraction: 1 },
      churn: 0.15,
      runToken,
      port: 0,
      outDir: join(dir, "runs"),
      onListening: (listening) => {
        joined.push(...joinHere(listening.url, runToken, ranks, trainer, join(dir, "saves")))
      }
    })
    await Promise.all(joined.map((rank) => Promise.race([rank.ended, new Promise((r) => setTimeout(r, 10_000))])))
    expect(result.exitCode).toBe(0)
    expect(result.epochs.map((e) => [e.lost, e.duplicated])).toEqual([
      [0, 0],
      [0, 0]
    ])
    const kinds = new Set((result.leaves ?? []).map((l) => l.kind))
    expect(kinds).toEqual(new Set(["graceful", "crash", "silent"]))
    for (const line of result.leaves ?? []) expect([line.lostSamples, line.duplicatedSamples]).toEqual([0, 0])
  }, 60_000)
})
