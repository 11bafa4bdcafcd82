import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Terminal } from "@xterm/headless"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type * as RunTypes from "../actors/run-types.ts"
import * as Cli from "../src/cli/index.ts"
import type * as Alerts from "../src/core/alerts.ts"
import * as Coordinator from "../src/core/coordinator.ts"
import * as Runtime from "../src/platform/detect.ts"
import * as Files from "../src/platform/files.ts"

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

interface Captured {
  readonly io: Cli.Io
  readonly out: () => string
  readonly err: () => string
}

const capture = (): Captured => {
  let out = ""
  let err = ""
  return {
    io: {
      out: (text) => {
        out += text
      },
      err: (text) => {
        err += text
      },
      isTerminal: false,
      progressStream: () => {
        throw new Error("no terminal in tests")
      }
    },
    out: () => out,
    err: () => err
  }
}

const noLaunch: Cli.Launch = () => Promise.reject(new Error("the launcher must not be called"))

const runMain = async (argv: ReadonlyArray<string>, launch: Cli.Launch = noLaunch) => {
  const captured = capture()
  const code = await Cli.main(argv, captured.io, launch)
  return { code, out: captured.out(), err: captured.err() }
}

const counters: Coordinator.Counters = Coordinator.zeroCounters()

const coreDeath = (rank: number, epoch: number): Coordinator.Death => ({
  rank,
  epoch,
  detector: "supervisor",
  cause: "killed by terminate",
  reportedAtMs: 0,
  declaredAtMs: 0,
  remainderSamples: 1200,
  extensions: 3,
  afterEnd: false
})

const summary = (epoch: number, deaths: ReadonlyArray<Coordinator.Death> = [], lost = 0, duplicated = 0): Coordinator.EpochSummary => ({
  epoch,
  epochSamples: 8000,
  samplesCommitted: 8000 - lost + duplicated,
  lost,
  duplicated,
  deaths,
  exits: [],
  startedAtMs: epoch * 10_000,
  endedAtMs: epoch * 10_000 + 9_000
})

const killTiming: RunTypes.DeathTiming = {
  rank: 2,
  epoch: 1,
  detector: "supervisor",
  cause: "killed by terminate",
  faultMs: 12_345,
  declaredMs: 12_346,
  recoveredMs: 12_348,
  detectedAfterFaultMs: 1.25,
  recoveredAfterFaultMs: 3.5,
  remainderSamples: 1200,
  redistributed: true
}

const rankLost: Alerts.Alert = {
  ts: 12_346,
  severity: "critical",
  path: "root/rank2",
  class: "RankLost",
  detail: "rank 2 lost: killed by terminate",
  count: 1
}

const completedEpochs = [summary(0), summary(1, [coreDeath(2, 1)]), summary(2)]

const completed: RunTypes.RunResult = {
  runId: "abc123",
  runDir: "runs/abc123",
  outcome: {
    status: "completed",
    reason: undefined,
    detail: "all epochs done",
    endedAtMs: 30_000,
    epochsCompleted: 3,
    failures: [2],
    exits: [0, 1, 3],
    deaths: [coreDeath(2, 1)],
    epochs: completedEpochs,
    evals: [],
    uncommitted: undefined,
    counters
  },
  deaths: [killTiming],
  alerts: [rankLost],
  epochs: [
    { ...completedEpochs[0]!, accuracy: 0.9105 },
    { ...completedEpochs[1]!, accuracy: 0.93504 },
    { ...completedEpochs[2]!, accuracy: 0.942 }
  ],
  finalAccuracy: 0.942,
  durationMs: 41_234,
  exitCode: 0,
  skippedFaults: []
}

const stoppedTiming: RunTypes.DeathTiming = {
  rank: 1,
  epoch: 0,
  detector: "supervisor",
  cause: "killed by terminate",
  faultMs: 3_000,
  declaredMs: 3_002,
  recoveredMs: 3_002,
  detectedAfterFaultMs: 2,
  recoveredAfterFaultMs: undefined,
  remainderSamples: 1400,
  redistributed: false
}

const unrecoverable: RunTypes.RunResult = {
  runId: "zz9",
  runDir: "runs/zz9",
  outcome: {
    status: "unrecoverable",
    reason: "FailureLimitReached",
    detail: "1 failure reached the failure limit of 1",
    endedAtMs: 3_002,
    epochsCompleted: 0,
    failures: [1],
    exits: [0, 2, 3],
    deaths: [coreDeath(1, 0)],
    epochs: [],
    evals: [],
    uncommitted: { epoch: 0, ranges: [[600, 1400], [2600, 1400], [4600, 1400], [6600, 1400]] },
    counters
  },
  deaths: [stoppedTiming],
  alerts: [],
  epochs: [],
  finalAccuracy: undefined,
  saves: { saved: [0, 2, 3], notSaved: [] },
  durationMs: 3_500,
  exitCode: 1,
  skippedFaults: []
}

const interrupted: RunTypes.RunResult = {
  ...unrecoverable,
  runId: "int1",
  runDir: "runs/int1",
  outcome: {
    ...unrecoverable.outcome,
    status: "interrupted",
    reason: "GracefulShutdown",
    detail: "interrupted by SIGTERM",
    failures: [],
    exits: [0, 1, 2, 3],
    deaths: []
  },
  deaths: [],
  saves: { saved: [0, 1, 3], notSaved: [2] },
  exitCode: 143
}

const auditFailed: RunTypes.RunResult = {
  ...completed,
  deaths: [],
  alerts: [],
  outcome: { ...completed.outcome, failures: [] },
  epochs: [{ ...summary(0), accuracy: 0.9 }, { ...summary(1, [], 5, 2), accuracy: 0.91 }, { ...summary(2), accuracy: 0.92 }],
  finalAccuracy: 0.92,
  exitCode: 4
}

const eventsOf = (result: RunTypes.RunResult): ReadonlyArray<RunTypes.RunEvent> => [
  {
    type: "started",
    ms: 0,
    runId: result.runId,
    runDir: result.runDir,
    worldSize: 4,
    epochs: 3,
    epochSamples: 8000,
    mode: "static",
    transport: "worker"
  },
  ...result.alerts.map((alert): RunTypes.RunEvent => ({ type: "alert", ms: alert.ts, alert })),
  ...result.deaths.map((death): RunTypes.RunEvent => ({ type: "death", ms: death.declaredMs, death })),
  ...result.epochs.map((e): RunTypes.RunEvent => ({
    type: "epoch",
    ms: e.endedAtMs,
    summary: { ...e, accuracy: undefined } as Coordinator.EpochSummary,
    accuracy: e.accuracy
  })),
  { type: "ended", ms: result.durationMs, outcome: result.outcome, saves: result.saves }
]

/**
 * The journal as the launcher streams it: each epoch line written before its eval (no accuracy),
 * the eval on a line of its own, and `ended` with the run's exit code.
 */
const streamedEventsOf = (result: RunTypes.RunResult): ReadonlyArray<RunTypes.RunEvent> =>
  eventsOf(result).flatMap((event): ReadonlyArray<RunTypes.RunEvent> => {
    if (event.type === "ended") return [{ ...event, exitCode: result.exitCode }]
    if (event.type !== "epoch" || event.accuracy === undefined) return [event]
    return [
      { ...event, accuracy: undefined },
      { type: "eval", ms: event.ms + 1, epoch: event.summary.epoch, rank: 0, accuracy: event.accuracy, loss: 0.5 }
    ]
  })

let scratch = ""

afterAll(() => {
  if (scratch !== "") rmSync(scratch, { recursive: true, force: true })
})

beforeAll(async () => {
  scratch = `${tmpdir()}/cohort-cli-test-${Runtime.detect()}-${Math.random().toString(36).slice(2)}`
  await Files.mkdir(scratch)
  await Files.writeFile(`${scratch}/no-factory.mjs`, "export const trainSamples = 10\n")
  await Files.writeFile(
    `${scratch}/good-trainer.mjs`,
    [
      "export const trainSamples = 10",
      "export const createTrainer = () => ({",
      "  trainBatch: () => ({ loss: 0 }),",
      "  getParams: () => new Float32Array(1),",
      "  setParams: () => undefined,",
      "  save: () => undefined",
      "})",
      ""
    ].join("\n")
  )
  await Files.writeFile(`${scratch}/broken-trainer.mjs`, "export const = 1\n")
})

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

describe("parse", () => {
  it("fills every default of demo, including the default kill of rank 2 at 40% of epoch 1", () => {
    expect(Cli.parse(["demo"])).toEqual({
      command: "demo",
      options: {
        trainer: undefined,
        worldSize: 4,
        epochs: 3,
        mode: "static",
        backend: "cpu",
        transport: "worker",
        kills: [{ rank: 2, atEpoch: 1, atFraction: 0.4 }],
        hangs: [],
        heartbeatTimeoutMs: 10_000,
        coordinatorTimeoutMs: 10_000,
        failureLimit: undefined,
        rolePolicy: "fastest",
        onRepeatedCrash: "stop",
        rankMemoryMb: 1024,
        interruptGraceMs: 30_000,
        seed: 1,
        outDir: "runs",
        json: false
      }
    })
  })

  it("reads every flag of demo", () => {
    const parsed = Cli.parse([
      "demo",
      "--world-size",
      "6",
      "--epochs",
      "2",
      "--mode",
      "progressive",
      "--backend",
      "ring",
      "--transport",
      "process",
      "--kill",
      "5@2.5",
      "--hang",
      "1@5",
      "--heartbeat-timeout-ms",
      "2000",
      "--coordinator-timeout-ms",
      "4000",
      "--failure-limit",
      "0.5",
      "--role-policy",
      "3",
      "--on-repeated-crash",
      "continue",
      "--rank-memory-mb",
      "64",
      "--interrupt-grace-ms",
      "5000",
      "--seed",
      "42",
      "--out",
      "/tmp/my-runs",
      "--json"
    ])
    expect(parsed).toEqual({
      command: "demo",
      options: {
        trainer: undefined,
        worldSize: 6,
        epochs: 2,
        mode: "progressive",
        backend: "ring",
        transport: "process",
        kills: [{ rank: 5, atSeconds: 2.5 }],
        hangs: [{ rank: 1, atSeconds: 5 }],
        heartbeatTimeoutMs: 2000,
        coordinatorTimeoutMs: 4000,
        failureLimit: { fraction: 0.5 },
        rolePolicy: { rank: 3 },
        onRepeatedCrash: "continue",
        rankMemoryMb: 64,
        interruptGraceMs: 5000,
        seed: 42,
        outDir: "/tmp/my-runs",
        json: true
      }
    })
  })

  it("accepts --flag=value as well as --flag value", () => {
    expect(Cli.parse(["demo", "--world-size=2", "--kill=1@3"])).toMatchObject({
      options: { worldSize: 2, kills: [{ rank: 1, atSeconds: 3 }] }
    })
  })

  it("collects repeated --kill and --hang in order; --kill replaces the default kill", () => {
    expect(Cli.parse(["demo", "--kill", "1@3", "--kill", "3@0", "--hang", "0@1", "--hang", "2@7.25"])).toMatchObject({
      options: {
        kills: [{ rank: 1, atSeconds: 3 }, { rank: 3, atSeconds: 0 }],
        hangs: [{ rank: 0, atSeconds: 1 }, { rank: 2, atSeconds: 7.25 }]
      }
    })
  })

  it("reads --dashboard [PORT] and --dashboard-faults, which needs --dashboard", () => {
    expect(Cli.parse(["demo"])).toMatchObject({ options: { dashboard: undefined } })
    expect(Cli.parse(["demo", "--dashboard"])).toMatchObject({ options: { dashboard: { port: 0, faults: false } } })
    expect(Cli.parse(["run", "--trainer", "t.ts", "--dashboard", "8123", "--dashboard-faults"])).toMatchObject({
      options: { dashboard: { port: 8123, faults: true } }
    })
    expect(Cli.parse(["demo", "--dashboard-faults"])).toEqual({ error: "--dashboard-faults goes with --dashboard (it adds kill buttons to the page)" })
    expect(Cli.parse(["demo", "--dashboard", "70000"])).toEqual({ error: "--dashboard PORT must be at most 65535, got '70000'" })
    expect(Cli.parse(["demo", "--dashboard", "x"])).toEqual({ error: "--dashboard must be an integer >= 0, got 'x'" })
  })

  it("serve refuses --dashboard-faults: its ranks are not this process's", async () => {
    const err: Array<string> = []
    const io = { out: () => {}, err: (text: string) => void err.push(text), isTerminal: false, progressStream: () => process.stderr }
    expect(await Cli.main(["serve", "--dashboard", "--dashboard-faults"], io)).toBe(2)
    expect(err).toEqual(["cohort: serve: --dashboard-faults needs ranks this process started (demo, run); served ranks run elsewhere\n"])
  })

  it("--no-kill removes the demo's kill", () => {
    expect(Cli.parse(["demo", "--no-kill"])).toMatchObject({ options: { kills: [] } })
  })

  it("moves the demo's kill to the last rank and epoch for small runs, and drops it for one rank", () => {
    expect(Cli.parse(["demo", "--world-size", "2", "--epochs", "1"])).toMatchObject({
      options: { kills: [{ rank: 1, atEpoch: 0, atFraction: 0.4 }] }
    })
    expect(Cli.parse(["demo", "--world-size", "3"])).toMatchObject({
      options: { kills: [{ rank: 2, atEpoch: 1, atFraction: 0.4 }] }
    })
    expect(Cli.parse(["demo", "--world-size", "1"])).toMatchObject({ options: { kills: [] } })
  })

  it("run takes --trainer and has no default kill", () => {
    expect(Cli.parse(["run", "--trainer", "./my-trainer.ts", "--epochs", "1"])).toEqual({
      command: "run",
      options: {
        trainer: "./my-trainer.ts",
        worldSize: 4,
        epochs: 1,
        mode: "static",
        backend: "cpu",
        transport: "worker",
        kills: [],
        hangs: [],
        heartbeatTimeoutMs: 10_000,
        coordinatorTimeoutMs: 10_000,
        failureLimit: undefined,
        rolePolicy: "fastest",
        onRepeatedCrash: "stop",
        rankMemoryMb: 1024,
        interruptGraceMs: 30_000,
        seed: 1,
        outDir: "runs",
        json: false
      }
    })
  })

  it("reads --failure-limit as a count (integer >= 0) or a fraction in (0, 1)", () => {
    const limit = (text: string) => {
      const parsed = Cli.parse(["demo", "--failure-limit", text])
      return "options" in parsed && (parsed.command === "demo" || parsed.command === "run") ? parsed.options.failureLimit : parsed
    }
    expect(limit("1")).toEqual({ absolute: 1 })
    expect(limit("0")).toEqual({ absolute: 0 })
    expect(limit("12")).toEqual({ absolute: 12 })
    expect(limit("0.5")).toEqual({ fraction: 0.5 })
    expect(limit(".25")).toEqual({ fraction: 0.25 })
    for (const bad of ["1.5", "1.0", "-1", "0.0", "half", ""]) {
      expect(limit(bad)).toEqual({
        error: `--failure-limit must be an integer >= 0 or a fraction between 0 and 1, got '${bad}'`
      })
    }
  })

  it("reads --role-policy as fastest or a rank", () => {
    expect(Cli.parse(["demo", "--role-policy", "fastest"])).toMatchObject({ options: { rolePolicy: "fastest" } })
    expect(Cli.parse(["demo", "--role-policy", "0"])).toMatchObject({ options: { rolePolicy: { rank: 0 } } })
    expect(Cli.parse(["demo", "--role-policy", "slowest"])).toEqual({
      error: "--role-policy must be fastest or a rank (an integer >= 0), got 'slowest'"
    })
    expect(Cli.parse(["demo", "--role-policy", "9"])).toEqual({ error: "--role-policy 9: rank 9 is out of range for 4 ranks (0 to 3)" })
    expect(Cli.parse(["demo", "--world-size", "1", "--role-policy", "1"])).toEqual({
      error: "--role-policy 1: rank 1 is out of range for 1 rank (0 to 0)"
    })
  })

  it("reads report with its run directory and --json", () => {
    const plain = { html: false, outFile: undefined }
    expect(Cli.parse(["report", "runs/abc"])).toEqual({ command: "report", options: { runDir: "runs/abc", json: false, fileBytesMax: 268_435_456, ...plain } })
    expect(Cli.parse(["report", "--json", "runs/abc"])).toEqual({
      command: "report",
      options: { runDir: "runs/abc", json: true, fileBytesMax: 268_435_456, ...plain }
    })
    expect(Cli.parse(["report", "--file-bytes-max", "1000", "runs/abc"])).toEqual({
      command: "report",
      options: { runDir: "runs/abc", json: false, fileBytesMax: 1000, ...plain }
    })
  })

  it("reads report --html with --out FILE, and refuses --out without --html and --html with --json", () => {
    expect(Cli.parse(["report", "--html", "runs/abc"])).toEqual({
      command: "report",
      options: { runDir: "runs/abc", json: false, fileBytesMax: 268_435_456, html: true, outFile: undefined }
    })
    expect(Cli.parse(["report", "--html", "--out", "page.html", "runs/abc"])).toEqual({
      command: "report",
      options: { runDir: "runs/abc", json: false, fileBytesMax: 268_435_456, html: true, outFile: "page.html" }
    })
    expect(Cli.parse(["report", "--out", "page.html", "runs/abc"])).toEqual({ error: "report: --out FILE goes with --html (the summary is printed)" })
    expect(Cli.parse(["report", "--html", "--json", "runs/abc"])).toEqual({ error: "report: --html and --json exclude each other" })
  })

  it("reads help, -h, --help and no arguments as help", () => {
    for (const argv of [[], ["help"], ["--help"], ["-h"], ["demo", "--help"], ["report", "-h"]]) {
      expect(Cli.parse(argv)).toEqual({ command: "help" })
    }
  })
})

// ---------------------------------------------------------------------------------------------
// Bad input: one line on stderr, exit code 2
// ---------------------------------------------------------------------------------------------

describe("parse resume", () => {
  it("takes the run directory and leaves every option not given undefined (the parent's), faults none", () => {
    expect(Cli.parse(["resume", "runs/abc"])).toEqual({
      command: "resume",
      options: {
        runDir: "runs/abc",
        trainer: undefined,
        worldSize: undefined,
        transport: undefined,
        kills: [],
        hangs: [],
        heartbeatTimeoutMs: undefined,
        coordinatorTimeoutMs: undefined,
        failureLimit: undefined,
        rankMemoryMb: undefined,
        interruptGraceMs: undefined,
        outDir: undefined,
        json: false,
        dashboard: undefined
      }
    })
  })

  it("reads every flag of resume", () => {
    const parsed = Cli.parse([
      "resume", "runs/abc", "--world-size", "3", "--transport", "process", "--kill", "1@2", "--hang", "2@4.5",
      "--heartbeat-timeout-ms", "5000", "--coordinator-timeout-ms", "3000", "--failure-limit", "2", "--rank-memory-mb", "0",
      "--interrupt-grace-ms", "0", "--trainer", "t.ts", "--out", "elsewhere", "--json", "--dashboard", "8123", "--dashboard-faults"
    ])
    expect(parsed).toEqual({
      command: "resume",
      options: {
        runDir: "runs/abc",
        trainer: "t.ts",
        worldSize: 3,
        transport: "process",
        kills: [{ rank: 1, atSeconds: 2 }],
        hangs: [{ rank: 2, atSeconds: 4.5 }],
        heartbeatTimeoutMs: 5000,
        coordinatorTimeoutMs: 3000,
        failureLimit: { absolute: 2 },
        rankMemoryMb: 0,
        interruptGraceMs: 0,
        outDir: "elsewhere",
        json: true,
        dashboard: { port: 8123, faults: true }
      }
    })
    expect(Cli.parse(["resume", "runs/abc", "--dashboard"])).toMatchObject({ options: { dashboard: { port: 0, faults: false } } })
  })

  it("refuses what a resume cannot change or read, in one line", () => {
    expect(Cli.parse(["resume"])).toEqual({ error: "missing required argument 'RUN_DIR'" })
    expect(Cli.parse(["resume", "runs/abc", "--epochs", "5"])).toEqual({ error: "unknown option '--epochs'" })
    expect(Cli.parse(["resume", "runs/abc", "--seed", "5"])).toEqual({ error: "unknown option '--seed'" })
    expect(Cli.parse(["resume", "runs/abc", "--world-size", "0"])).toEqual({ error: "--world-size must be an integer >= 1, got '0'" })
    expect(Cli.parse(["resume", "runs/abc", "--world-size", "2", "--kill", "2@1"])).toEqual({ error: "--kill 2@1: rank 2 is out of range for 2 ranks (0 to 1)" })
    expect(Cli.parse(["resume", "runs/abc", "--transport", "socket"])).toEqual({ error: "--transport must be worker or process, got 'socket'" })
    expect(Cli.parse(["resume", "runs/abc", "--out", ""])).toEqual({ error: "--out needs a folder path" })
    expect(Cli.parse(["resume", "runs/abc", "--dashboard-faults"])).toEqual({ error: "--dashboard-faults goes with --dashboard (it adds kill buttons to the page)" })
    expect(Cli.parse(["resume", "runs/abc", "--dashboard", "70000"])).toEqual({ error: "--dashboard PORT must be at most 65535, got '70000'" })
  })

  it("resumeCommand quotes a directory only when a shell needs it", () => {
    expect(Cli.resumeCommand("runs/abc")).toBe("cohort resume runs/abc")
    expect(Cli.resumeCommand("/tmp/my runs/it's")).toBe(`cohort resume '/tmp/my runs/it'\\''s'`)
  })
})

describe("bad input gives one line on stderr and exit code 2", () => {
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, string]> = [
    ["an unknown flag", ["demo", "--bogus"], "cohort: unknown option '--bogus'"],
    [
      "a misspelt flag",
      ["demo", "--wrold-size", "3"],
      "cohort: unknown option '--wrold-size' (did you mean --world-size?)"
    ],
    ["an unknown flag before the command", ["--verbose", "demo"], "cohort: unknown option '--verbose'"],
    ["an unknown command", ["train"], "cohort: unknown command 'train'"],
    ["a misspelt command", ["dmeo"], "cohort: unknown command 'dmeo' (did you mean demo?)"],
    ["an extra argument", ["demo", "now"], "cohort: too many arguments for 'demo'. Expected 0 arguments but got 1."],
    ["a flag without its value", ["demo", "--world-size"], "cohort: option '--world-size <n>' argument missing"],
    ["--world-size 0", ["demo", "--world-size", "0"], "cohort: --world-size must be an integer >= 1, got '0'"],
    ["--world-size 2.5", ["demo", "--world-size", "2.5"], "cohort: --world-size must be an integer >= 1, got '2.5'"],
    ["--world-size 1025", ["demo", "--world-size", "1025"], "cohort: --world-size must be at most 1024 (the ranks one machine starts), got '1025'"],
    ["--epochs 0", ["demo", "--epochs", "0"], "cohort: --epochs must be an integer >= 1, got '0'"],
    [
      "--kill 9@1 with 4 ranks",
      ["demo", "--kill", "9@1"],
      "cohort: --kill 9@1: rank 9 is out of range for 4 ranks (0 to 3)"
    ],
    [
      "--kill of a rank that --world-size leaves out",
      ["demo", "--world-size", "2", "--kill", "2@1"],
      "cohort: --kill 2@1: rank 2 is out of range for 2 ranks (0 to 1)"
    ],
    ["--kill -1@1", ["demo", "--kill", "-1@1"], "cohort: --kill -1@1: rank -1 is out of range for 4 ranks (0 to 3)"],
    ["a malformed --kill", ["demo", "--kill", "two@1"], "cohort: --kill expects RANK@SECONDS (e.g. 2@5), got 'two@1'"],
    ["a --kill without seconds", ["demo", "--kill", "2"], "cohort: --kill expects RANK@SECONDS (e.g. 2@5), got '2'"],
    ["negative seconds", ["demo", "--kill", "2@-1"], "cohort: --kill 2@-1: seconds must be >= 0"],
    ["a --hang out of range", ["demo", "--hang", "4@5"], "cohort: --hang 4@5: rank 4 is out of range for 4 ranks (0 to 3)"],
    ["a malformed --hang", ["demo", "--hang", "1@soon"], "cohort: --hang expects RANK@SECONDS (e.g. 2@5), got '1@soon'"],
    ["--kill with --no-kill", ["demo", "--no-kill", "--kill", "1@2"], "cohort: --kill cannot be used with --no-kill"],
    ["a bad mode", ["demo", "--mode", "fast"], "cohort: --mode must be static or progressive, got 'fast'"],
    ["a bad transport", ["demo", "--transport", "tcp"], "cohort: --transport must be worker, process or websocket, got 'tcp'"],
    ["a bad backend", ["demo", "--backend", "gpu"], "cohort: --backend must be cpu or ring, got 'gpu'"],
    [
      "a ring of one rank",
      ["demo", "--backend", "ring", "--world-size", "1"],
      "cohort: --backend ring needs --world-size 2 or more (the ranks average among themselves), got 1"
    ],
    [
      "a zero heartbeat timeout",
      ["demo", "--heartbeat-timeout-ms", "0"],
      "cohort: --heartbeat-timeout-ms must be an integer >= 1, got '0'"
    ], [
      "a zero coordinator timeout",
      ["demo", "--coordinator-timeout-ms", "0"],
      "cohort: --coordinator-timeout-ms must be an integer >= 1, got '0'"
    ],
    [
      "a failure limit above 1 that is not an integer",
      ["demo", "--failure-limit", "1.5"],
      "cohort: --failure-limit must be an integer >= 0 or a fraction between 0 and 1, got '1.5'"
    ],
    ["a bad --on-repeated-crash", ["demo", "--on-repeated-crash", "retry"], "cohort: --on-repeated-crash must be stop or continue, got 'retry'"],
    ["a rank memory limit below 16 MiB", ["demo", "--rank-memory-mb", "8"], "cohort: --rank-memory-mb must be an integer >= 16, got '8'"],
    ["a rank memory limit that is not an integer", ["demo", "--rank-memory-mb", "1.5"], "cohort: --rank-memory-mb must be an integer >= 16, got '1.5'"],
    ["a negative seed", ["demo", "--seed", "-1"], "cohort: --seed must be an integer from 0 to 4294967295, got '-1'"],
    ["a seed above 32 bits", ["demo", "--seed", "4294967296"], "cohort: --seed must be an integer from 0 to 4294967295, got '4294967296'"],
    ["an empty --out", ["demo", "--out", ""], "cohort: --out needs a folder path"],
    ["run without --trainer", ["run"], "cohort: run needs --trainer FILE"],
    ["--trainer on demo", ["demo", "--trainer", "x.ts"], "cohort: unknown option '--trainer'"],
    ["report without RUN_DIR", ["report"], "cohort: missing required argument 'RUN_DIR'"],
    ["report --file-bytes-max 0", ["report", "--file-bytes-max", "0", "runs/x"], "cohort: --file-bytes-max must be an integer >= 1, got '0'"]
  ]

  for (const [name, argv, message] of cases) {
    it(name, async () => {
      const { code, out, err } = await runMain(argv)
      expect({ code, out, err }).toEqual({ code: 2, out: "", err: `${message}\n` })
    })
  }

  it("a missing trainer file", async () => {
    const { code, out, err } = await runMain(["run", "--trainer", `${scratch}/nowhere.ts`])
    expect({ code, out, err }).toEqual({ code: 2, out: "", err: `cohort: trainer file not found: ${scratch}/nowhere.ts\n` })
  })

  it("a trainer that does not export the factory", async () => {
    const { code, out, err } = await runMain(["run", "--trainer", `${scratch}/no-factory.mjs`])
    expect({ code, out, err }).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${scratch}/no-factory.mjs: the trainer module does not export createTrainer\n`
    })
  })

  it("a trainer that does not load", async () => {
    const { code, out, err } = await runMain(["run", "--trainer", `${scratch}/broken-trainer.mjs`])
    expect(code).toBe(2)
    expect(out).toBe("")
    expect(err).toMatch(new RegExp(`^cohort: cannot import the trainer module ${scratch}/broken-trainer\\.mjs: .+\\n$`))
  })

  it("a missing run directory for report", async () => {
    const { code, out, err } = await runMain(["report", `${scratch}/no-such-run`])
    expect({ code, out, err }).toEqual({ code: 2, out: "", err: `cohort: no run directory at ${scratch}/no-such-run\n` })
  })

  it("a folder that is not a run directory for report", async () => {
    const { code, out, err } = await runMain(["report", scratch])
    expect({ code, out, err }).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${scratch} has neither summary.json nor events.ndjson; is it a run directory?\n`
    })
  })
})

// ---------------------------------------------------------------------------------------------
// help
// ---------------------------------------------------------------------------------------------

describe("help", () => {
  it("prints the help text on stdout with exit code 0", async () => {
    const { code, out, err } = await runMain(["help"])
    expect({ code, err }).toEqual({ code: 0, err: "" })
    expect(out).toBe(Cli.helpText())
    expect(out.startsWith(`cohort: elastic data-parallel training for TypeScript (runtime: ${Runtime.describe()})\n`)).toBe(true)
  })

  it("version, --version and -V print the package's version and the runtime with exit code 0; with more arguments they are not a version request", async () => {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
    for (const argv of [["version"], ["--version"], ["-V"]]) {
      expect(Cli.parse(argv)).toEqual({ command: "version" })
      const { code, out, err } = await runMain(argv)
      expect({ code, out, err }).toEqual({ code: 0, out: `cohort ${pkg.version} (runtime: ${Runtime.describe()})\n`, err: "" })
    }
    expect(Cli.parse(["demo", "--version"])).toEqual({ error: "unknown option '--version'" })
  })

  it("documents every flag with its default and every exit code", () => {
    const text = Cli.helpText()
    for (
      const flag of [
        "--trainer FILE",
        "--world-size N",
        "(default 4)",
        "--epochs N",
        "(default 3)",
        "--mode static|progressive",
        "(default static)",
        "--transport worker|process",
        "(default worker)",
        "--kill RANK@SECONDS",
        "demo default: rank 2 killed 40% into",
        "--hang RANK@SECONDS",
        "--no-kill",
        "--heartbeat-timeout-ms N",
        "(default 10000)",
        "--coordinator-timeout-ms N",
        "(default 10000; worker threads die with the coordinator)",
        "--failure-limit N|F",
        "(default none",
        "--role-policy fastest|N",
        "(default fastest)",
        "--seed N",
        "(default 1)",
        "--out DIR",
        "(default runs)",
        "--json",
        "cohort serve [options]",
        "cohort join URL [options]",
        "--listen HOST:PORT",
        "(default 127.0.0.1:0",
        "--token-file FILE",
        "COHORT_TOKEN",
        "--formation-timeout-ms N",
        "(default 300000)",
        "--rank N|auto",
        "(default auto)",
        "--rank-from-env NAME",
        "--save-dir DIR",
        "(default ./cohort-save)",
        "--connect-timeout-ms N",
        "10 wrong token; 11 rank taken; 12 run already formed; 13 rank declared dead;",
        "cohort bundle --trainer FILE --out DIR",
        "--serve-browser",
        "--backend cpu|ring"
      ]
    ) {
      expect(text).toContain(flag)
    }
    for (const code of [0, 1, 2, 3, 4, 130, 143]) expect(text).toMatch(new RegExp(`^  ${code}  \\S`, "m"))
    expect(text).toContain("cohort resume RUN_DIR [options]")
    expect(text).toContain("--trainer FILE              the run's trainer module if it moved")
    expect(Math.max(...text.split("\n").map((line) => line.length))).toBeLessThanOrEqual(100)
  })
})

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

describe("renderResult", () => {
  it("renders a completed run as a table per epoch, the deaths, the alerts and the outcome", () => {
    expect(Cli.renderResult(completed)).toEqual({
      out: [
        "epoch  samples committed  lost  duplicated  deaths  detection ms  recovery ms  test accuracy",
        "    0               8000     0           0       0             -            -         0.9105",
        "    1               8000     0           0       1           1.3          3.5         0.9350",
        "    2               8000     0           0       0             -            -         0.9420",
        "deaths:",
        "  rank 2 in epoch 1 (supervisor): killed by terminate; detected 1.3 ms after the fault; 1200 samples moved to the survivors 3.5 ms after the fault",
        "alerts:",
        "  critical RankLost root/rank2: rank 2 lost: killed by terminate",
        "outcome: completed 3 epochs in 41.2 s; failures: rank 2; final test accuracy 0.9420; every audit clean",
        "run directory: runs/abc123",
        ""
      ].join("\n"),
      err: undefined
    })
  })

  it("names the averaging backend and the ring's generations and links under the table", () => {
    const ring = Cli.renderResult({ ...completed, backend: "ring", ring: { generations: 2, links: "port", relayed: 0, dropped: 0 } }).out
    expect(ring).toContain("\naveraging: ring, 2 generations, direct links between worker threads\nrun directory: runs/abc123\n")
    const shared = Cli.renderResult({ ...completed, backend: "ring", ring: { generations: 1, links: "shared", relayed: 0, dropped: 0 } }).out
    expect(shared).toContain("\naveraging: ring, 1 generation, shared-memory links between worker threads\nrun directory: runs/abc123\n")
    const relayed = Cli.renderResult({ ...completed, backend: "ring", ring: { generations: 1, links: "relay", relayed: 120, dropped: 3 } }).out
    expect(relayed).toContain("\naveraging: ring, 1 generation, steps relayed by the coordinator (120 relayed, 3 dropped)\n")
    expect(Cli.renderResult({ ...completed, backend: "cpu" }).out).toContain("\naveraging: cpu (the coordinator averaged every round)\n")
  })

  it("renders an unrecoverable run with the stopped epoch, its uncommitted ranges and a one-line reason", () => {
    expect(Cli.renderResult(unrecoverable)).toEqual({
      out: [
        "epoch  samples committed  lost  duplicated  deaths  detection ms  recovery ms  test accuracy",
        "    0            stopped     -           -       1           2.0            -              -",
        "uncommitted in epoch 0: 5600 samples in 4 ranges: [600, 2000), [2600, 4000), [4600, 6000), [6600, 8000)",
        "deaths:",
        "  rank 1 in epoch 0 (supervisor): killed by terminate; detected 2.0 ms after the fault; 1400 samples left uncommitted (the run stopped)",
        "outcome: unrecoverable (FailureLimitReached) after 0 completed epochs in 3.5 s; failures: rank 1; final test accuracy -; every completed epoch's audit clean",
        "run directory: runs/zz9",
        ""
      ].join("\n"),
      err: "cohort: run stopped: FailureLimitReached: 1 failure reached the failure limit of 1; ranks 0, 2, 3 saved under runs/zz9/save; resume with: cohort resume runs/zz9"
    })
  })

  it("says which survivors saved and which did not finish their save", () => {
    const stopped = "cohort: run stopped: FailureLimitReached: 1 failure reached the failure limit of 1; "
    const errOf = (saves: RunTypes.RunResult["saves"]) => Cli.renderResult({ ...unrecoverable, saves }).err
    const resume = "; resume with: cohort resume runs/zz9"
    expect(errOf({ saved: [0, 3], notSaved: [2] })).toBe(`${stopped}ranks 0, 3 saved under runs/zz9/save; rank 2 did not finish its save${resume}`)
    expect(errOf({ saved: [], notSaved: [0, 2] })).toBe(`${stopped}ranks 0, 2 did not finish their save${resume}`)
    expect(errOf({ saved: [], notSaved: [] })).toBe(`${stopped}no survivor was left to save${resume}`)
    expect(errOf(undefined)).toBe(`${stopped}survivors were asked to save under runs/zz9/save${resume}`)
  })

  it("a served run: its survivors saved on their hosts, and its refused joins are counted under the table", () => {
    const rendered = Cli.renderResult({ ...unrecoverable, transport: "serve", refusals: { 4001: 2, 4010: 1 } })
    expect(rendered.err).toBe("cohort: run stopped: FailureLimitReached: 1 failure reached the failure limit of 1; ranks 0, 2, 3 saved under their hosts' --save-dir")
    expect(rendered.out).toContain("\nrefused joins: 2 × 4001, 1 × 4010\nrun directory: runs/zz9\n")
  })

  it("names the failed audits", () => {
    const rendered = Cli.renderResult(auditFailed)
    expect(rendered.err).toBe("cohort: audit failed: epoch 1 lost 5, duplicated 2")
    expect(rendered.out).toContain("    1               7997     5           2       0             -            -         0.9100\n")
    expect(rendered.out).toContain("; audit failed in epoch 1 (lost 5, duplicated 2)\n")
  })

  it("lists several deaths of one epoch in the timing columns and at most 8 uncommitted ranges", () => {
    const hang: RunTypes.DeathTiming = {
      ...stoppedTiming,
      rank: 3,
      detector: "heartbeat",
      cause: "no frame for 10001 ms",
      detectedAfterFaultMs: 10_150.04,
      recoveredAfterFaultMs: 10_151
    }
    const ranges = Array.from({ length: 10 }, (_, i) => [i * 100, 10] as const)
    const result: RunTypes.RunResult = {
      ...unrecoverable,
      deaths: [stoppedTiming, hang],
      outcome: { ...unrecoverable.outcome, failures: [1, 3], uncommitted: { epoch: 0, ranges } }
    }
    const out = Cli.renderResult(result).out
    expect(out).toContain("    0            stopped     -           -       2  2.0, 10150.0   -, 10151.0              -\n")
    expect(out).toContain(
      "uncommitted in epoch 0: 100 samples in 10 ranges: [0, 10), [100, 110), [200, 210), [300, 310), [400, 410), [500, 510), [600, 610), [700, 710), and 2 more\n"
    )
    expect(out).toContain("failures: ranks 1, 3;")
  })

  it("counts a death declared after the run ended in no epoch and says so", () => {
    const late: RunTypes.DeathTiming = { ...killTiming, rank: 1, epoch: 2, detectedAfterFaultMs: 833, recoveredAfterFaultMs: undefined, remainderSamples: 0, redistributed: false }
    const out = Cli.renderResult({ ...completed, deaths: [killTiming, late] }).out
    expect(out).toContain("    2               8000     0           0       0             -            -         0.9420\n")
    expect(out).toContain(
      "  rank 1 after the run ended (supervisor): killed by terminate; detected 833.0 ms after the fault; 0 samples left uncommitted (the run stopped)\n"
    )
  })
})

describe("a resumed run", () => {
  const resumed: RunTypes.Resumed = {
    parent: { runId: "par3nt", runDir: "runs/par3nt" },
    epoch: 1,
    firstRound: 12,
    committedSamples: 3000,
    committed: [[0, 1000], [2000, 2000]],
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
      resumed: { ...resumed, committedSamples: 0, committed: [], state: "checkpoint", loadedFrom: "runs/par3nt/checkpoints/v0", notes: ["note one"] }
    }
    const out = Cli.renderResult(fromCheckpoint).out
    expect(out).not.toContain("spans runs")
    expect(out).toContain(
      "resumed: this run resumes run par3nt (runs/par3nt) in epoch 1: the epoch is trained from its start; " +
        "model from runs/par3nt/checkpoints/v0 (the last epoch checkpoint)\n  note one\n"
    )
  })

  it("its started line names the parent", () => {
    const started: RunTypes.RunEvent = {
      type: "started", ms: 0, runId: "ch1ld", runDir: "runs/ch1ld", worldSize: 3, epochs: 3, epochSamples: 8000, mode: "static", transport: "worker", resumed
    }
    expect(Cli.eventText(started)).toBe(
      "run ch1ld: 3 ranks as worker threads, 3 epochs of 8000 samples, static mode; writing runs/ch1ld; resumes run par3nt (runs/par3nt) in epoch 1: " +
        "3000 samples of it committed by run par3nt, the rest trained here; model from runs/par3nt/save/rank0 (the survivors' save)"
    )
  })

  it("report reads a resumed run's journal back with the spanning epoch marked", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cohort-resumed-"))
    try {
      const events: ReadonlyArray<RunTypes.RunEvent> = [
        { type: "started", ms: 0, runId: "ch1ld", runDir: dir, worldSize: 3, epochs: 2, epochSamples: 8000, mode: "static", transport: "worker", resumed },
        { type: "epoch", ms: 10, summary: summary(1), accuracy: undefined },
        { type: "ended", ms: 20, outcome: { ...completed.outcome, epochs: [summary(1)], deaths: [], failures: [] }, exitCode: 0 }
      ]
      writeFileSync(join(dir, "events.ndjson"), events.map((e) => `${JSON.stringify(e)}\n`).join(""))
      const result = await Cli.readRun(dir)
      expect(typeof result !== "string" && [result.resumed, result.epochs.map((e) => e.spansRuns)]).toEqual([resumed, [["par3nt", "ch1ld"]]])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("lineView", () => {
  it("prints timestamped lines and at most one progress line per rank per second", () => {
    let text = ""
    const view = Cli.lineView((line) => {
      text += line
    })
    const progress = (ms: number, rank: number, samplesDone: number): RunTypes.RunEvent => ({
      type: "progress",
      ms,
      rank,
      epoch: 0,
      samplesDone,
      samplesPerSecond: 312.4,
      state: "training"
    })
    for (
      const event of [
        eventsOf(completed)[0]!,
        progress(500, 0, 64),
        progress(900, 0, 96),
        progress(950, 1, 64),
        progress(1500, 0, 160),
        progress(1600, 0, 192),
        { type: "fault", ms: 12_345, rank: 2, fault: "kill" },
        { type: "alert", ms: 12_346, alert: { ...rankLost, count: 3 } },
        { type: "death", ms: 12_346, death: killTiming },
        { type: "decision", ms: 12_346, detail: "rank 2's 1200 samples go to ranks 0, 1, 3" },
        { type: "epoch", ms: 20_000, summary: completedEpochs[1]!, accuracy: undefined },
        { type: "eval", ms: 20_400, epoch: 1, rank: 3, accuracy: 0.93504, loss: 0.21 },
        { type: "ended", ms: 3_002, outcome: unrecoverable.outcome }
      ] satisfies ReadonlyArray<RunTypes.RunEvent>
    ) {
      view.onEvent(event)
    }
    view.stop()
    expect(text).toBe(
      [
        "[   0.0s] run abc123: 4 ranks as worker threads, 3 epochs of 8000 samples, static mode; writing runs/abc123",
        "[   0.5s] rank 0 epoch 0: 64 samples done, 312 samples/s, training",
        "[   0.9s] rank 1 epoch 0: 64 samples done, 312 samples/s, training",
        "[   1.5s] rank 0 epoch 0: 160 samples done, 312 samples/s, training",
        "[  12.3s] rank 2 killed (injected fault)",
        "[  12.3s] alert critical RankLost root/rank2: rank 2 lost: killed by terminate (3 times)",
        "[  12.3s] rank 2 lost (supervisor): killed by terminate; detected 1.3 ms after the fault; 1200 samples moved to the survivors 3.5 ms after the fault",
        "[  12.3s] decision: rank 2's 1200 samples go to ranks 0, 1, 3",
        "[  20.0s] epoch 1 done: 8000 samples committed, lost 0, duplicated 0, 1 death, test accuracy pending",
        "[  20.4s] epoch 1 test accuracy 0.9350 (eval on rank 3, loss 0.2100)",
        "[   3.0s] run ended: unrecoverable (FailureLimitReached): 1 failure reached the failure limit of 1",
        ""
      ].join("\n")
    )
  })
})

describe("barsView", () => {
  it("draws one bar per rank and prints other events above the bars", () => {
    let written = ""
    const stream = {
      isTTY: true,
      columns: 120,
      write: (chunk: string) => {
        written += chunk
        return true
      }
    } as unknown as NodeJS.WritableStream
    const view = Cli.barsView(stream)
    const [started] = eventsOf(completed)
    view.onEvent(started!)
    view.onEvent({ type: "progress", ms: 900, rank: 1, epoch: 0, samplesDone: 640, samplesPerSecond: 700.2, state: "training" })
    view.onEvent({ type: "death", ms: 12_346, death: killTiming })
    view.onEvent({ type: "ended", ms: 41_234, outcome: completed.outcome })
    view.stop()
    const plain = written.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "")
    expect(plain).toContain("[  12.3s] rank 2 lost (supervisor): killed by terminate;")
    expect(plain).toContain("rank 1 [")
    expect(plain).toContain("] 640/2000 samples | epoch 0 | 0 samples/s | done")
    expect(plain).toContain("[  41.2s] run ended: completed")
    expect(plain).toMatch(/rank 2 \[[^\]]*\] 0\/2000 samples \| epoch 0 \| 0 samples\/s \| dead/)
  })

  it("on a real terminal (xterm.js, headless) every log line reads whole, with no bar text after it, and every rank's bar, a dead one's too, is on the screen at the end", async () => {
    const terminal = new Terminal({ cols: 200, rows: 60, allowProposedApi: true, convertEol: true }) // a tty turns "\n" into "\r\n"
    let pending = Promise.resolve()
    const stream = {
      isTTY: true,
      columns: 200,
      rows: 60,
      write: (chunk: string) => {
        pending = pending.then(() => new Promise<void>((resolve) => terminal.write(chunk, resolve)))
        return true
      },
      on: () => stream,
      removeListener: () => stream
    } as unknown as NodeJS.WritableStream
    const view = Cli.barsView(stream)
    const [started] = eventsOf(completed)
    view.onEvent(started!)
    const lines: Array<RunTypes.RunEvent> = []
    for (let rank = 0; rank < 4; rank++) {
      view.onEvent({ type: "progress", ms: 900, rank, epoch: 0, samplesDone: 1500 + rank, samplesPerSecond: 700, state: "training" })
    }
    // Several short lines at once, as decisions come in a burst, over the longer bar rows.
    for (let i = 0; i < 3; i++) {
      const event: RunTypes.RunEvent = { type: "alert", ms: 1000 + i, alert: { ...rankLost, detail: `short ${i}` } }
      lines.push(event)
      view.onEvent(event)
    }
    await new Promise((resolve) => setTimeout(resolve, 150)) // cli-progress redraws on its own timer
    view.onEvent({ type: "death", ms: 12_346, death: killTiming })
    view.onEvent({ type: "ended", ms: 41_234, outcome: completed.outcome })
    view.stop()
    await pending
    const screen: Array<string> = []
    for (let row = 0; row < terminal.buffer.active.length; row++) screen.push(terminal.buffer.active.getLine(row)!.translateToString(true))
    for (const event of lines) expect(screen).toContain(`[${(event.ms / 1000).toFixed(1).padStart(6)}s] ${Cli.eventText(event)}`)
    expect(screen.filter((row) => row.startsWith("["))).toEqual(screen.filter((row) => /^\[ *\d+\.\ds\] [^\]]*$/.test(row)))
    const bars = screen.filter((row) => row.startsWith("rank "))
    expect(bars.map((row) => row.replace(/\[[^\]]*\]/, "[]"))).toEqual([
      "rank 0 [] 1500/2000 samples | epoch 0 | 0 samples/s | done",
      "rank 1 [] 1501/2000 samples | epoch 0 | 0 samples/s | done",
      "rank 2 [] 1502/2000 samples | epoch 0 | 0 samples/s | dead",
      "rank 3 [] 1503/2000 samples | epoch 0 | 0 samples/s | done"
    ])
    terminal.dispose()
  })
})

// ---------------------------------------------------------------------------------------------
// demo and run with a stand-in launcher
// ---------------------------------------------------------------------------------------------

describe("demo and run", () => {
  const fakeLaunch = (result: RunTypes.RunResult, seen: Array<RunTypes.RunOptions>): Cli.Launch => (options) => {
    seen.push(options)
    for (const event of eventsOf(result)) options.onEvent?.(event)
    return Promise.resolve(result)
  }

  it("demo runs the bundled trainer with the parsed options and prints the events, then the table", async () => {
    const seen: Array<RunTypes.RunOptions> = []
    const { code, out, err } = await runMain(["demo", "--seed", "7"], fakeLaunch(completed, seen))
    expect({ code, err }).toEqual({ code: 0, err: "" })
    expect(seen).toHaveLength(1)
    const options = seen[0]!
    expect(options.trainer).toMatch(/^file:\/\/.*\/src\/train\/mnist-trainer\.ts$/)
    expect(options.signal?.aborted).toBe(false)
    expect(options.stopSignal?.aborted).toBe(false)
    expect({ ...options, trainer: "", onEvent: undefined, onRankOutput: undefined, signal: undefined, stopSignal: undefined }).toEqual({
      trainer: "",
      worldSize: 4,
      epochs: 3,
      mode: "static",
      backend: "cpu",
      transport: "worker",
      kills: [{ rank: 2, atEpoch: 1, atFraction: 0.4 }],
      hangs: [],
      heartbeatTimeoutMs: 10_000,
      coordinatorTimeoutMs: 10_000,
      failureLimit: undefined,
      rolePolicy: "fastest",
      onRepeatedCrash: "stop",
      rankMemoryMb: 1024,
      interruptGraceMs: 30_000,
      seed: 7,
      outDir: "runs",
      onEvent: undefined,
      onRankOutput: undefined,
      signal: undefined,
      stopSignal: undefined
    })
    expect(out).toBe(
      [
        "[   0.0s] run abc123: 4 ranks as worker threads, 3 epochs of 8000 samples, static mode; writing runs/abc123",
        "[  12.3s] alert critical RankLost root/rank2: rank 2 lost: killed by terminate",
        "[  12.3s] rank 2 lost (supervisor): killed by terminate; detected 1.3 ms after the fault; 1200 samples moved to the survivors 3.5 ms after the fault",
        "[   9.0s] epoch 0 done: 8000 samples committed, lost 0, duplicated 0, 0 deaths, test accuracy 0.9105",
        "[  19.0s] epoch 1 done: 8000 samples committed, lost 0, duplicated 0, 1 death, test accuracy 0.9350",
        "[  29.0s] epoch 2 done: 8000 samples committed, lost 0, duplicated 0, 0 deaths, test accuracy 0.9420",
        "[  41.2s] run ended: completed",
        ""
      ].join("\n") + Cli.renderResult(completed).out
    )
  })

  it("run passes the trainer as an absolute path and exits 1 with one line when the run is unrecoverable", async () => {
    const seen: Array<RunTypes.RunOptions> = []
    const { code, out, err } = await runMain(
      ["run", "--trainer", `${scratch}/good-trainer.mjs`, "--failure-limit", "1", "--kill", "1@3"],
      fakeLaunch(unrecoverable, seen)
    )
    expect(seen.map((o) => [o.trainer, o.kills, o.failureLimit])).toEqual([
      [`${scratch}/good-trainer.mjs`, [{ rank: 1, atSeconds: 3 }], { absolute: 1 }]
    ])
    expect(code).toBe(1)
    expect(out.endsWith(Cli.renderResult(unrecoverable).out)).toBe(true)
    expect(err).toBe(`${Cli.renderResult(unrecoverable).err}\n`)
  })

  it("exits 4 when an audit failed", async () => {
    const { code, err } = await runMain(["demo", "--no-kill"], fakeLaunch(auditFailed, []))
    expect({ code, err }).toEqual({ code: 4, err: "cohort: audit failed: epoch 1 lost 5, duplicated 2\n" })
  })

  it("--json prints only the result as JSON on stdout and the events on stderr", async () => {
    const { code, out, err } = await runMain(["demo", "--json"], fakeLaunch(completed, []))
    expect(code).toBe(0)
    expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(completed)))
    expect(err.split("\n")[0]).toBe(
      "[   0.0s] run abc123: 4 ranks as worker threads, 3 epochs of 8000 samples, static mode; writing runs/abc123"
    )
  })

  it("--json sends what ranks print to stderr as [rank N] lines, never to stdout", async () => {
    const launch: Cli.Launch = (options) => {
      options.onRankOutput?.(1, "save to somewhere")
      return Promise.resolve(completed)
    }
    const { code, out, err } = await runMain(["demo", "--json"], launch)
    expect(code).toBe(0)
    expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(completed)))
    expect(err.split("\n")).toContain("[rank 1] save to somewhere")
  })

  it("exits 3 with one line when the launcher fails", async () => {
    const { code, out, err } = await runMain(["demo"], () => Promise.reject(new Error("worldSize: bad\nstack")))
    expect({ code, out, err }).toEqual({ code: 3, out: "", err: "cohort: the run failed: worldSize: bad\n" })
  })
})

// ---------------------------------------------------------------------------------------------
// report
// ---------------------------------------------------------------------------------------------

describe("report", () => {
  const writeRun = async (name: string, result: RunTypes.RunResult, files: { summary: boolean; events: boolean }) => {
    const dir = `${scratch}/${name}`
    await Files.mkdir(dir)
    if (files.summary) await Files.writeFile(`${dir}/summary.json`, `${JSON.stringify(result, null, 2)}\n`)
    if (files.events) {
      await Files.writeFile(`${dir}/events.ndjson`, eventsOf(result).map((e) => JSON.stringify(e)).join("\n") + "\n")
    }
    return dir
  }

  it("rebuilds the same result from a streamed journal: epoch lines without accuracy, evals on their own lines, ended with its exit code", () => {
    for (const result of [completed, unrecoverable, auditFailed, interrupted]) {
      const text = streamedEventsOf(result).map((e) => JSON.stringify(e)).join("\n") + "\n"
      const rebuilt = Cli.resultFromEvents(text)
      expect(rebuilt).toEqual(JSON.parse(JSON.stringify({ ...result, skippedFaults: [] })))
    }
  })

  it("reports an interrupted run: the outcome line says interrupted, one stderr line says where the run and its saves are, exit 143", async () => {
    const dir = await writeRun("run-interrupted", interrupted, { summary: true, events: false })
    const { code, out, err } = await runMain(["report", dir])
    expect(code).toBe(143)
    expect(out.split("\n").filter((line) => line.includes("interrupted by"))).toEqual([
      "outcome: interrupted by SIGTERM after 0 completed epochs in 3.5 s; failures: none; final test accuracy -; every audit clean"
    ])
    expect(out).toContain("uncommitted in epoch 0: 5600 samples in 4 ranges: [600, 2000), [2600, 4000), [4600, 6000), [6600, 8000)\n")
    expect(err).toBe(
      `cohort: run interrupted by SIGTERM: run in ${dir}; ranks 0, 1, 3 saved under ${dir}/save; rank 2 did not finish its save; ` +
        `the epoch's uncommitted ranges are in ${dir}/summary.json; resume with: cohort resume ${dir}\n`
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
    for (const [name, result] of [["events-completed", completed], ["events-stopped", unrecoverable], ["events-audit", auditFailed]] as const) {
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
    const atFormation = `${scratch}/failed-formation`
    await Files.mkdir(atFormation)
    await Files.writeFile(`${atFormation}/events.ndjson`, `${JSON.stringify(started)}\n${JSON.stringify(failed)}\n`)
    expect(await runMain(["report", atFormation])).toEqual({
      code: 3,
      out: `no epoch finished\noutcome: failed at formation (2.5 s into the run): nothing was trained\nrun directory: ${atFormation}\n`,
      err: "cohort: the run failed at formation: rank 0 did not join within 2000 ms; nothing was trained: there is nothing to resume\n"
    })
    const later = `${scratch}/failed-later`
    await Files.mkdir(later)
    await Files.writeFile(`${later}/events.ndjson`, `${JSON.stringify(started)}\n${JSON.stringify({ ...failed, stage: "run", reason: "boom", formed: true })}\n`)
    const report = await runMain(["report", later])
    expect([report.code, report.err]).toEqual([3, `cohort: the run failed: run: boom; if it saved a checkpoint, resume it from there with: cohort resume ${later}\n`])
  })

  it("--json prints the result read", async () => {
    const dir = await writeRun("run-json", unrecoverable, { summary: true, events: false })
    const { code, out } = await runMain(["report", "--json", `${dir}/`])
    expect(code).toBe(1)
    expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(unrecoverable)))
  })

  it("says which line of events.ndjson is broken, and when the run did not finish", async () => {
    const broken = `${scratch}/broken-events`
    await Files.mkdir(broken)
    await Files.writeFile(`${broken}/events.ndjson`, `${JSON.stringify(eventsOf(completed)[0])}\n{not json\n`)
    expect(await runMain(["report", broken])).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${broken}/events.ndjson line 2 is not JSON\n`
    })
    const unfinished = `${scratch}/unfinished`
    await Files.mkdir(unfinished)
    await Files.writeFile(`${unfinished}/events.ndjson`, `${JSON.stringify(eventsOf(completed)[0])}\n`)
    expect(await runMain(["report", unfinished])).toEqual({
      code: 2,
      out: [
        "no epoch finished",
        "outcome: unknown: the journal ends after line 1 (0.0 s into the run), before the run ended; 0 epochs finished; deaths so far: none; last test accuracy -; every audit read clean",
        `run directory: ${unfinished}`,
        ""
      ].join("\n"),
      err: `cohort: warning: ${unfinished}/events.ndjson ends after line 1: the report shows the run as far as it was read; its outcome is unknown; ` +
        `if its coordinator's process died, resume it from its last checkpoint with: cohort resume ${unfinished}\n`
    })
  })

  it("refuses a summary.json that is not a run summary", async () => {
    const dir = `${scratch}/bad-summary`
    await Files.mkdir(dir)
    await Files.writeFile(`${dir}/summary.json`, `{"runId": 3}\n`)
    expect(await runMain(["report", dir])).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${dir}/summary.json is not a Cohort run summary: runId: Expected string\n`
    })
  })

  const writeSummary = async (name: string, value: unknown): Promise<string> => {
    const dir = `${scratch}/${name}`
    await Files.mkdir(dir)
    await Files.writeFile(`${dir}/summary.json`, JSON.stringify(value))
    return dir
  }

  const badSummaries: ReadonlyArray<readonly [string, unknown, string]> = [
    ["an epoch without fields", { ...completed, epochs: [{}] }, "epochs[0].epoch: Missing key"],
    ["finalAccuracy null", { ...completed, finalAccuracy: null }, "finalAccuracy: Expected number | undefined"],
    ["an alert that is null", { ...completed, alerts: [null] }, "alerts[0]: Expected object"],
    ["a death with a negative rank", { ...completed, deaths: [{ ...killTiming, rank: -1 }] }, "deaths[0].rank: Expected a value greater than or equal to 0"],
    ["an unknown outcome status", { ...completed, outcome: { ...completed.outcome, status: "fine" } }, `outcome.status: Expected "completed" | "unrecoverable" | "interrupted"`]
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
    const dir = `${scratch}/ended-without-outcome`
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
    const dir = `${scratch}/summary-passwd-like`
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
      const dir = `${scratch}/${name}`
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
    const events = `${scratch}/hostile-events`
    await Files.mkdir(events)
    await Files.writeFile(`${events}/events.ndjson`, eventsOf(hostile).map((e) => JSON.stringify(e)).join("\n") + "\n")
    const fromEvents = await runMain(["report", events])
    expect(fromEvents.out).toContain("  critical RankLost root/rank2: rank 2 lost[2J[H outcome: every audit clean\n")
    expect(fromEvents.out.replaceAll("\n", "")).not.toMatch(/[\p{Cc}\u202e]/u)
  })

  it("a journal cut in the epoch a rank died in places the death in that epoch, not after the end", async () => {
    const dir = `${scratch}/cut-after-death`
    await Files.mkdir(dir)
    const events = eventsOf(completed)
    const death = events.findIndex((e) => e.type === "death")
    const lines = events.slice(0, death + 1).map((e) => JSON.stringify(e))
    await Files.writeFile(`${dir}/events.ndjson`, lines.join("\n") + "\n{\"type\":\"ep")
    const { code, out } = await runMain(["report", dir])
    expect(code).toBe(2)
    expect(out).toContain("  rank 2 in epoch 1 (supervisor): killed by terminate;")
    expect(out).not.toContain("after the run ended")
  })

  it("reads every whole line of a journal cut mid-line, warns where it was cut, and reports what was read, exit 2", async () => {
    const dir = `${scratch}/cut-journal`
    await Files.mkdir(dir)
    const text = eventsOf(completed).map((e) => JSON.stringify(e)).join("\n") + "\n"
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
    expect(JSON.parse(json.out)).toMatchObject({ runId: "abc123", journal: `${dir}/events.ndjson`, cut: "was cut in line 7", durationMs: 29_000 })
  })

  it("reads --rank-memory-mb 0 as no limit", () => {
    expect(Cli.parse(["demo", "--rank-memory-mb", "0"])).toMatchObject({ options: { rankMemoryMb: 0 } })
  })

  const stack = "Error: trainBatch always fails\n    at Object.trainBatch (file:///t.ts:9:13)\n    at run (rank.ts:1:1)"
  const crashTiming = (rank: number): RunTypes.DeathTiming => ({
    ...stoppedTiming,
    rank,
    cause: "crashed: trainBatch always fails",
    stack,
    faultMs: undefined,
    detectedAfterFaultMs: undefined,
    recoveredAfterFaultMs: undefined
  })

  it("a TrainerFault stops with one line naming the error on stderr first, then its stack, once", () => {
    const stopped: RunTypes.RunResult = {
      ...unrecoverable,
      outcome: {
        ...unrecoverable.outcome,
        reason: "TrainerFault",
        detail: "the trainer failed the same way on ranks 1 and 0: trainBatch always fails",
        failures: [0, 1],
        exits: [2],
        repeatedCrash: { ranks: [1, 0], error: "trainBatch always fails", stack }
      },
      deaths: [crashTiming(1), crashTiming(0)],
      saves: { saved: [2], notSaved: [] },
      skippedFaults: [{ rank: 2, fault: "kill", spec: { rank: 2, atSeconds: 3 }, reason: "the run ended after 0.1 s of training" }]
    }
    expect(Cli.renderResult(stopped).err).toBe(
      [
        "cohort: run stopped: TrainerFault: the trainer failed the same way on ranks 1 and 0: trainBatch always fails; rank 2 saved under runs/zz9/save; resume with: cohort resume runs/zz9",
        "Error: trainBatch always fails",
        "    at Object.trainBatch (file:///t.ts:9:13)",
        "    at run (rank.ts:1:1)",
        "cohort: warning: --kill 2@3 did not happen: the run ended after 0.1 s of training"
      ].join("\n")
    )
  })

  it("a crash that did not stop the run is shown once too, as a warning with its stack", () => {
    expect(Cli.renderResult({ ...completed, deaths: [killTiming, crashTiming(3)] }).err).toBe(
      ["cohort: warning: rank 3 crashed: trainBatch always fails", stack].join("\n")
    )
    const repeated = { ...completed, outcome: { ...completed.outcome, repeatedCrash: { ranks: [3, 1] as const, error: "trainBatch always fails", stack } } }
    expect(Cli.renderResult(repeated).err).toBe(
      ["cohort: warning: the trainer failed the same way on ranks 3 and 1: trainBatch always fails", stack].join("\n")
    )
  })

  it("warns about requested faults that never happened", () => {
    const skipped: RunTypes.SkippedFault = { rank: 1, fault: "kill", spec: { rank: 1, atSeconds: 3 }, reason: "the run ended after 2.1 s of training" }
    expect(Cli.renderResult({ ...completed, skippedFaults: [skipped] }).err).toBe(
      "cohort: warning: --kill 1@3 did not happen: the run ended after 2.1 s of training"
    )
  })
})

// ---------------------------------------------------------------------------------------------
// the real command, as a child process
// ---------------------------------------------------------------------------------------------

/** Runs `bin/cohort.mjs` with `args` on this runtime in the repository folder; stdout and stderr piped. */
const runCli = (args: ReadonlyArray<string>) =>
  new Promise<{ readonly code: number | null; readonly out: string; readonly err: string }>((resolve, reject) => {
    const root = fileURLToPath(new URL("..", import.meta.url))
    const bin = fileURLToPath(new URL("../bin/cohort.mjs", import.meta.url))
    const child = spawn(process.execPath, [...(Runtime.detect() === "deno" ? ["run", "-A"] : []), bin, ...args], { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    child.stdout.on("data", (chunk: Uint8Array) => (out += new TextDecoder().decode(chunk)))
    child.stderr.on("data", (chunk: Uint8Array) => (err += new TextDecoder().decode(chunk)))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, out, err }))
  })

describe(`cohort run --json as a real process (${Runtime.detect()}): stdout is exactly one JSON document`, () => {
  for (const transport of ["worker", "process"] as const) {
    it(`with the README's line trainer, which prints in save(), on ${transport === "worker" ? "worker threads" : "child processes"}`, async () => {
      const { code, out, err } = await runCli([
        "run", "--trainer", "examples/line-trainer.ts", "--json", "--world-size", "2", "--epochs", "1",
        "--transport", transport, "--out", `${scratch}/real-${transport}`
      ])
      const result = JSON.parse(out) as RunTypes.RunResult
      expect([code, result.exitCode, result.outcome.status, result.deaths]).toEqual([0, 0, "completed", []])
      // The trainer's line went to stderr, prefixed with its rank.
      expect(err).toMatch(/^\[rank [01]\] save to \/.*\/checkpoints\/v0: slope [-0-9.e]+, intercept [-0-9.e]+$/m)
    }, 120_000)
  }

  it("with a trainer module that prints while it loads, in the command's process and in every worker", async () => {
    const example = fileURLToPath(new URL("../examples/line-trainer.ts", import.meta.url))
    // `.mts`: outside the repository no package.json says "type": "module", and tsx would load a `.ts` as CommonJS.
    const trainer = `${scratch}/loud-trainer.mts`
    await Files.writeFile(trainer, `export * from ${JSON.stringify(example)}\nconsole.log("loading the line trainer")\n`)
    const { code, out, err } = await runCli(["run", "--trainer", trainer, "--json", "--world-size", "2", "--epochs", "1", "--out", `${scratch}/real-loud`])
    expect([code, (JSON.parse(out) as RunTypes.RunResult).exitCode]).toEqual([0, 0])
    const lines = err.split("\n")
    for (const rank of [0, 1]) expect(lines).toContain(`[rank ${rank}] loading the line trainer`)
    // The command itself imports the trainer to check it: its print goes to stderr unprefixed.
    expect(lines).toContain("loading the line trainer")
  }, 120_000)
})
