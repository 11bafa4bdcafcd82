// A served run's recovery log (actors/launcher/recovery-log.ts): what it writes reads back as the
// fold's entries and the rounds' models; a line cut short by a kill is left out; a model slot
// holding another round's model is no model of the round asked for.
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import type * as Core from "../../src/core/coordinator.ts"
import * as Recovery from "../../src/core/recovery.ts"
import * as RecoveryLog from "../../actors/launcher/recovery-log.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort-recovery-log-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const round = (epoch: number, r: number, committed: ReadonlyArray<readonly [number, number]>) =>
  ({
    _tag: "AverageRound",
    epoch,
    round: r,
    openedAtMs: 0,
    contributors: [0],
    committed,
    params: [],
    paramRanks: [],
    reason: "test"
  }) as Extract<Core.Command, { _tag: "AverageRound" }>

describe("RecoveryLog", () => {
  it("reads back its base and commits as the fold's entries, and the last two rounds' models", () => {
    const runDir = join(dir, "a")
    const errors: Array<string> = []
    const log = RecoveryLog.open(runDir, (path) => errors.push(path))
    log.base({ epoch: 1, firstRound: 5, committed: [[0, 10]] }, Float32Array.of(1, 2))
    log.beforeRound(round(1, 5, [[10, 4]]), Float32Array.of(3, 4))
    log.beforeRound(round(1, 6, [[14, 6]]), Float32Array.of(5, 6))
    const read = RecoveryLog.read(runDir)
    expect(errors).toEqual([])
    expect(read.entries).toEqual([
      { _tag: "Base", epoch: 1, firstRound: 5, committed: [[0, 10]] },
      { _tag: "Commit", epoch: 1, round: 5, ranges: [[10, 4]] },
      { _tag: "Commit", epoch: 1, round: 6, ranges: [[14, 6]] }
    ])
    expect(Recovery.fold(3, 20, read.entries)).toMatchObject({ epoch: 1, lastRound: 6, committed: [[0, 20]] })
    expect(read.model(6)).toEqual(Float32Array.of(5, 6))
    expect(read.model(5)).toEqual(Float32Array.of(3, 4))
    // Round 4's slot (the base's model) was overwritten by round 6's.
    expect(read.model(4)).toBeUndefined()
  })

  it("an epoch's closed line ends it in the fold, with its audit and the round of its model", () => {
    const runDir = join(dir, "d")
    const log = RecoveryLog.open(runDir, () => {})
    log.base({ epoch: 0, firstRound: 0, committed: [] }, undefined)
    log.beforeRound(round(0, 0, [[0, 8]]), Float32Array.of(7))
    const summary = { epoch: 0, samplesCommitted: 8, lost: 0, duplicated: 0 } as unknown as Core.EpochSummary
    log.closed(summary)
    log.beforeRound(round(1, 1, [[0, 3]]), Float32Array.of(8))
    const read = RecoveryLog.read(runDir)
    expect(read.closed.get(0)).toEqual({ summary, round: 0 })
    expect(Recovery.fold(2, 8, read.entries)).toMatchObject({ epoch: 1, lastRound: 1, committed: [[0, 3]], unaudited: [0] })
    expect(read.model(0)).toEqual(Float32Array.of(7))
  })

  it("leaves out a line cut short, and a slot that holds another round's model", () => {
    const runDir = join(dir, "b")
    const log = RecoveryLog.open(runDir, () => {})
    log.base({ epoch: 0, firstRound: 0, committed: [] }, undefined)
    log.beforeRound(round(0, 0, [[0, 8]]), Float32Array.of(7))
    appendFileSync(join(runDir, RecoveryLog.dirName, "log.ndjson"), '{"type":"commit","epoch":0,"round":1,"ran')
    // A kill in the middle of round 1's model write: a torn slot.
    writeFileSync(join(runDir, RecoveryLog.dirName, "model-1.f32"), new Uint8Array(5))
    const read = RecoveryLog.read(runDir)
    expect(read.entries.map((e) => e._tag)).toEqual(["Base", "Commit"])
    expect(Recovery.fold(1, 8, read.entries).lastRound).toBe(0)
    expect(read.model(0)).toEqual(Float32Array.of(7))
    expect(read.model(1)).toBeUndefined()
  })

  it("reports a write it cannot make", () => {
    const blocked = join(dir, "c")
    writeFileSync(blocked, "a file where the run's folder should be")
    const errors: Array<string> = []
    const log = RecoveryLog.open(blocked, (path) => errors.push(path))
    log.beforeRound(round(0, 0, []), Float32Array.of(1))
    expect(errors.length).toBe(1)
  })

  it("writes nothing after a failed write: the log ends at its last good round", () => {
    const runDir = join(dir, "e")
    const errors: Array<string> = []
    const log = RecoveryLog.open(runDir, (path) => errors.push(path))
    log.base({ epoch: 0, firstRound: 0, committed: [] }, undefined)
    log.beforeRound(round(0, 0, [[0, 4]]), Float32Array.of(1))
    // Round 1's model slot cannot be written (a folder stands there): its line is not written either.
    rmSync(join(runDir, RecoveryLog.dirName, "model-1.f32"), { force: true })
    mkdirSync(join(runDir, RecoveryLog.dirName, "model-1.f32"))
    log.beforeRound(round(0, 1, [[4, 4]]), Float32Array.of(2))
    log.beforeRound(round(0, 2, [[8, 4]]), Float32Array.of(3))
    expect(errors).toEqual([join(runDir, RecoveryLog.dirName, "model-1.f32")])
    const read = RecoveryLog.read(runDir)
    expect(Recovery.fold(1, 12, read.entries)).toMatchObject({ lastRound: 0, committed: [[0, 4]] })
    expect(read.model(0)).toEqual(Float32Array.of(1))
  })
})
