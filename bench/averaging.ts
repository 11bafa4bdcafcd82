/**
 * Averaging benchmark: time per averaging round, `cpu` beside `ring`, in the same run,
 * at a few rank counts and parameter counts, with worker-thread ranks (the ring's collectives in a
 * shared all-reduce area, and beside it over its direct links alone) and, with `--process`, child
 * processes (the ring relayed by the coordinator).
 *
 * Each run trains `bench/trainers/params-only.ts` (no computation; one batch of 1 sample per
 * round, `averageEverySteps` 1) for `rounds` rounds of one epoch, so its time from formation to the
 * epoch's end is the rounds' time (with the ranks' per-batch overhead: progress reports, a timer
 * turn between batches). Per round: wall ms, and the coordinator thread's busy ms (its event
 * loop's active time, `performance.eventLoopUtilization`, where the runtime has it; the launcher
 * shares that thread and does next to nothing). Every run's audit must be clean.
 *
 * Run: `node --import tsx bench/averaging.ts [--quick] [--process] [--no-json]`, `bun
 * bench/averaging.ts`, `deno run -A bench/averaging.ts`. `--quick` measures 2 and 4 ranks at 100 k
 * and 400 k parameters; the full run adds 8 and 16 ranks and 4 M parameters. `--ranks 8,16`,
 * `--params 407050` and `--rounds 20` pick other rank counts, sizes and rounds per run (a short
 * iteration: `--ranks 8 --params 407050 --rounds 20 --no-json`); `--ring-shared-slots N` sets the
 * ring's `ringSharedSlots` (0: worker links over `MessageChannel`s only), `--ring-area-mb N` its
 * `ringAreaMemoryMb` (0: no shared all-reduce area). With worker threads each size is also run
 * over the ring's direct links alone (no area), the last column, unless `--no-links-row`. Numbers from a machine
 * shared with other work are labelled so in the JSON (`loaded: true` unless `--quiet-machine`).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Launcher from "../actors/launcher.ts"
import { fmt, isQuick, note, table, writeResults } from "./lib.ts"

const quick = isQuick()
const transport = process.argv.includes("--process") ? "process" as const : "worker" as const
const trainer = fileURLToPath(new URL("./trainers/params-only.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-bench-averaging-"))
/** The value after `--name`, if given. */
const flag = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : undefined
}
const numbers = (text: string | undefined): Array<number> | undefined => text?.split(",").map((part) => Number(part.replaceAll("_", "")))
const rounds = Number(flag("rounds") ?? (quick ? 20 : 40))
const ringSharedSlots = flag("ring-shared-slots") === undefined ? undefined : Number(flag("ring-shared-slots"))
const ringAreaMemoryMb = flag("ring-area-mb") === undefined ? undefined : Number(flag("ring-area-mb"))
const noLinksRow = process.argv.includes("--no-links-row")

interface Elu {
  readonly active: number
}
const elu = (performance as unknown as { eventLoopUtilization?: (a?: Elu) => Elu }).eventLoopUtilization

const measure = async (backend: "cpu" | "ring", worldSize: number, params: number, ringAreaMemoryMb?: number) => {
  process.env["COHORT_BENCH_PARAMS"] = String(params)
  process.env["COHORT_BENCH_SAMPLES"] = String(worldSize * rounds)
  let formedAt: number | undefined
  let busyAt: Elu | undefined
  let endedAt: number | undefined
  let busyMs = Number.NaN
  const result = await Launcher.run({
    trainer,
    worldSize,
    epochs: 1,
    backend,
    transport,
    ...(ringSharedSlots === undefined ? {} : { ringSharedSlots }),
    ...(ringAreaMemoryMb === undefined ? {} : { ringAreaMemoryMb }),
    batchSize: 1,
    averageEverySteps: 1,
    heartbeatTimeoutMs: 30_000,
    rankMemoryMb: 0,
    outDir,
    onRankOutput: () => {},
    onEvent: (event) => {
      if (event.type === "formed") {
        formedAt = performance.now()
        busyAt = elu?.()
      } else if (event.type === "epoch" && endedAt === undefined) {
        // The epoch's last round closed: what follows (saves, exits) is not averaging.
        endedAt = performance.now()
        if (elu !== undefined && busyAt !== undefined) busyMs = elu(busyAt).active
      }
    }
  })
  const wallMs = (endedAt ?? Number.NaN) - (formedAt ?? Number.NaN)
  const clean = result.epochs.every((e) => e.lost === 0 && e.duplicated === 0) && result.exitCode === 0
  if (!clean) throw new Error(`${backend} ${worldSize}x${params}: the run did not complete clean (exit ${result.exitCode})`)
  return { msPerRound: wallMs / rounds, coordinatorMsPerRound: busyMs / rounds, links: result.ring?.links ?? "-" }
}

const sizes = numbers(flag("params")) ?? (quick ? [100_000, 407_050] : [100_000, 407_050, 4_000_000])
const rankCounts = numbers(flag("ranks")) ?? (quick ? [2, 4] : [2, 4, 8, 16])
const rows: Array<Array<string | number>> = []
const results: Array<Record<string, unknown>> = []
for (const params of sizes) {
  for (const worldSize of rankCounts) {
    note(`averaging: ${worldSize} ranks, ${params} parameters, ${transport}`)
    const cpu = await measure("cpu", worldSize, params)
    const ring = await measure("ring", worldSize, params, ringAreaMemoryMb)
    // Worker threads: the same ring over its direct links only (no shared all-reduce area), beside it.
    const ringLinks = transport === "worker" && ring.links === "area" && !noLinksRow ? await measure("ring", worldSize, params, 0) : undefined
    rows.push([
      worldSize,
      params,
      fmt(cpu.msPerRound),
      fmt(ring.msPerRound),
      fmt(cpu.msPerRound / ring.msPerRound),
      fmt(cpu.coordinatorMsPerRound),
      fmt(ring.coordinatorMsPerRound),
      fmt(cpu.coordinatorMsPerRound / ring.coordinatorMsPerRound),
      ring.links,
      ringLinks === undefined ? "-" : `${fmt(ringLinks.msPerRound)} (${fmt(cpu.msPerRound / ringLinks.msPerRound)}x)`
    ])
    results.push({ worldSize, params, transport, rounds, cpu, ring, ...(ringLinks === undefined ? {} : { ringLinks }) })
  }
}
rmSync(outDir, { recursive: true, force: true })
console.log(`averaging rounds (${transport} ranks, ${rounds} rounds per run)`)
console.log(table(
  ["ranks", "params", "cpu ms/round", "ring ms/round", "cpu/ring", "cpu coord ms", "ring coord ms", "coord ratio", "ring links", "ring over links ms/round (cpu/it)"],
  rows
))
if (!process.argv.includes("--no-json")) {
  const file = writeResults({ averaging: { loaded: !process.argv.includes("--quiet-machine"), transport, rows: results } }, quick)
  note(`wrote ${file}`)
}
