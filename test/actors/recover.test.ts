// `serve --recover`'s checks before anything runs (actors/launcher/recover.ts), on hand-made run
// directories: a run still running, one that ended, one not served, and one whose last committed
// round's model is missing are refused with one line each; a ring run is taken over with the
// ranks' model (the last ring round committed, and a generation past every one formed); `findLost`
// finds the served run that lost its coordinator and none of the others.
import { createHmac } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Recover from "../../actors/launcher/recover.ts"
import { completed } from "../cli/fixtures.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort-recover-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const started = (options: Record<string, unknown> = {}, transport = "serve") => ({
  type: "started",
  ms: 0,
  runId: "r",
  runDir: "r",
  worldSize: 2,
  epochs: 2,
  epochSamples: 100,
  mode: "static",
  transport,
  options: { trainerUrl: "file:///nowhere.ts", backend: "cpu", ...options }
})

/** A run folder under `dir` with these journal events, a stale lock (a process id that is gone) and a token. */
const runDir = (name: string, events: ReadonlyArray<object>, extra: { readonly log?: string } = {}): string => {
  const run = join(dir, name)
  mkdirSync(join(run, "recovery"), { recursive: true })
  writeFileSync(join(run, "events.ndjson"), events.map((e) => `${JSON.stringify(e)}\n`).join(""))
  writeFileSync(join(run, "run.lock"), `${JSON.stringify({ pid: 2 ** 22 + 7, acquiredAtMs: 0 })}\n`)
  writeFileSync(join(run, "token"), "recover-test-token-0123456789\n")
  if (extra.log !== undefined) writeFileSync(join(run, "recovery", "log.ndjson"), extra.log)
  return run
}

const refusal = (run: string) =>
  Recover.recover({ runDir: run }, async () => {
    throw new Error("served")
  }).then(
    () => "no refusal",
    (error: Error) => error.message
  )

describe("serve --recover refuses before anything runs", () => {
  it("a run still running", async () => {
    const run = runDir("running", [started()])
    // This test's own process holds the lock: it is alive.
    writeFileSync(join(run, "run.lock"), `${JSON.stringify({ pid: process.pid, acquiredAtMs: 0 })}\n`)
    expect(await refusal(run)).toMatch(/^recover: run .* is still running in process \d+/)
  })

  it("a run that ended, one not served", async () => {
    expect(await refusal(runDir("ended", [started(), { type: "ended", ms: 5, outcome: completed.outcome }]))).toMatch(
      /^recover: run r ended: nothing to take over/
    )
    expect(await refusal(runDir("local", [started({}, "worker")]))).toMatch(/was not served/)
  })

  it("a folder that is no run (the --out folder given for one of its runs) names its runs", async () => {
    // Outside `dir`, whose runs findLost reads below.
    const out = mkdtempSync(join(tmpdir(), "cohort-recover-out-"))
    mkdirSync(join(out, "one"))
    writeFileSync(join(out, "one", "events.ndjson"), `${JSON.stringify(started())}\n`)
    expect(await refusal(out)).toBe(
      `recover: ${out} is not a run directory (it has no events.ndjson): give the run's own folder, <out>/<runId>, e.g. ${out}/one`
    )
    rmSync(out, { recursive: true, force: true })
    expect(await refusal(join(dir, "nowhere"))).toMatch(
      /nowhere is not a run directory \(it has no events.ndjson\): give the run's own folder, <out>\/<runId>$/
    )
  })

  it("a run whose last committed round's model is missing", async () => {
    const log = `${JSON.stringify({ type: "base", epoch: 0, firstRound: 0, committed: [] })}\n${JSON.stringify({ type: "commit", epoch: 0, round: 3, ranges: [[0, 10]] })}\n`
    expect(await refusal(runDir("no-model", [started()], { log }))).toMatch(/the model of round 3 is missing/)
  })

  it("a run that formed, or whose log failed, with no recovery log: rounds may have been committed", async () => {
    expect(await refusal(runDir("formed-no-log", [started(), { type: "formed", ms: 5, worldSize: 2 }]))).toMatch(
      /holds no recovery log: the run cannot be taken over exactly/
    )
    const fault = {
      type: "alert",
      ms: 5,
      alert: {
        ts: 5,
        severity: "critical",
        path: "root",
        class: "StorageFault",
        detail: "cannot write /x/recovery/log.ndjson: ENOSPC: no space",
        count: 1
      }
    }
    expect(await refusal(runDir("failed-log", [started(), fault]))).toMatch(/holds no recovery log \(cannot write .*ENOSPC/)
  })

  it("a token that is not the run's (its ranks would refuse the takeover and exit)", async () => {
    const log = `${JSON.stringify({ type: "base", epoch: 0, firstRound: 0, committed: [] })}\n`
    const run = runDir("wrong-token", [started()], { log })
    const check = createHmac("sha256", "recover-test-token-0123456789").update("cohort recovery token check").digest("base64url")
    writeFileSync(join(run, "recovery", "token.check"), `${check}\n`)
    const tried = (runToken: string) =>
      Recover.recover({ runDir: run, runToken }, async () => {
        throw new Error("served")
      }).catch((error: Error) => error.message)
    expect(await tried("another-token-0123456789abcdef")).toMatch(/^runToken: is not run r's token/)
    expect(await tried("recover-test-token-0123456789")).toBe("served")
  })

  it("a run lost after its last epoch ended but before that epoch's audit line: the line is written from the log", async () => {
    const summary = (epoch: number) => ({
      epoch,
      epochSamples: 100,
      samplesCommitted: 100,
      lost: 0,
      duplicated: 0,
      deaths: [],
      exits: [],
      startedAtMs: 0,
      endedAtMs: 1
    })
    const log = [
      { type: "base", epoch: 0, firstRound: 0, committed: [] },
      { type: "commit", epoch: 0, round: 0, ranges: [[0, 100]] },
      { type: "closed", epoch: 0, round: 0, summary: summary(0) },
      { type: "commit", epoch: 1, round: 1, ranges: [[0, 100]] },
      { type: "closed", epoch: 1, round: 1, summary: summary(1) }
    ]
      .map((l) => `${JSON.stringify(l)}\n`)
      .join("")
    const run = runDir("last-gap", [started(), { type: "epoch", ms: 3, summary: summary(0) }], { log })
    const auditLines = () => readFileSync(join(run, "events.ndjson"), "utf8").match(/"type":"epoch"/g)?.length
    expect(await refusal(run)).toMatch(/audited all 2 epochs \(the audit of epoch 1 written now from .*: its coordinator was lost/)
    expect(auditLines()).toBe(2)
    expect(await refusal(run)).toMatch(/audited all 2 epochs: nothing to take over/)
    // A restarted plain `serve` (findLost) writes the line too, and does not take the run over.
    const again = runDir("last-gap-2", [started(), { type: "epoch", ms: 3, summary: summary(0) }], { log })
    expect(await Recover.findLost(dir, 60_000, Date.now())).not.toContain(again)
    expect(readFileSync(join(again, "events.ndjson"), "utf8").match(/"type":"epoch"/g)?.length).toBe(2)
    expect(auditLines()).toBe(2)
  })

  it("takes a run lost before any round closed over with the trainers' initial model", async () => {
    let given: unknown
    const result = await Recover.recover({ runDir: runDir("early", [started()]), recoveryWindowMs: 5000 }, async (options) => {
      given = options
      throw new Error("served")
    }).catch((error: Error) => error.message)
    expect(result).toBe("served")
    expect(given).toMatchObject({
      resumeState: { epoch: 0, firstRound: 1, committed: [], params: undefined },
      recovery: { windowMs: 5000, expected: [0, 1], gone: [], epoch: 0, lastRound: -1 },
      runToken: "recover-test-token-0123456789"
    })
  })
})

describe("serve --recover waits for the ranks still in the run", () => {
  it("not for one that left cleanly before the loss", async () => {
    const leave = {
      type: "leave",
      ms: 4,
      leave: {
        rank: 1,
        epoch: 0,
        kind: "graceful",
        cause: "exited",
        declaredMs: 4,
        detectionMs: 0,
        recoveryMs: 1,
        remainderSamples: 10,
        lostSamples: 0,
        duplicatedSamples: 0,
        redoneSamples: 0,
        bytesMoved: 0
      }
    }
    let given: unknown
    await Recover.recover({ runDir: runDir("left", [started(), leave]) }, async (options) => {
      given = options
      throw new Error("served")
    }).catch(() => undefined)
    expect(given).toMatchObject({ recovery: { expected: [0], gone: [1] } })
  })
})

describe("serve --recover of a ring run", () => {
  it("confirms the last ring round committed to the ranks (they hold its mean, the log has no model) and forms the ring past every generation recorded", async () => {
    const log = [
      { type: "base", epoch: 0, firstRound: 0, committed: [] },
      { type: "ring", generation: 0 },
      { type: "commit", epoch: 0, round: 0, ranges: [[0, 20]], generation: 0 },
      { type: "ring", generation: 1 },
      { type: "ring", generation: 2 },
      { type: "commit", epoch: 0, round: 1, ranges: [[20, 20]], generation: 2 },
      { type: "ring", generation: 3 }
    ]
      .map((l) => `${JSON.stringify(l)}\n`)
      .join("")
    let given: unknown
    const result = await Recover.recover(
      { runDir: runDir("ring", [started({ backend: "ring", ringLinks: "relay" }), { type: "formed", ms: 1, worldSize: 2 }], { log }) },
      async (options) => {
        given = options
        throw new Error("served")
      }
    ).catch((error: Error) => error.message)
    expect(result).toBe("served")
    expect(given).toMatchObject({
      backend: "ring",
      ringLinks: "relay",
      resumeState: { epoch: 0, firstRound: 3, committed: [[0, 40]], params: undefined },
      recovery: { lastRound: 1, ringCommitted: { round: 1, generation: 2 }, generation: 4 }
    })
  })
})

describe("serve --recover listens where the ranks reconnect", () => {
  const given = async (events: ReadonlyArray<object>, name: string, options: Partial<Recover.RecoverOptions> = {}) => {
    let served: { readonly host?: string; readonly port?: number } = {}
    await Recover.recover({ runDir: runDir(name, events), ...options }, async (o) => {
      served = o
      throw new Error("served")
    }).catch(() => undefined)
    return served
  }

  it("a run served on port 0 is taken over on the port it was given, the last one it listened on", async () => {
    const listening = (url: string) => ({ type: "listening", ms: 3, url })
    expect(await given([started({ host: "127.0.0.1", port: 0 }), listening("ws://127.0.0.1:38923/")], "port0")).toMatchObject({
      host: "127.0.0.1",
      port: 38923
    })
    expect(
      await given([started({ port: 0 }), listening("wss://[::1]:40001/"), listening("wss://[::1]:40002/")], "port0-twice")
    ).toMatchObject({
      port: 40002
    })
    expect(await given([started({ port: 7070 }), listening("ws://127.0.0.1:7070/")], "port-given")).toMatchObject({ port: 7070 })
    expect(await given([started({ port: 0 }), listening("ws://127.0.0.1:38923/")], "port-listen", { port: 9000 })).toMatchObject({
      port: 9000
    })
  })
})

describe("findLost", () => {
  it("finds the served run that lost its coordinator within the window, and no run that ended, failed, ran locally or went quiet long ago", async () => {
    const out = join(dir, "out")
    const at = (name: string, events: ReadonlyArray<object>) => {
      const run = join(out, name)
      mkdirSync(run, { recursive: true })
      writeFileSync(join(run, "events.ndjson"), events.map((e) => `${JSON.stringify(e)}\n`).join(""))
      writeFileSync(join(run, "run.lock"), `${JSON.stringify({ pid: 2 ** 22 + 7, acquiredAtMs: 0 })}\n`)
      return run
    }
    const lost = at("a-lost", [started()])
    at("b-ended", [started(), { type: "ended", ms: 1, outcome: completed.outcome }])
    at("c-failed", [started(), { type: "failed", ms: 1, stage: "formation", reason: "x", formed: false }])
    at("d-local", [started({}, "worker")])
    const old = at("e-old", [started()])
    const longAgo = (Date.now() - 3_600_000) / 1000
    utimesSync(join(old, "events.ndjson"), longAgo, longAgo)
    expect(await Recover.findLost(out, 60_000, Date.now())).toEqual([lost])
  })
})
