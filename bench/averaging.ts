/**
 * Averaging benchmark: time per averaging round, `cpu` beside `ring`, in the same run,
 * at a few rank counts and parameter counts, with worker-thread ranks (the ring's collectives in a
 * shared all-reduce area, and beside it over its direct links alone) and, with `--process`, child
 * processes (the ring relayed by the coordinator).
 *
 * Each run trains a params-only trainer (`bench/trainers/params-only.ts`, no computation; one
 * batch of 1 sample per round, `averageEverySteps` 1), its sizes written into a module of its own
 * for each configuration. A round's time is the gap between two consecutive `round` events (the
 * coordinator committing them), with the ranks' per-batch overhead (progress reports, a timer
 * turn between batches); the bench reports the median and p90 of those gaps after `--warmup`
 * rounds (default 5), and fails unless the run committed exactly the rounds asked for, each with
 * every rank. "coord ms": the coordinator thread's busy ms per timed round (its event loop's
 * active time, `performance.eventLoopUtilization`, where the runtime has it; the launcher shares
 * that thread and does next to nothing); "process cpu ms": the CPU time of the bench's process
 * (all its threads: coordinator and worker ranks) per timed round, which a loaded machine moves
 * less than the rounds' wall time. Every run's audit must be clean.
 *
 * Run: `node --import tsx bench/averaging.ts [--quick] [--process] [--no-json]`, `bun
 * bench/averaging.ts`, `deno run -A bench/averaging.ts`. `--quick` measures 2 and 4 ranks at 100 k
 * and 400 k parameters; the full run adds 8 and 16 ranks and 4 M parameters. `--ranks 8,16`,
 * `--params 407050`, `--rounds 20`, `--warmup 5` and `--backends cpu` pick other rank counts,
 * sizes, rounds per run and backends (a short iteration: `--ranks 8 --params 407050 --rounds 20
 * --no-json`); `--ring-shared-slots N` sets the ring's `ringSharedSlots` (0: worker links over
 * `MessageChannel`s only), `--ring-area-dir DIR` its `ringAreaFolder` (child processes' area
 * files: a tmpfs with huge pages, docs/ring.md), `--ring-area-mb N` its `ringAreaMemoryMb` (0: no shared all-reduce
 * area). With worker threads each size is also run over the ring's direct links alone (no area),
 * the last column, unless `--no-links-row`; and, when the ring ran in its shared area, the bare
 * collective of the same size (`bench/bare-collective.ts`: the area's all-reduce between worker
 * threads with nothing around it) with the ring round's ratio to it, unless `--no-bare-row`.
 * Numbers from a machine shared with other work are
 * labelled so in the JSON (`loaded: true` unless `--quiet-machine`).
 *
 * With `--process` the ring runs between the processes with direct links (`ringLinks` `direct`:
 * through their area files in memory by default, "links" `file`, and beside it over the sockets
 * alone, `ringAreaMemoryMb` 0, unless `--no-links-row`) and, beside it, through the coordinator's
 * relay (`--no-relay-row` leaves that out); `--reference` also
 * times gloo and Open MPI for each configuration (`bench/reference.ts`) and prints the ratios, all
 * in a second table. That table also gives each run's CPU time a round, the ranks' processes
 * (Linux's `/proc`) and the bench's own together ("direct cpu ms", "relay cpu ms"), and the bare
 * collective over direct links between processes (`bench/wire-collective.ts`: no coordinator,
 * commit or trainer) with its CPU time and the direct round's ratio to it, unless `--no-bare-row`.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Launcher from "../actors/launcher/launcher.ts"
import * as Runtime from "../src/platform/detect.ts"
import { measureBare } from "./bare-collective.ts"
import { fmt, isMain, isQuick, note, quantile, table, writeResults } from "./lib.ts"
import { measureReferences, type Reference } from "./reference.ts"
import { measureWire } from "./wire-collective.ts"

/** One configuration of the bench: `rounds` timed rounds after `warmupRounds` untimed ones. */
export interface MeasureOptions {
  readonly backend: "cpu" | "ring"
  readonly worldSize: number
  readonly params: number
  readonly rounds: number
  readonly warmupRounds: number
  readonly transport: "worker" | "process"
  /** A folder for the runs' records and the configuration's trainer module. */
  readonly outDir: string
  readonly ringSharedSlots?: number | undefined
  readonly ringAreaMemoryMb?: number | undefined
  /** `RunOptions.ringAreaFolder`: where child-process ranks keep their area files (`--ring-area-dir`). */
  readonly ringAreaFolder?: string | undefined
  /** `RunOptions.ringLinks`: `relay` puts every ring step through the coordinator. */
  readonly ringLinks?: "direct" | "relay" | undefined
}

/**
 * What one configuration measured: `rounds` is the count of timed rounds, taken from the run's
 * own `round` events (never from what was asked for); `medianMs` and `p90Ms` are over the gaps
 * between consecutive committed rounds, warm-up rounds left out; `coordinatorMsPerRound` is the
 * coordinator thread's busy time over the timed rounds, divided by their count, and
 * `processCpuMsPerRound` the process's CPU time likewise (on a loaded machine it varies less than
 * the rounds' wall time; with `process` ranks it leaves the ranks' processes out).
 */
export interface Measured {
  readonly backend: "cpu" | "ring"
  readonly worldSize: number
  readonly params: number
  readonly rounds: number
  readonly warmupRounds: number
  readonly medianMs: number
  readonly p90Ms: number
  readonly coordinatorMsPerRound: number
  /** CPU time of the whole process (every thread: coordinator and worker ranks) per timed round. */
  readonly processCpuMsPerRound: number
  /** With `process` ranks, the CPU time of the ranks' processes per timed round (Linux; else NaN). */
  readonly ranksCpuMsPerRound: number
  readonly links: string
  /** Ring steps the coordinator relayed in the whole run (0 when every direct link held). */
  readonly relayedSteps: number
  readonly roundMs: ReadonlyArray<number>
}

interface Elu {
  readonly active: number
}
const elu = (performance as unknown as { eventLoopUtilization?: (a?: Elu) => Elu }).eventLoopUtilization
const paramsOnly = fileURLToPath(new URL("./trainers/params-only.ts", import.meta.url))

/**
 * The CPU ms (user and system) of this process's running child processes, from Linux's `/proc`
 * (`NaN` where there is none): a rank process's time, which the bench's own `cpuUsage` leaves out.
 * Ticks of 10 ms, so a difference over tens of rounds.
 */
const childrenCpuMs = (): number => {
  let ticks = 0
  try {
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      let stat: string
      try {
        stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      } catch {
        continue // ended meanwhile
      }
      // After the command's closing parenthesis: state, ppid, ..., utime (14th field), stime (15th).
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (Number(fields[1]) === process.pid) ticks += Number(fields[11]) + Number(fields[12])
    }
  } catch {
    return Number.NaN
  }
  return ticks * 10
}

/**
 * A trainer module with this configuration's sizes written into it. A module is imported once per
 * process, so one module for every configuration would keep the first one's sample count (and
 * run fewer rounds than asked for in every later one).
 */
const trainerFor = (outDir: string, samples: number, params: number): string => {
  const file = join(outDir, `params-only-${samples}x${params}.ts`)
  writeFileSync(
    file,
    [
      `import { paramsOnly } from ${JSON.stringify(paramsOnly)}`,
      `const trainer = paramsOnly({ samples: ${samples}, params: ${params} })`,
      "export const trainSamples = trainer.trainSamples",
      "export const createTrainer = trainer.createTrainer",
      ""
    ].join("\n")
  )
  return file
}

/**
 * Runs one configuration: one epoch of `warmupRounds + rounds` rounds (one batch of one sample
 * per rank a round) and times each round as the gap since the round before it, when the
 * coordinator committed it. Throws when the run did not end clean, or when the rounds it committed
 * are not exactly the ones asked for (each with every rank contributing): a bench that divided
 * by rounds it never ran would print a wrong number.
 */
export const measure = async (options: MeasureOptions): Promise<Measured> => {
  const { backend, worldSize, params, rounds, warmupRounds } = options
  const name = `${backend} ${worldSize} x ${params}`
  if (!(Number.isSafeInteger(rounds) && rounds >= 1 && Number.isSafeInteger(warmupRounds) && warmupRounds >= 1)) {
    throw new Error(
      `${name}: rounds and warm-up rounds must be integers >= 1 (the first timed round needs one before it), got ${rounds} and ${warmupRounds}`
    )
  }
  const total = warmupRounds + rounds
  const committedAtMs: Array<number> = []
  const committed: Array<{ readonly round: number; readonly contributors: number }> = []
  let busyAt: Elu | undefined
  let busyMs = Number.NaN
  let cpuAt: NodeJS.CpuUsage | undefined
  let cpuMs = Number.NaN
  let ranksCpuAt = Number.NaN
  let ranksCpuMs = Number.NaN
  const result = await Launcher.run({
    trainer: trainerFor(options.outDir, worldSize * total, params),
    worldSize,
    epochs: 1,
    backend,
    transport: options.transport,
    ...(options.ringSharedSlots === undefined ? {} : { ringSharedSlots: options.ringSharedSlots }),
    ...(options.ringAreaMemoryMb === undefined ? {} : { ringAreaMemoryMb: options.ringAreaMemoryMb }),
    ...(options.ringAreaFolder === undefined ? {} : { ringAreaFolder: options.ringAreaFolder }),
    ...(options.ringLinks === undefined ? {} : { ringLinks: options.ringLinks }),
    batchSize: 1,
    averageEverySteps: 1,
    heartbeatTimeoutMs: 30_000,
    rankMemoryMb: 0,
    outDir: options.outDir,
    onRankOutput: () => {},
    onEvent: (event) => {
      if (event.type !== "round") return
      committedAtMs.push(performance.now())
      committed.push({ round: event.round, contributors: event.contributors })
      if (committed.length === warmupRounds) {
        busyAt = elu?.()
        cpuAt = process.cpuUsage()
        if (options.transport === "process") ranksCpuAt = childrenCpuMs()
      }
      if (committed.length !== total) return
      if (busyAt !== undefined && elu !== undefined) busyMs = elu(busyAt).active
      if (cpuAt !== undefined) {
        const used = process.cpuUsage(cpuAt)
        cpuMs = (used.user + used.system) / 1000
      }
      if (options.transport === "process") ranksCpuMs = childrenCpuMs() - ranksCpuAt
    }
  })
  const clean = result.epochs.length === 1 && result.epochs.every((e) => e.lost === 0 && e.duplicated === 0) && result.exitCode === 0
  if (!clean) throw new Error(`${name}: the run did not complete clean (exit ${result.exitCode})`)
  if (committed.length !== total)
    throw new Error(`${name}: ${total} rounds asked for (${warmupRounds} warm-up), ${committed.length} committed`)
  const gap = committed.findIndex((c, i) => c.round !== committed[0]!.round + i || c.contributors !== worldSize)
  if (gap >= 0)
    throw new Error(
      `${name}: committed round ${gap} is round ${committed[gap]!.round} with ${committed[gap]!.contributors} contributors; expected consecutive rounds of ${worldSize}`
    )
  const roundMs = committedAtMs.slice(warmupRounds).map((at, i) => at - committedAtMs[warmupRounds + i - 1]!)
  return {
    backend,
    worldSize,
    params,
    rounds: roundMs.length,
    warmupRounds,
    medianMs: quantile(roundMs, 0.5),
    p90Ms: quantile(roundMs, 0.9),
    // Deno's eventLoopUtilization reads 0 throughout: no measurement, not an idle coordinator.
    coordinatorMsPerRound: busyMs > 0 ? busyMs / roundMs.length : Number.NaN,
    processCpuMsPerRound: cpuMs / roundMs.length,
    ranksCpuMsPerRound: ranksCpuMs / roundMs.length,
    links: result.ring?.links ?? "-",
    relayedSteps: result.ring?.relayed ?? 0,
    roundMs
  }
}

/** The value after `--name`, if given. */
const flag = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : undefined
}
const numbers = (text: string | undefined): Array<number> | undefined => text?.split(",").map((part) => Number(part.replaceAll("_", "")))
const optionalNumber = (name: string): number | undefined => (flag(name) === undefined ? undefined : Number(flag(name)))

/** A measurement without its every round, for the results file. */
const summary = (measured: Measured | undefined) => {
  if (measured === undefined) return undefined
  const { roundMs: _, ...rest } = measured
  return rest
}

const main = async (): Promise<void> => {
  const quick = isQuick()
  const transport = process.argv.includes("--process") ? ("process" as const) : ("worker" as const)
  const outDir = mkdtempSync(join(tmpdir(), "cohort-bench-averaging-"))
  const rounds = Number(flag("rounds") ?? (quick ? 20 : 40))
  const warmupRounds = Number(flag("warmup") ?? 5)
  const ringSharedSlots = optionalNumber("ring-shared-slots")
  const ringAreaMemoryMb = optionalNumber("ring-area-mb")
  const noLinksRow = process.argv.includes("--no-links-row")
  const sizes = numbers(flag("params")) ?? (quick ? [100_000, 407_050] : [100_000, 407_050, 4_000_000])
  const rankCounts = numbers(flag("ranks")) ?? (quick ? [2, 4] : [2, 4, 8, 16])
  const backends = (flag("backends") ?? "cpu,ring").split(",")
  const ringAreaFolder = flag("ring-area-dir")
  const common = { params: 0, rounds, warmupRounds, transport, outDir, ringSharedSlots, ringAreaFolder }
  const rows: Array<Array<string | number>> = []
  const results: Array<Record<string, unknown>> = []
  const processRows: Array<Array<string | number>> = []
  const cell = (m: { readonly medianMs: number; readonly p90Ms: number } | undefined): string =>
    m === undefined ? "-" : `${fmt(m.medianMs)} / ${fmt(m.p90Ms)}`
  for (const params of sizes) {
    for (const worldSize of rankCounts) {
      note(`averaging: ${worldSize} ranks, ${params} parameters, ${transport}, ${warmupRounds} + ${rounds} rounds`)
      const at = { ...common, worldSize, params }
      const cpu = backends.includes("cpu") ? await measure({ ...at, backend: "cpu" }) : undefined
      const ring = backends.includes("ring") ? await measure({ ...at, backend: "ring", ringAreaMemoryMb }) : undefined
      // The same ring over its direct links only (no shared all-reduce area, no area files), beside it.
      const overLinks = (ring?.links === "area" || ring?.links === "file") && !noLinksRow
      const ringLinks = overLinks ? await measure({ ...at, backend: "ring", ringAreaMemoryMb: 0 }) : undefined
      // The floor of a shared-area round: the same collective with no coordinator, frames or trainer.
      const bare =
        transport === "worker" && ring?.links === "area" && !process.argv.includes("--no-bare-row")
          ? await measureBare(worldSize, params, rounds, warmupRounds)
          : undefined
      // Processes: the ring through the coordinator's relay beside its direct links, and what a user
      // would pick instead (gloo, Open MPI), in the same run.
      const ringRelay =
        transport === "process" && (ring?.links === "direct" || ring?.links === "file") && !process.argv.includes("--no-relay-row")
          ? await measure({ ...at, backend: "ring", ringLinks: "relay" })
          : undefined
      // The floor of a direct round: the same collective between processes with nothing around it.
      const wire =
        transport === "process" && (ring?.links === "direct" || ring?.links === "file") && !process.argv.includes("--no-bare-row")
          ? await measureWire(worldSize, params, rounds, warmupRounds)
          : undefined
      const references =
        transport === "process" && process.argv.includes("--reference") ? measureReferences(worldSize, params, rounds, warmupRounds) : []
      const reference = (library: Reference["library"]) => references.find((r) => r.library === library)
      const ratio = (m: { readonly medianMs: number } | undefined, r: { readonly medianMs: number } | undefined): string =>
        m === undefined || r === undefined ? "-" : fmt(m.medianMs / r.medianMs)
      const cpuOf = (m: { readonly ranksCpuMsPerRound: number; readonly processCpuMsPerRound: number } | undefined): string =>
        m === undefined ? "-" : fmt(m.ranksCpuMsPerRound + m.processCpuMsPerRound)
      if (transport === "process") {
        processRows.push([
          worldSize,
          params,
          cell(ring),
          cpuOf(ring),
          ring?.links ?? "-",
          ring === undefined ? "-" : ring.relayedSteps,
          cell(ringLinks),
          cpuOf(ringLinks),
          ratio(ringLinks, ring),
          cell(wire),
          wire === undefined ? "-" : fmt(wire.cpuMsPerRound),
          ratio(ring, wire),
          cell(ringRelay),
          cpuOf(ringRelay),
          ratio(ringRelay, ring),
          cell(cpu),
          cell(reference("gloo")),
          ratio(ring, reference("gloo")),
          cell(reference("mpi")),
          ratio(ring, reference("mpi")),
          cell(reference("mpi tcp")),
          ratio(ring, reference("mpi tcp"))
        ])
      }
      rows.push([
        worldSize,
        params,
        cell(cpu),
        cell(ring),
        cpu === undefined || ring === undefined ? "-" : fmt(cpu.medianMs / ring.medianMs),
        cpu === undefined ? "-" : fmt(cpu.processCpuMsPerRound),
        ring === undefined ? "-" : fmt(ring.processCpuMsPerRound),
        cpu === undefined ? "-" : fmt(cpu.coordinatorMsPerRound),
        ring === undefined ? "-" : fmt(ring.coordinatorMsPerRound),
        ring?.links ?? "-",
        cell(ringLinks),
        cell(bare),
        ratio(ring, bare),
        bare === undefined ? "-" : fmt(bare.processCpuMsPerRound)
      ])
      results.push({
        worldSize,
        params,
        transport,
        cpu: summary(cpu),
        ring: summary(ring),
        ringLinks: summary(ringLinks),
        ringRelay: summary(ringRelay),
        bare,
        wire,
        references
      })
    }
  }
  rmSync(outDir, { recursive: true, force: true })
  console.log(
    `averaging rounds on ${Runtime.describe()} (${transport} ranks; ms a round, median / p90 of ${rounds} rounds after ${warmupRounds} warm-up rounds)`
  )
  console.log(
    table(
      [
        "ranks",
        "params",
        "cpu ms",
        "ring ms",
        "cpu/ring",
        "cpu process cpu ms",
        "ring process cpu ms",
        "cpu coord ms",
        "ring coord ms",
        "ring links",
        "ring over links ms",
        "bare collective ms",
        "ring/bare",
        "bare process cpu ms"
      ],
      rows
    )
  )
  if (transport === "process") {
    console.log(
      `\nring between processes: direct links beside the relay and the reference points (ms a round, median / p90; ratios of medians; "relayed": ring steps the coordinator carried over direct links)`
    )
    console.log(
      table(
        [
          "ranks",
          "params",
          "ring direct ms",
          "direct cpu ms",
          "links",
          "relayed",
          "ring over sockets ms",
          "sockets cpu ms",
          "sockets/direct",
          "bare collective ms",
          "bare cpu ms",
          "direct/bare",
          "ring relay ms",
          "relay cpu ms",
          "relay/direct",
          "cpu ms",
          "gloo ms",
          "direct/gloo",
          "mpi ms",
          "direct/mpi",
          "mpi tcp ms",
          "direct/mpi tcp"
        ],
        processRows
      )
    )
  }
  if (!process.argv.includes("--no-json")) {
    const file = writeResults(
      { averaging: { loaded: !process.argv.includes("--quiet-machine"), transport, rounds, warmupRounds, rows: results } },
      quick
    )
    note(`wrote ${file}`)
  }
}

if (isMain("averaging")) await main()
