// A served run that is still forming outlives a joiner that leaves: a rank started with another
// trainer (its trainSamples differ) says why and leaves, its index is free again, and the right
// joiners form the run, which completes. Real processes of the command line over 127.0.0.1.
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { type CliProcess, servedUrl, startCli, waitFor } from "../cli-process.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
// 1600 samples: not the served run's 4800.
const wide = fileURLToPath(new URL("../fixtures/trainers/wide.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-vacate-"))
const tokenFile = join(dir, "token")
writeFileSync(tokenFile, "serve-vacate-test-token-0123456789\n")
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
})

const cohort = (args: ReadonlyArray<string>): CliProcess => startCli(args, { cwd: dir, started: children })

describe("a served run that is forming", () => {
  it("keeps forming when a joiner with another trainer leaves: serve says why, its index is taken again, and the run completes with clean audits", async () => {
    const serve = cohort([
      "serve",
      "--trainer",
      steady,
      "--world-size",
      "2",
      "--epochs",
      "1",
      "--token-file",
      tokenFile,
      "--out",
      "runs",
      "--json"
    ])
    const url = await servedUrl(serve)
    const join_ = (trainer: string, save: string) =>
      cohort(["join", url, "--trainer", trainer, "--token-file", tokenFile, "--save-dir", save])
    const wrong = join_(wide, "save-wrong")
    expect(await wrong.exit).toBe(16)
    expect(wrong.err()).toContain(
      "cohort join: the trainer's trainSamples (1600) differ from the run's (4800); start the same trainer as the coordinator\n"
    )
    await waitFor(() => serve.err().includes("left before the run formed"), 30_000, "serve's line for the joiner that left")
    expect(serve.err()).toMatch(
      /\] rank 0 left before the run formed: the trainer's trainSamples \(1600\) differ from the run's \(4800\); its index is free for another join\n/
    )
    const right = [join_(steady, "save-0"), join_(steady, "save-1")]
    expect(await Promise.all(right.map((p) => p.exit))).toEqual([0, 0])
    expect(await serve.exit).toBe(0)
    const summary = JSON.parse(serve.out()) as {
      runDir: string
      deaths: ReadonlyArray<unknown>
      epochs: ReadonlyArray<{ samplesCommitted: number; lost: number; duplicated: number }>
    }
    expect(summary.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[4800, 0, 0]])
    expect(summary.deaths).toEqual([])
    const journal = readFileSync(join(dir, summary.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; rank?: number })
    expect(journal.filter((e) => e.type === "joined" || e.type === "left" || e.type === "formed").map((e) => e.type)).toEqual([
      "joined",
      "left",
      "joined",
      "joined",
      "formed"
    ])
  }, 120_000)
})
