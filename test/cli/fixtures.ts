// Shared by the test/cli/*.test.ts files of the command line (split from test/cli.test.ts): a
// captured Io, main with a stand-in launcher, hand-built run results and their journals, and a
// scratch folder per test file.
import { rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { afterAll, beforeAll } from "vitest"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as Cli from "../../src/cli/index.ts"
import type * as Alerts from "../../src/core/alerts.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Files from "../../src/platform/files.ts"

export interface Captured {
  readonly io: Cli.Io
  readonly out: () => string
  readonly err: () => string
}

export const capture = (): Captured => {
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

export const noLaunch: Cli.Launch = () => Promise.reject(new Error("the launcher must not be called"))

export const runMain = async (argv: ReadonlyArray<string>, launch: Cli.Launch = noLaunch) => {
  const captured = capture()
  const code = await Cli.main(argv, captured.io, launch)
  return { code, out: captured.out(), err: captured.err() }
}

export const counters: Coordinator.Counters = Coordinator.zeroCounters()

export const coreDeath = (rank: number, epoch: number): Coordinator.Death => ({
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

export const summary = (
  epoch: number,
  deaths: ReadonlyArray<Coordinator.Death> = [],
  lost = 0,
  duplicated = 0
): Coordinator.EpochSummary => ({
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

export const killTiming: RunTypes.DeathTiming = {
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

export const rankLost: Alerts.Alert = {
  ts: 12_346,
  severity: "critical",
  path: "root/rank2",
  class: "RankLost",
  detail: "rank 2 lost: killed by terminate",
  count: 1
}

export const completedEpochs = [summary(0), summary(1, [coreDeath(2, 1)]), summary(2)]

export const completed: RunTypes.RunResult = {
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

export const stoppedTiming: RunTypes.DeathTiming = {
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

export const unrecoverable: RunTypes.RunResult = {
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
    uncommitted: {
      epoch: 0,
      ranges: [
        [600, 1400],
        [2600, 1400],
        [4600, 1400],
        [6600, 1400]
      ]
    },
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

export const interrupted: RunTypes.RunResult = {
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

export const auditFailed: RunTypes.RunResult = {
  ...completed,
  deaths: [],
  alerts: [],
  outcome: { ...completed.outcome, failures: [] },
  epochs: [
    { ...summary(0), accuracy: 0.9 },
    { ...summary(1, [], 5, 2), accuracy: 0.91 },
    { ...summary(2), accuracy: 0.92 }
  ],
  finalAccuracy: 0.92,
  exitCode: 4
}

export const eventsOf = (result: RunTypes.RunResult): ReadonlyArray<RunTypes.RunEvent> => [
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
  ...result.epochs.map(
    (e): RunTypes.RunEvent => ({
      type: "epoch",
      ms: e.endedAtMs,
      summary: { ...e, accuracy: undefined } as Coordinator.EpochSummary,
      accuracy: e.accuracy
    })
  ),
  { type: "ended", ms: result.durationMs, outcome: result.outcome, saves: result.saves }
]

/**
 * The journal as the launcher streams it: each epoch line written before its eval (no accuracy),
 * the eval on a line of its own, and `ended` with the run's exit code.
 */
export const streamedEventsOf = (result: RunTypes.RunResult): ReadonlyArray<RunTypes.RunEvent> =>
  eventsOf(result).flatMap((event): ReadonlyArray<RunTypes.RunEvent> => {
    if (event.type === "ended") return [{ ...event, exitCode: result.exitCode }]
    if (event.type !== "epoch" || event.accuracy === undefined) return [event]
    return [
      { ...event, accuracy: undefined },
      { type: "eval", ms: event.ms + 1, epoch: event.summary.epoch, rank: 0, accuracy: event.accuracy, loss: 0.5 }
    ]
  })

/**
 * A scratch folder for the calling test file, made before its tests with three trainer modules
 * (good-trainer.mjs, no-factory.mjs, broken-trainer.mjs) and removed after them; the returned
 * function gives its path once the tests run.
 */
export const useScratch = (): (() => string) => {
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
  return () => scratch
}
