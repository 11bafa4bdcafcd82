/**
 * Codec benchmark (docs/design.md §4, §6): encode + decode round trips per second and bytes per
 * message for a `Heartbeat`, an `ExtendPartition` and a 100,000-parameter `Params`, for Cohort's
 * codec (cbor-x with the agreed structures table, pre-scan and schema validation) beside JSON
 * (`JSON.stringify` + `TextEncoder`, params as a number list) and plain cbor-x
 * (`new Encoder({ useRecords: false })`, no validation), all measured in the same run.
 *
 * Run: `node --import tsx bench/codec.ts`, `bun bench/codec.ts`, `deno run -A bench/codec.ts`,
 * or `npm run bench:codec`. Flags: `--quick` (well under 5 s), `--json <path>` (default
 * `bench/results/codec.<runtime>.json`), `--no-json`.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"
import { Decoder, Encoder, isNativeAccelerationEnabled } from "cbor-x"
import { Result } from "effect"
import * as Runtime from "../src/platform/detect.ts"
import * as Codec from "../src/wire/codec.ts"
import * as Frame from "../src/wire/frame.ts"

const args = process.argv.slice(2)
const quick = args.includes("--quick")
const jsonAt = args.indexOf("--json")
const runtime = Runtime.detect()
const jsonPath = args.includes("--no-json")
  ? undefined
  : jsonAt >= 0 && args[jsonAt + 1] !== undefined
    ? args[jsonAt + 1]!
    : `bench/results/codec.${runtime}.json`
const warmupMs = quick ? 100 : 500
const measureMs = quick ? 150 : 1500

interface CodecUnderTest {
  readonly name: string
  readonly encode: (frame: Frame.Frame) => Uint8Array
  /** Decodes and returns something derived from the result, so the work cannot be skipped. */
  readonly decode: (bytes: Uint8Array) => number
}

const params = new Float32Array(100_000)
for (let i = 0; i < params.length; i++) params[i] = Math.sin(i) * 0.01

const cases: ReadonlyArray<{ readonly name: string; readonly frame: Frame.Frame }> = [
  { name: "Heartbeat", frame: Frame.fromRank(17, { _tag: "Heartbeat" }) },
  {
    name: "ExtendPartition",
    frame: Frame.fromCoordinator({ _tag: "ExtendPartition", epoch: 7, offset: 123_456_789, size: 4096 })
  },
  { name: "Params (100k)", frame: Frame.fromRank(3, { _tag: "Params", epoch: 2, round: 41, samplesDone: 70_000, params }) }
]

const cohort: CodecUnderTest = {
  name: "cohort (structures + validation)",
  encode: Codec.encode,
  decode: (bytes) => {
    const result = Codec.decode(bytes)
    if (Result.isFailure(result)) throw new Error(`decode failed: ${result.failure.message}`)
    return result.success.from === "coordinator" ? 1 : 0
  }
}

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder()
const json: CodecUnderTest = {
  name: "JSON (+ UTF-8 bytes)",
  encode: (frame) =>
    textEncoder.encode(JSON.stringify(frame, (_key, value: unknown) => (value instanceof Float32Array ? Array.from(value) : value))),
  decode: (bytes) => {
    const value = JSON.parse(textDecoder.decode(bytes)) as { message: { params?: ReadonlyArray<number> } }
    const list = value.message.params
    return list === undefined ? 0 : new Float32Array(list).length
  }
}

const plainEncoder = new Encoder({ useRecords: false })
const plainDecoder = new Decoder({ useRecords: false })
const plain: CodecUnderTest = {
  name: "plain cbor-x (no records)",
  encode: (frame) => plainEncoder.encode(frame),
  decode: (bytes) => ((plainDecoder.decode(bytes) as { from: unknown }).from === "coordinator" ? 1 : 0)
}

const codecs: ReadonlyArray<CodecUnderTest> = [cohort, json, plain]

interface Row {
  readonly message: string
  readonly codec: string
  readonly messagesPerSecond: number
  readonly bytesPerMessage: number
}

const measure = (codec: CodecUnderTest, frame: Frame.Frame): Row & { readonly sink: number } => {
  const bytesPerMessage = codec.encode(frame).length
  let sink = 0
  const loop = (ms: number): number => {
    let count = 0
    // Read the clock after batches that double while they take under 2 ms, so that a 1-µs
    // heartbeat and a 100-ms JSON Params both stop close to `ms`.
    let batch = 1
    const start = performance.now()
    let now = start
    while (now - start < ms) {
      const before = now
      for (let i = 0; i < batch; i++) sink += codec.decode(codec.encode(frame))
      count += batch
      now = performance.now()
      if (now - before < 2) batch *= 2
    }
    return (count * 1000) / (now - start)
  }
  loop(warmupMs)
  const messagesPerSecond = loop(measureMs)
  return { message: "", codec: codec.name, messagesPerSecond, bytesPerMessage, sink }
}

const rows: Array<Row> = []
for (const { name, frame } of cases) {
  for (const codec of codecs) {
    const { sink: _sink, ...row } = measure(codec, frame)
    rows.push({ ...row, message: name })
  }
}

const format = (n: number): string => (n >= 1e6 ? `${(n / 1e6).toFixed(2)} M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)} k` : n.toFixed(0))

const header = ["message", "codec", "encode+decode msg/s", "bytes/msg", "msg/s vs JSON", "bytes vs JSON"]
const table = rows.map((row) => {
  const base = rows.find((r) => r.message === row.message && r.codec === json.name)!
  return [
    row.message,
    row.codec,
    format(row.messagesPerSecond),
    String(row.bytesPerMessage),
    `${(row.messagesPerSecond / base.messagesPerSecond).toFixed(2)}x`,
    `${(row.bytesPerMessage / base.bytesPerMessage).toFixed(2)}x`
  ]
})
const widths = header.map((title, i) => Math.max(title.length, ...table.map((cells) => cells[i]!.length)))
const line = (cells: ReadonlyArray<string>): string =>
  `| ${cells.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join(" | ")} |`

console.log(
  `codec bench: ${runtime} ${Runtime.version()}, cbor-x native acceleration ${isNativeAccelerationEnabled ? "on" : "off"}, ` +
    `${quick ? "quick" : "full"} (${measureMs} ms per cell after ${warmupMs} ms warm-up)`
)
console.log(line(header))
console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`)
for (const cells of table) console.log(line(cells))

if (jsonPath !== undefined) {
  mkdirSync(dirname(jsonPath), { recursive: true })
  writeFileSync(
    jsonPath,
    `${JSON.stringify({ bench: "codec", runtime, version: Runtime.version(), native: isNativeAccelerationEnabled, quick, measureMs, rows }, null, 2)}\n`
  )
  console.log(`wrote ${jsonPath}`)
}
