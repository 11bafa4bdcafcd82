import { describe, expect, it } from "vitest"
import * as Model from "../../src/dashboard/model.ts"

const started = {
  type: "started",
  ms: 0,
  runId: "r1",
  runDir: "runs/r1",
  worldSize: 3,
  epochs: 2,
  epochSamples: 90,
  mode: "static",
  transport: "worker"
}
const death = {
  type: "death",
  ms: 1510,
  death: {
    rank: 2,
    epoch: 0,
    detector: "supervisor",
    cause: "killed by terminate",
    faultMs: 1500,
    declaredMs: 1510,
    recoveredMs: 1530,
    detectedAfterFaultMs: 10,
    recoveredAfterFaultMs: 30,
    remainderSamples: 20,
    redistributed: true
  }
}
const summary = (epoch: number) => ({
  epoch,
  epochSamples: 90,
  samplesCommitted: 90,
  lost: 0,
  duplicated: 0,
  deaths: epoch === 0 ? [{}] : [],
  exits: [],
  startedAtMs: 0,
  endedAtMs: 1
})

describe("dashboard model: the run page folded from journal events", () => {
  it("folds a run: rows, rounds with their times, a death's three marks, audits with their evals, alerts and the end", () => {
    const model = Model.fromEvents([
      started,
      { type: "formed", ms: 100, worldSize: 3 },
      { type: "progress", ms: 600, rank: 0, epoch: 0, samplesDone: 32, samplesPerSecond: 64, state: "training" },
      { type: "progress", ms: 700, rank: 1, epoch: 0, samplesDone: 64, samplesPerSecond: 100, state: "waiting" },
      { type: "round", ms: 1000, epoch: 0, round: 0, contributors: 3, openMs: 40, loss: 2.25, receivedBytes: 3000, sentBytes: 2700 },
      { type: "fault", ms: 1500, rank: 2, fault: "kill" },
      death,
      {
        type: "alert",
        ms: 1510,
        alert: { ts: 5, severity: "critical", path: "root/rank2", class: "RankLost", detail: "rank 2 lost", count: 1 }
      },
      { type: "round", ms: 2200, epoch: 0, round: 1, contributors: 2, openMs: 0, linkSentBytes: 196_896, linkReceivedBytes: 196_896 },
      { type: "epoch", ms: 2200, summary: summary(0) },
      { type: "eval", ms: 2300, epoch: 0, rank: 0, accuracy: 0.9, loss: 0.4 },
      { type: "decision", ms: 2400, detail: "ShutdownWithSave to every survivor: interrupted" },
      { type: "ended", ms: 2600, outcome: { status: "interrupted", reason: "GracefulShutdown", detail: "stopped" }, exitCode: 130 }
    ])
    expect([
      model.runId,
      model.worldSize,
      model.epochs,
      model.epochSamples,
      model.mode,
      model.transport,
      model.formedMs,
      model.nowMs
    ]).toEqual(["r1", 3, 2, 90, "static", "worker", 100, 2600])
    expect(model.ranks.map((r) => [r.rank, r.status, r.detector, r.epoch, r.samplesDone, r.samplesPerSecond, r.lastFrameMs])).toEqual([
      [0, "exited", undefined, 0, 32, 64, 600],
      [1, "exited", undefined, 0, 64, 100, 700],
      [2, "dead", "supervisor", undefined, 0, 0, undefined]
    ])
    expect(model.rounds).toEqual([
      { ms: 1000, epoch: 0, round: 0, contributors: 3, openMs: 40, roundMs: 900, loss: 2.25, receivedBytes: 3000, sentBytes: 2700 },
      {
        ms: 2200,
        epoch: 0,
        round: 1,
        contributors: 2,
        openMs: 0,
        roundMs: 1200,
        loss: undefined,
        linkSentBytes: 196_896,
        linkReceivedBytes: 196_896
      }
    ])
    expect(model.deaths).toEqual([
      {
        rank: 2,
        epoch: 0,
        detector: "supervisor",
        cause: "killed by terminate",
        faultMs: 1500,
        declaredMs: 1510,
        recoveredMs: 1530,
        detectedAfterFaultMs: 10,
        recoveredAfterDeclaredMs: 20,
        remainderSamples: 20
      }
    ])
    expect(model.epochRows).toEqual([
      { epoch: 0, ms: 2200, epochSamples: 90, samplesCommitted: 90, lost: 0, duplicated: 0, deaths: 1, accuracy: 0.9, loss: 0.4 }
    ])
    expect(model.alerts).toEqual([
      { ms: 1510, severity: "critical", path: "root/rank2", class: "RankLost", detail: "rank 2 lost", count: 1 }
    ])
    expect(model.faults).toEqual([{ ms: 1500, rank: 2, fault: "kill" }])
    expect(model.ended).toEqual({ ms: 2600, status: "interrupted", reason: "GracefulShutdown", detail: "stopped", exitCode: 130 })
  })

  it("shows ranks joining before formation, training after, saving once asked to save, and a dead rank's late progress not at all", () => {
    const model = Model.fromEvents([started])
    expect(model.ranks.map((r) => r.status)).toEqual(["joining", "joining", "joining"])
    Model.apply(model, { type: "formed", ms: 100, worldSize: 3 })
    expect(model.ranks.map((r) => r.status)).toEqual(["training", "training", "training"])
    Model.apply(model, death)
    Model.apply(model, { type: "progress", ms: 1600, rank: 2, epoch: 0, samplesDone: 99, samplesPerSecond: 9, state: "training" })
    Model.apply(model, { type: "decision", ms: 1700, detail: "ShutdownWithSave to every survivor: FailureLimitReached" })
    Model.apply(model, { type: "progress", ms: 1800, rank: 0, epoch: 0, samplesDone: 40, samplesPerSecond: 9, state: "training" })
    expect(model.ranks.map((r) => [r.status, r.samplesDone])).toEqual([
      ["saving", 40],
      ["saving", 0],
      ["dead", 0]
    ])
  })

  it("adds a row for a rank welcomed into the running run (docs/growing.md), after any vacant index below it; its progress shows", () => {
    const model = Model.fromEvents([started, { type: "formed", ms: 100, worldSize: 3 }])
    Model.apply(model, {
      type: "welcomed",
      ms: 200,
      rank: 4,
      epoch: 0,
      firstRound: 2,
      samples: 10,
      given: "the tail half of rank 0's span"
    })
    Model.apply(model, { type: "progress", ms: 300, rank: 4, epoch: 0, samplesDone: 8, samplesPerSecond: 80, state: "training" })
    Model.apply(model, { type: "welcomed", ms: 400, rank: 1e9, epoch: 0, firstRound: 2, samples: 0, given: "" }) // no row that far
    expect(model.ranks.map((r) => [r.rank, r.status, r.samplesDone])).toEqual([
      [0, "training", 0],
      [1, "training", 0],
      [2, "training", 0],
      [3, "joining", 0],
      [4, "training", 8]
    ])
  })

  it("takes a dead or exited rank's progress from before its end, sent after it (a live page opened late), without bringing it back", () => {
    const model = Model.fromEvents([started, { type: "formed", ms: 100, worldSize: 3 }, death])
    Model.apply(model, { type: "ended", ms: 2600, outcome: { status: "completed", detail: "done" }, exitCode: 0 })
    Model.apply(model, { type: "progress", ms: 1400, rank: 2, epoch: 0, samplesDone: 24, samplesPerSecond: 9, state: "training" })
    Model.apply(model, { type: "progress", ms: 2500, rank: 0, epoch: 1, samplesDone: 30, samplesPerSecond: 9, state: "training" })
    expect(model.ranks.map((r) => [r.status, r.epoch, r.samplesDone, r.samplesPerSecond, r.lastFrameMs])).toEqual([
      ["exited", 1, 30, 0, 2500],
      ["exited", undefined, 0, 0, undefined],
      ["dead", 0, 24, 0, 1400]
    ])
  })

  it("a death that moved nothing has no third mark; one with no injected fault has no first", () => {
    const model = Model.fromEvents([
      started,
      {
        type: "death",
        ms: 900,
        death: {
          ...death.death,
          rank: 0,
          faultMs: undefined,
          detectedAfterFaultMs: undefined,
          declaredMs: 900,
          recoveredMs: 900,
          redistributed: false
        }
      }
    ])
    expect(
      model.deaths.map((d) => [d.rank, d.faultMs, d.declaredMs, d.recoveredMs, d.detectedAfterFaultMs, d.recoveredAfterDeclaredMs])
    ).toEqual([[0, undefined, 900, undefined, undefined, undefined]])
  })

  it("skips what is not an event it shows, and ranks out of range", () => {
    const model = Model.fromEvents([
      started,
      null,
      7,
      [],
      { type: "mystery", ms: 50 },
      { type: "progress", ms: 60, rank: 9, epoch: 0, samplesDone: 1 },
      { type: "round", ms: 70 }
    ])
    expect([model.nowMs, model.rounds.length, model.ranks.map((r) => r.lastFrameMs)]).toEqual([70, 0, [undefined, undefined, undefined]])
  })

  it("keeps journal events the page shows and leaves out routine decisions", () => {
    expect(
      [
        { type: "round", ms: 1 },
        { type: "decision", ms: 1, detail: "3 × ExtendPartition: remainder of rank 2" },
        { type: "decision", ms: 1, detail: "ShutdownWithSave to every survivor: x" },
        { type: "listening", ms: 1, url: "ws://x" },
        "round"
      ].map(Model.isShown)
    ).toEqual([true, false, true, false, false])
  })
})
