// cohort report: reading a finished, interrupted, cut or hostile run back (split from test/cli.test.ts).
import { execFileSync } from "node:child_process"
import { symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as Cli from "../../src/cli/index.ts"
import * as Files from "../../src/platform/files.ts"
import {
  auditFailed,
  completed,
  eventsOf,
  interrupted,
  killTiming,
  rankLost,
  runMain,
  streamedEventsOf,
  unrecoverable,
  useScratch
} from "./fixtures.ts"

const scratch = useScratch()

describe("report", () => {
  const writeRun = async (name: string, result: RunTypes.RunResult, files: { summary: boolean; events: boolean }) => {
    const dir = `${scratch()}/${name}`
    await Files.mkdir(dir)
    if (files.summary) await Files.writeFile(`${dir}/summary.json`, `${JSON.stringify(result, null, 2)}\n`)
    if (files.events) {
      await Files.writeFile(
        `${dir}/events.ndjson`,
        eventsOf(result)
          .map((e) => JSON.stringify(e))
          .join("\n") + "\n"
      )
    }
    return dir
  }

  it("rebuilds the same result from a streamed journal: epoch lines without accuracy, evals on their own lines, ended with its exit code", () => {
    for (const result of [completed, unrecoverable, auditFailed, interrupted]) {
      const text =
        streamedEventsOf(result)
          .map((e) => JSON.stringify(e))
          .join("\n") + "\n"
      const rebuilt = Cli.resultFromEvents(text)
      expect(rebuilt).toEqual(JSON.parse(JSON.stringify({ ...result, skippedFaults: [] })))
    }
  })

  it("reports an interrupted run: the outcome line says interrupted, one stderr line says where the run and its saves are, exit 143", async () => {
    const dir = await writeRun("run-interrupted", interrupted, { summary: true, events: false })
    const { code, out, err } = await runMain(["report", dir])
    expect(code).toBe(143)
    expect(out.split("\n").filter((line) => line.includes("interrupted by"))).toEqual([
      "outcome: interrupted by SIGTERM after 0 completed epochs in 3.5 s; failures: none; final test accuracy -; no epoch finished, so no audit"
    ])
    expect(out).toContain("uncommitted in epoch 0: 5600 samples in 4 ranges: [600, 2000), [2600, 4000), [4600, 6000), [6600, 8000)\n")
    expect(err).toBe(
      `cohort: run interrupted by SIGTERM: run in ${dir}; ranks 0, 1, 3 saved under ${dir}/save; rank 2 did not finish its save; ` +
        `the epoch's uncommitted ranges are in ${dir}/summary.json; resume with: cohort resume ${dir}\n`
    )
  })

  it("a run a resume already took on from names that run instead of a resume command", async () => {
    const dir = await writeRun("run-resumed-already", interrupted, { summary: true, events: false })
    writeFileSync(join(dir, "resumed-by.json"), `${JSON.stringify({ runId: "Child00001", runDir: "runs/Child00001" })}\n`)
    const { code, err } = await runMain(["report", dir])
    expect(code).toBe(143)
    expect(err).toBe(
      `cohort: run interrupted by SIGTERM: run in ${dir}; ranks 0, 1, 3 saved under ${dir}/save; rank 2 did not finish its save; ` +
        `the epoch's uncommitted ranges are in ${dir}/summary.json; run Child00001 (runs/Child00001) resumed it and trained on from it\n`
    )
  })

  it("an interrupted run that had not formed says there is nothing to resume, with no resume command", async () => {
    const early: RunTypes.RunResult = {
      ...interrupted,
      outcome: { ...interrupted.outcome, uncommitted: undefined, epochs: [], epochsCompleted: 0 },
      epochs: [],
      saves: { saved: [], notSaved: [0, 1, 2, 3] }
    }
    const dir = await writeRun("run-interrupted-early", early, { summary: true, events: false })
    const { code, err } = await runMain(["report", dir])
    expect({ code, err }).toEqual({
      code: 143,
      err: `cohort: run interrupted by SIGTERM: run in ${dir}; it stopped before training started: there is nothing to resume\n`
    })
  })

  it("prints a finished run's summary again from summary.json, with the run's exit code", async () => {
    const dir = await writeRun("run-summary", completed, { summary: true, events: true })
    const { code, out, err } = await runMain(["report", dir])
    expect({ code, out, err }).toEqual({ code: 0, out: Cli.renderResult(completed, dir).out, err: "" })
    expect(out.endsWith(`run directory: ${dir}\n`)).toBe(true)
  })

  it("rebuilds the same summary from events.ndjson alone", async () => {
    for (const [name, result] of [
      ["events-completed", completed],
      ["events-stopped", unrecoverable],
      ["events-audit", auditFailed]
    ] as const) {
      const dir = await writeRun(name, result, { summary: false, events: true })
      const rendered = Cli.renderResult(result, dir)
      const { code, out, err } = await runMain(["report", dir])
      expect({ code, out, err }).toEqual({
        code: result.exitCode,
        out: rendered.out,
        err: rendered.err === undefined ? "" : `${rendered.err}\n`
      })
    }
  })

  it("a journal that ends with failed: at formation no resume hint and exit 3; once formed, the failure and the checkpoint resume", async () => {
    const started = eventsOf(completed)[0]!
    const failed = { type: "failed", ms: 2500, stage: "formation", reason: "rank 0 did not join within 2000 ms", formed: false }
    const atFormation = `${scratch()}/failed-formation`
    await Files.mkdir(atFormation)
    await Files.writeFile(`${atFormation}/events.ndjson`, `${JSON.stringify(started)}\n${JSON.stringify(failed)}\n`)
    expect(await runMain(["report", atFormation])).toEqual({
      code: 3,
      out: `no epoch finished\noutcome: failed at formation (2.5 s into the run): nothing was trained\nrun directory: ${atFormation}\n`,
      err: "cohort: the run failed at formation: rank 0 did not join within 2000 ms; nothing was trained: there is nothing to resume\n"
    })
    const later = `${scratch()}/failed-later`
    await Files.mkdir(later)
    await Files.writeFile(
      `${later}/events.ndjson`,
      `${JSON.stringify(started)}\n${JSON.stringify({ ...failed, stage: "run", reason: "boom", formed: true })}\n`
    )
    const report = await runMain(["report", later])
    expect([report.code, report.err]).toEqual([
      3,
      `cohort: the run failed: run: boom; if it saved a checkpoint, resume it from there with: cohort resume ${later}\n`
    ])
  })

  it("--json prints the result read", async () => {
    const dir = await writeRun("run-json", unrecoverable, { summary: true, events: false })
    const { code, out } = await runMain(["report", "--json", `${dir}/`])
    expect(code).toBe(1)
    expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(unrecoverable)))
  })

  it("says which line of events.ndjson is broken, and when the run did not finish", async () => {
    const broken = `${scratch()}/broken-events`
    await Files.mkdir(broken)
    await Files.writeFile(`${broken}/events.ndjson`, `${JSON.stringify(eventsOf(completed)[0])}\n{not json\n`)
    expect(await runMain(["report", broken])).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${broken}/events.ndjson line 2 is not JSON\n`
    })
    const unfinished = `${scratch()}/unfinished`
    await Files.mkdir(unfinished)
    await Files.writeFile(`${unfinished}/events.ndjson`, `${JSON.stringify(eventsOf(completed)[0])}\n`)
    expect(await runMain(["report", unfinished])).toEqual({
      code: 2,
      out: [
        "no epoch finished",
        "outcome: unknown: the journal ends after line 1 (0.0 s into the run), before the run ended; 0 epochs finished; deaths so far: none; last test accuracy -; no epoch finished, so no audit",
        `run directory: ${unfinished}`,
        ""
      ].join("\n"),
      err:
        `cohort: warning: ${unfinished}/events.ndjson ends after line 1: the report shows the run as far as it was read; its outcome is unknown; ` +
        `if its coordinator's process died, resume it from its last checkpoint with: cohort resume ${unfinished}\n`
    })
  })

  it("refuses a summary.json that is not a run summary", async () => {
    const dir = `${scratch()}/bad-summary`
    await Files.mkdir(dir)
    await Files.writeFile(`${dir}/summary.json`, `{"runId": 3}\n`)
    expect(await runMain(["report", dir])).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${dir}/summary.json is not a Cohort run summary: runId: Expected string\n`
    })
  })

  const writeSummary = async (name: string, value: unknown): Promise<string> => {
    const dir = `${scratch()}/${name}`
    await Files.mkdir(dir)
    await Files.writeFile(`${dir}/summary.json`, JSON.stringify(value))
    return dir
  }

  const badSummaries: ReadonlyArray<readonly [string, unknown, string]> = [
    ["an epoch without fields", { ...completed, epochs: [{}] }, "epochs[0].epoch: Missing key"],
    ["finalAccuracy null", { ...completed, finalAccuracy: null }, "finalAccuracy: Expected number | undefined"],
    ["an alert that is null", { ...completed, alerts: [null] }, "alerts[0]: Expected object"],
    [
      "a death with a negative rank",
      { ...completed, deaths: [{ ...killTiming, rank: -1 }] },
      "deaths[0].rank: Expected a value greater than or equal to 0"
    ],
    [
      "an unknown outcome status",
      { ...completed, outcome: { ...completed.outcome, status: "fine" } },
      `outcome.status: Expected "completed" | "unrecoverable" | "interrupted"`
    ]
  ]
  for (const [name, value, field] of badSummaries) {
    it(`names the first bad field of a summary.json with ${name}, exit 2`, async () => {
      const dir = await writeSummary(`bad-${name.replaceAll(" ", "-")}`, value)
      expect(await runMain(["report", dir])).toEqual({
        code: 2,
        out: "",
        err: `cohort: ${dir}/summary.json is not a Cohort run summary: ${field}\n`
      })
    })
  }

  it("names the line and field of an ended event without outcome in events.ndjson, exit 2", async () => {
    const dir = `${scratch()}/ended-without-outcome`
    await Files.mkdir(dir)
    const lines = eventsOf(completed).map((e) => JSON.stringify(e.type === "ended" ? { type: "ended", ms: e.ms } : e))
    await Files.writeFile(`${dir}/events.ndjson`, lines.join("\n") + "\n")
    expect(await runMain(["report", dir])).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${dir}/events.ndjson line 7 is not a valid ended event: outcome: Missing key\n`
    })
  })

  it("a summary.json that is not JSON is named without echoing what it holds, exit 2", async () => {
    const dir = `${scratch()}/summary-passwd-like`
    await Files.mkdir(dir)
    await Files.writeFile(`${dir}/summary.json`, "root:x:0:0:root:/root:/bin/bash\n")
    expect(await runMain(["report", dir])).toEqual({
      code: 2,
      out: "",
      err: `cohort: cannot read ${dir}/summary.json: it is not valid JSON\n`
    })
  })

  it("reads only regular files: a summary.json linked to /dev/zero or a named pipe is refused at once, exit 2", async () => {
    const cases: ReadonlyArray<readonly [string, string, string, (path: string) => void]> = [
      ["summary-dev-zero", "summary.json", "device", (path) => symlinkSync("/dev/zero", path)],
      ["summary-fifo", "summary.json", "fifo", (path) => execFileSync("mkfifo", [path])],
      ["events-fifo", "events.ndjson", "fifo", (path) => execFileSync("mkfifo", [path])]
    ]
    for (const [name, file, kind, make] of cases) {
      const dir = `${scratch()}/${name}`
      await Files.mkdir(dir)
      make(`${dir}/${file}`)
      expect(await runMain(["report", dir])).toEqual({
        code: 2,
        out: "",
        err: `cohort: ${dir}/${file} is not a regular file (it is a ${kind}); report reads only regular files\n`
      })
    }
  })

  it("refuses a file above --file-bytes-max without reading it, exit 2", async () => {
    const dir = await writeSummary("summary-too-large", completed)
    const bytes = JSON.stringify(completed).length
    expect(await runMain(["report", "--file-bytes-max", String(bytes - 1), dir])).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${dir}/summary.json is larger than ${bytes - 1} bytes (--file-bytes-max); it was not read\n`
    })
    const exact = await runMain(["report", "--file-bytes-max", String(bytes), dir])
    expect(exact.code).toBe(0)
  })

  it("strips control characters from every string it prints from a file", async () => {
    const hostile: RunTypes.RunResult = {
      ...completed,
      runDir: "runs/\x1b]0;owned\x07abc",
      alerts: [{ ...rankLost, detail: "rank 2 lost\x1b[2J\x1b[H\noutcome: every audit clean\u202e", path: "root/\x9brank2" }],
      deaths: [{ ...killTiming, cause: "killed\r\x1b[1A\x1b[2Kby terminate\x00" }]
    }
    const dir = await writeSummary("hostile", hostile)
    const { code, out, err } = await runMain(["report", dir])
    expect({ code, err }).toEqual({ code: 0, err: "" })
    expect(out).toContain("  critical RankLost root/rank2: rank 2 lost[2J[H outcome: every audit clean\n")
    expect(out).toContain("  rank 2 in epoch 1 (supervisor): killed [1A[2Kby terminate; detected 1.3 ms after the fault;")
    expect(out.replaceAll("\n", "")).not.toMatch(/[\p{Cc}\u202e]/u)
    const json = await runMain(["report", "--json", dir])
    expect(JSON.parse(json.out).runDir).toBe("runs/]0;ownedabc")
    const events = `${scratch()}/hostile-events`
    await Files.mkdir(events)
    await Files.writeFile(
      `${events}/events.ndjson`,
      eventsOf(hostile)
        .map((e) => JSON.stringify(e))
        .join("\n") + "\n"
    )
    const fromEvents = await runMain(["report", events])
    expect(fromEvents.out).toContain("  critical RankLost root/rank2: rank 2 lost[2J[H outcome: every audit clean\n")
    expect(fromEvents.out.replaceAll("\n", "")).not.toMatch(/[\p{Cc}\u202e]/u)
  })

  it("a journal cut in the epoch a rank died in places the death in that epoch, not after the end", async () => {
    const dir = `${scratch()}/cut-after-death`
    await Files.mkdir(dir)
    const events = eventsOf(completed)
    const death = events.findIndex((e) => e.type === "death")
    const lines = events.slice(0, death + 1).map((e) => JSON.stringify(e))
    await Files.writeFile(`${dir}/events.ndjson`, lines.join("\n") + '\n{"type":"ep')
    const { code, out } = await runMain(["report", dir])
    expect(code).toBe(2)
    expect(out).toContain("  rank 2 in epoch 1 (supervisor): killed by terminate;")
    expect(out).not.toContain("after the run ended")
  })

  it("reads every whole line of a journal cut mid-line, warns where it was cut, and reports what was read, exit 2", async () => {
    const dir = `${scratch()}/cut-journal`
    await Files.mkdir(dir)
    const text =
      eventsOf(completed)
        .map((e) => JSON.stringify(e))
        .join("\n") + "\n"
    await Files.writeFile(`${dir}/events.ndjson`, text.slice(0, text.length - 40))
    const { code, out, err } = await runMain(["report", dir])
    expect(code).toBe(2)
    expect(err).toBe(
      `cohort: warning: ${dir}/events.ndjson was cut in line 7: the report shows the run as far as it was read; its outcome is unknown; ` +
        `if its coordinator's process died, resume it from its last checkpoint with: cohort resume ${dir}\n`
    )
    expect(out).toBe(
      [
        "epoch  samples committed  lost  duplicated  deaths  detection ms  recovery ms  test accuracy",
        "    0               8000     0           0       0             -            -         0.9105",
        "    1               8000     0           0       1           1.3          3.5         0.9350",
        "    2               8000     0           0       0             -            -         0.9420",
        "deaths:",
        "  rank 2 in epoch 1 (supervisor): killed by terminate; detected 1.3 ms after the fault; 1200 samples moved to the survivors 3.5 ms after the fault",
        "alerts:",
        "  critical RankLost root/rank2: rank 2 lost: killed by terminate",
        "outcome: unknown: the journal was cut in line 7 (29.0 s into the run), before the run ended; 3 epochs finished; deaths so far: rank 2; last test accuracy 0.9420; every audit read clean",
        `run directory: ${dir}`,
        ""
      ].join("\n")
    )
    const json = await runMain(["report", "--json", dir])
    expect(json.code).toBe(2)
    expect(JSON.parse(json.out)).toMatchObject({
      runId: "abc123",
      journal: `${dir}/events.ndjson`,
      cut: "was cut in line 7",
      durationMs: 29_000
    })
  })
})

describe("report: the departures' cost lines", () => {
  const withLeaves: RunTypes.RunResult = {
    ...completed,
    leaves: [
      {
        rank: 2,
        epoch: 1,
        kind: "crash",
        cause: "killed by terminate",
        declaredMs: 12_000,
        detectionMs: 40,
        recoveryMs: 1.5,
        remainderSamples: 1200,
        lostSamples: 0,
        duplicatedSamples: 0,
        redoneSamples: 64,
        bytesMoved: 96
      },
      {
        rank: 3,
        epoch: 1,
        kind: "silent",
        cause: "heartbeat",
        declaredMs: 14_000,
        detectionMs: 10_043,
        recoveryMs: 0.5,
        remainderSamples: 800,
        lostSamples: 0,
        duplicatedSamples: 0,
        redoneSamples: 0,
        bytesMoved: 48
      },
      {
        rank: 1,
        epoch: 2,
        kind: "graceful",
        cause: "clean exit",
        declaredMs: 20_000,
        detectionMs: 0,
        recoveryMs: 0.2,
        remainderSamples: 300,
        lostSamples: 0,
        duplicatedSamples: 0,
        redoneSamples: 32,
        bytesMoved: 48
      }
    ]
  }

  it("prints one row per departure and the median and p90 per kind, from summary.json and from the journal alone; --json carries them", async () => {
    for (const files of [
      { summary: true, events: false },
      { summary: false, events: true }
    ]) {
      const dir = `${scratch()}/leaves-${files.summary ? "summary" : "journal"}`
      await Files.mkdir(dir)
      if (files.summary) await Files.writeFile(`${dir}/summary.json`, `${JSON.stringify(withLeaves)}\n`)
      else {
        const events = [
          ...streamedEventsOf(withLeaves),
          ...withLeaves.leaves!.map((leave) => ({ type: "leave", ms: leave.declaredMs, leave }))
        ]
        await Files.writeFile(`${dir}/events.ndjson`, events.map((e) => JSON.stringify(e)).join("\n") + "\n")
      }
      const { code, out } = await runMain(["report", dir])
      expect(code).toBe(0)
      const lines = out.split("\n")
      const at = lines.indexOf("departures (what each cost):")
      expect(lines.slice(at + 1, at + 5).map((line) => line.trim().split(/\s+/))).toEqual([
        ["rank", "epoch", "kind", "detection", "ms", "recovery", "ms", "remainder", "lost", "duplicated", "redone", "bytes", "moved"],
        ["2", "1", "crash", "40", "1.5", "1200", "0", "0", "64", "96"],
        ["3", "1", "silent", "10043", "0.5", "800", "0", "0", "0", "48"],
        ["1", "2", "graceful", "0", "0.2", "300", "0", "0", "32", "48"]
      ])
      expect(lines[at + 5]).toBe("departures by kind:")
      expect(lines.slice(at + 7, at + 10).map((line) => line.trim().split(/\s+/).slice(0, 2))).toEqual([
        ["graceful", "1"],
        ["crash", "1"],
        ["silent", "1"]
      ])
      const json = await runMain(["report", dir, "--json"])
      expect((JSON.parse(json.out) as RunTypes.RunResult).leaves).toEqual(JSON.parse(JSON.stringify(withLeaves.leaves)))
    }
  })
})

describe("report: the joiners' cost lines", () => {
  const withJoins: RunTypes.RunResult = {
    ...completed,
    joins: [
      { rank: 4, epoch: 1, connectedMs: 11_000, welcomeMs: 3, trainingMs: 120.5, bytes: 40_312 },
      { rank: 5, epoch: 2, connectedMs: 19_000, welcomeMs: 5, trainingMs: 240, bytes: 40_400 }
    ]
  }

  it("prints one row per joiner and the median and p90, from summary.json and from the journal alone; --json carries them", async () => {
    for (const files of [
      { summary: true, events: false },
      { summary: false, events: true }
    ]) {
      const dir = `${scratch()}/joins-${files.summary ? "summary" : "journal"}`
      await Files.mkdir(dir)
      if (files.summary) await Files.writeFile(`${dir}/summary.json`, `${JSON.stringify(withJoins)}\n`)
      else {
        const events = [
          ...streamedEventsOf(withJoins),
          ...withJoins.joins!.map((join) => ({ type: "join", ms: join.connectedMs + join.trainingMs, join }))
        ]
        await Files.writeFile(`${dir}/events.ndjson`, events.map((e) => JSON.stringify(e)).join("\n") + "\n")
      }
      const { code, out } = await runMain(["report", dir])
      expect(code).toBe(0)
      const lines = out.split("\n")
      const at = lines.indexOf("joins brought up to date (what each cost):")
      expect(at).toBeGreaterThan(0)
      expect(lines.slice(at + 1, at + 4).map((line) => line.trim().split(/\s+/))).toEqual([
        ["rank", "epoch", "welcome", "ms", "training", "ms", "bytes"],
        ["4", "1", "3.0", "120.5", "40312"],
        ["5", "2", "5.0", "240.0", "40400"]
      ])
      expect(lines[at + 4]).toBe("joins in all:")
      expect(lines[at + 6]!.trim().split(/\s+/)).toEqual(["2", "3.0", "5.0", "120.5", "240.0", "40312", "40400"])
      const json = await runMain(["report", dir, "--json"])
      expect((JSON.parse(json.out) as RunTypes.RunResult).joins).toEqual(withJoins.joins)
    }
  })
})
