/**
 * Compression benchmark (docs/edge-averaging.md), two tables.
 *
 * **Packing** (`run`): bytes and time per averaging round of the `cpu` backend for
 * `--compress none|fp16|int8`, at the bundled model's size (407,050 parameters).
 *
 * A round of n ranks is n `Params` frames in and one `Update` frame out to each of n ranks, as the
 * coordinator counts them (`Coordinator.Hooks.onRoundBytes`): the bytes are the real frames'
 * (`Codec.encodePacked`). "pack ms" is one `Packed.withFeedback` of a contribution (what a rank,
 * and the coordinator for its update, adds to a round), "decode ms" one frame's `Codec.decode`
 * (unpacking included), medians over `--repeats` (default 20) after 3 warm-ups. "bytes / sample" divides a
 * round's bytes by the samples trained between two rounds (n ranks × `--average-every` batches,
 * default 32, × 32 samples): the cost of one sample's worth of sync. "time at 1 Mbit/s": one
 * contribution's transfer time on such a link.
 *
 * "codec CPU ms / round": what a round's packing and unpacking cost everyone together, each rank's
 * contribution and the coordinator's update packed once, n contributions and n updates decoded.
 *
 * **Accuracy** (`accuracy`): real runs of the bundled MNIST trainer (4 worker ranks, 3 epochs, static
 * mode) for each compression, averaging every `--base-every` batches (default 1: every step) and
 * 8× and 64× less often, each with plain averaging and with the outer optimizer
 * (`--outer-lr`, `--outer-momentum`). Per run: the rounds closed, the test accuracy after the last
 * epoch, the averaging bytes per round and per sample trained (the journal's `round` events:
 * contributions in and updates out at the coordinator), the run's CPU seconds (every rank is a
 * thread of this process) and wall seconds. It prints whether the issue's targets hold: int8
 * within 0.01 of float32's accuracy with 3.5× fewer bytes per round, fp16 within 0.005, the
 * outer optimizer at 8× fewer rounds within 0.02 of float32 every round. `--quick` trains the
 * 64-hidden-unit model (`bench/trainers/mnist-small.ts`) for 1 epoch.
 *
 * With `--ring relay|direct` the accuracy runs use the ring backend between child processes
 * (`transport: "process"`), over the coordinator's relay or direct links, plain averaging only
 * (the outer optimizer is the cpu backend's): `compress` then packs the ring steps. Bytes are the
 * journal's, the relayed steps in and out at the coordinator (each step counted twice: in from its
 * sender, out to its receiver; 0 with direct links, whose bytes the coordinator never sees), and
 * the CPU seconds are the coordinator's process only (the ranks are processes of their own).
 *
 * **Poisoning** (`poisoning`, with `--poison`): 4 ranks of the 64-hidden-unit MNIST model, rank 3
 * sending its parameters × 1e6 or sign-flipped every round, with `mean`, `median` and
 * `trimmed-mean` beside a clean run: the final accuracy and the `OutlierParams` alerts.
 *
 * Run: `node --import tsx bench/compression.ts [--quick] [--no-json] [--no-accuracy | --accuracy-only] [--poison]
 * [--compress none,fp16,int8] [--fewer 1,8,64] [--plain-fewer 1,8,64] [--outer-fewer 1,8,64] [--base-every N]
 * [--outer-lr X] [--outer-momentum M] [--deltas on|off] [--ring relay|direct]` (`--deltas`: the runs' `deltas`, default the run's own; `--plain-fewer`, `--outer-fewer`: at which of `--fewer` to train
 * with plain averaging, with the outer optimizer)
 * (`--quick` packs 100,000 parameters, 5 repeats). Numbers from a machine shared with other work
 * are labelled so in the JSON (`loaded: true` unless `--quiet-machine`).
 */
import { readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Launcher from "../actors/launcher/launcher.ts"
import * as Codec from "../src/wire/codec.ts"
import * as Frame from "../src/wire/frame.ts"
import * as Packed from "../src/wire/packed.ts"
import { fmt, isMain, isQuick, nowMs, quantile, table, writeResults } from "./lib.ts"

/** One row: a compression at one size. */
export interface Row {
  readonly compress: Packed.Compression
  readonly params: number
  readonly ranks: number
  readonly contributionBytes: number
  readonly roundBytes: number
  readonly bytesPerSample: number
  readonly ratio: number
  readonly packMs: number
  readonly decodeMs: number
  readonly codecMsPerRound: number
  readonly maxError: number
  readonly secondsAt1Mbit: number
}

const argument = (name: string, fallback: number, argv: ReadonlyArray<string>): number => {
  const at = argv.indexOf(name)
  return at >= 0 && argv[at + 1] !== undefined ? Number(argv[at + 1]) : fallback
}

/** Runs the bench; returns its rows and the markdown table. */
export const run = (quick: boolean, argv: ReadonlyArray<string> = process.argv) => {
  const params = quick ? 100_000 : argument("--params", 407_050, argv)
  const ranks = argument("--ranks", 4, argv)
  const repeats = quick ? 5 : argument("--repeats", 20, argv)
  const averageEvery = argument("--average-every", 32, argv)
  const samplesPerRound = ranks * averageEvery * 32
  // A model's worth of values of the scale an MLP's weights have.
  let seed = 12345
  const values = Float32Array.from({ length: params }, () => {
    seed = (seed * 48271) % 2147483647
    return (seed / 2147483647 - 0.5) * 0.2
  })
  const rows: Array<Row> = []
  let plainRound = 0
  for (const compress of ["none", "fp16", "int8"] as const) {
    const packTimes: Array<number> = []
    const decodeTimes: Array<number> = []
    let contribution: Uint8Array = new Uint8Array(0)
    let update: Uint8Array = new Uint8Array(0)
    let maxError = 0
    for (let i = 0; i < repeats + 3; i++) {
      const started = nowMs()
      const packed = compress === "none" ? undefined : Packed.withFeedback(values, undefined, compress).bytes
      const packedMs = nowMs() - started
      contribution = Codec.encodePacked(
        Frame.fromRank(1, {
          _tag: "Params",
          epoch: 0,
          round: 7,
          samplesDone: 4096,
          params: packed === undefined ? values : new Float32Array(0),
          loss: 0.5
        }),
        packed
      )
      update = Codec.encodePacked(
        Frame.fromCoordinator({ _tag: "Update", round: 7, params: packed === undefined ? values : new Float32Array(0) }),
        packed
      )
      const decodeStarted = nowMs()
      const decoded = Codec.decode(contribution)
      const decodedMs = nowMs() - decodeStarted
      if (decoded._tag !== "Success" || decoded.success.message._tag !== "Params")
        throw new Error(`${compress}: the contribution did not decode`)
      if (i >= 3) {
        packTimes.push(packedMs)
        decodeTimes.push(decodedMs)
      }
      const back = decoded.success.message.params
      maxError = 0
      for (let j = 0; j < params; j++) maxError = Math.max(maxError, Math.abs(back[j]! - values[j]!))
    }
    const roundBytes = ranks * contribution.length + ranks * update.length
    if (compress === "none") plainRound = roundBytes
    rows.push({
      compress,
      params,
      ranks,
      contributionBytes: contribution.length,
      roundBytes,
      bytesPerSample: roundBytes / samplesPerRound,
      ratio: plainRound / roundBytes,
      packMs: compress === "none" ? 0 : quantile(packTimes, 0.5),
      decodeMs: quantile(decodeTimes, 0.5),
      codecMsPerRound: (ranks + 1) * (compress === "none" ? 0 : quantile(packTimes, 0.5)) + 2 * ranks * quantile(decodeTimes, 0.5),
      maxError,
      secondsAt1Mbit: (contribution.length * 8) / 1e6
    })
  }
  const markdown = table(
    [
      "compress",
      "params",
      "ranks",
      "contribution bytes",
      "round bytes",
      "bytes / sample",
      "fewer bytes",
      "pack ms",
      "decode ms",
      "codec CPU ms / round",
      "max error",
      "s at 1 Mbit/s"
    ],
    rows.map((r) => [
      r.compress,
      r.params,
      r.ranks,
      r.contributionBytes,
      r.roundBytes,
      r.bytesPerSample,
      `${fmt(r.ratio)}×`,
      r.packMs,
      r.decodeMs,
      r.codecMsPerRound,
      r.maxError,
      r.secondsAt1Mbit
    ])
  )
  return { rows, markdown }
}

/** One training run of the accuracy table. */
export interface AccuracyRow {
  /** `cpu`, or the ring backend over its relay or direct links (`--ring`). */
  readonly backend: "cpu" | "ring relay" | "ring direct"
  readonly compress: Packed.Compression
  /** How many times less often than `--base-every` the ranks averaged. */
  readonly fewer: number
  readonly averageEvery: number
  /** The outer optimizer's learning rate and momentum, or undefined for plain averaging. */
  readonly outer: { readonly lr: number; readonly momentum: number } | undefined
  readonly rounds: number
  /** Test accuracy after each epoch. */
  readonly accuracy: ReadonlyArray<number>
  readonly bytesPerRound: number
  readonly bytesPerSample: number
  /** Bytes per sample of float32 every round (the first row) over this run's. */
  readonly fewerBytes: number
  readonly cpuSeconds: number
  readonly wallSeconds: number
}

const list = (name: string, fallback: string, argv: ReadonlyArray<string>): Array<string> => {
  const at = argv.indexOf(name)
  return (at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback).split(",")
}

type Setting = Pick<AccuracyRow, "backend" | "compress" | "fewer" | "outer">

/** Trains one setting to the end; throws when the run did not complete or an audit is not exact. */
const train = async (
  setting: Setting,
  sizes: { trainer: string; epochs: number; ranks: number; baseEvery: number; outDir: string; deltas: boolean | undefined }
) => {
  const averageEvery = sizes.baseEvery * setting.fewer
  const cpuBefore = process.cpuUsage()
  const started = nowMs()
  const result = await Launcher.run({
    trainer: sizes.trainer,
    worldSize: sizes.ranks,
    epochs: sizes.epochs,
    averageEverySteps: averageEvery,
    compress: setting.compress,
    ...(setting.outer === undefined ? {} : { outerLr: setting.outer.lr, outerMomentum: setting.outer.momentum }),
    ...(sizes.deltas === undefined ? {} : { deltas: sizes.deltas }),
    ...(setting.backend === "cpu"
      ? {}
      : {
          backend: "ring" as const,
          transport: "process" as const,
          ringLinks: setting.backend === "ring relay" ? ("relay" as const) : ("direct" as const)
        }),
    heartbeatTimeoutMs: 60_000,
    outDir: sizes.outDir
  })
  const wallSeconds = (nowMs() - started) / 1000
  const cpu = process.cpuUsage(cpuBefore)
  const label = `${setting.backend} ${setting.compress} ${setting.fewer}x ${setting.outer === undefined ? "plain" : "outer"}`
  if (result.outcome.status !== "completed") throw new Error(`${label}: the run ended ${result.outcome.status}`)
  for (const e of result.epochs)
    if (e.lost !== 0 || e.duplicated !== 0 || e.accuracy === undefined) throw new Error(`${label}: epoch ${e.epoch} audit or eval missing`)
  const rounds = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { type: string; receivedBytes?: number; sentBytes?: number })
    .filter((e) => e.type === "round")
  const bytes = rounds.reduce((sum, r) => sum + (r.receivedBytes ?? 0) + (r.sentBytes ?? 0), 0)
  const samples = result.epochs.reduce((sum, e) => sum + e.samplesCommitted, 0)
  rmSync(result.runDir, { recursive: true, force: true })
  return {
    ...setting,
    averageEvery,
    rounds: rounds.length,
    accuracy: result.epochs.map((e) => e.accuracy!),
    bytesPerRound: rounds.length === 0 ? 0 : bytes / rounds.length,
    bytesPerSample: bytes / samples,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    wallSeconds
  }
}

/** Whether the issue's accuracy targets hold in `rows` (each a line, or a line saying what is missing). */
const targets = (rows: ReadonlyArray<AccuracyRow>): Array<string> => {
  const find = (compress: string, fewer: number, outer: boolean) =>
    rows.find((r) => r.compress === compress && r.fewer === fewer && (r.outer !== undefined) === outer)
  const plain = find("none", 1, false)
  if (plain === undefined) return ["(no float32 every-round run: no targets checked)"]
  const final = (r: AccuracyRow) => r.accuracy[r.accuracy.length - 1]!
  const line = (name: string, r: AccuracyRow | undefined, slack: number, bytesRatio = 0) => {
    if (r === undefined) return `${name}: not run`
    const ratio = r.bytesPerRound === 0 ? Number.NaN : plain.bytesPerRound / r.bytesPerRound
    const held = final(r) >= final(plain) - slack - 1e-9 && ratio >= bytesRatio
    return `${name}: accuracy ${final(r)} vs float32's ${final(plain)} - ${slack}, ${fmt(ratio)}× fewer bytes per round${bytesRatio > 0 ? ` (>= ${bytesRatio})` : ""}: ${held ? "held" : "MISSED"}`
  }
  return [
    line("int8 every round", find("int8", 1, false), 0.01, 3.5),
    line("fp16 every round", find("fp16", 1, false), 0.005),
    line("float32, outer optimizer, 8x fewer rounds", find("none", 8, true), 0.02),
    line("int8, outer optimizer, 8x fewer rounds", find("int8", 8, true), 0.02)
  ]
}

/** Runs the accuracy table (minutes: one real training run per row); returns its rows, the markdown table and the target lines. */
export const accuracy = async (quick: boolean, argv: ReadonlyArray<string> = process.argv) => {
  const trainer = fileURLToPath(new URL(quick ? "./trainers/mnist-small.ts" : "../src/train/mnist-trainer.ts", import.meta.url))
  const outer = { lr: argument("--outer-lr", 0.7, argv), momentum: argument("--outer-momentum", 0.9, argv) }
  const sizes = {
    trainer,
    epochs: argument("--epochs", quick ? 1 : 3, argv),
    ranks: argument("--ranks", 4, argv),
    baseEvery: argument("--base-every", 1, argv),
    outDir: join(tmpdir(), "cohort-bench-compression"),
    deltas: argv.includes("--deltas") ? list("--deltas", "on", argv)[0] === "on" : undefined
  }
  const ring = argv.includes("--ring") ? list("--ring", "relay", argv)[0] : undefined
  const backend: AccuracyRow["backend"] = ring === undefined ? "cpu" : ring === "direct" ? "ring direct" : "ring relay"
  const rows: Array<AccuracyRow> = []
  for (const compress of list("--compress", "none,fp16,int8", argv) as Array<Packed.Compression>)
    for (const fewer of list("--fewer", "1,8,64", argv).map(Number))
      for (const withOuter of backend === "cpu" ? [undefined, outer] : [undefined]) {
        if (
          !list(withOuter === undefined ? "--plain-fewer" : "--outer-fewer", "1,8,64", argv)
            .map(Number)
            .includes(fewer)
        )
          continue
        const row = await train({ backend, compress, fewer, outer: withOuter }, sizes)
        const first = rows[0] ?? row
        rows.push({ ...row, fewerBytes: first.bytesPerSample / row.bytesPerSample })
        console.error(
          `  ${compress} ${fewer}x ${withOuter === undefined ? "plain" : "outer"}: ${row.accuracy.join(" ")} (${row.wallSeconds.toFixed(0)} s)`
        )
      }
  const markdown = table(
    [
      "backend",
      "compress",
      "rounds fewer",
      "average every",
      "outer lr / momentum",
      "rounds",
      "accuracy by epoch",
      "bytes / round",
      "bytes / sample",
      "fewer bytes / sample",
      "CPU s",
      "wall s"
    ],
    rows.map((r) => [
      r.backend,
      r.compress,
      `${r.fewer}×`,
      r.averageEvery,
      r.outer === undefined ? "off" : `${r.outer.lr} / ${r.outer.momentum}`,
      r.rounds,
      r.accuracy.map((a) => a.toFixed(4)).join(", "),
      Math.round(r.bytesPerRound),
      r.bytesPerSample,
      `${fmt(r.fewerBytes)}×`,
      r.cpuSeconds,
      r.wallSeconds
    ])
  )
  return { rows, markdown, targets: targets(rows), settings: { ...sizes, outer } }
}

/** One run of the poisoning table. */
export interface PoisonRow {
  readonly poison: "none" | "scale" | "flip" | "flip-scale"
  readonly aggregate: "mean" | "median" | "trimmed-mean"
  readonly accuracy: ReadonlyArray<number>
  /** `OutlierParams` alerts, and the ranks they named. */
  readonly outlierAlerts: number
  readonly outlierPaths: ReadonlyArray<string>
  readonly wallSeconds: number
}

/**
 * The poisoning table (`--poison`): 4 ranks of the 64-hidden-unit MNIST model
 * (`bench/trainers/mnist-poisoned.ts`), rank 3 sending its parameters × 1e6 (`scale`),
 * sign-flipped (`flip`) or both (`flip-scale`, × −1e6) every round, combined with `mean`, `median`
 * and `trimmed-mean` (`--poisons KIND,...` picks the kinds; all by default), beside the
 * clean run with `mean`: the test accuracy after each epoch and the `OutlierParams` alerts.
 */
export const poisoning = async (quick: boolean, argv: ReadonlyArray<string> = process.argv) => {
  const trainer = fileURLToPath(new URL("./trainers/mnist-poisoned.ts", import.meta.url))
  const epochs = argument("--epochs", quick ? 1 : 3, argv)
  const settings: Array<Pick<PoisonRow, "poison" | "aggregate">> = [{ poison: "none", aggregate: "mean" }]
  const kinds = (argv[argv.indexOf("--poisons") + 1] ?? "").split(",")
  const poisons = (["scale", "flip", "flip-scale"] as const).filter((p) => !argv.includes("--poisons") || kinds.includes(p))
  for (const poison of poisons) for (const aggregate of ["mean", "median", "trimmed-mean"] as const) settings.push({ poison, aggregate })
  const rows: Array<PoisonRow> = []
  for (const setting of settings) {
    process.env["COHORT_BENCH_POISON"] = setting.poison
    const started = nowMs()
    const result = await Launcher.run({
      trainer,
      worldSize: 4,
      epochs,
      aggregate: setting.aggregate,
      heartbeatTimeoutMs: 60_000,
      outDir: join(tmpdir(), "cohort-bench-poisoning")
    })
    rmSync(result.runDir, { recursive: true, force: true })
    if (result.outcome.status !== "completed" || result.epochs.some((e) => e.lost !== 0 || e.duplicated !== 0))
      throw new Error(`${setting.poison} ${setting.aggregate}: the run ended ${result.outcome.status}, or an audit is not exact`)
    const outliers = result.alerts.filter((a) => a.class === "OutlierParams")
    rows.push({
      ...setting,
      accuracy: result.epochs.map((e) => e.accuracy ?? Number.NaN),
      outlierAlerts: outliers.length,
      outlierPaths: [...new Set(outliers.map((a) => a.path))],
      wallSeconds: (nowMs() - started) / 1000
    })
    console.error(`  poison ${setting.poison} ${setting.aggregate}: ${rows[rows.length - 1]!.accuracy.join(" ")}`)
  }
  delete process.env["COHORT_BENCH_POISON"]
  const markdown = table(
    ["rank 3 sends", "aggregate", "accuracy by epoch", "OutlierParams alerts", "ranks named", "wall s"],
    rows.map((r) => [
      r.poison === "none"
        ? "its parameters (clean)"
        : r.poison === "scale"
          ? "parameters × 1e6"
          : r.poison === "flip"
            ? "parameters sign-flipped"
            : "parameters × −1e6",
      r.aggregate,
      r.accuracy.map((a) => a.toFixed(4)).join(", "),
      r.outlierAlerts,
      r.outlierPaths.join(" ") || "-",
      r.wallSeconds
    ])
  )
  return { rows, markdown }
}

if (isMain("compression")) {
  const quick = isQuick()
  const packing = process.argv.includes("--accuracy-only") ? undefined : run(quick)
  if (packing !== undefined) console.log(`${packing.markdown}\n`)
  const trained = process.argv.includes("--no-accuracy") ? undefined : await accuracy(quick)
  if (trained !== undefined) console.log(`${trained.markdown}\n\n${trained.targets.join("\n")}`)
  const poisoned = process.argv.includes("--poison") ? await poisoning(quick) : undefined
  if (poisoned !== undefined) console.log(`\n${poisoned.markdown}`)
  if (!process.argv.includes("--no-json")) {
    const loaded = !process.argv.includes("--quiet-machine")
    const file = writeResults(
      {
        ...(packing === undefined ? {} : { compression: { loaded, rows: packing.rows } }),
        ...(trained === undefined
          ? {}
          : { compressionAccuracy: { loaded, settings: trained.settings, rows: trained.rows, targets: trained.targets } }),
        ...(poisoned === undefined ? {} : { poisoning: { loaded, rows: poisoned.rows } })
      },
      quick
    )
    console.log(`\nwrote ${file}`)
  }
}
