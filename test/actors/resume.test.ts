// `cohort resume` (docs/resume.md): a run stopped unrecoverable, interrupted or cut off by
// its coordinator's death goes on as a new run, from its survivors' saves (only the epoch's
// uncommitted ranges are trained; the epoch's audit covers both runs) or from its last checkpoint
// (the epoch trained again); every bad input is refused with one line and exit 2, and leaves the
// parent's directory as it was. Real workers, real child processes, the real CLI under each runtime.
import { spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { cliCommand } from "../cli-process.ts"
import { journalOf, onlyRunDir } from "../run-folders.ts"
import { expectRecordsAgree } from "../run-records.ts"
import * as Launcher from "../../actors/launcher/launcher.ts"
import * as Resume from "../../actors/launcher/resume.ts"
import type { RunOptions, RunResult } from "../../actors/record/run-types.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Cli from "../../src/cli/index.ts"
import * as ModelFile from "../../src/train/model-file.ts"
import * as SavedModel from "../../src/train/saved-model.ts"

const runtime = Runtime.detect()
// The bundled MNIST trainer with 64 hidden units (the demo's data, schedule and saves at an eighth
// of its arithmetic): the test compares a resumed run with an uninterrupted one, not the model.
const demoTrainer = fileURLToPath(new URL("../fixtures/trainers/mnist-small.ts", import.meta.url))
const steadySlow = fileURLToPath(new URL("../fixtures/trainers/steady-slow.ts", import.meta.url))
const cli = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-resume-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

interface Exited {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Starts the CLI with `args` under this runtime; `exited` resolves with its code and output. */
const startCli = (
  args: ReadonlyArray<string>
): { readonly pid: number; readonly exited: Promise<Exited>; readonly stdout: () => string } => {
  const child = spawn(process.execPath, [...(runtime === "deno" ? ["run", "-A", cli] : [cli]), ...args], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<Exited>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })))
  return { pid: child.pid!, exited, stdout: () => stdout }
}
const cohort = (...args: ReadonlyArray<string>): Promise<Exited> => startCli(args).exited

/** Every file under `dir` (relative path) with its SHA-256: equal before and after means unchanged. */
const snapshot = (dir: string): Record<string, string> => {
  const files: Record<string, string> = {}
  const walk = (at: string, prefix: string): void => {
    for (const name of readdirSync(at).sort()) {
      // Another resume's atomic write in flight (its `.tmp` file, renamed a moment later) is not
      // part of the folder's state, and may be gone before it is read.
      if (name.endsWith(".tmp")) continue
      const path = join(at, name)
      if (statSync(path).isDirectory()) walk(path, `${prefix}${name}/`)
      else files[`${prefix}${name}`] = createHash("sha256").update(readFileSync(path)).digest("hex")
    }
  }
  walk(dir, "")
  return files
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** What every clean epoch of a run of `samples` samples reads: `[epoch, samples, lost 0, duplicated 0]`. */
const auditRows = (result: RunResult) => result.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])

describe(`cohort resume (${runtime})`, () => {
  // The three groups below share nothing (each its own trainer files and folders) and mostly wait on
  // ranks and child processes: they run side by side; the bad-input tests, which edit one trainer
  // file and its hold file, run one after the other.
  it.concurrent("the demo stopped by a failure limit of 1 and a kill mid-epoch, resumed on 3 ranks: the resumed epoch's audit covers both runs (lost 0, duplicated 0), the rest completes, accuracy within 0.01 of an uninterrupted run", async () => {
    // As `cohort demo --epochs 2 --seed 7` (4 worker ranks; 64 hidden units), in this process. The parent: rank 1
    // killed once half of epoch 0 is committed (its mid-epoch averaging round: rounds every 32 of a
    // rank's 62 batches), with a failure limit of 1. (The issue's `--kill 1@3` is a time, which
    // lands in epoch 1 before any round under Bun, whose epochs are shorter.)
    const demo = { trainer: demoTrainer, worldSize: 4, epochs: 2, seed: 7, onRankOutput: () => {} }
    const base = await Launcher.run({ ...demo, outDir: join(outDir, "demo-baseline") })
    expect(base.exitCode).toBe(0)
    const parent = await Launcher.run({
      ...demo,
      outDir: join(outDir, "demo"),
      failureLimit: { absolute: 1 },
      kills: [{ rank: 1, atEpoch: 0, atFraction: 0.5 }]
    })
    expect(parent.exitCode).toBe(1)
    const uncommitted = parent.outcome.uncommitted!
    const left = uncommitted.ranges.reduce((sum, [, size]) => sum + size, 0)
    expect([uncommitted.epoch, left > 0, left < 8000]).toEqual([0, true, true])
    // Every save and checkpoint folder holds both models, each readable: the trainer's own
    // (model.f32, model.json) and Cohort's (cohort-params.f32, cohort-params.json), neither
    // overwriting the other. 50,890 parameters: 784 * 64 + 64 + 64 * 10 + 10.
    for (const [folder, epoch] of [
      [`${parent.runDir}/save/rank0`, 0],
      [`${base.runDir}/checkpoints/v0`, 0],
      [`${base.runDir}/checkpoints/v1`, 1]
    ] as const) {
      const trainers = await ModelFile.read(folder)
      expect([trainers.params.length, trainers.meta.format, trainers.meta.model, trainers.meta.shape]).toEqual([
        50890,
        "cohort-model",
        "mlp",
        { inputs: 784, hidden: 64, classes: 10 }
      ])
      const cohorts = await SavedModel.read(folder)
      expect(cohorts._tag === "Model" && [cohorts.params.length, cohorts.meta.epoch]).toEqual([50890, epoch])
    }
    // And the coordinator's model of each epoch, in the same checkpoint folders.
    for (const [folder, epoch] of [
      [`${base.runDir}/checkpoints/v0`, 0],
      [`${base.runDir}/checkpoints/v1`, 1]
    ] as const) {
      const own = await SavedModel.read(folder, SavedModel.coordinatorFiles)
      expect(own._tag === "Model" && [own.params.length, own.meta.epoch, own.meta.rank]).toEqual([50890, epoch, -1])
    }
    // What `cohort report` (and the CLI at the end of the run) says about it.
    const stopped = await cohort("report", parent.runDir)
    expect([stopped.code, stopped.stderr]).toEqual([
      1,
      `cohort: run stopped: FailureLimitReached: 1 failure reached the failure limit of 1; ranks 0, 2, 3 saved under ${parent.runDir}/save; ` +
        `resume with: ${cliCommand()} resume ${parent.runDir}\n`
    ])

    const resumed = await cohort("resume", parent.runDir, "--world-size", "3", "--json")
    expect(resumed.stderr).not.toMatch(/cohort: note:/)
    expect(resumed.code).toBe(0)
    const child = JSON.parse(resumed.stdout) as RunResult
    // A new run beside its parent, naming it and where it picked up.
    expect(child.runDir).not.toBe(parent.runDir)
    expect(join(child.runDir, "..")).toBe(join(parent.runDir, ".."))
    expect(child.resumed).toMatchObject({
      parent: { runId: parent.runId, runDir: parent.runDir },
      epoch: uncommitted.epoch,
      committedSamples: 8000 - left,
      state: "save",
      loadedFrom: `${parent.runDir}/save/rank0`,
      notes: []
    })
    const started = journalOf(child.runDir)[0]!
    expect(started.type === "started" && [started.worldSize, started.epochs, started.resumed]).toEqual([3, 2, child.resumed])
    // The resumed epoch's audit counts both runs' samples, each once; then every remaining epoch.
    expect(auditRows(child)).toEqual([
      [0, 8000, 0, 0],
      [1, 8000, 0, 0]
    ])
    expect(child.epochs[0]!.spansRuns).toEqual([parent.runId, child.runId])
    expect(child.outcome.status).toBe("completed")
    expect(child.finalAccuracy!).toBeGreaterThanOrEqual(base.finalAccuracy! - 0.01)
    await expectRecordsAgree(parent.runDir, parent)
    await expectRecordsAgree(child.runDir, child)
    // The report marks the epoch that spans both runs.
    const report = await cohort("report", child.runDir)
    expect(report.code).toBe(0)
    expect(report.stdout).toContain(
      `* epoch ${uncommitted.epoch} spans runs ${parent.runId} and ${child.runId}: ${8000 - left} samples committed by run ${parent.runId}, ${left} by run ${child.runId}; the audit covers both\n`
    )
    // The parent's directory holds no lock once the resume is over.
    expect(existsSync(join(parent.runDir, "resume.lock"))).toBe(false)
  }, 400_000)

  it.concurrent("SIGKILL of the coordinator (--transport process) mid-epoch, the journal cut mid-line: report reads it and gives the command; resume trains the cut epoch again from the last checkpoint with a clean audit", async () => {
    const parentOut = join(outDir, "killed")
    const run = startCli([
      "run",
      "--trainer",
      steadySlow,
      "--transport",
      "process",
      "--world-size",
      "3",
      "--epochs",
      "3",
      "--no-kill",
      "--coordinator-timeout-ms",
      "3000",
      "--out",
      parentOut
    ])
    let runDir = ""
    const until = Date.now() + 120_000
    // Once epoch 0 is audited and checkpointed and epoch 1 is under way.
    while (Date.now() < until) {
      runDir = onlyRunDir(parentOut)
      const journal = runDir === "" ? [] : journalOf(runDir)
      if (
        journal.some((e) => e.type === "epoch" && e.summary.epoch === 0) &&
        existsSync(join(runDir, "checkpoints", "v0", "cohort-params.json")) &&
        journal.some((e) => e.type === "progress" && e.epoch === 1)
      )
        break
      await sleep(20)
    }
    spawnSync("kill", ["-KILL", String(run.pid)]) // kill(1): Deno's process.kill cannot send every signal
    await run.exited
    // Every rank's emergency save is done once the CLI's stderr closed (the ranks held it open).
    expect(journalOf(runDir).some((e) => e.type === "ended")).toBe(false)
    const newest = Math.max(...readdirSync(join(runDir, "checkpoints")).map((name) => Number(name.slice(1))))
    expect(newest).toBeLessThan(2)
    // Cut the journal in the middle of its last line, as a write cut short by the kill.
    const journalPath = join(runDir, "events.ndjson")
    const text = readFileSync(journalPath, "utf8")
    const lastStart = text.slice(0, -1).lastIndexOf("\n") + 1
    truncateSync(journalPath, Buffer.byteLength(text.slice(0, lastStart + Math.floor((text.length - 1 - lastStart) / 2))))
    const cutLine = text.slice(0, lastStart).split("\n").length
    const before = snapshot(runDir)

    const report = await cohort("report", runDir)
    expect(report.code).toBe(2)
    expect(report.stderr).toBe(
      `cohort: warning: ${runDir}/events.ndjson was cut in line ${cutLine}: the report shows the run as far as it was read; its outcome is unknown; ` +
        `if its coordinator's process died, resume it from its last checkpoint with: ${cliCommand()} resume ${runDir}\n`
    )

    // The killed run's own lock is left behind, stale: one line says so, and it is no bar.
    const holder = (JSON.parse(readFileSync(join(runDir, "run.lock"), "utf8")) as { pid: number }).pid
    const resumed = await cohort("resume", runDir, "--transport", "worker", "--world-size", "2", "--json")
    expect(resumed.code).toBe(0)
    expect(resumed.stderr.split("\n").filter((line) => line.startsWith("cohort: note:"))).toEqual([
      `cohort: note: the lock ${runDir}/run.lock is stale: process ${holder} is gone; the run is not running`,
      `cohort: note: the parent's journal was cut in line ${cutLine} (a write cut short); every whole line before it was read`,
      `cohort: note: the parent's journal ends without its outcome (it was cut in line ${cutLine}): its coordinator's process died: ` +
        `resuming from checkpoint v${newest}, the model after the last audited epoch; epoch ${newest + 1} is trained from its start`
    ])
    const child = JSON.parse(resumed.stdout) as RunResult
    expect(child.resumed).toMatchObject({
      epoch: newest + 1,
      committedSamples: 0,
      committed: [],
      state: "checkpoint",
      loadedFrom: `${runDir}/checkpoints/v${newest}`
    })
    expect(auditRows(child)).toEqual([newest + 1, 2].filter((e, i, all) => all.indexOf(e) === i).map((epoch) => [epoch, 4800, 0, 0]))
    expect(child.epochs.every((e) => e.spansRuns === undefined)).toBe(true)
    expect(child.exitCode).toBe(0)
    // Nothing in the parent's directory changed but the marker naming the run that resumed it.
    const { ["resumed-by.json"]: marker, ...after } = snapshot(runDir)
    expect(after).toEqual(before)
    expect(JSON.parse(readFileSync(join(runDir, "resumed-by.json"), "utf8"))).toEqual({ runId: child.runId, runDir: child.runDir })
    expect(marker).toBeDefined()
  }, 300_000)

  describe.concurrent("bad input: one line, exit 2, the parent's directory unchanged", () => {
    // A trainer of its own (a file this test edits): 24,000 samples, 4 ms a batch (an epoch of 3
    // ranks lasts about 1.3 s), holds while `<dir>/hold` exists.
    const trainerDir = join(outDir, "trainer")
    mkdirSync(trainerDir, { recursive: true })
    const trainer = join(trainerDir, "held.mjs")
    const hold = join(trainerDir, "hold")
    const source = (samples: number) =>
      [
        `import { existsSync } from "node:fs"`,
        `import { mkdir, writeFile } from "node:fs/promises"`,
        `export const trainSamples = ${samples}`,
        `const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms))`,
        `export const createTrainer = (context) => {`,
        `  const params = new Float32Array(4)`,
        `  return {`,
        `    trainBatch: async (indices) => { while (existsSync(${JSON.stringify(hold)})) await wait(20); await wait(4); return { loss: indices.length } },`,
        `    getParams: () => params,`,
        `    setParams: (next) => params.set(next),`,
        `    save: async (dir) => { await mkdir(dir, { recursive: true }); await writeFile(dir + "/held.json", JSON.stringify({ rank: context.rank })) }`,
        `  }`,
        `}`,
        ``
      ].join("\n")
    writeFileSync(trainer, source(24000))

    /** A run of `trainer` interrupted 3000 samples into epoch 1 (rounds committed): its survivors saved in epoch 1. */
    const interrupted = async (name: string): Promise<RunResult> => {
      const controller = new AbortController()
      const result = await Launcher.run({
        trainer,
        worldSize: 3,
        epochs: 3,
        outDir: join(outDir, name),
        signal: controller.signal,
        onRankOutput: () => {},
        onEvent: (event) => {
          if (event.type === "progress" && event.epoch === 1 && event.samplesDone >= 3000) controller.abort()
        }
      })
      expect([result.outcome.status, result.outcome.uncommitted?.epoch, result.saves]).toEqual([
        "interrupted",
        1,
        { saved: [0, 1, 2], notSaved: [] }
      ])
      return result
    }

    /**
     * `cohort resume ...args` in this process (`Cli.main`, the launcher already loaded) or, with
     * `spawned`, as a process of its own (a trainer module this process imported before is cached).
     */
    const resume = async (args: ReadonlyArray<string>, spawned = false): Promise<Exited> => {
      if (spawned) return cohort("resume", ...args)
      let stdout = ""
      let stderr = ""
      const io: Cli.Io = {
        out: (text) => void (stdout += text),
        err: (text) => void (stderr += text),
        isTerminal: false,
        progressStream: () => {
          throw new Error("no progress bars without a terminal")
        }
      }
      const code = await Cli.main(["resume", ...args], io)
      return { code, stdout, stderr }
    }

    /** `cohort resume dir`: exit 2 with exactly `line` on stderr, and `dir` as it was. */
    const refused = async (dir: string, line: string, spawned = false): Promise<void> => {
      const before = existsSync(dir) ? snapshot(dir) : undefined
      const result = await resume([dir], spawned)
      expect({ code: result.code, stderr: result.stderr, stdout: result.stdout }).toEqual({
        code: 2,
        stderr: `cohort: ${line}\n`,
        stdout: ""
      })
      expect(existsSync(dir) ? snapshot(dir) : undefined).toEqual(before)
    }

    it.sequential("a completed run, a folder that is not a run, a missing folder, an --out inside the run, another dataset size, another trainer file, no usable state", async () => {
      const completed = await Launcher.run({ trainer, worldSize: 3, epochs: 1, outDir: join(outDir, "completed"), onRankOutput: () => {} })
      expect(completed.exitCode).toBe(0)
      await refused(completed.runDir, `resume: nothing to resume: run ${completed.runId} completed all 1 epoch`)
      const empty = join(outDir, "empty")
      mkdirSync(empty)
      await refused(empty, `resume: ${empty} is not a run directory: it has no events.ndjson`)
      await refused(join(outDir, "nowhere"), `resume: ${join(outDir, "nowhere")} is not a run directory: no such directory`)

      const parent = await interrupted("interrupted")
      for (const out of [parent.runDir, join(parent.runDir, "runs")]) {
        const before = snapshot(parent.runDir)
        const result = await resume([parent.runDir, "--out", out])
        expect({ code: result.code, stderr: result.stderr }).toEqual({
          code: 2,
          stderr: `cohort: resume: --out ${out} is inside the folder of run ${parent.runId} (${parent.runDir}); a resumed run is written beside the run it resumes, never inside it\n`
        })
        expect(snapshot(parent.runDir)).toEqual(before)
      }
      // The same file with another dataset size; then the same size but other contents (each in a
      // process of its own: this one has the module cached).
      writeFileSync(trainer, source(20000))
      await refused(
        parent.runDir,
        `resume: the trainer ${trainer} has 20000 training samples, but run ${parent.runId} trained on 24000; resume needs the same dataset`,
        true
      )
      writeFileSync(trainer, `${source(24000)}// edited\n`)
      await refused(
        parent.runDir,
        `resume: the trainer ${trainer} is not the file run ${parent.runId} trained with (its SHA-256 differs); resume needs the same trainer`,
        true
      )
      writeFileSync(trainer, source(24000))

      // Every survivor's save corrupt and no checkpoint: nothing to load.
      const broken = join(outDir, "broken", parent.runId)
      cpSync(parent.runDir, broken, { recursive: true })
      rmSync(join(broken, "checkpoints"), { recursive: true, force: true })
      for (const rank of [0, 1, 2]) truncateSync(join(broken, "save", `rank${rank}`, "cohort-params.f32"), 3)
      await refused(
        broken,
        `resume: no state to resume run ${parent.runId} from: the survivors' saves are not usable (` +
          `rank 0: cohort-params.f32 has 3 bytes, expected 16; rank 1: cohort-params.f32 has 3 bytes, expected 16; rank 2: cohort-params.f32 has 3 bytes, expected 16); ` +
          `and no good checkpoint under ${broken}/checkpoints`
      )
    }, 300_000)

    it.sequential("corrupt saves fall back to the last checkpoint (and say so); a second resume while the first runs is refused by its lock, and so is a resume of the run it is training; a stale lock is taken over; a resume from the saves spans both runs", async () => {
      const parent = await interrupted("locked")
      const uncommitted = parent.outcome.uncommitted!
      // A parent that averaged with the ring (its journal says so) is resumed with the ring, and its
      // ring options, not with the default cpu backend.
      const ringParent = join(outDir, "ring-parent", parent.runId)
      cpSync(parent.runDir, ringParent, { recursive: true })
      const ringJournal = join(ringParent, "events.ndjson")
      writeFileSync(ringJournal, readFileSync(ringJournal, "utf8").replace(`"backend":"cpu"`, `"backend":"ring","ringAreaMemoryMb":64`))
      let carried: RunOptions | undefined
      await Resume.resume({ resume: ringParent }, async (options) => {
        carried = options
        throw new Error("not launched")
      }).catch(() => {})
      expect([carried?.backend, carried?.ringAreaMemoryMb, carried?.worldSize]).toEqual(["ring", 64, 3])
      // A copy whose saves are corrupt: the checkpoint of epoch 0 is loaded instead.
      const corrupt = join(outDir, "corrupt", parent.runId)
      cpSync(parent.runDir, corrupt, { recursive: true })
      for (const rank of [0, 1, 2]) writeFileSync(join(corrupt, "save", `rank${rank}`, "cohort-params.f32"), new Uint8Array(16).fill(7))
      const before = snapshot(corrupt)
      // The first resume, a process of its own, holds (its trainer waits on the hold file) while a second one tries.
      writeFileSync(hold, "")
      const first = startCli(["resume", corrupt, "--json", "--out", join(outDir, "corrupt-resumed")])
      const lock = join(corrupt, "resume.lock")
      try {
        for (let i = 0; i < 6000 && !existsSync(lock); i++) await sleep(20)
        expect(JSON.parse(readFileSync(lock, "utf8")).pid).toBe(first.pid)
        await refused(
          corrupt,
          `resume: run ${parent.runId} is already being resumed by process ${first.pid} (lock file ${lock}); wait for it to end`
        )
        // The resumed run itself is still training (held): resuming it is refused by its run.lock.
        const resumedRuns = join(outDir, "corrupt-resumed")
        for (
          let i = 0;
          i < 6000 && !(existsSync(resumedRuns) && readdirSync(resumedRuns).some((id) => existsSync(join(resumedRuns, id, "run.lock"))));
          i++
        )
          await sleep(20)
        const runningId = readdirSync(resumedRuns).find((id) => existsSync(join(resumedRuns, id, "run.lock")))!
        const running = await resume([join(resumedRuns, runningId)])
        expect({ code: running.code, stderr: running.stderr }).toEqual({
          code: 2,
          stderr: `cohort: resume: run ${runningId} is still running in process ${first.pid} (lock file ${join(resumedRuns, runningId, "run.lock")}); stop it first (SIGINT saves it) or wait for it to end\n`
        })
        // Once the first resume forms it also marks the parent resumed: while it runs, its lock still
        // speaks (not "resume that run instead, or delete the marker").
        const marker = join(corrupt, "resumed-by.json")
        expect(existsSync(marker)).toBe(false)
        writeFileSync(marker, `${JSON.stringify({ runId: runningId, runDir: join(resumedRuns, runningId) })}\n`)
        await refused(
          corrupt,
          `resume: run ${parent.runId} is already being resumed by process ${first.pid} (lock file ${lock}); wait for it to end`
        )
        rmSync(marker)
      } finally {
        rmSync(hold, { force: true })
      }
      const done = await first.exited
      expect(done.code).toBe(0)
      expect(done.stderr.split("\n").filter((line) => line.startsWith("cohort: note:"))).toEqual([
        `cohort: note: the survivors' saves are not usable (${[0, 1, 2].map((r) => `rank ${r}: cohort-params.f32 does not match its checksum`).join("; ")}): ` +
          `resuming from checkpoint v0, the model after the last audited epoch; epoch 1 is trained from its start`
      ])
      const fromCheckpoint = JSON.parse(done.stdout) as RunResult
      expect([fromCheckpoint.resumed?.state, fromCheckpoint.resumed?.epoch, fromCheckpoint.resumed?.committedSamples]).toEqual([
        "checkpoint",
        1,
        0
      ])
      expect(auditRows(fromCheckpoint)).toEqual([
        [1, 24000, 0, 0],
        [2, 24000, 0, 0]
      ])
      // The lock is gone and nothing else in the parent changed but the marker naming the run that
      // resumed it, which refuses a second resume (it would train the same samples again).
      const { ["resumed-by.json"]: marker, ...after } = snapshot(corrupt)
      expect(after).toEqual(before)
      expect(marker).toBeDefined()
      const markerPath = join(corrupt, "resumed-by.json")
      expect(JSON.parse(readFileSync(markerPath, "utf8"))).toEqual({ runId: fromCheckpoint.runId, runDir: fromCheckpoint.runDir })
      await refused(
        corrupt,
        `resume: run ${parent.runId} was already resumed by run ${fromCheckpoint.runId} (${fromCheckpoint.runDir}), which trained on from it: resume that run instead (resume ${fromCheckpoint.runDir}), or, to train from run ${parent.runId} again anyway, delete ${markerPath}`
      )

      // Rank 0's save is a model of no round (a ring joiner still waiting for its model when the
      // run stopped saves its initial one): the newest round's save, rank 1's, is loaded instead.
      const round = (JSON.parse(readFileSync(join(parent.runDir, "save", "rank1", "cohort-params.json"), "utf8")) as { round: number })
        .round
      expect(round).toBeGreaterThan(0)
      await SavedModel.write(join(parent.runDir, "save", "rank0"), new Float32Array(4), { epoch: 1, round: -1, rank: 0 })
      // A lock left by a resume that was killed (its process is gone) is taken over.
      const stale = join(parent.runDir, "resume.lock")
      writeFileSync(stale, `${JSON.stringify({ pid: 999_999_999, acquiredAtMs: 1 })}\n`)
      const resumed = await resume([parent.runDir, "--world-size", "2", "--json"])
      expect(resumed.code).toBe(0)
      expect(resumed.stderr.split("\n").filter((line) => line.startsWith("cohort: note:"))).toEqual([
        `cohort: note: took over the stale lock ${stale}: process 999999999 is gone`,
        `cohort: note: not loaded: the save of rank 0: its model is of round -1, older than rank 1's (round ${round})`
      ])
      expect(existsSync(stale)).toBe(false)
      const child = JSON.parse(resumed.stdout) as RunResult
      const left = uncommitted.ranges.reduce((sum, [, size]) => sum + size, 0)
      expect(left).toBeLessThan(24000 - 3 * 1024)
      expect(child.resumed).toMatchObject({
        epoch: 1,
        committedSamples: 24000 - left,
        state: "save",
        loadedFrom: `${parent.runDir}/save/rank1`
      })
      expect(auditRows(child)).toEqual([
        [1, 24000, 0, 0],
        [2, 24000, 0, 0]
      ])
      expect(child.epochs[0]!.spansRuns).toEqual([parent.runId, child.runId])
      // Its report says where it came from.
      const report = await cohort("report", child.runDir)
      expect(report.code).toBe(0)
      expect(report.stdout).toContain(`resumed: this run resumes run ${parent.runId} (${parent.runDir}) in epoch 1: `)
    }, 300_000)
  })
})
