// A rank that leaves gracefully in the middle of an epoch (`JoinedRank.leave()`) contributes the
// chunks it reported done before it says Exiting: its cost line has no redone samples, and the
// audit stays exact. Two ranks joined from this process over loopback, progressive mode, a
// contribution every 8 batches (two chunks); rank 1 is asked to leave during its 6th batch, when
// its first chunk is done and not yet contributed. Node only.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type * as SocketRanks from "../../actors/rank/socket-ranks.ts"
import { joinHere, writePacedTrainer } from "../served-ranks.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort-leave-contributes-"))
afterAll(() => (process.env.KEEP ? console.error(dir) : rmSync(dir, { recursive: true, force: true })))

const hook = "__cohortLeaveContributesBatch"

describe("a graceful leave mid-epoch", () => {
  it("contributes the leaver's done chunks before Exiting: redone 0, exact audit", async () => {
    const ranks = 2
    const trainer = join(dir, "trainer.ts")
    writePacedTrainer(trainer, { samples: ranks * 8 * 64, params: 100, hook })
    const runToken = "leave-contributes-test-token-0123456789abcdef"
    const joined: Array<SocketRanks.JoinedRank> = []
    let left: Promise<void> | undefined
    ;(globalThis as Record<string, unknown>)[hook] = (rank: number, batches: number) => {
      if (rank !== 1 || batches !== 6 || left !== undefined) return
      left = joined.find((r) => r.rank() === 1)?.leave()
    }
    const result = await Launcher.serve({
      trainer,
      worldSize: ranks,
      epochs: 1,
      mode: "progressive",
      batchSize: 8,
      averageEverySteps: 8,
      heartbeatTimeoutMs: 2000,
      failureLimit: { fraction: 1 },
      runToken,
      port: 0,
      outDir: join(dir, "runs"),
      onListening: (listening) => {
        joined.push(...joinHere(listening.url, runToken, ranks, trainer, join(dir, "saves")))
      }
    })
    delete (globalThis as Record<string, unknown>)[hook]
    expect(left).toBeDefined()
    await left
    expect(result.epochs.map((e) => [e.lost, e.duplicated])).toEqual([[0, 0]])
    const leaves = (result.leaves ?? []).map((l) => [l.rank, l.kind, l.lostSamples, l.duplicatedSamples, l.redoneSamples])
    expect(leaves).toEqual([[1, "graceful", 0, 0, 0]])
  }, 30_000)
})
