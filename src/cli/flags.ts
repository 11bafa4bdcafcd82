/**
 * The flags' values checked: the checkers every command uses (`integerAtLeast`, `oneOf`, a
 * `UsageError` for bad input) and the options of `demo`, `run` (and the run part of `serve`) and
 * `resume` built from commander's raw values, every default filled in (`defaults.ts`).
 *
 * @since 0.1.0
 */
import type * as Commander from "commander"
import type { RunTypes } from "../../actors/cli-entry.ts"
import * as Config from "../core/config.ts"
import { defaults, demoKill } from "./defaults.ts"

/**
 * The options of `demo` and `run`, every default filled in. `trainer` is the path as given
 * (`run` only; `undefined` for `demo`, which trains the bundled workload).
 *
 * @since 0.1.0
 * @category parsing
 */
export interface RunCommandOptions {
  readonly trainer: string | undefined
  readonly worldSize: number
  readonly epochs: number
  readonly mode: "static" | "progressive"
  readonly backend: "cpu" | "ring"
  /** `--ring-links direct|relay` (ring backend): ring steps rank to rank where the transport can, or all through the coordinator; `undefined` (direct) without it. */
  readonly ringLinks?: "direct" | "relay" | undefined
  /** `--ring-area-mb N` (ring backend): the largest all-reduce area of a ring generation, MiB (0: none, steps over the links); `undefined` (the launcher's default) without it. */
  readonly ringAreaMemoryMb?: number | undefined
  /** `--ring-area-dir DIR` (ring backend, child processes): where the run's folder for its ranks' sockets and area files goes; `undefined` (`/dev/shm` where it can) without it. */
  readonly ringAreaFolder?: string | undefined
  readonly transport: "worker" | "process" | "websocket"
  readonly kills: ReadonlyArray<RunTypes.KillSpec>
  readonly hangs: ReadonlyArray<RunTypes.HangSpec>
  readonly heartbeatTimeoutMs: number
  readonly coordinatorTimeoutMs: number
  /** `--round-deadline-ms N` (cpu backend): rounds close N ms after their first contribution without the ranks still training, once half the survivors contributed; `undefined` (off) without it. */
  readonly roundDeadlineMs?: number | undefined
  /** `--round-quorum F` (with `--round-deadline-ms`): the fraction (0, 1] of the survivors a round needs before its deadline closes it; `undefined` (0.5) without it. */
  readonly roundQuorum?: number | undefined
  /** `--round-silence-ms`, `--blocking-silence-ms`, `--blocking-quiet-max` (docs/liveness.md); only those given. */
  readonly silence?: Silence
  /** `--aggregate`, `--clip-norm`, `--outlier-rounds-max` (cpu backend, docs/edge-averaging.md); only those given. */
  readonly aggregation?: Aggregation
  /** `--compress none|fp16|int8` (cpu backend, docs/edge-averaging.md); `undefined` (none) without it. */
  readonly compress?: "none" | "fp16" | "int8"
  /** `--deltas on|off` (cpu backend, docs/edge-averaging.md); `undefined` (the run's default) without it. */
  readonly deltas?: boolean
  /** `--outer-lr`, `--outer-momentum` (cpu backend, docs/edge-averaging.md); only those given. */
  readonly outer?: { readonly outerLr?: number; readonly outerMomentum?: number }
  readonly failureLimit: Config.FailureLimit | undefined
  readonly rolePolicy: Config.RolePolicy
  readonly onRepeatedCrash: "stop" | "continue"
  readonly rankMemoryMb: number
  readonly interruptGraceMs: number
  /** `--save-timeout-ms`, `--eval-timeout-ms` (docs/liveness.md); `undefined`: the core's defaults. */
  readonly saveTimeoutMs: number | undefined
  readonly evalTimeoutMs: number | undefined
  /** `--beat-links` (docs/liveness.md): WebSocket ranks beat on a link of their own during calls. */
  readonly beatLinks?: true
  /** `--liveness fixed|adaptive` (docs/liveness.md); default fixed. */
  readonly livenessDetector: "fixed" | "adaptive"
  /**
   * `--dashboard [PORT]` (PORT default 0: a free port, printed), `--dashboard-faults` (kill
   * buttons) and `--dashboard-connections-max N` (the listener's cap, default 256): the live run
   * page (`src/dashboard/live.ts`); `undefined` without `--dashboard`.
   */
  readonly dashboard?: { readonly port: number; readonly faults: boolean; readonly connectionsMax?: number } | undefined
  readonly seed: number
  readonly outDir: string
  readonly json: boolean
}

/**
 * The options of `resume`: the parent's run directory as given, and the overrides given (each
 * `undefined` when absent: the parent's value is used; faults: none).
 *
 * @since 0.1.0
 * @category parsing
 */
export interface ResumeCommandOptions {
  readonly runDir: string
  readonly trainer: string | undefined
  readonly worldSize: number | undefined
  readonly transport: "worker" | "process" | undefined
  readonly kills: ReadonlyArray<RunTypes.KillSpec>
  readonly hangs: ReadonlyArray<RunTypes.HangSpec>
  readonly heartbeatTimeoutMs: number | undefined
  readonly coordinatorTimeoutMs: number | undefined
  readonly failureLimit: Config.FailureLimit | undefined
  readonly rankMemoryMb: number | undefined
  readonly interruptGraceMs: number | undefined
  readonly outDir: string | undefined
  readonly json: boolean
  /** `--dashboard [PORT]` and `--dashboard-faults`, as for `demo` and `run`. */
  readonly dashboard?: { readonly port: number; readonly faults: boolean } | undefined
}

/** Commander's raw values of the run flags. @since 0.1.0 @category parsing */
export interface RawRunOptions {
  readonly trainer?: string
  readonly worldSize?: string
  readonly epochs?: string
  readonly mode?: string
  readonly backend?: string
  readonly ringLinks?: string
  readonly ringAreaMb?: string
  readonly ringAreaDir?: string
  readonly transport?: string
  readonly kill?: ReadonlyArray<string> | false
  readonly hang?: ReadonlyArray<string>
  readonly heartbeatTimeoutMs?: string
  readonly coordinatorTimeoutMs?: string
  readonly roundDeadlineMs?: string
  readonly roundQuorum?: string
  readonly roundSilenceMs?: string
  readonly blockingSilenceMs?: string
  readonly blockingQuietMax?: string
  readonly aggregate?: string
  readonly clipNorm?: string
  readonly outlierRoundsMax?: string
  readonly compress?: string
  readonly deltas?: string
  readonly outerLr?: string
  readonly outerMomentum?: string
  readonly failureLimit?: string
  readonly rolePolicy?: string
  readonly onRepeatedCrash?: string
  readonly rankMemoryMb?: string
  readonly interruptGraceMs?: string
  readonly seed?: string
  readonly out?: string
  readonly json?: boolean
  readonly dashboard?: string | true
  readonly dashboardFaults?: true
  readonly dashboardConnectionsMax?: string
  readonly saveTimeoutMs?: string
  readonly evalTimeoutMs?: string
  readonly beatLinks?: true
  readonly liveness?: string
}

/** Bad input found while parsing: its message is the one line shown. @since 0.1.0 @category parsing */
export class UsageError extends Error {}

/**
 * Makes each flag of `command` and its subcommands that takes a value refuse another flag
 * (`--…`) as that value, naming the flag: commander would take `--ring-listen` in
 * `--ring-advertise --ring-listen X` as `--ring-advertise`'s value and report the `X` left over
 * as too many arguments. Call after the flags are declared; returns `command`. Errors:
 * `UsageError`. @since 0.1.0 @category parsing
 */
export const refuseFlagsAsValues = <C extends Commander.Command>(command: C): C => {
  for (const option of command.options) {
    if (!option.required) continue
    const parse = option.parseArg
    option.argParser((value: string, previous: unknown) => {
      if (value.startsWith("--")) throw new UsageError(`option '${option.flags}' argument missing ('${value}' is the next flag)`)
      return parse === undefined ? value : parse(value, previous)
    })
  }
  for (const sub of command.commands) refuseFlagsAsValues(sub)
  return command
}

const integerPattern = /^\d+$/

/** An integer flag >= `min`, or `fallback` when absent. @since 0.1.0 @category parsing */
export const integerAtLeast = (flag: string, text: string | undefined, min: number, fallback: number): number => {
  if (text === undefined) return fallback
  const value = Number(text)
  if (!integerPattern.test(text) || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`${flag} must be an integer >= ${min}, got '${text}'`)
  }
  return value
}

/** One of `choices`, or `fallback` when absent. @since 0.1.0 @category parsing */
export const oneOf = <A extends string>(flag: string, text: string | undefined, choices: ReadonlyArray<A>, fallback: A): A => {
  if (text === undefined) return fallback
  const found = choices.find((choice) => choice === text)
  if (found === undefined) {
    throw new UsageError(`${flag} must be ${choices.slice(0, -1).join(", ")} or ${choices[choices.length - 1]}, got '${text}'`)
  }
  return found
}

const outOfRange = (rank: number, worldSize: number): string =>
  `rank ${rank} is out of range for ${worldSize} ${worldSize === 1 ? "rank" : "ranks"} (0 to ${worldSize - 1})`

// RANK@TIME: seconds, bare (`2@1.5`) or with `s` (`2@1.5s`), or milliseconds with `ms` (`2@500ms`).
const faultSpecPattern = /^(-?\d+)@(-?(?:\d+(?:\.\d*)?|\.\d+))(ms|s)?$/

const faultSpec = (flag: string, text: string, worldSize: number): { readonly rank: number; readonly atSeconds: number } => {
  const match = faultSpecPattern.exec(text)
  if (match === null) throw new UsageError(`${flag} expects RANK@SECONDS (e.g. 2@5, 2@1.5s or 2@500ms), got '${text}'`)
  const rank = Number(match[1])
  const atSeconds = match[3] === "ms" ? Number(match[2]) / 1000 : Number(match[2])
  if (rank < 0 || rank >= worldSize) {
    throw new UsageError(`${flag} ${text}: ${outOfRange(rank, worldSize)}`)
  }
  if (atSeconds < 0) throw new UsageError(`${flag} ${text}: seconds must be >= 0`)
  return { rank, atSeconds }
}

const failureLimit = (text: string | undefined): Config.FailureLimit | undefined => {
  if (text === undefined) return undefined
  const value = Number(text)
  if (integerPattern.test(text) && Number.isSafeInteger(value)) return { absolute: value }
  if (/^\d*\.\d+$/.test(text) && value > 0 && value < 1) return { fraction: value }
  throw new UsageError(`--failure-limit must be an integer >= 0 or a fraction between 0 and 1, got '${text}'`)
}

const rolePolicy = (text: string | undefined, worldSize: number): Config.RolePolicy => {
  if (text === undefined || text === "fastest") return "fastest"
  const rank = Number(text)
  if (!integerPattern.test(text) || !Number.isSafeInteger(rank)) {
    throw new UsageError(`--role-policy must be fastest or a rank (an integer >= 0), got '${text}'`)
  }
  if (rank >= worldSize) throw new UsageError(`--role-policy ${text}: ${outOfRange(rank, worldSize)}`)
  return { rank }
}

const seedMax = 4_294_967_295

const seed = (text: string | undefined): number => {
  if (text === undefined) return defaults.seed
  const value = Number(text)
  if (!integerPattern.test(text) || value > seedMax) {
    throw new UsageError(`--seed must be an integer from 0 to ${seedMax}, got '${text}'`)
  }
  return value
}

/**
 * How the cpu backend combines rounds, as the run options take it (`RunOptions.aggregate` and the rest).
 *
 * @since 0.1.0
 * @category parsing
 */
export interface Aggregation {
  readonly aggregate?: "mean" | "trimmed-mean" | "median"
  readonly trimFraction?: number
  readonly clipNorm?: number
  readonly outlierRoundsMax?: number
}

const fractionBelowHalf = /^(0|0?\.\d+)$/
const positiveNumber = /^(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i

/**
 * `--aggregate mean|median|trimmed-mean[:F]|clip:N` (`clip:N` is the mean of contributions
 * clipped to change norm N), `--clip-norm N` (with any rule), `--outlier-rounds-max K`.
 */
const aggregation = (raw: RawRunOptions, backend: "cpu" | "ring"): Aggregation => {
  const text = raw.aggregate
  const [rule, argument] = text === undefined ? [undefined, undefined] : [text.split(":")[0], text.split(":").slice(1).join(":")]
  const usage = `--aggregate must be mean, median, trimmed-mean, trimmed-mean:F (0 <= F < 0.5) or clip:N (N > 0), got '${text}'`
  let out: { -readonly [K in keyof Aggregation]: Aggregation[K] } = {}
  if (rule === "mean" || rule === "median") {
    if (text !== rule) throw new UsageError(usage)
    out.aggregate = rule
  } else if (rule === "trimmed-mean") {
    out.aggregate = "trimmed-mean"
    if (text !== rule) {
      if (!fractionBelowHalf.test(argument!) || !(Number(argument) < 0.5)) throw new UsageError(usage)
      out.trimFraction = Number(argument)
    }
  } else if (rule === "clip") {
    if (!positiveNumber.test(argument!) || !(Number(argument) > 0) || !Number.isFinite(Number(argument))) throw new UsageError(usage)
    out = { aggregate: "mean", clipNorm: Number(argument) }
  } else if (rule !== undefined) throw new UsageError(usage)
  if (raw.clipNorm !== undefined) {
    if (rule === "clip") throw new UsageError("--clip-norm cannot be used with --aggregate clip:N (it says the norm already)")
    const norm = Number(raw.clipNorm)
    if (!positiveNumber.test(raw.clipNorm) || !(norm > 0) || !Number.isFinite(norm))
      throw new UsageError(`--clip-norm must be a number above 0, got '${raw.clipNorm}'`)
    out.clipNorm = norm
  }
  if (raw.outlierRoundsMax !== undefined) out.outlierRoundsMax = integerAtLeast("--outlier-rounds-max", raw.outlierRoundsMax, 0, 0)
  const robust = (out.aggregate !== undefined && out.aggregate !== "mean") || out.clipNorm !== undefined
  if (robust && backend === "ring")
    throw new UsageError("--aggregate and --clip-norm need --backend cpu: ring members average among themselves")
  return out
}

const deltasOption = (text: string, backend: "cpu" | "ring"): boolean => {
  const deltas = oneOf("--deltas", text, ["on", "off"], "off") === "on"
  if (deltas && backend === "ring") throw new UsageError("--deltas on needs --backend cpu: ring members average their parameters")
  return deltas
}

const compression = (text: string): "none" | "fp16" | "int8" => oneOf("--compress", text, ["none", "fp16", "int8"], "none")

/** `--outer-lr N` (> 0) and `--outer-momentum F` ([0, 1)), cpu backend only. */
const outerOptions = (
  raw: RawRunOptions,
  backend: "cpu" | "ring"
): { readonly outer?: { readonly outerLr?: number; readonly outerMomentum?: number } } => {
  if (raw.outerLr === undefined && raw.outerMomentum === undefined) return {}
  if (backend === "ring") throw new UsageError("--outer-lr and --outer-momentum need --backend cpu: the coordinator applies the outer step")
  const lr = raw.outerLr === undefined ? undefined : Number(raw.outerLr)
  if (lr !== undefined && !(positiveNumber.test(raw.outerLr!) && lr > 0 && Number.isFinite(lr)))
    throw new UsageError(`--outer-lr must be a number above 0, got '${raw.outerLr}'`)
  const momentum = raw.outerMomentum === undefined ? undefined : Number(raw.outerMomentum)
  if (momentum !== undefined && !(/^(0|0?\.\d+)$/.test(raw.outerMomentum!) && momentum < 1)) {
    throw new UsageError(`--outer-momentum must be a number from 0 to below 1, got '${raw.outerMomentum}'`)
  }
  return { outer: { ...(lr === undefined ? {} : { outerLr: lr }), ...(momentum === undefined ? {} : { outerMomentum: momentum }) } }
}

const withAggregation = (given: Aggregation): { readonly aggregation?: Aggregation } =>
  Object.keys(given).length === 0 ? {} : { aggregation: given }

/**
 * What the run does about silent ranks before their heartbeat timeout, as the run options take
 * it (`RunOptions.roundSilenceMs` and the rest; docs/liveness.md).
 *
 * @since 0.1.0
 * @category parsing
 */
export interface Silence {
  readonly roundSilenceMs?: number
  readonly blockingSilenceMs?: number
  readonly blockingSilenceQuietMax?: number
}

/**
 * `--round-silence-ms N` (cpu backend), `--blocking-silence-ms N` and `--blocking-quiet-max F`
 * (with `--blocking-silence-ms`). The bound against the ranks' beat interval is the launcher's
 * check (`LaunchError` `blockingSilenceMs`).
 */
const silence = (raw: RawRunOptions, backend: "cpu" | "ring"): Silence => {
  const roundSilenceMs = raw.roundSilenceMs === undefined ? undefined : integerAtLeast("--round-silence-ms", raw.roundSilenceMs, 1, 0)
  if (roundSilenceMs !== undefined && backend === "ring") {
    throw new UsageError("--round-silence-ms needs --backend cpu: a ring round is one collective of every member")
  }
  const blockingSilenceMs =
    raw.blockingSilenceMs === undefined ? undefined : integerAtLeast("--blocking-silence-ms", raw.blockingSilenceMs, 1, 0)
  const quietMax = raw.blockingQuietMax === undefined ? undefined : Number(raw.blockingQuietMax)
  if (quietMax !== undefined && !(/^(\d*\.\d+|1)$/.test(raw.blockingQuietMax!) && quietMax > 0 && quietMax <= 1)) {
    throw new UsageError(`--blocking-quiet-max must be a fraction above 0, at most 1, got '${raw.blockingQuietMax}'`)
  }
  if (quietMax !== undefined && blockingSilenceMs === undefined)
    throw new UsageError("--blocking-quiet-max goes with --blocking-silence-ms")
  return {
    ...(roundSilenceMs === undefined ? {} : { roundSilenceMs }),
    ...(blockingSilenceMs === undefined ? {} : { blockingSilenceMs }),
    ...(quietMax === undefined ? {} : { blockingSilenceQuietMax: quietMax })
  }
}

const withSilence = (given: Silence): { readonly silence?: Silence } => (Object.keys(given).length === 0 ? {} : { silence: given })

/** The checked options of `demo`/`run` (and the run part of `serve`) from commander's raw values. @since 0.1.0 @category parsing */
export const runOptions = (command: "demo" | "run" | "serve", raw: RawRunOptions, killAndNoKill: boolean): RunCommandOptions => {
  if (command === "run" && raw.trainer === undefined) throw new UsageError("run needs --trainer FILE")
  if (raw.trainer === "") throw new UsageError("--trainer needs a file path")
  if (killAndNoKill) throw new UsageError("--kill cannot be used with --no-kill")
  const worldSize = integerAtLeast("--world-size", raw.worldSize, 1, defaults.worldSize)
  // The launcher's `defaults.worldSizeMax` (not imported: the launcher loads only when a run starts).
  if (command !== "serve" && worldSize > 1024)
    throw new UsageError(`--world-size must be at most 1024 (the ranks one machine starts), got '${raw.worldSize}'`)
  // The launcher's `serveDefaults.worldSizeMax` (the core's bound).
  if (command === "serve" && worldSize > 1_000_000) throw new UsageError(`--world-size must be at most 1000000, got '${raw.worldSize}'`)
  const epochs = integerAtLeast("--epochs", raw.epochs, 1, defaults.epochs)
  const mode = oneOf("--mode", raw.mode, ["static", "progressive"], defaults.mode)
  const backend = oneOf("--backend", raw.backend, ["cpu", "ring"], defaults.backend)
  if (backend === "ring" && worldSize < 2)
    throw new UsageError(`--backend ring needs --world-size 2 or more (the ranks average among themselves), got ${worldSize}`)
  const transport = oneOf("--transport", raw.transport, ["worker", "process", "websocket"], defaults.transport)
  const ringLinks = raw.ringLinks === undefined ? undefined : oneOf("--ring-links", raw.ringLinks, ["direct", "relay"], "direct")
  if (ringLinks !== undefined && backend !== "ring") throw new UsageError("--ring-links goes with --backend ring")
  const ringAreaMemoryMb = raw.ringAreaMb === undefined ? undefined : integerAtLeast("--ring-area-mb", raw.ringAreaMb, 0, 0)
  if (ringAreaMemoryMb !== undefined && backend !== "ring") throw new UsageError("--ring-area-mb goes with --backend ring")
  // The launcher's `defaults.ringAreaMemoryMbMax` (not imported: the launcher loads only when a run starts).
  if (ringAreaMemoryMb !== undefined && ringAreaMemoryMb > 65_536)
    throw new UsageError(`--ring-area-mb must be at most 65536, got '${raw.ringAreaMb}'`)
  if (raw.ringAreaDir !== undefined && backend !== "ring") throw new UsageError("--ring-area-dir goes with --backend ring")
  if (raw.ringAreaDir === "") throw new UsageError("--ring-area-dir needs a folder path")
  const ringAreaFolder = raw.ringAreaDir
  const kills: ReadonlyArray<RunTypes.KillSpec> =
    raw.kill === false
      ? []
      : raw.kill !== undefined
        ? raw.kill.map((text) => faultSpec("--kill", text, worldSize))
        : command === "demo"
          ? demoKill(worldSize, epochs)
          : []
  const hangs = (raw.hang ?? []).map((text) => faultSpec("--hang", text, worldSize))
  const heartbeatTimeoutMs = integerAtLeast("--heartbeat-timeout-ms", raw.heartbeatTimeoutMs, 1, defaults.heartbeatTimeoutMs)
  const roundDeadlineMs = raw.roundDeadlineMs === undefined ? undefined : integerAtLeast("--round-deadline-ms", raw.roundDeadlineMs, 1, 0)
  if (roundDeadlineMs !== undefined && backend === "ring") {
    throw new UsageError("--round-deadline-ms needs --backend cpu: a ring round is one collective of every member")
  }
  const roundQuorum = raw.roundQuorum === undefined ? undefined : Number(raw.roundQuorum)
  if (roundQuorum !== undefined && !(/^(\d*\.\d+|1)$/.test(raw.roundQuorum!) && roundQuorum > 0 && roundQuorum <= 1)) {
    throw new UsageError(`--round-quorum must be a fraction above 0, at most 1, got '${raw.roundQuorum}'`)
  }
  if (roundQuorum !== undefined && roundDeadlineMs === undefined) throw new UsageError("--round-quorum goes with --round-deadline-ms")
  if (raw.out === "") throw new UsageError("--out needs a folder path")
  const rankMemoryMb = raw.rankMemoryMb === "0" ? 0 : integerAtLeast("--rank-memory-mb", raw.rankMemoryMb, 16, defaults.rankMemoryMb)
  return {
    trainer: raw.trainer,
    worldSize,
    epochs,
    mode,
    backend,
    ...(ringLinks === undefined ? {} : { ringLinks }),
    ...(ringAreaMemoryMb === undefined ? {} : { ringAreaMemoryMb }),
    ...(ringAreaFolder === undefined ? {} : { ringAreaFolder }),
    transport,
    kills,
    hangs,
    heartbeatTimeoutMs,
    coordinatorTimeoutMs: integerAtLeast("--coordinator-timeout-ms", raw.coordinatorTimeoutMs, 1, defaults.coordinatorTimeoutMs),
    ...(roundDeadlineMs === undefined ? {} : { roundDeadlineMs }),
    ...(roundQuorum === undefined ? {} : { roundQuorum }),
    ...withSilence(silence(raw, backend)),
    ...withAggregation(aggregation(raw, backend)),
    ...(raw.compress === undefined ? {} : { compress: compression(raw.compress) }),
    ...(raw.deltas === undefined ? {} : { deltas: deltasOption(raw.deltas, backend) }),
    ...outerOptions(raw, backend),
    failureLimit: failureLimit(raw.failureLimit),
    rolePolicy: rolePolicy(raw.rolePolicy, worldSize),
    onRepeatedCrash: oneOf("--on-repeated-crash", raw.onRepeatedCrash, ["stop", "continue"], defaults.onRepeatedCrash),
    rankMemoryMb,
    interruptGraceMs:
      raw.interruptGraceMs === "0" ? 0 : integerAtLeast("--interrupt-grace-ms", raw.interruptGraceMs, 1, defaults.interruptGraceMs),
    saveTimeoutMs: raw.saveTimeoutMs === undefined ? undefined : integerAtLeast("--save-timeout-ms", raw.saveTimeoutMs, 1, 1),
    evalTimeoutMs: raw.evalTimeoutMs === undefined ? undefined : integerAtLeast("--eval-timeout-ms", raw.evalTimeoutMs, 1, 1),
    ...(raw.beatLinks === true ? { beatLinks: true as const } : {}),
    livenessDetector: oneOf("--liveness", raw.liveness, ["fixed", "adaptive"], "fixed"),
    seed: seed(raw.seed),
    outDir: raw.out ?? defaults.outDir,
    json: raw.json === true,
    dashboard: dashboardOption(raw)
  }
}

/**
 * The launcher's options that `demo`, `run` and `serve` take alike from their checked flags (the
 * flags of parse.ts `runFlags`): the run's size and mode, liveness, rounds and how they are
 * combined, the failure policy, the seed and the output folder; an option not given is left out.
 *
 * @since 0.1.0
 * @category parsing
 */
export const sharedRunOptions = (options: RunCommandOptions) => ({
  worldSize: options.worldSize,
  epochs: options.epochs,
  mode: options.mode,
  backend: options.backend,
  ...(options.ringLinks === undefined ? {} : { ringLinks: options.ringLinks }),
  ...(options.ringAreaMemoryMb === undefined ? {} : { ringAreaMemoryMb: options.ringAreaMemoryMb }),
  ...(options.ringAreaFolder === undefined ? {} : { ringAreaFolder: options.ringAreaFolder }),
  heartbeatTimeoutMs: options.heartbeatTimeoutMs,
  coordinatorTimeoutMs: options.coordinatorTimeoutMs,
  ...(options.roundDeadlineMs === undefined ? {} : { roundDeadlineMs: options.roundDeadlineMs }),
  ...(options.roundQuorum === undefined ? {} : { roundQuorum: options.roundQuorum }),
  ...options.silence,
  ...options.aggregation,
  ...(options.compress === undefined ? {} : { compress: options.compress }),
  ...(options.deltas === undefined ? {} : { deltas: options.deltas }),
  ...options.outer,
  failureLimit: options.failureLimit,
  rolePolicy: options.rolePolicy,
  onRepeatedCrash: options.onRepeatedCrash,
  interruptGraceMs: options.interruptGraceMs,
  ...(options.saveTimeoutMs === undefined ? {} : { saveTimeoutMs: options.saveTimeoutMs }),
  ...(options.evalTimeoutMs === undefined ? {} : { evalTimeoutMs: options.evalTimeoutMs }),
  ...(options.beatLinks === true ? { beatLinks: true } : {}),
  livenessDetector: options.livenessDetector,
  seed: options.seed,
  outDir: options.outDir
})

/** `--dashboard [PORT]` and `--dashboard-faults`, checked. */
const dashboardOption = (raw: RawRunOptions): RunCommandOptions["dashboard"] => {
  if (raw.dashboard === undefined) {
    if (raw.dashboardFaults === true) throw new UsageError("--dashboard-faults goes with --dashboard (it adds kill buttons to the page)")
    if (raw.dashboardConnectionsMax !== undefined)
      throw new UsageError("--dashboard-connections-max goes with --dashboard (it caps the page's listener)")
    return undefined
  }
  const port = raw.dashboard === true ? 0 : integerAtLeast("--dashboard", raw.dashboard, 0, 0)
  if (port > 65_535) throw new UsageError(`--dashboard PORT must be at most 65535, got '${String(raw.dashboard)}'`)
  const cap = raw.dashboardConnectionsMax
  return {
    port,
    faults: raw.dashboardFaults === true,
    ...(cap === undefined ? {} : { connectionsMax: integerAtLeast("--dashboard-connections-max", cap, 1, 1) })
  }
}

/**
 * The `run` flags that `resume` refuses, each with why: what they set is the parent's (its journal's
 * `started` event), so that the resumed run trains exactly the samples the parent did not commit,
 * in the same order, with the same model (docs/resume.md).
 *
 * @since 0.1.0
 * @category parsing
 */
export const resumeRefusedFlags: ReadonlyArray<readonly [flag: string, key: keyof RawRunOptions, why: string]> = [
  [
    "--seed",
    "seed",
    "resume keeps the parent's seed: the model's initialisation and every epoch's sample order come from it, and the samples the parent committed are those of that order"
  ],
  ["--epochs", "epochs", "resume keeps the parent's number of epochs: the resumed run trains the rest of the parent's epochs"],
  ["--mode", "mode", "resume keeps the parent's mode: the uncommitted ranges it trains are those of the parent's plan"],
  ["--backend", "backend", "resume keeps the parent's averaging backend (and its ring options)"],
  ["--role-policy", "rolePolicy", "resume keeps the parent's role policy (run({ resume }) in the library can change it)"],
  [
    "--on-repeated-crash",
    "onRepeatedCrash",
    "resume keeps the parent's --on-repeated-crash (run({ resume }) in the library can change it)"
  ],
  ["--no-kill", "kill", "resume injects no fault unless --kill or --hang is given: there is no kill to remove"]
]

/**
 * The checked options of `resume` from commander's raw values: the overrides given, each
 * `undefined` when absent; a flag `resumeRefusedFlags` names is refused with why.
 *
 * @since 0.1.0
 * @category parsing
 */
export const resumeOptions = (runDir: string, raw: RawRunOptions): ResumeCommandOptions => {
  for (const [flag, key, why] of resumeRefusedFlags) {
    if (raw[key] !== undefined && (key !== "kill" || raw.kill === false)) throw new UsageError(`resume: ${flag} cannot be given: ${why}`)
  }
  if (raw.trainer === "") throw new UsageError("--trainer needs a file path")
  if (raw.out === "") throw new UsageError("--out needs a folder path")
  const worldSize = raw.worldSize === undefined ? undefined : integerAtLeast("--world-size", raw.worldSize, 1, defaults.worldSize)
  if (worldSize !== undefined && worldSize > 1024)
    throw new UsageError(`--world-size must be at most 1024 (the ranks one machine starts), got '${raw.worldSize}'`)
  // The run's world size is known once its journal is read: ranks are checked against 1024 here,
  // against the world size by the launcher.
  const ranks = worldSize ?? 1024
  const optionalInteger = (flag: string, text: string | undefined, min: number): number | undefined =>
    text === undefined ? undefined : integerAtLeast(flag, text, min, min)
  return {
    runDir,
    trainer: raw.trainer,
    worldSize,
    transport:
      raw.transport === undefined
        ? undefined
        : oneOf<"worker" | "process">("--transport", raw.transport, ["worker", "process"], defaults.transport),
    kills: (Array.isArray(raw.kill) ? raw.kill : []).map((text) => faultSpec("--kill", text, ranks)),
    hangs: (raw.hang ?? []).map((text) => faultSpec("--hang", text, ranks)),
    heartbeatTimeoutMs: optionalInteger("--heartbeat-timeout-ms", raw.heartbeatTimeoutMs, 1),
    coordinatorTimeoutMs: optionalInteger("--coordinator-timeout-ms", raw.coordinatorTimeoutMs, 1),
    failureLimit: failureLimit(raw.failureLimit),
    rankMemoryMb: raw.rankMemoryMb === "0" ? 0 : optionalInteger("--rank-memory-mb", raw.rankMemoryMb, 16),
    interruptGraceMs: raw.interruptGraceMs === "0" ? 0 : optionalInteger("--interrupt-grace-ms", raw.interruptGraceMs, 1),
    outDir: raw.out,
    json: raw.json === true,
    dashboard: dashboardOption(raw)
  }
}
