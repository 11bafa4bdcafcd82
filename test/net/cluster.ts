/**
 * A served run across hosts made of network namespaces (`./netns.ts`), shared by the tests in
 * test/net and the link benches: `cohort serve` in one host, one `cohort join` per rank in the
 * hosts `hostOf` names, all under the runtime running the caller; the run's summary and journal.
 *
 * `scratch(prefix)` makes a folder (with a run token file) that the caller removes in `afterAll`.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { RunResult } from "../../actors/record/run-types.ts"
import type * as Netns from "./netns.ts"

/** The CLI every process runs. */
export const cli = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** One journal event (`events.ndjson`). */
export interface Event {
  readonly type: string
  readonly ms: number
  readonly [key: string]: unknown
}

/** A folder for a test file's runs and its run token (`tokenFile`). */
export interface Scratch {
  readonly dir: string
  readonly tokenFile: string
}

export const scratch = (prefix: string): Scratch => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  const tokenFile = join(dir, "token")
  writeFileSync(tokenFile, `net-token-${Math.random().toString(36).slice(2)}-${Date.now()}`, { mode: 0o600 })
  return { dir, tokenFile }
}

/** The one run under `out`: its summary and its journal. */
export const readRun = (out: string): { readonly summary: RunResult; readonly events: ReadonlyArray<Event> } => {
  const [runId] = readdirSync(out)
  const dir = join(out, runId ?? "missing")
  return {
    summary: JSON.parse(readFileSync(join(dir, "summary.json"), "utf8")) as RunResult,
    events: readFileSync(join(dir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Event)
  }
}

/**
 * What a cluster that did not end well left, for a failed assertion's message: each process's exit
 * and the tail of what it printed, and the tail of the run's journal.
 */
export const story = async (cluster: Cluster, lines = 25): Promise<string> => {
  const tail = (text: string) => text.trim().split("\n").slice(-lines).join("\n")
  const procs = [["serve", cluster.serve] as const, ...cluster.ranks.map((rank, r) => [`rank ${r}`, rank] as const)]
  const parts: Array<string> = []
  for (const [name, proc] of procs) {
    const exit = await Promise.race([proc.exited, sleep(0).then(() => "running")])
    parts.push(`--- ${name} (${exit}):\n${tail(`${proc.stdout()}\n${proc.stderr()}`)}`)
  }
  const [runId] = existsSync(cluster.out) ? readdirSync(cluster.out) : []
  const journal = runId === undefined ? "" : join(cluster.out, runId, "events.ndjson")
  parts.push(`--- journal:\n${journal !== "" && existsSync(journal) ? tail(readFileSync(journal, "utf8")) : "(none)"}`)
  return parts.join("\n")
}

/** Each epoch's `[samplesCommitted, lost, duplicated]`. */
export const audits = (summary: RunResult) => summary.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])

/** Milliseconds from each round's close to the next one's (from formation for the first). */
export const roundTimes = (events: ReadonlyArray<Event>): ReadonlyArray<number> => {
  const formed = events.find((e) => e.type === "formed")?.ms ?? 0
  const closes = events.filter((e) => e.type === "round").map((e) => e.ms)
  return closes.map((ms, i) => ms - (i === 0 ? formed : closes[i - 1]!))
}

export interface StartOptions {
  readonly scratch: Scratch
  /** The run's folder under the scratch folder: `<name>/runs`, and `<name>/save-<rank>`. */
  readonly name: string
  readonly trainer: string
  readonly worldSize: number
  readonly epochs: number
  readonly port: number
  /** The host of `cohort serve`; default `"a"`. */
  readonly serveHost?: string
  readonly hostOf: (rank: number) => string
  /** Every process is killed after this long. */
  readonly lifetimeMs: number
  /** More `cohort serve` options (`--heartbeat-timeout-ms`...). */
  readonly serveArgs?: ReadonlyArray<string>
  /** More `cohort join` options, for every rank (`--coordinator-reconnect-ms`...). */
  readonly joinArgs?: ReadonlyArray<string>
  /** The URL rank `rank` joins; default the serving host's address and `port`. */
  readonly urlOf?: (rank: number) => string
  readonly env?: Readonly<Record<string, string>>
  /** Every process's nice value (`Netns.ExecOptions.nice`); default the test's own. */
  readonly nice?: number
  /** Start the ranks only once the server printed its port (default true). */
  readonly waitForServe?: boolean
}

export interface Cluster {
  readonly serve: Netns.Proc
  readonly ranks: ReadonlyArray<Netns.Proc>
  /** The runs folder (`readRun(out)`). */
  readonly out: string
}

/** Starts `cohort serve` and one `cohort join` per rank (see the module doc). */
export const start = async (network: Netns.Network, options: StartOptions): Promise<Cluster> => {
  const serveHost = options.serveHost ?? "a"
  const out = join(options.scratch.dir, options.name, "runs")
  const env = options.env === undefined ? {} : { env: options.env }
  const serve = network.script(
    serveHost,
    cli,
    [
      "serve",
      "--trainer",
      options.trainer,
      "--world-size",
      String(options.worldSize),
      "--epochs",
      String(options.epochs),
      ...(options.serveArgs ?? []),
      "--listen",
      `${network.address(serveHost)}:${options.port}`,
      "--token-file",
      options.scratch.tokenFile,
      "--out",
      out
    ],
    { lifetimeMs: options.lifetimeMs, ...env, ...(options.nice === undefined ? {} : { nice: options.nice }) }
  )
  if (options.waitForServe ?? true) await serve.waitFor(new RegExp(`${options.port}`), 20_000)
  const urlOf = options.urlOf ?? (() => `ws://${network.address(serveHost)}:${options.port}/`)
  const ranks = Array.from({ length: options.worldSize }, (_, rank) =>
    network.script(
      options.hostOf(rank),
      cli,
      [
        "join",
        urlOf(rank),
        "--trainer",
        options.trainer,
        "--token-file",
        options.scratch.tokenFile,
        "--rank",
        String(rank),
        "--save-dir",
        join(options.scratch.dir, options.name, `save-${rank}`),
        ...(options.joinArgs ?? [])
      ],
      { lifetimeMs: options.lifetimeMs, ...env, ...(options.nice === undefined ? {} : { nice: options.nice }) }
    )
  )
  return { serve, ranks, out }
}
