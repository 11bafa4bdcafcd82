// What a resume and a takeover keep of the parent's options (actors/launcher/carried-options.ts):
// every rule of the run comes back from the journal as it was given, the caller's value wins,
// a malformed or missing one is left to its default, and `serve --recover` runs by the parent's rules.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { carriedRules, decidedAnew, ruleNames } from "../../actors/launcher/carried-options.ts"
import { loggedOptions } from "../../actors/launcher/launcher-journal.ts"
import * as Recover from "../../actors/launcher/recover.ts"

/** A value of each rule that is no default, so that carrying it is seen. */
const parentRules = {
  backend: "ring",
  ringSharedSlots: 2,
  ringAreaMemoryMb: 0,
  ringLinks: "relay",
  rankConnectionsMax: 99,
  heartbeatTimeoutMs: 4321,
  heartbeatIntervalMs: 321,
  saveTimeoutMs: 7000,
  evalTimeoutMs: 8000,
  beatLinks: true,
  livenessDetector: "adaptive",
  adaptiveTimeoutMinMs: 1500,
  coordinatorStallMs: 900,
  coordinatorTimeoutMs: 12000,
  roundDeadlineMs: 60,
  roundQuorum: 0.75,
  roundSilenceMs: 150,
  blockingSilenceMs: 750,
  blockingSilenceQuietMax: 0.3,
  aggregate: "median",
  trimFraction: 0.1,
  clipNorm: 2.5,
  outlierFactor: 6,
  outlierRoundsMax: 3,
  compress: "int8",
  deltas: true,
  outerLr: 0.7,
  outerMomentum: 0.9,
  tickMs: 50,
  failureLimit: { fraction: 0.5 },
  rolePolicy: { rank: 1 },
  onRepeatedCrash: "continue",
  rankMemoryMb: 512,
  rankNice: 5,
  interruptGraceMs: 2500
} as const

describe("carriedRules", () => {
  it("gives back every rule of the run as the journal recorded it", () => {
    expect(Object.keys(parentRules).sort()).toEqual([...ruleNames].sort())
    const journaled = JSON.parse(
      JSON.stringify(loggedOptions({ trainer: "t.ts", ...parentRules, signal: new AbortController().signal }, {}))
    )
    expect(carriedRules(journaled)).toEqual(parentRules)
  })

  it("lets the caller's values win and leaves malformed or missing ones to their defaults", () => {
    const carried = carriedRules(
      { aggregate: "mode", roundSilenceMs: "150", heartbeatTimeoutMs: 4321, rolePolicy: { rank: "x" }, failureLimit: null },
      { heartbeatTimeoutMs: 9000, clipNorm: 1 }
    )
    expect(carried).toEqual({ heartbeatTimeoutMs: 9000, clipNorm: 1 })
  })

  it("every option of a run is either a rule or decided anew by each continuation, never both", () => {
    const anew = Object.keys(decidedAnew)
    expect(anew.filter((name) => (ruleNames as ReadonlyArray<string>).includes(name))).toEqual([])
    expect(anew).toEqual(expect.arrayContaining(["kills", "signal", "worldSize", "tls"]))
  })
})

describe("serve --recover", () => {
  const dir = mkdtempSync(join(tmpdir(), "cohort-carried-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  /** A served run's folder under `dir` that lost its coordinator: its journal's `started` line with `options`, a stale lock, its token. */
  const servedRun = (name: string, options: Record<string, unknown>): string => {
    const run = join(dir, name)
    mkdirSync(join(run, "recovery"), { recursive: true })
    const started = {
      type: "started",
      ms: 0,
      runId: name,
      runDir: name,
      worldSize: 2,
      epochs: 2,
      epochSamples: 100,
      mode: "static",
      transport: "serve",
      options
    }
    writeFileSync(join(run, "events.ndjson"), `${JSON.stringify(started)}\n`)
    writeFileSync(join(run, "run.lock"), `${JSON.stringify({ pid: 2 ** 22 + 7, acquiredAtMs: 0 })}\n`)
    writeFileSync(join(run, "token"), "carried-test-token-0123456789\n")
    return run
  }

  it("takes a run over by the parent's rules (rounds, liveness, how rounds combine)", async () => {
    const run = servedRun("r", {
      trainerUrl: "file:///nowhere.ts",
      ...parentRules,
      backend: "cpu",
      compress: "none",
      deltas: false,
      maxRanks: 4
    })
    let given: unknown
    const result = await Recover.recover({ runDir: run, recoveryWindowMs: 5000 }, async (serveOptions) => {
      given = serveOptions
      throw new Error("served")
    }).catch((error: Error) => error.message)
    expect(result).toBe("served")
    expect(given).toMatchObject({ ...parentRules, backend: "cpu", compress: "none", deltas: false, maxRanks: 4 })
  })

  it("says which rules it was given that differ from the run's, and runs by the run's", async () => {
    const run = servedRun("r2", { trainerUrl: "file:///nowhere.ts", aggregate: "median", heartbeatTimeoutMs: 4000 })
    let served: unknown
    let ignored: unknown
    await Recover.recover(
      {
        runDir: run,
        given: { heartbeatTimeoutMs: 8000, aggregate: "median", roundSilenceMs: 300 },
        onIgnored: (list) => {
          ignored = list
        }
      },
      async (serveOptions) => {
        served = serveOptions
        throw new Error("served")
      }
    ).catch(() => undefined)
    expect(ignored).toEqual([
      { name: "heartbeatTimeoutMs", given: 8000, run: 4000 },
      { name: "roundSilenceMs", given: 300, run: undefined }
    ])
    expect(served).toMatchObject({ heartbeatTimeoutMs: 4000, aggregate: "median" })
    expect((served as { roundSilenceMs?: number }).roundSilenceMs).toBeUndefined()
  })
})
