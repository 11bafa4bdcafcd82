/**
 * Compression benchmark (docs/edge-averaging.md): bytes and time per averaging round of the `cpu`
 * backend for `--compress none|fp16|int8`, at the bundled model's size (407,050 parameters).
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
 * Run: `node --import tsx bench/compression.ts [--quick] [--no-json]` (`--quick`: 100,000
 * parameters, 5 repeats). Numbers from a machine shared with other work are labelled so in the
 * JSON (`loaded: true` unless `--quiet-machine`).
 */
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
      r.maxError,
      r.secondsAt1Mbit
    ])
  )
  return { rows, markdown }
}

if (isMain("compression")) {
  const quick = isQuick()
  const { rows, markdown } = run(quick)
  console.log(markdown)
  if (!process.argv.includes("--no-json")) {
    const file = writeResults({ compression: { loaded: !process.argv.includes("--quiet-machine"), rows } }, quick)
    console.log(`\nwrote ${file}`)
  }
}
