/**
 * A run rebuilt from its record after its coordinator was lost (`Recovery.fold`): the point is
 * the first epoch without an audit, its committed ranges and the last round; a core started from
 * it completes the run with every epoch audited exactly once, whatever prefix of the record
 * survived.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import type * as Coordinator from "../../src/core/coordinator.ts"
import * as Recovery from "../../src/core/recovery.ts"
import * as Simulation from "./simulation.ts"

const SEED = 20261203

describe("Recovery.fold", () => {
  it("an empty record is the run's start: epoch 0, nothing committed, no round", () => {
    expect(Recovery.fold(2, 10, [])).toEqual({
      epoch: 0,
      lastRound: -1,
      committed: [],
      committedSamples: 0,
      unaudited: [],
      gone: [],
      generation: -1,
      ringCommitted: undefined
    })
  })

  it("the point is the first epoch without an audit, with its commits merged, in any order of the entries", () => {
    const entries: Array<Recovery.Entry> = [
      { _tag: "Commit", epoch: 1, round: 5, ranges: [[4, 2]] },
      { _tag: "Gone", rank: 2 },
      { _tag: "Commit", epoch: 0, round: 1, ranges: [[0, 10]] },
      { _tag: "Audited", epoch: 0 },
      {
        _tag: "Commit",
        epoch: 1,
        round: 4,
        ranges: [
          [0, 4],
          [8, 3]
        ]
      }
    ]
    expect(Recovery.fold(3, 10, entries)).toEqual({
      epoch: 1,
      lastRound: 5,
      committed: [
        [0, 6],
        [8, 2]
      ],
      committedSamples: 8,
      unaudited: [],
      gone: [2],
      generation: -1
    })
  })

  it("ring: the last ring round committed and its generation, never a takeover's base; the newest generation formed", () => {
    const entries: Array<Recovery.Entry> = [
      { _tag: "Ring", generation: 0 },
      { _tag: "Commit", epoch: 0, round: 3, ranges: [[0, 4]], generation: 0 },
      { _tag: "Ring", generation: 1 },
      { _tag: "Commit", epoch: 0, round: 4, ranges: [[4, 2]], generation: 1 },
      { _tag: "Ring", generation: 2 },
      // A takeover began at round 6 and formed generation 3, then was lost before its first round.
      { _tag: "Base", epoch: 0, firstRound: 6, committed: [[0, 6]] },
      { _tag: "Ring", generation: 3 }
    ]
    const point = Recovery.fold(2, 10, entries)
    expect(point).toMatchObject({ lastRound: 5, ringCommitted: { round: 4, generation: 1 }, generation: 3, committedSamples: 6 })
    expect(Recovery.resumeOf(point, 2)).toEqual({ epoch: 0, firstRound: 7, committed: [[0, 6]], generation: 4 })
  })

  it("commits of an epoch after an unaudited one are not part of the point (they are trained again)", () => {
    const point = Recovery.fold(3, 10, [
      { _tag: "Commit", epoch: 0, round: 0, ranges: [[0, 10]] },
      { _tag: "Commit", epoch: 1, round: 1, ranges: [[0, 3]] }
    ])
    expect(point).toMatchObject({ epoch: 0, lastRound: 1, committed: [[0, 10]] })
  })

  it("an epoch closed without its audit line ends the same: the next epoch's commits count, its audit is owed", () => {
    const point = Recovery.fold(3, 10, [
      { _tag: "Commit", epoch: 0, round: 0, ranges: [[0, 10]] },
      { _tag: "Closed", epoch: 0 },
      { _tag: "Commit", epoch: 1, round: 1, ranges: [[0, 3]] }
    ])
    expect(point).toMatchObject({ epoch: 1, lastRound: 1, committed: [[0, 3]], unaudited: [0] })
    // Owed across a later base too (a takeover lost before it wrote the line).
    const again = Recovery.fold(3, 10, [
      { _tag: "Closed", epoch: 0 },
      { _tag: "Base", epoch: 1, firstRound: 3, committed: [[0, 3]] }
    ])
    expect(again).toMatchObject({ epoch: 1, committed: [[0, 3]], unaudited: [0] })
    expect(
      Recovery.fold(3, 10, [
        { _tag: "Closed", epoch: 0 },
        { _tag: "Audited", epoch: 0 }
      ]).unaudited
    ).toEqual([])
  })

  it("the last base wins: a resumed or recovered run starts from its own point", () => {
    const point = Recovery.fold(3, 10, [
      { _tag: "Base", epoch: 0, firstRound: 0, committed: [] },
      { _tag: "Base", epoch: 1, firstRound: 7, committed: [[0, 2]] },
      { _tag: "Commit", epoch: 1, round: 7, ranges: [[2, 2]] }
    ])
    expect(point).toMatchObject({ epoch: 1, lastRound: 7, committed: [[0, 4]] })
    expect(Recovery.resumeOf(point, 3)).toEqual({ epoch: 1, firstRound: 9, committed: [[0, 4]] })
  })

  it("a run whose every epoch is audited has nothing to resume", () => {
    const point = Recovery.fold(1, 10, [{ _tag: "Audited", epoch: 0 }])
    expect(point.epoch).toBe(1)
    expect(Recovery.resumeOf(point, 1)).toBeUndefined()
  })
})

describe("recovering from any prefix of a recorded run", () => {
  const scenario = fc.record({
    seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
    options: fc.record({
      worldSize: fc.integer({ min: 1, max: 6 }),
      epochSamples: fc.integer({ min: 1, max: 120 }),
      epochs: fc.integer({ min: 1, max: 3 }),
      mode: fc.constantFrom("static" as const, "progressive" as const),
      batchSize: fc.integer({ min: 1, max: 8 }),
      chunkSamples: fc.integer({ min: 1, max: 16 }),
      chunksInflightMax: fc.integer({ min: 1, max: 3 })
    }),
    kills: fc.integer({ min: 0, max: 2 }),
    averageEvery: fc.integer({ min: 1, max: 4 }),
    safetySteps: fc.integer({ min: 0, max: 300 })
  })

  it("completes the run with every epoch audited exactly once and round numbers never reused", () => {
    let recovered = 0
    let midEpoch = 0
    let owedAudits = 0
    fc.assert(
      fc.property(scenario, fc.integer({ min: 0, max: 999 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }), (s, cut, seed) => {
        const base = { ...s, kills: Math.min(s.kills, s.options.worldSize - 1), hangs: 0, exits: 0, lateFrames: 0 }
        // The record a coordinator leaves: a commit per closed round, a `Closed` per ended epoch,
        // and its audit line later, after the next epoch's first commit (the epoch's model is
        // written meanwhile): every cut between the two is a kill in that gap.
        const record: Array<Recovery.Entry> = [{ _tag: "Base", epoch: 0, firstRound: 0, committed: [] }]
        const owed: Array<Recovery.Entry> = []
        const onCommand = (command: Coordinator.Command): void => {
          if (command._tag === "AverageRound") {
            record.push({ _tag: "Commit", epoch: command.epoch, round: command.round, ranges: command.committed })
            record.push(...owed.splice(0))
          } else if (command._tag === "EpochEnded") {
            record.push({ _tag: "Closed", epoch: command.summary.epoch })
            owed.push({ _tag: "Audited", epoch: command.summary.epoch })
          }
        }
        Simulation.run({ ...base, onCommand })
        record.push(...owed.splice(0))
        const kept = record.slice(0, 1 + Math.floor((cut / 1000) * record.length))
        const { epochs, epochSamples } = s.options
        const point = Recovery.fold(epochs, epochSamples, kept)
        const resume = Recovery.resumeOf(point, epochs)
        // The recovered run writes the audit lines owed (`unaudited`).
        const auditedBefore = [...kept.flatMap((e) => (e._tag === "Audited" ? [e.epoch] : [])), ...point.unaudited]
        if (point.unaudited.length > 0) owedAudits += 1
        // No committed sample trained again: every commit of the point's epoch is in the point.
        const committedKept = kept.flatMap((e) => (e._tag === "Commit" && e.epoch === point.epoch ? [e] : []))
        const start: Recovery.Entry = { _tag: "Base", epoch: point.epoch, firstRound: 0, committed: [] }
        const inPoint = Recovery.fold(epochs, epochSamples, [start, ...committedKept]).committedSamples
        expect(point.committedSamples).toBe(inPoint)
        if (resume === undefined) {
          expect(auditedBefore.sort()).toEqual(Array.from({ length: epochs }, (_, e) => e))
          return
        }
        recovered += 1
        if (point.committedSamples > 0 && point.committedSamples < epochSamples) midEpoch += 1
        const audited: Array<number> = []
        let firstRound: number | undefined
        const second = Simulation.run({
          ...base,
          seed,
          resume,
          onCommand: (command) => {
            if (command._tag === "EpochEnded") audited.push(command.summary.epoch)
            if (command._tag === "AverageRound") firstRound ??= command.round
          }
        }).state
        // The simulation checks each audit (the recovered epoch's covers both coordinators').
        if (second.outcome?.status !== "completed") return
        expect([...auditedBefore, ...audited].sort()).toEqual(Array.from({ length: epochs }, (_, e) => e))
        if (firstRound !== undefined) expect(firstRound).toBeGreaterThan(point.lastRound + 1)
      }),
      { seed: SEED, numRuns: 200 }
    )
    expect(recovered).toBeGreaterThan(50)
    expect(midEpoch).toBeGreaterThan(10)
    expect(owedAudits).toBeGreaterThan(5)
  })
})
