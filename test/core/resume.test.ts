/**
 * A resumed run (docs/resume.md): the core begins at the parent's epoch with the parent's committed
 * ranges in that epoch's audit log, plans only the rest, and numbers rounds on from the parent's.
 */
import { describe, expect, it } from "vitest"
import * as Coordinator from "../../src/core/coordinator.ts"
import { frame, make, params, ranges, tags } from "./harness.ts"

describe("Coordinator.start with a resume point", () => {
  it("static: the uncommitted ranges, end to end, are split equally over the survivors (StartEpoch first, ExtendPartition for a second range)", () => {
    const s = make({ worldSize: 3, epochSamples: 100, epochs: 2 })
    const cmds = Coordinator.start(s, 0, { resume: { epoch: 1, firstRound: 4, committed: [[10, 80]] } })
    expect(tags(cmds)).toEqual(["Broadcast:SetRoles", "Send:StartEpoch", "Send:StartEpoch", "Send:StartEpoch", "Send:ExtendPartition"])
    // Free: [0, 10) and [90, 100), 20 samples: parts of 7, 7 and 6.
    expect(ranges(s, cmds, "StartEpoch")).toEqual([
      [0, 0, 7],
      [1, 7, 3],
      [2, 94, 6]
    ])
    expect(ranges(s, cmds, "ExtendPartition")).toEqual([[1, 90, 4]])
    expect(s.epoch).toBe(1)
    params(s, 0, 1, 7)
    params(s, 1, 1, 7)
    const closed = params(s, 2, 1, 6)
    expect(closed.find((c) => c._tag === "AverageRound")).toMatchObject({ epoch: 1, round: 4, contributors: [0, 1, 2] })
    const ended = closed.find((c) => c._tag === "EpochEnded")
    // The audit covers both runs: the parent's 80 samples and this run's 20.
    expect(ended?._tag === "EpochEnded" && ended.summary).toMatchObject({ epoch: 1, samplesCommitted: 100, lost: 0, duplicated: 0 })
    expect(s.outcome).toMatchObject({ status: "completed", epochsCompleted: 2 })
    expect(s.outcome?.epochs.map((e) => e.epoch)).toEqual([1])
  })

  it("static: the epochs after the resumed one are planned as usual", () => {
    const s = make({ worldSize: 2, epochSamples: 10, epochs: 3 })
    Coordinator.start(s, 0, { resume: { epoch: 1, firstRound: 9, committed: [[0, 4]] } })
    params(s, 0, 1, 3)
    const next = params(s, 1, 1, 3)
    expect(ranges(s, next, "StartEpoch")).toEqual([
      [0, 0, 5],
      [1, 5, 5]
    ])
    expect(s.epoch).toBe(2)
    expect(s.round).toBe(10)
  })

  it("progressive: the uncommitted ranges are served as chunks", () => {
    const s = make({ worldSize: 2, epochSamples: 100, epochs: 1, mode: "progressive", chunkSamples: 8, chunksInflightMax: 1 })
    const cmds = Coordinator.start(s, 0, { resume: { epoch: 0, firstRound: 0, committed: [[0, 90]] } })
    expect(ranges(s, cmds, "AssignChunk")).toEqual([
      [0, 90, 8],
      [1, 98, 2]
    ])
    frame(s, 1, 1, { _tag: "ChunkDone", epoch: 0, offset: 98, size: 2 })
    const done = frame(s, 0, 1, { _tag: "ChunkDone", epoch: 0, offset: 90, size: 8 })
    expect(tags(done)).toEqual([])
    params(s, 0, 2, 0)
    const closed = params(s, 1, 2, 0)
    const ended = closed.find((c) => c._tag === "EpochEnded")
    expect(ended?._tag === "EpochEnded" && ended.summary).toMatchObject({ epoch: 0, samplesCommitted: 100, lost: 0, duplicated: 0 })
  })

  it("an epoch the parent committed in full ends at start, and the next one is planned", () => {
    const s = make({ worldSize: 2, epochSamples: 10, epochs: 2, checkpointEveryEpochs: 0, evalEveryEpochs: 0 })
    const cmds = Coordinator.start(s, 0, { resume: { epoch: 0, firstRound: 3, committed: [[0, 10]] } })
    expect(tags(cmds)).toEqual([
      "Broadcast:SetRoles",
      "Send:StartEpoch",
      "Send:StartEpoch",
      "EpochEnded",
      "EpochModel",
      "Send:StartEpoch",
      "Send:StartEpoch"
    ])
    expect(ranges(s, cmds, "StartEpoch")).toEqual([
      [0, 0, 0],
      [1, 0, 0],
      [0, 0, 5],
      [1, 5, 5]
    ])
    expect(s.summaries[0]).toMatchObject({ epoch: 0, samplesCommitted: 10, lost: 0, duplicated: 0 })
  })

  it("a resume point outside the run is a BadResume alert, and the run starts at epoch 0", () => {
    const s = make({ worldSize: 2, epochSamples: 10, epochs: 2 })
    const cmds = Coordinator.start(s, 0, { resume: { epoch: 2, firstRound: 0, committed: [] } })
    const alert = cmds.find((c) => c._tag === "Alert")
    expect(alert?._tag === "Alert" && [alert.alert.class, alert.alert.severity, alert.alert.detail]).toEqual([
      "BadResume",
      "critical",
      "resume epoch 2 is outside [0, 2): the run starts at epoch 0"
    ])
    expect(s.epoch).toBe(0)
    expect(ranges(s, cmds, "StartEpoch")).toEqual([
      [0, 0, 5],
      [1, 5, 5]
    ])
  })
})

describe("Coordinator.normalizeResume", () => {
  const config = () => make({ worldSize: 2, epochSamples: 100, epochs: 3 }).config

  it("sorts, clips to the epoch and merges overlapping or adjacent ranges", () => {
    expect(
      Coordinator.normalizeResume(config(), {
        epoch: 1,
        firstRound: 2,
        committed: [
          [50, 10],
          [0, 5],
          [3, 4],
          [55, 60],
          [5, 1]
        ]
      })
    ).toEqual({
      epoch: 1,
      firstRound: 2,
      committed: [
        [0, 7],
        [50, 50]
      ]
    })
  })

  it.each([
    [{ epoch: -1, firstRound: 0, committed: [] }, "resume epoch -1 is outside [0, 3)"],
    [{ epoch: 3, firstRound: 0, committed: [] }, "resume epoch 3 is outside [0, 3)"],
    [{ epoch: 0.5, firstRound: 0, committed: [] }, "resume epoch 0.5 is outside [0, 3)"],
    [{ epoch: 0, firstRound: -1, committed: [] }, "resume firstRound -1 must be an integer >= 0"],
    [{ epoch: 0, firstRound: 0, committed: [[1, -2]] }, "committed range [1, -2] must be two integers >= 0"],
    [
      { epoch: 0, firstRound: 0, committed: [[1]] as unknown as Array<readonly [number, number]> },
      "committed range [1] must be two integers >= 0"
    ]
  ])("refuses %j: %s", (resume, reason) => {
    expect(Coordinator.normalizeResume(config(), resume as Coordinator.Resume)).toBe(reason)
  })
})

describe("Coordinator.start for a ring run taken over (docs/recovery.md)", () => {
  it("forms its ring in the resume's generation, and asks a member for an owed epoch's model before any ring round closes", () => {
    const s = make({ worldSize: 2, epochSamples: 10, epochs: 3, backend: "ring" })
    const cmds = Coordinator.start(s, 0, {
      resume: { epoch: 1, firstRound: 5, committed: [], generation: 7 },
      owedModel: { epoch: 0, round: 4 }
    })
    const rings = cmds.flatMap((c) => (c._tag === "Send" && c.message._tag === "FormRing" ? [c.message.generation] : []))
    expect(rings).toEqual([7, 7])
    expect(cmds.find((c) => c._tag === "Send" && c.message._tag === "RequestParams")).toMatchObject({
      to: 0,
      message: { _tag: "RequestParams", round: 4 }
    })
    // The member's answer is the epoch's model, for the shell to write before the epoch's audit line.
    const answered = frame(s, 0, 1, { _tag: "Params", epoch: 1, round: 4, samplesDone: 0, params: new Float32Array(3).fill(1) })
    expect(answered.find((c) => c._tag === "EpochModel")).toMatchObject({ epoch: 0, round: 4, from: 0 })
  })

  it("a generation that is not an integer >= 0 is refused with the rest of the resume point", () => {
    const s = make({ worldSize: 2, epochSamples: 10, epochs: 3, backend: "ring" })
    expect(Coordinator.normalizeResume(s.config, { epoch: 0, firstRound: 0, committed: [], generation: -1 })).toBe(
      "resume generation -1 must be an integer >= 0"
    )
  })
})
