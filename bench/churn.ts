/**
 * Churn at edge scale (docs/churn.md): a served run of `ranks` ranks over real WebSocket on
 * loopback, the ranks in a few child processes of many ranks each (`cohort join --ranks`'s
 * `SocketRanks.joinRanks`, bench/churn-ranks.ts). After every averaging round (at most one churn
 * in flight: the next waits until the last one's joiners trained), `fraction` of the live ranks
 * leave, a third each gracefully, by a crash (socket cut) and silently (socket open, nothing sent),
 * and as many new ranks join (`maxRanks`). The same cohort without churn is the baseline.
 *
 * Each row: departures by kind (median / p90 of detection and recovery from the journal's cost
 * lines, and of the bench's own fault → remainder handed over), samples redone, bytes moved,
 * committed samples per second against the baseline, the coordinator's CPU per round (this process
 * holds only the coordinator), the rank processes' peak resident memory, and the audits.
 *
 * Run: `node --import tsx bench/churn.ts [--quick]` (quick: 64 ranks, cpu only).
 */
import { fork } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { setPriority, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Launcher from "../actors/launcher/launcher.ts"
import * as Runtime from "../src/platform/detect.ts"
import type { JoinCost, LeaveCost, RunEvent } from "../actors/record/run-types.ts"
import * as Lib from "./lib.ts"

export interface Scenario {
  readonly ranks: number
  readonly processes: number
  readonly backend: "cpu" | "ring"
  readonly mode: "static" | "progressive"
  readonly epochs: number
  /** Fraction of the live ranks that leave (and join) per churn; 0 for the baseline. */
  readonly fraction: number
  readonly params: number
  readonly batchMs: number
  readonly heartbeatTimeoutMs: number
  /** `cpu` only: rounds close this long after their first contribution without the silent ranks (0: off). */
  readonly roundDeadlineMs?: number
  /** How often ranks beat when they send nothing else (default: a quarter of the timeout, at most 1 s). */
  readonly heartbeatIntervalMs?: number
  /** `cpu`: rounds do not wait on a rank silent this long; it is not declared (`roundSilenceMs`; 0: off). */
  readonly roundSilenceMs?: number
  /** A rank the run waits on and silent this long is declared at once (`blockingSilenceMs`; 0: off). */
  readonly blockingSilenceMs?: number
  /** With blocking silence: the largest share of live ranks silent at once for it to declare any (`blockingSilenceQuietMax`). */
  readonly blockingSilenceQuietMax?: number
  /**
   * The rank processes' niceness (0: the coordinator's): above 0 the OS runs the coordinator first
   * when both want a core, as when the ranks are devices of their own rather than two processes
   * on the coordinator's 2 cores.
   */
  readonly ranksNice?: number
  /**
   * When a churn's joiners count as in (the next churn waits for all of them, and only ranks in
   * can be picked to leave): `welcomed` (the default: the server let them in) or `trained` (their
   * join cost line came: they trained a batch).
   */
  readonly churnAfter?: "welcomed" | "trained"
  /** The ways ranks leave, each an equal share of a churn (default all three). */
  readonly kinds?: ReadonlyArray<"graceful" | "crash" | "silent">
  /** Packed rounds (`compress`): contributions and `Update`s as packed changes (docs/edge-averaging.md). */
  readonly compress?: "none" | "fp16" | "int8"
  /** `deltas` (default: the run's, on with `compress`). */
  readonly deltas?: boolean
  /** Keep the scenario's folder (its run's journal and summary: `Row.runDir`); the caller removes it. */
  readonly keep?: boolean
}

export interface Row {
  readonly scenario: Scenario
  readonly churns: number
  readonly rounds: number
  readonly leaves: ReadonlyArray<LeaveCost>
  /** What bringing each joiner up to date cost (the journal's join lines). */
  readonly joins: ReadonlyArray<JoinCost>
  /** Each rank the bench made leave, how, and when (wall clock ms). */
  readonly faults: ReadonlyArray<readonly [rank: number, kind: string, atMs: number]>
  /** When the last epoch's audit line arrived (wall clock ms): later departures cost nothing. */
  readonly lastAuditAtMs: number
  /** When the cohort formed (wall clock ms): throughput counts from here. */
  readonly startedAtMs: number
  /** The bench's clock: from a fault to its cost line (the survivors had the remainder), by kind. */
  readonly faultToRecoveredMs: Readonly<Record<string, ReadonlyArray<number>>>
  readonly committedPerSecond: number
  readonly coordinatorCpuPerRoundMs: number
  /** Of `coordinatorCpuPerRoundMs`, the kernel's part (`process.cpuUsage().system`): socket reads and writes. */
  readonly coordinatorSystemPerRoundMs: number
  /** The coordinator's CPU over the run's wall time: its busy share of one core, %. */
  readonly coordinatorCpuPercent: number
  /**
   * CPU ms of each side, from the start until the cohort formed (the first ranks' joins, process
   * start included) and from then to the run's end (training, rounds and churn).
   */
  readonly cpuMs: {
    readonly coordinatorToFormed: number
    readonly ranksToFormed: number
    readonly coordinatorRun: number
    readonly ranksRun: number
  }
  readonly roundsPerSecond: number
  readonly rankRssPeakMb: number
  /** This process (the coordinator alone), sampled at each epoch's end: its peaks, MB. */
  readonly coordinatorPeakMb: { readonly rss: number; readonly heapUsed: number; readonly arrayBuffers: number }
  readonly audits: { readonly epochs: number; readonly lost: number; readonly duplicated: number; readonly samples: number }
  readonly exitCode: number
  readonly durationMs: number
  /** The core's counters that say how rounds and epochs' ends went on without silent ranks. */
  readonly counters: {
    readonly roundsClosedWithoutSilent: number
    readonly roundsClosedAtDeadline: number
    readonly takeBacks: number
    readonly samplesTakenBack: number
    readonly paramsTakenBack: number
  }
  /** Joins the server refused, by close code (4008: too many pending from one address). */
  readonly refusals: Readonly<Record<string, number>>
  /** The run's folder (`cohort report` reads it); removed with the scenario's unless `keep`. */
  readonly runDir: string
}

const here = fileURLToPath(new URL(".", import.meta.url))

/** A params-only trainer module whose batches take `batchMs` (a timer, no CPU). */
const writeTrainer = (dir: string, scenario: Scenario, samples: number): string => {
  const file = join(dir, `trainer-${scenario.params}-${samples}-${scenario.batchMs}.ts`)
  writeFileSync(
    file,
    `import { paramsOnly } from ${JSON.stringify(join(here, "trainers/params-only.ts"))}\n` +
      `const t = paramsOnly({ samples: ${samples}, params: ${scenario.params} })\n` +
      `export const trainSamples = t.trainSamples\n` +
      `export const createTrainer = (context: { readonly rank: number }) => {\n` +
      `  const inner = t.createTrainer(context)\n` +
      `  return { ...inner, trainBatch: async (indices: Uint32Array) => { await new Promise((r) => setTimeout(r, ${scenario.batchMs})); return inner.trainBatch(indices) } }\n` +
      `}\n`
  )
  return file
}

/** A process's CPU so far (user + system), ms, from /proc (Linux; 0 elsewhere). */
const cpuMsOf = (pid: number | undefined): number => {
  if (pid === undefined) return 0
  try {
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th, in ticks.
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop()!.trim().split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
  } catch {
    return 0
  }
}
const ticksPerSecond = 100

const rssMb = (pid: number | undefined): number => {
  if (pid === undefined) return 0
  try {
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
    return kb === undefined ? 0 : Number(kb) / 1024
  } catch {
    return 0
  }
}

// Long because: one scenario is one served run, its rank processes and its churn driver together.
export const measure = async (scenario: Scenario): Promise<Row> => {
  const dir = mkdtempSync(join(tmpdir(), "cohort-churn-"))
  const batchSize = 8
  const samples = scenario.ranks * batchSize * 12
  const trainer = writeTrainer(dir, scenario, samples)
  const runToken = "churn-bench-token-0123456789abcdef"
  const joinsMax = Math.ceil(scenario.ranks * scenario.fraction) * 200
  const children: Array<ReturnType<typeof fork>> = []
  const faultAt = new Map<number, { readonly kind: string; readonly atMs: number }>()
  const faultToRecoveredMs: Record<string, Array<number>> = { graceful: [], crash: [], silent: [] }
  let liveCount = 0
  let awaitingJoins = 0
  let started = false
  let churns = 0
  let rounds = 0
  let rssPeak = 0
  let cpuAtStart: NodeJS.CpuUsage | undefined
  const cpuBefore = process.cpuUsage()
  let ranksCpuAtStartMs = 0
  const ranksCpuMs = (): number => children.reduce((sum, child) => sum + cpuMsOf(child.pid), 0)
  let startedMs = 0
  let lastAuditAtMs = 0
  const coordinatorPeakMb = { rss: 0, heapUsed: 0, arrayBuffers: 0 }
  const sampleRss = (): void => {
    rssPeak = Math.max(
      rssPeak,
      children.reduce((sum, child) => sum + rssMb(child.pid), 0)
    )
    const own = process.memoryUsage()
    coordinatorPeakMb.rss = Math.max(coordinatorPeakMb.rss, own.rss / 2 ** 20)
    coordinatorPeakMb.heapUsed = Math.max(coordinatorPeakMb.heapUsed, own.heapUsed / 2 ** 20)
    coordinatorPeakMb.arrayBuffers = Math.max(coordinatorPeakMb.arrayBuffers, own.arrayBuffers / 2 ** 20)
  }
  const churn = (): void => {
    if (!started || scenario.fraction === 0 || awaitingJoins > 0) return
    const count = Math.max(3, Math.round(liveCount * scenario.fraction))
    // Thirds by kind, spread over the processes (each takes as many as it has live ranks).
    const per = (total: number, i: number) => Math.floor(total / children.length) + (i < total % children.length ? 1 : 0)
    const ways = scenario.kinds ?? ["graceful", "crash", "silent"]
    const kinds = { graceful: 0, crash: 0, silent: 0 }
    ways.forEach((way, i) => (kinds[way] = Math.floor(count / ways.length) + (i < count % ways.length ? 1 : 0)))
    churns += 1
    awaitingJoins = count
    children.forEach((child, i) =>
      child.send({
        op: "churn",
        graceful: per(kinds.graceful, i),
        crash: per(kinds.crash, i),
        silent: per(kinds.silent, i),
        join: per(count, i)
      })
    )
  }
  let lastEventAtMs = Date.now()
  const stallWatch = setInterval(() => {
    if (Date.now() - lastEventAtMs > 15_000) {
      Lib.note(`churn: no event for ${Math.round((Date.now() - lastEventAtMs) / 1000)} s (run folder ${dir})`)
    }
  }, 5000)
  const onEvent = (event: RunEvent): void => {
    lastEventAtMs = Date.now()
    switch (event.type) {
      case "formed":
        started = true
        startedMs = Date.now()
        cpuAtStart = process.cpuUsage()
        ranksCpuAtStartMs = ranksCpuMs()
        return
      case "round":
        rounds += 1
        if (rounds % 10 === 0) sampleRss()
        churn()
        return
      case "join":
        if (scenario.churnAfter === "trained") {
          awaitingJoins = Math.max(0, awaitingJoins - 1)
          for (const child of children) child.send({ op: "trained", rank: event.join.rank })
        }
        return
      case "leave": {
        const fault = faultAt.get(event.leave.rank)
        if (fault !== undefined) faultToRecoveredMs[fault.kind]?.push(Date.now() - fault.atMs)
        return
      }
      case "epoch":
        lastAuditAtMs = Date.now()
        sampleRss()
        Lib.note(
          `churn ${scenario.backend} ${scenario.mode} ${scenario.ranks} ranks ${scenario.fraction}: epoch ${event.summary.epoch} lost ${event.summary.lost} duplicated ${event.summary.duplicated}, ${churns} churns`
        )
        return
    }
  }
  const result = await Launcher.serve({
    trainer,
    worldSize: scenario.ranks,
    maxRanks: scenario.ranks + joinsMax,
    epochs: scenario.epochs,
    mode: scenario.mode,
    backend: scenario.backend,
    batchSize,
    averageEverySteps: 2,
    heartbeatTimeoutMs: scenario.heartbeatTimeoutMs,
    ...(scenario.heartbeatIntervalMs === undefined ? {} : { heartbeatIntervalMs: scenario.heartbeatIntervalMs }),
    ...(scenario.roundDeadlineMs === undefined || scenario.roundDeadlineMs === 0 ? {} : { roundDeadlineMs: scenario.roundDeadlineMs }),
    ...(scenario.roundSilenceMs === undefined || scenario.roundSilenceMs === 0 ? {} : { roundSilenceMs: scenario.roundSilenceMs }),
    ...(scenario.blockingSilenceMs === undefined || scenario.blockingSilenceMs === 0
      ? {}
      : { blockingSilenceMs: scenario.blockingSilenceMs }),
    ...(scenario.blockingSilenceQuietMax === undefined ? {} : { blockingSilenceQuietMax: scenario.blockingSilenceQuietMax }),
    ...(scenario.compress === undefined || scenario.compress === "none" ? {} : { compress: scenario.compress }),
    ...(scenario.deltas === undefined ? {} : { deltas: scenario.deltas }),
    failureLimit: { fraction: 1 },
    runToken,
    port: 0,
    outDir: join(dir, "runs"),
    onEvent,
    onListening: (listening) => {
      const per = (i: number) => Math.floor(scenario.ranks / scenario.processes) + (i < scenario.ranks % scenario.processes ? 1 : 0)
      for (let i = 0; i < scenario.processes; i++) {
        const given = {
          url: listening.url,
          runToken,
          trainer: pathToFileURL(trainer).href,
          ranks: per(i),
          saveDir: join(dir, "saves"),
          seed: 17 + i,
          churnAfter: scenario.churnAfter ?? "welcomed"
        }
        const child = fork(join(here, "churn-ranks.ts"), [JSON.stringify(given)], {
          // The rank processes run on Node whatever runs the coordinator (this process): under Bun
          // or Deno only the coordinator changes runtime.
          ...(Runtime.detect() === "node" ? {} : { execPath: "node" }),
          // CHURN_PROF=DIR: each rank process writes a CPU profile there as it exits.
          execArgv: [
            "--import",
            "tsx",
            ...(process.env.CHURN_PROF === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${process.env.CHURN_PROF}`])
          ],
          stdio: ["ignore", "ignore", "inherit", "ipc"]
        })
        child.on("message", (message: { welcomed?: number; left?: number; kind?: string; atMs?: number }) => {
          if (message.welcomed !== undefined) {
            liveCount += 1
            if (started && scenario.churnAfter !== "trained") awaitingJoins = Math.max(0, awaitingJoins - 1)
          }
          if (message.left !== undefined && message.kind !== undefined && message.atMs !== undefined) {
            liveCount -= 1
            faultAt.set(message.left, { kind: message.kind, atMs: message.atMs })
          }
        })
        if (scenario.ranksNice !== undefined && scenario.ranksNice > 0 && child.pid !== undefined)
          setPriority(child.pid, scenario.ranksNice)
        children.push(child)
      }
    }
  })
  clearInterval(stallWatch)
  const cpu = process.cpuUsage(cpuAtStart)
  const ranksCpuAtEndMs = ranksCpuMs()
  const toFormed = cpuAtStart === undefined ? undefined : process.cpuUsage(cpuBefore)
  const durationMs = Date.now() - startedMs
  sampleRss()
  for (const child of children) {
    child.send({ op: "end" })
    setTimeout(() => child.kill("SIGKILL"), 5000).unref()
  }
  if (scenario.keep !== true && process.env.CHURN_KEEP === undefined) rmSync(dir, { recursive: true, force: true })
  else Lib.note(`churn: kept ${dir}`)
  const committed = result.epochs.reduce((sum, e) => sum + e.samplesCommitted, 0)
  return {
    scenario,
    churns,
    rounds,
    leaves: result.leaves ?? [],
    joins: result.joins ?? [],
    faults: [...faultAt].map(([rank, fault]) => [rank, fault.kind, fault.atMs] as const),
    lastAuditAtMs,
    startedAtMs: startedMs,
    faultToRecoveredMs,
    committedPerSecond: committed / (durationMs / 1000),
    coordinatorCpuPerRoundMs: (cpu.user + cpu.system) / 1000 / Math.max(1, rounds),
    coordinatorCpuPercent: (100 * (cpu.user + cpu.system)) / 1000 / Math.max(1, durationMs),
    cpuMs: {
      coordinatorToFormed: toFormed === undefined ? 0 : (toFormed.user + toFormed.system - cpu.user - cpu.system) / 1000,
      ranksToFormed: ranksCpuAtStartMs,
      coordinatorRun: (cpu.user + cpu.system) / 1000,
      ranksRun: ranksCpuAtEndMs - ranksCpuAtStartMs
    },
    coordinatorSystemPerRoundMs: cpu.system / 1000 / Math.max(1, rounds),
    roundsPerSecond: rounds / (durationMs / 1000),
    rankRssPeakMb: rssPeak,
    coordinatorPeakMb,
    audits: {
      epochs: result.epochs.length,
      lost: result.epochs.reduce((sum, e) => sum + e.lost, 0),
      duplicated: result.epochs.reduce((sum, e) => sum + e.duplicated, 0),
      samples: committed
    },
    exitCode: result.exitCode,
    durationMs,
    counters: {
      roundsClosedWithoutSilent: result.outcome.counters.roundsClosedWithoutSilent,
      roundsClosedAtDeadline: result.outcome.counters.roundsClosedAtDeadline,
      takeBacks: result.outcome.counters.takeBacks,
      samplesTakenBack: result.outcome.counters.samplesTakenBack,
      paramsTakenBack: result.outcome.counters.paramsTakenBack
    },
    refusals: result.refusals ?? {},
    runDir: result.runDir
  }
}

const ms = (values: ReadonlyArray<number>): string =>
  values.length === 0
    ? "-"
    : `${Lib.fmt(Lib.quantile(values, 0.5))} / ${Lib.fmt(Lib.quantile(values, 0.9))} / ${Lib.fmt(Lib.quantile(values, 0.99))}`

/** One row per kind of a churned scenario, with the baseline's throughput beside it. */
const rowsOf = (row: Row, baseline: Row | undefined): Array<Array<string | number>> =>
  (["graceful", "crash", "silent"] as const).map((kind) => {
    const of = row.leaves.filter((l) => l.kind === kind)
    return [
      `${row.scenario.ranks} ${row.scenario.backend} ${row.scenario.mode}${row.scenario.roundDeadlineMs ? ` deadline ${row.scenario.roundDeadlineMs} ms` : ""}${row.scenario.roundSilenceMs ? ` round silence ${row.scenario.roundSilenceMs} ms` : ""}${row.scenario.blockingSilenceMs ? ` blocking silence ${row.scenario.blockingSilenceMs} ms` : ""}${row.scenario.blockingSilenceQuietMax ? ` quiet max ${row.scenario.blockingSilenceQuietMax}` : ""}${row.scenario.compress !== undefined && row.scenario.compress !== "none" ? ` ${row.scenario.compress}` : ""}`,
      kind,
      of.length,
      ms(of.map((l) => l.detectionMs)),
      ms(of.flatMap((l) => (l.recoveryMs === undefined ? [] : [l.recoveryMs]))),
      ms(row.faultToRecoveredMs[kind] ?? []),
      of.reduce((sum, l) => sum + l.redoneSamples, 0),
      of.reduce((sum, l) => sum + l.bytesMoved, 0),
      `${row.audits.epochs} epochs, lost ${row.audits.lost}, duplicated ${row.audits.duplicated}, exit ${row.exitCode}`,
      `${Lib.fmt(row.committedPerSecond)} (${baseline === undefined ? "-" : `${Lib.fmt((100 * row.committedPerSecond) / baseline.committedPerSecond)}%`})`,
      `${Lib.fmt(row.coordinatorCpuPerRoundMs)} (${Lib.fmt(row.coordinatorCpuPercent)}%)`,
      Lib.fmt(row.rankRssPeakMb),
      row.joins.length === 0
        ? "-"
        : `${row.joins.length}: ${ms(row.joins.map((j) => j.trainingMs))} ms, ${Lib.fmt(
            Lib.quantile(
              row.joins.map((j) => j.bytes),
              0.5
            )
          )} B`
    ]
  })

export const run = async (quick: boolean): Promise<{ readonly rows: ReadonlyArray<Row>; readonly markdown: string }> => {
  const base = { processes: quick ? 2 : 4, epochs: quick ? 5 : 5, params: 10_000, batchMs: 5, heartbeatTimeoutMs: 2000 }
  // A silent leaver the run waits on, declared at 750 ms instead of the 2 s timeout; ranks then beat every 250 ms.
  const blocking = { blockingSilenceMs: 750, heartbeatIntervalMs: 250 }
  // Rounds that do not wait on silent ranks, and blocking silence for the epoch's end that leaves
  // alone ranks falling silent together (a stalled rank process); ranks beat every 250 ms.
  const quiet = { roundSilenceMs: 300, blockingSilenceMs: 750, blockingSilenceQuietMax: 0.3, heartbeatIntervalMs: 250 }
  const shapes: Array<
    Pick<
      Scenario,
      | "ranks"
      | "backend"
      | "mode"
      | "roundDeadlineMs"
      | "roundSilenceMs"
      | "blockingSilenceMs"
      | "blockingSilenceQuietMax"
      | "heartbeatIntervalMs"
    >
  > = quick
    ? [{ ranks: 64, backend: "cpu", mode: "progressive" }]
    : [
        { ranks: 64, backend: "cpu", mode: "progressive" },
        // A silent leave holds every round open until the heartbeat timeout: a round deadline does not wait for it.
        { ranks: 64, backend: "cpu", mode: "progressive", roundDeadlineMs: 300 },
        { ranks: 64, backend: "cpu", mode: "progressive", ...blocking },
        { ranks: 64, backend: "cpu", mode: "progressive", ...quiet },
        { ranks: 64, backend: "ring", mode: "progressive" },
        { ranks: 64, backend: "ring", mode: "progressive", ...blocking },
        { ranks: 256, backend: "cpu", mode: "progressive" },
        { ranks: 256, backend: "cpu", mode: "progressive", ...blocking },
        { ranks: 256, backend: "cpu", mode: "progressive", ...quiet },
        { ranks: 256, backend: "cpu", mode: "static" },
        { ranks: 256, backend: "ring", mode: "progressive" }
      ]
  const rows: Array<Row> = []
  const table: Array<Array<string | number>> = []
  for (const shape of shapes) {
    const baseline = await measure({ ...base, ...shape, fraction: 0 })
    const churned = await measure({ ...base, ...shape, fraction: 0.3 })
    rows.push(baseline, churned)
    table.push(...rowsOf(churned, baseline))
  }
  const markdown = Lib.table(
    [
      "cohort",
      "kind",
      "count",
      "detection ms median / p90 / p99",
      "recovery ms",
      "fault → recovered ms",
      "redone",
      "bytes moved",
      "audits",
      "committed/s (of no churn)",
      "coordinator cpu ms / round (% of one core)",
      "rank processes peak RSS MB",
      "joins: connect → training ms median / p90 / p99, bytes median"
    ],
    table
  )
  return { rows, markdown }
}

if (Lib.isMain("churn")) {
  const quick = Lib.isQuick()
  const ranks = process.argv.find((a) => a.startsWith("--ranks="))
  if (ranks === undefined) console.log((await run(quick)).markdown)
  else {
    // One scenario: --ranks=N [--kinds=graceful,crash,silent] [--churn-after=welcomed|trained] [--ring] [--static] [--epochs=N] [--ranks-nice=N] [--fraction=F] [--round-deadline-ms=MS] [--round-silence-ms=MS] [--blocking-silence-ms=MS] [--blocking-quiet-max=F] [--heartbeat-interval-ms=MS] [--compress=none|fp16|int8] [--deltas=on|off]
    const ranksNice = Number(process.argv.find((a) => a.startsWith("--ranks-nice="))?.slice(13) ?? 0)
    const epochs = Number(process.argv.find((a) => a.startsWith("--epochs="))?.slice(9) ?? 5)
    const fraction = Number(process.argv.find((a) => a.startsWith("--fraction="))?.slice(11) ?? 0.3)
    const roundDeadlineMs = Number(process.argv.find((a) => a.startsWith("--round-deadline-ms="))?.slice(20) ?? 0)
    const roundSilenceMs = Number(process.argv.find((a) => a.startsWith("--round-silence-ms="))?.slice(19) ?? 0)
    const blockingSilenceMs = Number(process.argv.find((a) => a.startsWith("--blocking-silence-ms="))?.slice(22) ?? 0)
    const quietMax = process.argv.find((a) => a.startsWith("--blocking-quiet-max="))?.slice(21)
    const heartbeatIntervalMs = process.argv.find((a) => a.startsWith("--heartbeat-interval-ms="))?.slice(24)
    const kinds = process.argv.find((a) => a.startsWith("--kinds="))?.slice(8)
    const churnAfter = process.argv.find((a) => a.startsWith("--churn-after="))?.slice(14)
    const compress = process.argv.find((a) => a.startsWith("--compress="))?.slice(11)
    const deltas = process.argv.find((a) => a.startsWith("--deltas="))?.slice(9)
    if (compress !== undefined && compress !== "none" && compress !== "fp16" && compress !== "int8")
      throw new Error(`--compress must be none, fp16 or int8, got ${compress}`)
    if (deltas !== undefined && deltas !== "on" && deltas !== "off") throw new Error(`--deltas must be on or off, got ${deltas}`)
    const row = await measure({
      ranks: Number(ranks.slice(8)),
      processes: 2,
      backend: process.argv.includes("--ring") ? "ring" : "cpu",
      mode: process.argv.includes("--static") ? "static" : "progressive",
      epochs,
      fraction,
      params: 10_000,
      batchMs: 5,
      heartbeatTimeoutMs: 2000,
      roundDeadlineMs,
      roundSilenceMs,
      blockingSilenceMs,
      ...(quietMax === undefined ? {} : { blockingSilenceQuietMax: Number(quietMax) }),
      ranksNice,
      ...(churnAfter === "trained" ? { churnAfter } : {}),
      ...(kinds === undefined ? {} : { kinds: kinds.split(",") as Array<"graceful" | "crash" | "silent"> }),
      ...(heartbeatIntervalMs === undefined ? {} : { heartbeatIntervalMs: Number(heartbeatIntervalMs) }),
      ...(compress === undefined ? {} : { compress }),
      ...(deltas === undefined ? {} : { deltas: deltas === "on" })
    })
    console.log(
      Lib.table(
        [
          "cohort",
          "kind",
          "count",
          "detection",
          "recovery",
          "fault → recovered",
          "redone",
          "bytes",
          "audits",
          "committed/s",
          "cpu ms/round (%)",
          "RSS MB",
          "joins"
        ],
        rowsOf(row, undefined)
      )
    )
    const peak = row.coordinatorPeakMb
    console.log(
      `churns ${row.churns}, rounds ${row.rounds} (${row.counters.roundsClosedWithoutSilent} without silent ranks, ${row.counters.roundsClosedAtDeadline} at the deadline), ` +
        `take-backs ${row.counters.takeBacks} (${Lib.fmt(row.counters.samplesTakenBack)} samples, ${row.counters.paramsTakenBack} Params dropped), ` +
        `${(row.durationMs / 1000).toFixed(1)} s, ${Lib.fmt(row.committedPerSecond)} committed/s; coordinator cpu ms/round ${row.coordinatorCpuPerRoundMs.toFixed(1)} (system ${row.coordinatorSystemPerRoundMs.toFixed(1)}), peak MB: rss ${Lib.fmt(peak.rss)}, heap ${Lib.fmt(peak.heapUsed)}, array buffers ${Lib.fmt(peak.arrayBuffers)}`
    )
    const leftByKind = ["graceful", "crash", "silent"].map((kind) => `${kind} ${row.faults.filter((f) => f[1] === kind).length}`)
    console.log(
      `cpu ms: coordinator ${Lib.fmt(row.cpuMs.coordinatorToFormed)} to formed, ${Lib.fmt(row.cpuMs.coordinatorRun)} in the run; ` +
        `rank processes ${Lib.fmt(row.cpuMs.ranksToFormed)} to formed, ${Lib.fmt(row.cpuMs.ranksRun)} in the run; ` +
        `last audit ${((row.lastAuditAtMs - row.startedAtMs) / 1000).toFixed(1)} s after formed (${Lib.fmt(row.audits.samples / ((row.lastAuditAtMs - row.startedAtMs) / 1000))} committed/s to it); ` +
        `made to leave: ${leftByKind.join(", ")}; joins trained ${row.joins.length}; refused joins ${JSON.stringify(row.refusals)}`
    )
  }
}
