// Growing cohorts (docs/growing.md) as a user runs them: `cohort serve --max-ranks` and `cohort join`
// processes over 127.0.0.1, under the runtime running the tests (Node, Bun, Deno). One run per
// mode: 2 ranks form it, 2 more join during epoch 0, one of the first two is killed in epoch 1,
// and the run finishes with clean audits and the accuracy of a fixed 3-rank run (minus 0.01).
// The progressive run also takes the refusals a user meets: a join beyond maxRanks (4013) and a
// dead rank's index (4015). Beside them a ring run grows from 2 to 3 ranks (the joiner takes the
// model from a ring member) and keeps the fixed run's accuracy. The trainer is paced by a file (mnist-paced.ts): slow while the test
// acts on the run, then full speed. Full tier: the grown runs take a minute and more on 2 cores;
// the quick tier has the joins in test/actors/grow-hostile.test.ts and test/core/joins.test.ts,
// and the flags in serve-grow.test.ts.
import type { ChildProcess } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import { type CliProcess, freePort, servedUrl, startCli, waitFor } from "../cli-process.ts"

const runtime = Runtime.detect()
const paced = fileURLToPath(new URL("../fixtures/trainers/mnist-paced.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-grow-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const token = "serve-grow-test-token-0123456789"
const tokenFile = join(dir, "token")
writeFileSync(tokenFile, `${token}\n`)

const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
})

const cohort = (args: ReadonlyArray<string>, env: Record<string, string> = {}): CliProcess =>
  startCli(args, { cwd: dir, env, started: children })

const count = (text: string, pattern: RegExp): number => (text.match(pattern) ?? []).length

interface Summary {
  readonly exitCode: number
  readonly finalAccuracy: number
  readonly epochs: ReadonlyArray<{ readonly samplesCommitted: number; readonly lost: number; readonly duplicated: number }>
  readonly deaths: ReadonlyArray<{ readonly rank: number; readonly epoch: number; readonly redistributed: boolean }>
  readonly refusals?: Readonly<Record<string, number>>
  readonly outcome: {
    readonly joins?: ReadonlyArray<{ readonly rank: number; readonly epoch: number; readonly firstRound: number; readonly samples: number }>
  }
  readonly runDir: string
}

interface Event {
  readonly type: string
  readonly rank?: number
  readonly epoch?: number
  readonly samples?: number
  readonly detail?: string
  readonly closeCode?: number
}

const audits = (summary: Summary) => summary.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])

/** A fixed 3-rank run of the same trainer, mode and epochs (worker threads, full speed): its final accuracy. */
const baseline = async (mode: string): Promise<number> => {
  const run = cohort([
    "run",
    "--trainer",
    paced,
    "--world-size",
    "3",
    "--mode",
    mode,
    "--epochs",
    "3",
    "--no-kill",
    "--out",
    `base-${mode}`,
    "--json"
  ])
  expect(await run.exit).toBe(0)
  return (JSON.parse(run.out()) as Summary).finalAccuracy
}

/** The served run's journal, every line parsed. */
const journalOf = (summary: Summary): Array<Event> =>
  readFileSync(join(dir, summary.runDir, "events.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Event)

/**
 * Serves a run of 2 ranks that may grow (`serveArgs`: `--max-ranks`, the mode, the backend) over
 * 3 epochs under `runs-<name>`, paced at 2 s a batch, and joins its 2 formation ranks; resolves
 * once it formed. At that pace epoch 0 lasts about 64 s: the joiners' commands (`joinAs`, saving
 * under `<name>-save-<i>`) start in time on a loaded machine, where they take seconds each.
 */
const servedPaced = async (name: string, serveArgs: ReadonlyArray<string>) => {
  const paceFile = join(dir, `pace-${name}`)
  writeFileSync(paceFile, "2000")
  const env = { COHORT_TEST_PACE: paceFile }
  const port = await freePort()
  const serve = cohort(
    [
      ...["serve", "--trainer", paced, "--world-size", "2", ...serveArgs, "--epochs", "3"],
      ...["--listen", `127.0.0.1:${port}`, "--token-file", tokenFile, "--out", `runs-${name}`, "--json"]
    ],
    env
  )
  const url = await servedUrl(serve)
  const joinAs = (i: number) =>
    cohort(
      [
        ...["join", url, "--trainer", paced, "--token-file", tokenFile, "--rank", "auto"],
        ...["--save-dir", `${name}-save-${i}`, "--connect-timeout-ms", "60000"]
      ],
      env
    )
  const first = [0, 1].map(joinAs)
  await waitFor(() => serve.err().includes("formed: every one of the 2 ranks joined"), 120_000, "formation")
  return { serve, url, env, paceFile, joinAs, first }
}

/**
 * Serves 2 ranks with `--max-ranks 4` in `mode`; 2 more join during epoch 0; rank 0 is killed in
 * epoch 1; `during(url, env)` runs once rank 0's death is declared, before the run speeds up.
 */
const grownRun = async (
  mode: "progressive" | "static",
  during: (url: string, env: Record<string, string>) => Promise<void>,
  joined: () => void = () => {}
) => {
  // Once both joiners are in, 300 ms a batch: epoch 1 lasts seconds, time to kill in it.
  const { serve, url, env, paceFile, joinAs, first } = await servedPaced(mode, ["--max-ranks", "4", "--mode", mode])
  const joiners = [2, 3].map(joinAs)
  await waitFor(() => count(serve.err(), /joined the running run in epoch \d+/g) === 2, 120_000, "two joins")
  joined()
  writeFileSync(paceFile, "300")
  await waitFor(() => serve.err().includes("epoch 0 done"), 120_000, "epoch 0's end")
  const zero = first.find((p) => p.err().includes(" as rank 0 of 2"))!
  zero.child.kill("SIGKILL")
  await waitFor(() => serve.err().includes("rank 0 lost"), 60_000, "rank 0's death")
  // The refused joins' commands take seconds to start: the run must still be training then.
  writeFileSync(paceFile, "1000")
  await during(url, env)
  unlinkSync(paceFile)
  // serve, the other formation rank and the joiners exit 0; rank 0 was killed (no code).
  const codes = await Promise.all([serve, ...first.filter((p) => p !== zero), ...joiners, zero].map((p) => p.exit))
  const summary = JSON.parse(serve.out()) as Summary
  return { codes, summary, journal: journalOf(summary), joiners, serve }
}

/**
 * The ring backend (docs/growing.md): serves 2 ranks with `--max-ranks 3` in progressive mode; a third
 * joins during epoch 0, takes the model from rank 0 through the coordinator and enters the ring at
 * the next round boundary; no fault.
 */
const grownRing = async (after: Promise<unknown>) => {
  // Its processes start once the other runs' joiners are in: process starts are what loads the
  // machine, and those joins must land in their epoch 0.
  await after
  const { serve, paceFile, joinAs, first } = await servedPaced("ring", ["--max-ranks", "3", "--backend", "ring", "--mode", "progressive"])
  const joiner = joinAs(2)
  await waitFor(() => count(serve.err(), /joined the running run in epoch \d+/g) === 1, 120_000, "the join")
  writeFileSync(paceFile, "300")
  // Paced until the journal shows the joiner's trained samples (a progress line at most once a second).
  const trained = (): boolean => {
    const runs = join(dir, "runs-ring")
    const journals = existsSync(runs)
      ? readdirSync(runs)
          .map((id) => join(runs, id, "events.ndjson"))
          .filter((file) => existsSync(file))
      : []
    return journals.some((file) =>
      readFileSync(file, "utf8")
        .split("\n")
        .some((line) => /"type":"progress"/.test(line) && /"rank":2[,}]/.test(line) && /"samplesDone":[1-9]/.test(line))
    )
  }
  await waitFor(trained, 180_000, "the joiner's trained samples")
  unlinkSync(paceFile)
  const codes = await Promise.all([serve, ...first, joiner].map((p) => p.exit))
  const summary = JSON.parse(serve.out()) as Summary & { readonly ring?: { readonly generations: number; readonly links: string } }
  return { codes, summary, journal: journalOf(summary) as Array<Event & { readonly samplesDone?: number }>, joiner }
}

describe(`growing a served run: cohort serve --max-ranks and cohort join (${runtime})`, () => {
  // Both modes run side by side (the paced ranks mostly wait), each beside its fixed 3-rank baseline.
  it("2 ranks grow to 4 in epoch 0 and rank 0 dies in epoch 1; both modes complete with clean audits and the accuracy of a fixed 3-rank run. Progressive: each joiner trains its first chunks in epoch 0; a join beyond maxRanks (4013) and one with rank 0's index (4015) are refused. Static: empty partitions in epoch 0, partitions from epoch 1", async () => {
    let full: [number | null, string] = [null, ""]
    let dead: [number | null, string] = [null, ""]
    let served = ""
    let progressiveJoined = () => {}
    let staticJoined = () => {}
    const joinsIn = Promise.all([
      new Promise<void>((resolve) => (progressiveJoined = resolve)),
      new Promise<void>((resolve) => (staticJoined = resolve))
    ])
    const [progressive, statik, ring] = await Promise.all([
      grownRun(
        "progressive",
        async (url, env) => {
          served = url
          const more = cohort(
            ["join", url, "--trainer", paced, "--token-file", tokenFile, "--save-dir", "more", "--connect-timeout-ms", "60000"],
            env
          )
          const again = cohort(
            [
              "join",
              url,
              "--trainer",
              paced,
              "--token-file",
              tokenFile,
              "--rank",
              "0",
              "--save-dir",
              "again",
              "--connect-timeout-ms",
              "60000"
            ],
            env
          )
          full = [await more.exit, more.err()]
          dead = [await again.exit, again.err()]
        },
        () => progressiveJoined()
      ),
      grownRun(
        "static",
        async () => {},
        () => staticJoined()
      ),
      grownRing(joinsIn)
    ])
    // The baselines train at full speed: after the grown runs, so that they never slow the joins.
    const bases = { progressive: baseline("progressive"), static: baseline("static") }
    for (const { codes, summary } of [progressive, statik]) {
      expect(codes).toEqual([0, 0, 0, 0, null])
      expect(audits(summary)).toEqual([
        [2048, 0, 0],
        [2048, 0, 0],
        [2048, 0, 0]
      ])
      expect(summary.deaths.map((d) => [d.rank, d.epoch, d.redistributed])).toEqual([[0, 1, true]])
    }
    expect(
      progressive.joiners.map((p) => /as rank (\d) \(the run grew beyond the 2 ranks it formed with\)/.exec(p.err())?.[1]).sort()
    ).toEqual(["2", "3"])

    // Progressive: each joiner was handed its first chunks at its welcome in epoch 0; it never died,
    // the audit is clean, and a chunk is committed only by its holder: it trained them in epoch 0.
    // The joiners' Hellos may come in either order (each loads its trainer first).
    const byRank = <A extends { readonly rank?: number }>(list: ReadonlyArray<A>) => [...list].sort((a, b) => (a.rank ?? 0) - (b.rank ?? 0))
    const joins = byRank(progressive.summary.outcome.joins ?? [])
    expect(joins.map((j) => [j.rank, j.epoch])).toEqual([
      [2, 0],
      [3, 0]
    ])
    for (const j of joins) expect(j.samples).toBeGreaterThan(0)
    expect(byRank(progressive.journal.filter((e) => e.type === "welcomed")).map((e) => [e.rank, e.epoch, (e.samples ?? 0) > 0])).toEqual([
      [2, 0, true],
      [3, 0, true]
    ])
    expect(full).toEqual([
      17,
      `cohort join: refused by ${served}: no rank index is free below the run's --max-ranks (the run is full, or the index asked for is not below it) (close code 4013)\n`
    ])
    expect(dead).toEqual([
      13,
      `cohort join: refused by ${served}: that rank index died: a dead rank's index is never reused (close code 4015)\n`
    ])
    expect(progressive.summary.refusals).toEqual({ 4013: 1, 4015: 1 })
    expect(
      progressive.journal
        .filter((e) => e.type === "refused")
        .map((e) => e.closeCode)
        .sort()
    ).toEqual([4013, 4015])
    expect(progressive.serve.err()).toMatch(/\] rank 2 joined the running run in epoch 0 \(rounds from \d+; \d+ samples handed at once\)/)
    expect(progressive.serve.out() + progressive.serve.err()).not.toContain("rank 2 joined in epoch 0") // --json: no end table
    expect(progressive.summary.finalAccuracy).toBeGreaterThanOrEqual((await bases.progressive) - 0.01)

    // Static: one empty StartEpoch per joiner in epoch 0; epoch 1 is planned over all 4 ranks.
    expect(byRank(statik.summary.outcome.joins ?? []).map((j) => [j.rank, j.epoch, j.samples])).toEqual([
      [2, 0, 0],
      [3, 0, 0]
    ])
    const starts = statik.journal
      .filter((e) => e.type === "decision" && /^\d+ × StartEpoch/.test(e.detail ?? ""))
      .map((e) => e.detail!.split(":")[0])
    expect(starts).toEqual(["2 × StartEpoch", "1 × StartEpoch", "1 × StartEpoch", "4 × StartEpoch", "3 × StartEpoch"])
    expect(statik.summary.finalAccuracy).toBeGreaterThanOrEqual((await bases.static) - 0.01)

    // Ring: the joiner got rank 0's model of a closed round as its Update (relayed by the
    // coordinator), entered the ring in a new generation, trained, and the run kept the accuracy.
    expect(ring.codes).toEqual([0, 0, 0, 0])
    expect(audits(ring.summary)).toEqual([
      [2048, 0, 0],
      [2048, 0, 0],
      [2048, 0, 0]
    ])
    expect(ring.summary.deaths).toEqual([])
    expect((ring.summary.outcome.joins ?? []).map((j) => [j.rank, j.epoch])).toEqual([[2, 0]])
    expect(ring.joiner.err()).toMatch(/as rank 2 \(the run grew beyond the 2 ranks it formed with\)/)
    const models = ring.journal.filter((e) => e.type === "decision" && /^Update to rank 2: /.test(e.detail ?? ""))
    expect(models.map((e) => e.detail?.replace(/round \d+/g, "round N"))).toEqual(["Update to rank 2: rank 2's model: round N from rank 0"])
    // Generation 0, then the one the joiner entered; a loaded machine may add a rendezvous retry.
    expect(ring.summary.ring?.generations).toBeGreaterThanOrEqual(2)
    expect(ring.journal.some((e) => e.type === "progress" && e.rank === 2 && (e.samplesDone ?? 0) > 0)).toBe(true)
    // Within 0.025: on Deno the grown ring landed 0.0125 to 0.0185 under its baseline (about 0.305)
    // in 2 of 8 runs, and within 0.0025 in the others; which round the joiner enters moves it.
    expect(ring.summary.finalAccuracy).toBeGreaterThanOrEqual((await bases.progressive) - 0.025)

    // cohort report shows the joins in its end table.
    const report = cohort(["report", progressive.summary.runDir])
    expect(await report.exit).toBe(0)
    expect(report.out()).toMatch(
      /\njoins:\n {2}rank [23] joined in epoch 0, in the rounds from round \d+; \d+ samples handed at once\n {2}rank [23] joined in epoch 0/
    )
    expect(count(report.out(), /\n {2}rank [23] joined in epoch 0,/g)).toBe(2)
  }, 420_000)
})
