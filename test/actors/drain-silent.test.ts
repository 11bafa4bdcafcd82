// A rank that goes silent at the run's end (socket open, nothing sent) is declared at its
// heartbeat timeout while the survivors drain; its socket is closed then (the declaration's
// RankDead close, and the drain's cut-off of dead ranks), so it does not hold the drain for the
// whole exit grace period (15 s). Three ranks joined from this
// process over loopback; one is silenced as the last epoch opens: the rounds go on without it
// (roundSilenceMs) and the run ends before its heartbeat timeout. Node only (the launcher's drain
// is the same code on every runtime; the timing it needs is surest there).
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import type * as SocketRanks from "../../actors/rank/socket-ranks.ts"
import { joinHere, writePacedTrainer } from "../served-ranks.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort-drain-silent-"))
afterAll(() => (process.env.KEEP ? console.error(dir) : rmSync(dir, { recursive: true, force: true })))

describe("the drain at the run's end", () => {
  it("a rank silent at the end is cut off once declared, well before the exit grace period", async () => {
    const ranks = 3
    const epochs = 2
    const trainer = join(dir, "trainer.ts")
    writePacedTrainer(trainer, { samples: ranks * 8 * 16, params: 100 })
    const runToken = "drain-silent-test-token-0123456789abcdef"
    const joined: Array<SocketRanks.JoinedRank> = []
    let lastAuditMs: number | undefined
    let silent: SocketRanks.JoinedRank | undefined
    let deathAfterAudit = false
    const result = await Launcher.serve({
      trainer,
      worldSize: ranks,
      epochs,
      mode: "progressive",
      batchSize: 8,
      averageEverySteps: 2,
      // Long enough that the last epoch ends before the silent rank is declared, on a loaded machine too.
      heartbeatTimeoutMs: 6000,
      roundSilenceMs: 150,
      failureLimit: { fraction: 1 },
      runToken,
      port: 0,
      outDir: join(dir, "runs"),
      onEvent: (event) => {
        if (event.type === "death") deathAfterAudit = lastAuditMs !== undefined
        if (event.type !== "epoch") return
        if (event.summary.epoch === epochs - 1) lastAuditMs = Date.now()
        if (event.summary.epoch !== epochs - 2) return
        // Not rank 0: the run asks it to checkpoint, and a call gets a longer timeout.
        silent = joined.find((rank) => rank.rank() === ranks - 1)
        void silent?.silence()
      },
      onListening: (listening) => {
        joined.push(...joinHere(listening.url, runToken, ranks, trainer, join(dir, "saves")))
      }
    })
    const endedMs = Date.now()
    expect(await silent?.ended).toBe(13)
    expect(result.epochs.map((e) => [e.lost, e.duplicated])).toEqual([
      [0, 0],
      [0, 0]
    ])
    expect(lastAuditMs).toBeDefined()
    // Declared at its heartbeat timeout once the run had ended: while the survivors drained.
    expect(deathAfterAudit).toBe(true)
    // Declared about 6 s after its last frame; held by its socket the drain lasted the 15 s grace.
    expect(endedMs - lastAuditMs!).toBeLessThan(13_000)
  }, 60_000)
})
