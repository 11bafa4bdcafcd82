/**
 * Small helpers shared by the benchmarks: timing, percentiles, markdown tables, results files.
 * Benchmarks report; they never fail on a number.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import * as Runtime from "../src/platform/detect.ts"

/** Monotonic milliseconds. */
export const nowMs = (): number => performance.now()

/** Median and 99th percentile of a list of numbers (nearest rank). */
export const percentiles = (values: ReadonlyArray<number>): { readonly median: number; readonly p99: number } => {
  if (values.length === 0) return { median: Number.NaN, p99: Number.NaN }
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
  return { median: at(0.5), p99: at(0.99) }
}

/** The `q` quantile of a list of numbers (nearest rank; `q` in [0, 1]); NaN for an empty list. */
export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
}

/** Formats a number for a table: 3 significant digits, thousands separators for large values. */
export const fmt = (value: number): string => {
  if (!Number.isFinite(value)) return String(value)
  if (Number.isInteger(value)) return value.toLocaleString("en-US")
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString("en-US")
  if (Math.abs(value) >= 1) return value.toPrecision(3)
  return value.toPrecision(2)
}

/** A markdown table. */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string | number>>): string => {
  const cells = rows.map((r) => r.map((c) => (typeof c === "number" ? fmt(c) : c)))
  return [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`, ...cells.map((r) => `| ${r.join(" | ")} |`)].join("\n")
}

/** `--quick` on the command line. */
export const isQuick = (argv: ReadonlyArray<string> = process.argv): boolean => argv.includes("--quick")

/** Machine and runtime facts recorded with every result. */
export const environment = () => ({
  runtime: Runtime.describe(),
  platform: `${process.platform} ${process.arch}`,
  date: new Date().toISOString()
})

/**
 * Writes `bench/results/<runtime>-<date>[-quick].json` (relative to the working directory, the
 * project root under `npm run`), merging into that day's file so that separately run sections
 * end up together, and returns its path.
 */
export const writeResults = (results: Record<string, unknown>, quick: boolean): string => {
  const dir = join(process.cwd(), "bench", "results")
  mkdirSync(dir, { recursive: true })
  const date = new Date().toISOString().slice(0, 10)
  const file = join(dir, `${Runtime.detect()}-${date}${quick ? "-quick" : ""}.json`)
  const earlier = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>) : {}
  writeFileSync(file, `${JSON.stringify({ ...earlier, environment: environment(), ...results }, null, 2)}\n`)
  return file
}

/** Lets V8 settle between measurements where the runtime exposes a collector. */
export const collectGarbage = (): void => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc !== undefined) gc()
}

/** Bytes held by the typed arrays reachable from `root` (one level into plain objects and arrays). */
export const typedArrayBytes = (root: unknown): number => {
  const seen = new Set<unknown>()
  let bytes = 0
  const visit = (value: unknown, depth: number): void => {
    if (value === null || typeof value !== "object" || seen.has(value)) return
    seen.add(value)
    if (ArrayBuffer.isView(value)) {
      bytes += value.buffer.byteLength
      return
    }
    if (depth > 3) return
    for (const child of Object.values(value as Record<string, unknown>)) visit(child, depth + 1)
  }
  visit(root, 0)
  return bytes
}

/**
 * True when the script being run is the bench file named `name` (`"tick"` for `bench/tick.ts`).
 * By name, not by `import.meta.url`: in a bundle every module shares the bundle's URL.
 */
export const isMain = (name: string): boolean => {
  const script = process.argv[1]
  return script !== undefined && basename(script).replace(/\.[cm]?[jt]s$/, "") === name
}

/** A progress line on stderr, so that stdout keeps only the tables. */
export const note = (text: string): void => {
  process.stderr.write(`${text}\n`)
}

type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
  timeoutMs: number
) => { readonly async: false; readonly value: string } | { readonly async: true; readonly value: Promise<string> }

/** Resolves once word `index` of the shared `words` is at least `value` (waits without blocking the thread). */
export const atLeast = async (words: Int32Array, index: number, value: number): Promise<void> => {
  const waitAsync = (Atomics as unknown as { readonly waitAsync: WaitAsync }).waitAsync
  for (let now = Atomics.load(words, index); now < value; now = Atomics.load(words, index)) {
    const waited = waitAsync(words, index, now, 1000)
    if (waited.async) await waited.value
  }
}
