import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as Cli from "../../src/cli/index.ts"
import { expectRecordsAgree } from "../run-records.ts"
import { demoEpoch } from "./demo-epoch.ts"

const outDir = mkdtempSync(join(tmpdir(), "cohort-demo-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

describe("cohort demo", () => {
  // The same epoch on 4 rank processes over WebSocket is in demo-websocket.full.test.ts; the quick
  // tier runs ranks over WebSocket in launcher.test.ts.
  // The cpu backend's accuracy on worker threads, which the ring's run below must match (within 0.01).
  let cpuAccuracy: number | undefined
  it("trains the bundled digits for one epoch on 4 worker ranks with a clean audit", async () => {
    cpuAccuracy = await demoEpoch("worker", "terminate", outDir)
  }, 120_000)

  it("with --backend ring: the ranks all-reduce among themselves, the killed rank re-forms the ring, and the audit is clean", async () => {
    const out: Array<string> = []
    const io: Cli.Io = {
      out: (text) => void out.push(text),
      err: () => {},
      isTerminal: false,
      progressStream: () => {
        throw new Error("no progress bars without a terminal")
      }
    }
    const code = await Cli.main(["demo", "--epochs", "1", "--backend", "ring", "--out", outDir, "--json"], io)
    expect(code).toBe(0)
    const result = JSON.parse(out.join("")) as {
      readonly runDir: string
      readonly backend: string
      readonly ring: { readonly generations: number; readonly links: string }
      readonly deaths: ReadonlyArray<{ readonly rank: number }>
      readonly epochs: ReadonlyArray<{
        readonly samplesCommitted: number
        readonly lost: number
        readonly duplicated: number
        readonly accuracy: number
      }>
    }
    expect(result.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([[8000, 0, 0]])
    expect(result.deaths.map((d) => d.rank)).toEqual([2])
    const records = await expectRecordsAgree(result.runDir, result as unknown as RunTypes.RunResult)
    expect(records.evals.map(([epoch]) => epoch)).toEqual([0])
    expect([result.backend, result.ring.generations, result.ring.links]).toEqual(["ring", 2, "area"])
    // One journal decision per ring generation, naming its members, not one per member.
    const journal = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { readonly type: string; readonly detail?: string })
    const formRings = journal.filter((e) => e.type === "decision" && /^FormRing/.test(e.detail ?? "")).map((e) => e.detail!.split(": ")[0])
    expect(formRings).toEqual(["FormRing generation 0 to ranks 0, 1, 2, 3", "FormRing generation 1 to ranks 0, 1, 3"])
    // The ring averages the same contributions as cpu (the members that trained since the last
    // round, with equal weights), so its accuracy is the cpu run's above, within 0.01.
    if (cpuAccuracy === undefined) throw new Error("run the whole file: this test compares with the cpu run above")
    expect(result.epochs[0]!.accuracy).toBeGreaterThanOrEqual(cpuAccuracy - 0.01)
  }, 120_000)
})
