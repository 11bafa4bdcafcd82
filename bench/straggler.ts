/**
 * Stragglers (a round deadline, `roundDeadlineMs`): worker-thread ranks in progressive mode with
 * the `cpu` backend, one of them ten times slower a batch (`bench/trainers/straggler.ts`; it
 * stands for a rank on a lossy or slow link). Three runs in the same process: every rank healthy;
 * the straggler with rounds that wait for it (the default); the straggler with a round deadline of
 * twice the healthy run's median time a round stays open (first contribution to close), at least
 * one 10 ms tick. Reports each run's median and p99 time between
 * two rounds closing, its epoch time, and both as ratios to the healthy run, with the rounds closed
 * at their deadline and the audit (which must be clean: a late contribution commits only when it
 * is folded into a later round).
 *
 * Run: `node --import tsx bench/straggler.ts [--quick]`, `bun bench/straggler.ts`.
 */
import * as Launcher from "../actors/launcher/launcher.ts"
import * as Lib from "./lib.ts"

export interface Row {
  readonly run: "healthy" | "straggler, rounds wait" | "straggler, round deadline"
  readonly worldSize: number
  readonly roundDeadlineMs: number
  readonly rounds: number
  readonly roundsAtDeadline: number
  readonly roundMs: { readonly median: number; readonly p99: number }
  readonly openMs: { readonly median: number; readonly p99: number }
  readonly epochMs: number
  readonly roundRatio: number
  readonly epochRatio: number
  readonly lost: number
  readonly duplicated: number
}

const measure = async (quick: boolean, slow: boolean, roundDeadlineMs: number) => {
  const worldSize = quick ? 3 : 4
  process.env["COHORT_BENCH_SLOW"] = slow ? `${worldSize - 1}:20` : ""
  const closed: Array<number> = []
  const openMs: Array<number> = []
  const result = await Launcher.run({
    trainer: "bench/trainers/straggler.ts",
    worldSize,
    epochs: 1,
    mode: "progressive",
    batchSize: 16,
    averageEverySteps: 8,
    tickMs: 10,
    ...(roundDeadlineMs > 0 ? { roundDeadlineMs } : {}),
    outDir: "bench/results/runs",
    onRankOutput: () => {},
    onEvent: (event) => {
      if (event.type !== "round") return
      closed.push(Lib.nowMs())
      openMs.push(event.openMs)
    }
  })
  const gaps = closed.slice(1).map((at, i) => at - closed[i]!)
  const epoch = result.epochs[0]
  return {
    worldSize,
    rounds: closed.length,
    roundsAtDeadline: result.outcome.counters.roundsClosedAtDeadline,
    roundMs: Lib.percentiles(gaps),
    openMs: Lib.percentiles(openMs),
    epochMs: epoch === undefined ? Number.NaN : epoch.endedAtMs - epoch.startedAtMs,
    lost: epoch?.lost ?? Number.NaN,
    duplicated: epoch?.duplicated ?? Number.NaN
  }
}

/** The three runs and their table. */
export const run = async (quick: boolean): Promise<{ readonly rows: ReadonlyArray<Row>; readonly markdown: string }> => {
  const healthy = await measure(quick, false, 0)
  const waits = await measure(quick, true, 0)
  // A healthy round closes a few ms after its first contribution (the others come in close behind):
  // the deadline gives a round twice its healthy median open time, at least one tick.
  const deadlineMs = Math.max(10, Math.round(healthy.openMs.median * 2))
  const deadline = await measure(quick, true, deadlineMs)
  delete process.env["COHORT_BENCH_SLOW"]
  const row = (run: Row["run"], m: Awaited<ReturnType<typeof measure>>, roundDeadlineMs: number): Row => ({
    run,
    ...m,
    roundDeadlineMs,
    roundRatio: m.roundMs.median / healthy.roundMs.median,
    epochRatio: m.epochMs / healthy.epochMs
  })
  const rows = [row("healthy", healthy, 0), row("straggler, rounds wait", waits, 0), row("straggler, round deadline", deadline, deadlineMs)]
  const markdown = Lib.table(
    [
      "run",
      "ranks",
      "deadline ms",
      "rounds",
      "at deadline",
      "open ms median",
      "round ms median",
      "p99",
      "× healthy",
      "epoch ms",
      "× healthy",
      "lost",
      "duplicated"
    ],
    rows.map((r) => [
      r.run,
      r.worldSize,
      r.roundDeadlineMs === 0 ? "off" : r.roundDeadlineMs,
      r.rounds,
      r.roundsAtDeadline,
      Lib.fmt(r.openMs.median),
      Lib.fmt(r.roundMs.median),
      Lib.fmt(r.roundMs.p99),
      Lib.fmt(r.roundRatio),
      Lib.fmt(r.epochMs),
      Lib.fmt(r.epochRatio),
      r.lost,
      r.duplicated
    ])
  )
  return { rows, markdown }
}

if (Lib.isMain("straggler")) {
  const quick = Lib.isQuick()
  const { markdown, ...data } = await run(quick)
  console.log(`## straggler\n\n${markdown}\n`)
  console.log(`results: ${Lib.writeResults({ straggler: data }, quick)}`)
}
