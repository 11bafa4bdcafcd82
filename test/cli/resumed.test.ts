// How a resumed run is shown: the spanning epoch, its notes, its started line, and report (split from test/cli.test.ts).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as Cli from "../../src/cli/index.ts"
import { completed, interrupted, summary } from "./fixtures.ts"

describe("a resumed run", () => {
  const resumed: RunTypes.Resumed = {
    parent: { runId: "par3nt", runDir: "runs/par3nt" },
    epoch: 1,
    firstRound: 12,
    committedSamples: 3000,
    committed: [
      [0, 1000],
      [2000, 2000]
    ],
    state: "save",
    loadedFrom: "runs/par3nt/save/rank0",
    notes: []
  }
  const child: RunTypes.RunResult = {
    ...completed,
    runId: "ch1ld",
    runDir: "runs/ch1ld",
    epochs: completed.epochs.map((e) => (e.epoch === 1 ? { ...e, spansRuns: ["par3nt", "ch1ld"] as const } : e)),
    resumed
  }

  it("marks the epoch that spans both runs in the end table and says where the run picked up", () => {
    const lines = Cli.renderResult(child).out.split("\n")
    expect(lines.slice(0, 5)).toEqual([
      "epoch  samples committed  lost  duplicated  deaths  detection ms  recovery ms  test accuracy",
      "    0               8000     0           0       0             -            -         0.9105",
      "   1*               8000     0           0       1           1.3          3.5         0.9350",
      "    2               8000     0           0       0             -            -         0.9420",
      "* epoch 1 spans runs par3nt and ch1ld: 3000 samples committed by run par3nt, 5000 by run ch1ld; the audit covers both"
    ])
    expect(lines[5]).toBe(
      "resumed: this run resumes run par3nt (runs/par3nt) in epoch 1: 3000 samples of it committed by run par3nt, the rest trained here; " +
        "model from runs/par3nt/save/rank0 (the survivors' save)"
    )
  })

  it("lists the resume's notes under it; a checkpoint resume trains its epoch from the start and spans nothing", () => {
    const fromCheckpoint: RunTypes.RunResult = {
      ...completed,
      resumed: {
        ...resumed,
        committedSamples: 0,
        committed: [],
        state: "checkpoint",
        loadedFrom: "runs/par3nt/checkpoints/v0",
        notes: ["note one"]
      }
    }
    const out = Cli.renderResult(fromCheckpoint).out
    expect(out).not.toContain("spans runs")
    expect(out).toContain(
      "resumed: this run resumes run par3nt (runs/par3nt) in epoch 1: the epoch is trained from its start; " +
        "model from runs/par3nt/checkpoints/v0 (the last audited epoch's checkpoint)\n  note one\n"
    )
  })

  it("its started line names the parent", () => {
    const started: RunTypes.RunEvent = {
      type: "started",
      ms: 0,
      runId: "ch1ld",
      runDir: "runs/ch1ld",
      worldSize: 3,
      epochs: 3,
      epochSamples: 8000,
      mode: "static",
      transport: "worker",
      resumed
    }
    expect(Cli.eventText(started)).toBe(
      "run ch1ld: 3 ranks as worker threads, 3 epochs of 8000 samples, static mode; writing runs/ch1ld; resumes run par3nt (runs/par3nt) in epoch 1: " +
        "3000 samples of it committed by run par3nt, the rest trained here; model from runs/par3nt/save/rank0 (the survivors' save)"
    )
  })

  it("a resume interrupted before it formed stops in the epoch it was to resume in and points back to its parent, which it did not resume", () => {
    const early: RunTypes.RunResult = {
      ...interrupted,
      runId: "ch1ld",
      runDir: "runs/ch1ld",
      outcome: { ...interrupted.outcome, detail: "interrupted by SIGINT", uncommitted: undefined, epochs: [], epochsCompleted: 0 },
      epochs: [],
      saves: { saved: [], notSaved: [] },
      exitCode: 130,
      resumed
    }
    const { out, err } = Cli.renderResult(early)
    expect(out.split("\n").slice(0, 2)).toEqual([
      "epoch  samples committed  lost  duplicated  deaths  detection ms  recovery ms  test accuracy",
      "    1            stopped     -           -       0             -            -              -"
    ])
    expect(out).toContain("outcome: interrupted by SIGINT after 1 completed epoch in 3.5 s;")
    expect(err).toBe(
      "cohort: run interrupted by SIGINT: run in runs/ch1ld; it stopped before training started, so run par3nt was not resumed: resume it with: cohort resume runs/par3nt"
    )
  })

  it("a resume interrupted before it formed and resumed since names the run that trained on, not its parent (a resume of it is refused)", () => {
    const early: RunTypes.RunResult & { readonly resumedBy: { readonly runId: string; readonly runDir: string } } = {
      ...interrupted,
      runId: "ch1ld",
      runDir: "runs/ch1ld",
      outcome: { ...interrupted.outcome, detail: "interrupted by SIGINT", uncommitted: undefined, epochs: [], epochsCompleted: 0 },
      epochs: [],
      saves: { saved: [], notSaved: [] },
      exitCode: 130,
      resumed,
      resumedBy: { runId: "gr4nd", runDir: "runs/gr4nd" }
    }
    expect(Cli.renderResult(early).err).toBe(
      "cohort: run interrupted by SIGINT: run in runs/ch1ld; it stopped before training started; run gr4nd (runs/gr4nd) resumed it and trained on from it"
    )
  })

  it("report reads a resumed run's journal back with the spanning epoch marked", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cohort-resumed-"))
    try {
      const events: ReadonlyArray<RunTypes.RunEvent> = [
        {
          type: "started",
          ms: 0,
          runId: "ch1ld",
          runDir: dir,
          worldSize: 3,
          epochs: 2,
          epochSamples: 8000,
          mode: "static",
          transport: "worker",
          resumed
        },
        { type: "epoch", ms: 10, summary: summary(1), accuracy: undefined },
        { type: "ended", ms: 20, outcome: { ...completed.outcome, epochs: [summary(1)], deaths: [], failures: [] }, exitCode: 0 }
      ]
      writeFileSync(join(dir, "events.ndjson"), events.map((e) => `${JSON.stringify(e)}\n`).join(""))
      const result = await Cli.readRun(dir)
      expect(typeof result !== "string" && [result.resumed, result.epochs.map((e) => e.spansRuns)]).toEqual([
        resumed,
        [["par3nt", "ch1ld"]]
      ])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
