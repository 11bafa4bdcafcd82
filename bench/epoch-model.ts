/**
 * What the coordinator's epoch models cost: at every epoch end the model after it is written on
 * the coordinator's host before the epoch's audit line (with `ring`, first asked of a member; no
 * ring round closes meanwhile). Per configuration: the rounds' median time (the gap between
 * consecutive round lines of the same epoch: the baseline, from the same run), and per epoch the
 * time from the audit to the model written (the `model` line's `afterAuditMs`: the transfer and
 * the write), with the write alone (`writeMs`), median and p90, and the ratio of the median cost
 * to the median round. With `cpu` the write does not hold training up (it runs beside the next
 * epoch; only the journal's lines wait); with `ring` the transfer does (no round closes until the
 * model arrived), the write does not.
 *
 * Each run trains `bench/trainers/params-only.ts` (no computation) with worker-thread ranks for
 * `--epochs` epochs (default 8, 4 with `--quick`), a few rounds each. The bench checks that every
 * epoch has its `model` line, with no error, and a clean audit; a missing one is a failure, not a
 * number.
 *
 * Run: `node --import tsx bench/epoch-model.ts [--quick]`, `bun bench/epoch-model.ts`, `deno run -A
 * bench/epoch-model.ts`.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Launcher from "../actors/launcher/launcher.ts"
import type { RunEvent } from "../actors/record/run-types.ts"
import { fmt, isQuick, note, table, writeResults } from "./lib.ts"

const quick = isQuick()
const epochs = Number(process.argv[process.argv.indexOf("--epochs") + 1] ?? Number.NaN) || (quick ? 4 : 8)
const trainer = fileURLToPath(new URL("./trainers/params-only.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-bench-epoch-model-"))
const worldSize = 4
// The trainer reads its sample count once, at import: one count for every configuration.
const roundsPerEpoch = 4
process.env["COHORT_BENCH_SAMPLES"] = String(worldSize * roundsPerEpoch)

const quantile = (values: ReadonlyArray<number>, q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
}

const measure = async (backend: "cpu" | "ring", params: number) => {
  process.env["COHORT_BENCH_PARAMS"] = String(params)
  const events: Array<RunEvent> = []
  const result = await Launcher.run({
    trainer,
    worldSize,
    epochs,
    backend,
    averageEverySteps: 1,
    batchSize: 1,
    outDir,
    onEvent: (event) => events.push(event),
    onRankOutput: () => {}
  })
  if (result.epochs.length !== epochs || result.epochs.some((e) => e.lost !== 0 || e.duplicated !== 0)) {
    throw new Error(
      `${backend} x ${params}: not every epoch was audited clean: ${JSON.stringify(result.epochs.map((e) => [e.lost, e.duplicated]))}`
    )
  }
  const models = events.filter((e): e is Extract<RunEvent, { type: "model" }> => e.type === "model")
  if (models.length !== epochs || models.some((m) => m.error !== undefined || m.bytes !== params * 4)) {
    throw new Error(`${backend} x ${params}: an epoch without its model: ${JSON.stringify(models)}`)
  }
  const costs = models.map((m) => m.afterAuditMs ?? Number.NaN)
  const writes = models.map((m) => m.writeMs)
  const rounds = events.filter((e): e is Extract<RunEvent, { type: "round" }> => e.type === "round")
  const gaps = rounds.slice(1).flatMap((r, i) => (r.epoch === rounds[i]!.epoch ? [r.ms - rounds[i]!.ms] : []))
  const roundMs = quantile(gaps, 0.5)
  return {
    backend,
    params,
    roundMs,
    costMedianMs: quantile(costs, 0.5),
    costP90Ms: quantile(costs, 0.9),
    writeMedianMs: quantile(writes, 0.5),
    writeP90Ms: quantile(writes, 0.9),
    costPerRound: quantile(costs, 0.5) / roundMs
  }
}

const sizes = quick ? [407_050] : [407_050, 4_000_000]
const rows: Array<Awaited<ReturnType<typeof measure>>> = []
try {
  for (const params of sizes) {
    for (const backend of ["cpu", "ring"] as const) {
      note(`epoch-model: ${backend}, ${worldSize} ranks x ${params} parameters, ${epochs} epochs`)
      rows.push(await measure(backend, params))
    }
  }
} finally {
  rmSync(outDir, { recursive: true, force: true })
}
console.log(
  table(
    ["backend", "params", "round ms (median)", "audit to model written ms (median / p90)", "write ms (median / p90)", "cost / round"],
    rows.map((r) => [
      r.backend,
      r.params,
      fmt(r.roundMs),
      `${fmt(r.costMedianMs)} / ${fmt(r.costP90Ms)}`,
      `${fmt(r.writeMedianMs)} / ${fmt(r.writeP90Ms)}`,
      `${fmt(r.costPerRound)}x`
    ])
  )
)
if (!process.argv.includes("--no-json")) console.log(`results: ${writeResults({ epochModel: { worldSize, epochs, rows } }, quick)}`)
