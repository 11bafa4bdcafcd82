// summary.json is the authority for a completed run: a journal cut short after it (a write that a
// full or failing disk refused) does not make the run resumable, and report says the journal is
// incomplete. Real CLI processes under the runtime that runs this file.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/record/run-types.ts"
import * as Runtime from "../../src/platform/detect.ts"
import { removeDir, startCli } from "../cli-process.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-summary-"))
afterAll(() => removeDir(outDir))

const cohort = async (...args: ReadonlyArray<string>) => {
  const cli = startCli(args, { cwd: process.cwd() })
  const code = await cli.exit
  return { code, out: cli.out(), err: cli.err() }
}

describe(`a completed run whose journal is short (${Runtime.detect()})`, () => {
  it("resume refuses it as completed (per summary.json); report shows summary.json and warns, in one line, that the journal is incomplete", async () => {
    const run = await cohort(
      "run",
      "--trainer",
      steady,
      "--transport",
      "worker",
      "--world-size",
      "2",
      "--epochs",
      "2",
      "--no-kill",
      "--out",
      outDir,
      "--json"
    )
    expect(run.code, run.err).toBe(0)
    const result = JSON.parse(run.out) as RunResult
    const runDir = join(outDir, readdirSync(outDir)[0]!)
    // The journal as a full disk leaves it: cut after its first epoch's line, before the run's end.
    const journal = join(runDir, "events.ndjson")
    const lines = readFileSync(journal, "utf8").split("\n")
    const kept = lines.findIndex((line) => line.includes(`"type":"epoch"`)) + 1
    writeFileSync(journal, `${lines.slice(0, kept).join("\n")}\n`)

    const resumed = await cohort("resume", runDir)
    expect([resumed.code, resumed.err]).toEqual([2, `cohort: resume: nothing to resume: run ${result.runId} completed all 2 epochs\n`])

    const report = await cohort("report", runDir)
    expect(report.code).toBe(0)
    expect(report.err).toBe(
      `cohort: warning: the journal ${journal} is incomplete: it ends after line ${kept}, with 1 of the 2 finished epochs that summary.json records; ` +
        `the report shows summary.json\n`
    )
    expect(report.out).toContain("outcome: completed 2 epochs")
  }, 120_000)
})
