// `serve --churn F` (ServeOptions.churn, docs/churn.md): after every averaging round the served
// run makes a fraction of its live ranks leave, a third each way (Shutdown, a cut socket, frames
// dropped). 24 ranks joined from this process (`SocketRanks.joinRanks`, what `cohort join
// --ranks` runs) over loopback, 2 epochs: the run completes with exact audits, and the ranks made
// to leave have cost lines of all three kinds. Results only, never speed. Node only.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import * as SocketRanks from "../../actors/rank/socket-ranks.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort-churn-serve-"))
afterAll(() => (process.env.KEEP ? console.error(dir) : rmSync(dir, { recursive: true, force: true })))

const paramsOnly = fileURLToPath(new URL("../../bench/trainers/params-only.ts", import.meta.url))

describe("serve --churn", () => {
  it("24 joined ranks, 15% made to leave after each round: exact audits, cost lines of the three kinds", async () => {
    const ranks = 24
    const trainer = join(dir, "trainer.ts")
    writeFileSync(
      trainer,
      `import { paramsOnly } from ${JSON.stringify(paramsOnly)}\n` +
        `const t = paramsOnly({ samples: ${ranks * 8 * 12}, params: 1000 })\n` +
        `export const trainSamples = t.trainSamples\n` +
        `export const createTrainer = (context: { readonly rank: number }) => {\n` +
        `  const inner = t.createTrainer(context)\n` +
        `  return { ...inner, trainBatch: async (indices: Uint32Array) => { await new Promise((r) => setTimeout(r, 5)); return inner.trainBatch(indices) } }\n` +
        `}\n`
    )
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
        joined.push(
          ...SocketRanks.joinRanks({
            url: listening.url,
            runToken,
            ranks,
            rank: "auto",
            trainer: pathToFileURL(trainer).href,
            saveDir: join(dir, "saves"),
            resumable: false,
            say: () => {}
          })
        )
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
