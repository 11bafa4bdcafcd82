/**
 * Served ranks on links that misbehave, across hosts made of Linux network namespaces (the
 * harness of test/net: `cohort serve` in host A, rank 0 in host B, the other ranks in host C;
 * every process the CLI under this runtime). NEEDS ROOT ON LINUX (network namespaces, nftables,
 * tc): anywhere else it stops at once and says so.
 *
 * Every cluster runs `bench/trainers/waiting.ts` (2 ms a batch) with `COHORT_BENCH_PARAMS`
 * parameters (8,192 by default: a 32 KB `Params`, 0.26 s at 1 Mbit/s; `--params N`) and rounds with a deadline
 * (`--round-deadline-ms N`, 100 by default; `--round-quorum F`, the CLI's half of the survivors
 * by default; `--mode`, static by default), so that a round can close without a slow contributor.
 *
 * - **Loss ratio**: the same run twice in one bench run, every link clean and then rank 0's link at
 *   30% packet loss both ways (nftables); the time between two rounds closing (what the healthy
 *   ranks wait for), median and p90, and the lossy run's as a ratio to the clean run's (target
 *   <= 1.5x). Each run must have closed at least `roundsMin` rounds (the ratio's sample) with
 *   audits clean, else the bench fails.
 * - **Failover on links** (the failover bench's link rows): rank 0's link clean, at 1 Mbit/s
 *   both ways (`tbf`), or at 30% loss; two healthy ranks in C are SIGKILLed at 3 s and 6 s after
 *   formation. Per row: kill -> declared and kill -> remainder sent (medians; a served rank whose
 *   process ends is held `resumeWindowMs`, 2 s, for a resume before it is declared), and false
 *   deaths: ranks declared that were not killed (target 0).
 *
 * Run (as root): `node --import tsx bench/links.ts [--quick] [--loss-only] [--params N] [--mode M] [--round-deadline-ms N] [--round-quorum F]`; the failover rows
 * alone: `node --import tsx bench/failover.ts --links-only`.
 */
import { rmSync } from "node:fs"
import { fileURLToPath } from "node:url"
import * as Cluster from "../test/net/cluster.ts"
import * as Netns from "../test/net/netns.ts"
import * as Lib from "./lib.ts"

const trainer = fileURLToPath(new URL("./trainers/waiting.ts", import.meta.url))
const flag = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(name)
  return at < 0 ? fallback : (process.argv[at + 1] ?? fallback)
}
/** `--round-deadline-ms N` (default 100: about a clean round here). */
const roundDeadlineMs = Number(flag("--round-deadline-ms", "100"))
/** `--round-quorum F` (default the CLI's, half the survivors). */
const roundQuorum = flag("--round-quorum", "")
/** `--mode static|progressive` (default static). */
const mode = flag("--mode", "static")
const serveArgs = [
  "--round-deadline-ms",
  String(roundDeadlineMs),
  "--mode",
  mode,
  ...(roundQuorum === "" ? [] : ["--round-quorum", roundQuorum])
]
const setting = `--mode ${mode}, --round-deadline-ms ${roundDeadlineMs}${roundQuorum === "" ? "" : `, --round-quorum ${roundQuorum}`}`
const roundsMin = 20
/** Every process is killed after this long. */
const lifetimeMs = 300_000

type Link = "clean" | "1 Mbit/s" | "30% loss"

/** `--params N` (default 8,192: with more, a 1 Mbit/s link cannot carry one Update a round; see bench/README.md). */
export const paramsOf = (argv: ReadonlyArray<string>): number => {
  const at = argv.indexOf("--params")
  return at < 0 ? 8192 : Number(argv[at + 1])
}

/** Throws, saying why, unless this process may make network namespaces. */
export const requireRoot = (): void => {
  try {
    Netns.requireRootLinux()
  } catch (error) {
    throw new Error(`bench/links.ts NEEDS ROOT ON LINUX (network namespaces, nftables, tc): ${(error as Error).message}`)
  }
}

interface Ran {
  readonly summary: ReturnType<typeof Cluster.readRun>["summary"]
  readonly events: ReadonlyArray<Cluster.Event>
  /** Kills in the run's own clock (the journal's `ms`). */
  readonly killsMs: ReadonlyArray<number>
  readonly wallMs: number
}

let clusters = 0

/** One served cluster; `kills` are [rank, ms after formation]. */
const runCluster = async (options: {
  readonly link: Link
  readonly worldSize: number
  readonly epochs: number
  readonly params: number
  readonly kills: ReadonlyArray<readonly [number, number]>
}): Promise<Ran> => {
  clusters += 1
  const scratch = Cluster.scratch("cohort-bench-links-")
  const network = Netns.create(["a", "b", "c"])
  const started = Lib.nowMs()
  try {
    if (options.link === "1 Mbit/s") network.rateLimitBoth("b", { rateKbit: 1000, burstBytes: 4096, latencyMs: 400 })
    if (options.link === "30% loss") network.dropPercentBoth("b", 30)
    const { serve, ranks, out } = await Cluster.start(network, {
      scratch,
      name: `run${clusters}`,
      trainer,
      worldSize: options.worldSize,
      epochs: options.epochs,
      port: 7300,
      lifetimeMs,
      hostOf: (rank) => (rank === 0 ? "b" : "c"),
      serveArgs,
      env: { COHORT_BENCH_PARAMS: String(options.params) }
    })
    await serve.waitFor(/formed/, 120_000)
    const formedWallMs = Date.now()
    const killsWallMs: Array<number> = []
    for (const [rank, atMs] of options.kills) {
      await Cluster.sleep(Math.max(0, formedWallMs + atMs - Date.now()))
      if (/run ended/.test(serve.stdout() + serve.stderr()))
        throw new Error(`the run ended before the kill at ${atMs} ms: give it more epochs`)
      ranks[rank]!.kill("SIGKILL")
      killsWallMs.push(Date.now())
    }
    const code = await serve.exited
    if (code !== 0) throw new Error(`cohort serve exited ${code}:\n${serve.stderr()}`)
    await Promise.all(ranks.map((r) => r.exited))
    const { summary, events } = Cluster.readRun(out)
    // The journal's clock: an epoch's wall start against its event time.
    const formedMs = events.find((e) => e.type === "formed")?.ms ?? 0
    const offsetMs = (summary.epochs[0]?.startedAtMs ?? Number.NaN) - formedMs
    return { summary, events, killsMs: killsWallMs.map((ms) => ms - offsetMs), wallMs: Lib.nowMs() - started }
  } finally {
    network.destroy()
    rmSync(scratch.dir, { recursive: true, force: true })
  }
}

const auditsClean = (ran: Ran): boolean => ran.summary.epochs.every((e) => e.lost === 0 && e.duplicated === 0)

/** Milliseconds between two rounds closing, within each epoch (an epoch's end waits for its last contributions). */
const roundGaps = (events: ReadonlyArray<Cluster.Event>): ReadonlyArray<number> => {
  const rounds = events.filter((e) => e.type === "round")
  return rounds.slice(1).flatMap((e, i) => (e.epoch === rounds[i]!.epoch ? [e.ms - rounds[i]!.ms] : []))
}

/** Rounds closed at their deadline, from the journal's last event. */
const roundsAtDeadline = (events: ReadonlyArray<Cluster.Event>): number => {
  const ended = events.find((e) => e.type === "ended") as
    | { readonly outcome?: { readonly counters?: { readonly roundsClosedAtDeadline?: number } } }
    | undefined
  return ended?.outcome?.counters?.roundsClosedAtDeadline ?? Number.NaN
}

export interface LossRow {
  readonly link: Link
  readonly rounds: number
  readonly roundsAtDeadline: number
  readonly roundMs: { readonly median: number; readonly p90: number }
  readonly ratio: { readonly median: number; readonly p90: number }
  readonly deaths: number
  readonly wallMs: number
}

/** The loss ratio: the clean run, then the lossy one, in this bench run. */
export const runLossRatio = async (
  quick: boolean,
  params: number
): Promise<{ readonly rows: ReadonlyArray<LossRow>; readonly markdown: string }> => {
  requireRoot()
  const measured: Array<Omit<LossRow, "ratio">> = []
  for (const link of ["clean", "30% loss"] as const) {
    Lib.note(`links: loss ratio, ${link}`)
    const ran = await runCluster({ link, worldSize: 3, epochs: quick ? 2 : 4, params, kills: [] })
    const gaps = roundGaps(ran.events)
    if (gaps.length < roundsMin)
      throw new Error(`the ${link} run closed ${gaps.length + 1} rounds, fewer than the ${roundsMin} the ratio needs`)
    if (!auditsClean(ran)) throw new Error(`the ${link} run's audit is not clean: ${JSON.stringify(ran.summary.epochs)}`)
    measured.push({
      link,
      rounds: gaps.length,
      roundsAtDeadline: roundsAtDeadline(ran.events),
      roundMs: { median: Lib.quantile(gaps, 0.5), p90: Lib.quantile(gaps, 0.9) },
      deaths: ran.summary.deaths.length,
      wallMs: ran.wallMs
    })
  }
  const clean = measured[0]!
  const rows = measured.map((m) => ({
    ...m,
    ratio: { median: m.roundMs.median / clean.roundMs.median, p90: m.roundMs.p90 / clean.roundMs.p90 }
  }))
  const markdown =
    Lib.table(
      [
        "rank 0's link",
        "round gaps measured",
        "closed at deadline",
        "round ms median",
        "p90",
        "ratio median",
        "ratio p90",
        "deaths",
        "run s"
      ],
      rows.map((r) => [
        r.link,
        r.rounds,
        r.roundsAtDeadline,
        r.roundMs.median,
        r.roundMs.p90,
        r.ratio.median,
        r.ratio.p90,
        r.deaths,
        r.wallMs / 1000
      ])
    ) + `\n\n3 served ranks (rank 0 on the link named), ${params.toLocaleString("en-US")} parameters, ${setting}; target: ratio <= 1.5`
  return { rows, markdown }
}

export interface FailoverLinkRow {
  readonly link: Link
  readonly kills: number
  readonly killToDeclaredMs: number
  readonly killToRecoveredMs: number
  readonly falseDeaths: number
  readonly lost: number
  readonly duplicated: number
  readonly wallMs: number
}

/** The failover bench's link rows. */
export const runFailoverRows = async (
  quick: boolean,
  params: number
): Promise<{ readonly rows: ReadonlyArray<FailoverLinkRow>; readonly markdown: string }> => {
  requireRoot()
  const rows: Array<FailoverLinkRow> = []
  for (const link of ["clean", "1 Mbit/s", "30% loss"] as const) {
    Lib.note(`links: failover, rank 0's link ${link}`)
    const kills: ReadonlyArray<readonly [number, number]> = quick
      ? [[4, 3000]]
      : [
          [4, 3000],
          [3, 6000]
        ]
    const ran = await runCluster({ link, worldSize: 5, epochs: quick ? 6 : 10, params, kills })
    const killed = new Set(kills.map(([rank]) => rank))
    const deathOf = (rank: number) => ran.summary.deaths.find((d) => d.rank === rank)
    const toDeclared = kills.map(([rank], i) => (deathOf(rank)?.declaredMs ?? Number.NaN) - ran.killsMs[i]!)
    const toRecovered = kills.map(([rank], i) => (deathOf(rank)?.recoveredMs ?? Number.NaN) - ran.killsMs[i]!)
    rows.push({
      link,
      kills: kills.length,
      killToDeclaredMs: Lib.quantile(toDeclared, 0.5),
      killToRecoveredMs: Lib.quantile(toRecovered, 0.5),
      falseDeaths: ran.summary.deaths.filter((d) => !killed.has(d.rank)).length,
      lost: ran.summary.epochs.reduce((sum, e) => sum + e.lost, 0),
      duplicated: ran.summary.epochs.reduce((sum, e) => sum + e.duplicated, 0),
      wallMs: ran.wallMs
    })
  }
  const markdown =
    Lib.table(
      [
        "rank 0's link",
        "kills",
        "kill → declared ms (median)",
        "kill → remainder sent ms (median)",
        "false deaths",
        "lost",
        "duplicated",
        "run s"
      ],
      rows.map((r) => [r.link, r.kills, r.killToDeclaredMs, r.killToRecoveredMs, r.falseDeaths, r.lost, r.duplicated, r.wallMs / 1000])
    ) +
    `\n\n5 served ranks (rank 0 on the link named, ranks 1-4 in another host; ranks 4 and 3 SIGKILLed at 3 s and 6 s), ${params.toLocaleString("en-US")} parameters, ${setting}; target: 0 false deaths`
  return { rows, markdown }
}

if (Lib.isMain("links")) {
  const quick = Lib.isQuick()
  const params = paramsOf(process.argv)
  const loss = await runLossRatio(quick, params)
  console.log(`## links: round time with one rank at 30% loss\n\n${loss.markdown}\n`)
  const failover = process.argv.includes("--loss-only") ? undefined : await runFailoverRows(quick, params)
  if (failover !== undefined) console.log(`## links: failover\n\n${failover.markdown}\n`)
  console.log(
    `results: ${Lib.writeResults({ linksLoss: loss.rows, ...(failover === undefined ? {} : { linksFailover: failover.rows }) }, quick)}`
  )
}
