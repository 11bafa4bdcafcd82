// Exactly once across the coordinator's death: `cohort run` SIGKILLed at random instants (many
// tries: right after an epoch's audit line, and anywhere in the run), then `cohort resume` until
// the chain completes. Every epoch of the chain (the run and its resumes) is audited exactly once,
// clean, and an audited epoch 0 is never lost. Real processes: the CLI as a child of this test,
// its ranks as worker threads or child processes, under the runtime that runs this file.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import { removeDir, startCli, waitFor } from "../cli-process.ts"

const runtime = Runtime.detect()
const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-once-"))
afterAll(() => removeDir(outDir))

const epochs = 3
const epochSamples = 4800

/** The seed of this file's random instants, printed so that a failure can be replayed. */
const seed = Number(process.env.COHORT_TEST_SEED ?? Date.now() % 100_000)
let state = seed
const random = (): number => {
  state = (state * 1103515245 + 12345) % 2147483648
  return state / 2147483648
}

interface Audited {
  readonly run: string
  readonly epoch: number
  readonly samplesCommitted: number
  readonly lost: number
  readonly duplicated: number
}

const journal = (runDir: string): Array<Record<string, unknown>> =>
  readFileSync(join(runDir, "events.ndjson"), "utf8")
    .split("\n")
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>]
      } catch {
        return [] // a last line cut short by the kill
      }
    })

const auditsOf = (runDir: string): Array<Audited> =>
  journal(runDir)
    .filter((e) => e.type === "epoch")
    .map((e) => {
      const s = e.summary as { epoch: number; samplesCommitted: number; lost: number; duplicated: number }
      return { run: runDir, epoch: s.epoch, samplesCommitted: s.samplesCommitted, lost: s.lost, duplicated: s.duplicated }
    })

const runDirs = (dir: string): Array<string> => readdirSync(dir).map((name) => join(dir, name))

/**
 * One try: a run killed at an instant, then resumed (and resumed again if a resume is cut short)
 * until one completes; returns every run's audits and what the kill hit.
 */
const tryOnce = async (
  dir: string,
  transport: string,
  backend: string,
  killAfter: { readonly epoch: number; readonly delayMs: number } | { readonly atMs: number }
) => {
  const run = startCli(
    [
      "run",
      "--trainer",
      steady,
      "--transport",
      transport,
      "--backend",
      backend,
      "--world-size",
      "3",
      "--epochs",
      String(epochs),
      "--no-kill",
      "--out",
      dir
    ],
    { cwd: dir }
  )
  if ("epoch" in killAfter) {
    await waitFor(
      () => run.out().includes(`epoch ${killAfter.epoch} done`) || run.child.exitCode !== null,
      60_000,
      `epoch ${killAfter.epoch}'s line`
    )
    await new Promise((resolve) => setTimeout(resolve, killAfter.delayMs))
  } else {
    await waitFor(() => run.out().includes("formed") || run.child.exitCode !== null, 60_000, "the run to form")
    await new Promise((resolve) => setTimeout(resolve, killAfter.atMs))
  }
  run.child.kill("SIGKILL")
  await run.exit
  const parent = runDirs(dir)[0]!
  const resumed = startCli(["resume", parent], { cwd: dir })
  const code = await resumed.exit
  const child = runDirs(dir).find((d) => d !== parent)
  // A run that completed before the kill hit it has nothing to resume.
  if (child === undefined) {
    expect(resumed.err(), `resume of ${parent} (seed ${seed}): ${resumed.out()}${resumed.err()}`).toMatch(/nothing to resume/)
    return auditsOf(parent)
  }
  expect(code, `resume of ${parent} (seed ${seed}): ${resumed.out()}${resumed.err()}`).toBe(0)
  return [...auditsOf(parent), ...auditsOf(child)]
}

const expectOnce = (audits: ReadonlyArray<Audited>, what: string): void => {
  const epochsSeen = audits.map((a) => a.epoch).sort((a, b) => a - b)
  expect(epochsSeen, `${what}: every epoch audited exactly once across the chain (seed ${seed}): ${JSON.stringify(audits)}`).toEqual(
    Array.from({ length: epochs }, (_, e) => e)
  )
  for (const a of audits)
    expect([a.samplesCommitted, a.lost, a.duplicated], `${what}: epoch ${a.epoch} of ${a.run}`).toEqual([epochSamples, 0, 0])
}

describe(`exactly once across SIGKILLs of the coordinator's process (${runtime}, seed ${seed})`, () => {
  // Every combination on Node; Bun and Deno (what differs there: their files, processes and
  // sockets) one of each transport and backend, for CI time. The combinations run side by side,
  // each in its own folders, with their instants drawn here in order (the seed replays them): a
  // run is mostly its processes starting, and no kill or resume waits on a heartbeat timeout.
  const cases =
    runtime === "node"
      ? ([
          ["worker", "cpu"],
          ["worker", "ring"],
          ["process", "cpu"],
          ["process", "ring"]
        ] as const)
      : ([
          ["worker", "ring"],
          ["process", "cpu"]
        ] as const)
  for (const [transport, backend] of cases) {
    const tries = [
      { epoch: 0, delayMs: Math.floor(random() * 200) },
      { epoch: 1, delayMs: Math.floor(random() * 200) },
      { atMs: Math.floor(random() * 2500) }
    ]
    it.concurrent(`${transport} ranks, ${backend}: killed 0-200 ms after an epoch's audit line, or at a random instant, then resumed: the chain audits every epoch once`, async () => {
      for (const [i, killAfter] of tries.entries()) {
        const dir = join(outDir, `${transport}-${backend}-${i}`)
        mkdirSync(dir, { recursive: true })
        expectOnce(await tryOnce(dir, transport, backend, killAfter), `${transport}/${backend} try ${i} (${JSON.stringify(killAfter)})`)
      }
    }, 240_000)
  }
})

describe(`a resume killed in its first epoch (${runtime})`, () => {
  it("resuming it trains on from where it started; resuming its parent names it; the chain audits every epoch once", async () => {
    const dir = join(outDir, "chain")
    mkdirSync(dir, { recursive: true })
    const run = startCli(["run", "--trainer", steady, "--world-size", "3", "--epochs", String(epochs), "--no-kill", "--out", dir], {
      cwd: dir
    })
    await waitFor(() => run.out().includes("epoch 0 done") || run.child.exitCode !== null, 60_000, "epoch 0's line")
    run.child.kill("SIGKILL")
    await run.exit
    const parent = runDirs(dir)[0]!
    // The resume is killed once it formed and marked its parent, before its first epoch's audit.
    const first = startCli(["resume", parent], { cwd: dir })
    await waitFor(
      () => existsSync(join(parent, "resumed-by.json")) || first.child.exitCode !== null,
      60_000,
      "the resume to form and mark its parent"
    )
    first.child.kill("SIGKILL")
    await first.exit
    const child = runDirs(dir).find((d) => d !== parent)!
    expect(auditsOf(child)).toEqual([])
    const again = startCli(["resume", parent], { cwd: dir })
    expect(await again.exit).not.toBe(0)
    expect(again.err()).toContain(`resume ${child}`)
    const second = startCli(["resume", child], { cwd: dir })
    expect(await second.exit, `${second.out()}${second.err()}`).toBe(0)
    const grandchild = runDirs(dir).find((d) => d !== parent && d !== child)!
    expectOnce([...auditsOf(parent), ...auditsOf(child), ...auditsOf(grandchild)], "parent, killed resume, its resume")
  }, 120_000)
})

describe(`a resume killed before it formed (${runtime})`, () => {
  // Such a resume marks nothing (a run marks its parent once it formed), so the run it resumed
  // and the dead resume both look resumable; only one of them may train on.
  const killedBeforeForming = async (dir: string): Promise<{ readonly parent: string; readonly dead: string }> => {
    mkdirSync(dir, { recursive: true })
    const run = startCli(["run", "--trainer", steady, "--world-size", "3", "--epochs", String(epochs), "--no-kill", "--out", dir], {
      cwd: dir
    })
    await waitFor(() => run.out().includes("epoch 0 done") || run.child.exitCode !== null, 60_000, "epoch 0's line")
    run.child.kill("SIGKILL")
    await run.exit
    const parent = runDirs(dir)[0]!
    const resumed = startCli(["resume", parent], { cwd: dir })
    const started = (): boolean =>
      runDirs(dir).some((d) => d !== parent && existsSync(join(d, "events.ndjson")) && journal(d).some((e) => e.type === "started"))
    await waitFor(() => started() || resumed.child.exitCode !== null, 60_000, "the resume to start its journal")
    resumed.child.kill("SIGKILL")
    await resumed.exit
    const dead = runDirs(dir).find((d) => d !== parent)!
    expect(
      journal(dead).some((e) => e.type === "formed"),
      "the resume was killed before it formed"
    ).toBe(false)
    expect(existsSync(join(parent, "resumed-by.json"))).toBe(false)
    return { parent, dead }
  }

  it("resuming the dead resume, then the run it resumed: the second is refused; the chain audits every epoch once", async () => {
    const dir = join(outDir, "unformed-then-parent")
    const { parent, dead } = await killedBeforeForming(dir)
    const second = startCli(["resume", dead], { cwd: dir })
    expect(await second.exit, `${second.out()}${second.err()}`).toBe(0)
    const again = startCli(["resume", parent], { cwd: dir })
    expect(await again.exit, `${again.out()}${again.err()}`).toBe(2)
    expect(again.err()).toMatch(/already resumed/)
    expectOnce(runDirs(dir).flatMap(auditsOf), "parent, resume killed before forming, its resume, the parent resumed again")
  }, 180_000)

  it("resuming the run it resumed, then the dead resume: the second is refused; the chain audits every epoch once", async () => {
    const dir = join(outDir, "parent-then-unformed")
    const { parent, dead } = await killedBeforeForming(dir)
    const second = startCli(["resume", parent], { cwd: dir })
    expect(await second.exit, `${second.out()}${second.err()}`).toBe(0)
    const again = startCli(["resume", dead], { cwd: dir })
    expect(await again.exit, `${again.out()}${again.err()}`).toBe(2)
    expect(again.err()).toMatch(/already resumed/)
    expectOnce(runDirs(dir).flatMap(auditsOf), "parent, resume killed before forming, the parent resumed again, the dead resume resumed")
  }, 180_000)
})

describe(`a resume killed in its first epoch, resumed from another folder (${runtime})`, () => {
  it("the paths its journal recorded relative to where it ran (--out runs) are found: the chain completes and audits every epoch once", async () => {
    const dir = join(outDir, "elsewhere")
    mkdirSync(dir, { recursive: true })
    const runs = join(dir, "runs")
    const run = startCli(["run", "--trainer", steady, "--world-size", "3", "--epochs", String(epochs), "--no-kill", "--out", "runs"], {
      cwd: dir
    })
    await waitFor(() => run.out().includes("epoch 0 done") || run.child.exitCode !== null, 60_000, "epoch 0's line")
    run.child.kill("SIGKILL")
    await run.exit
    const parent = runDirs(runs)[0]!
    const first = startCli(["resume", `runs/${parent.split("/").at(-1)}`], { cwd: dir })
    await waitFor(
      () => existsSync(join(parent, "resumed-by.json")) || first.child.exitCode !== null,
      60_000,
      "the resume to form and mark its parent"
    )
    first.child.kill("SIGKILL")
    await first.exit
    const child = runDirs(runs).find((d) => d !== parent)!
    expect(auditsOf(child)).toEqual([])
    const second = startCli(["resume", child], { cwd: tmpdir() })
    expect(await second.exit, `${second.out()}${second.err()}`).toBe(0)
    expectOnce(runDirs(runs).flatMap(auditsOf), "parent, killed resume, its resume from another folder")
  }, 120_000)
})
