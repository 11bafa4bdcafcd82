/**
 * Which of a run's options a continuation of it keeps: a resume (`cohort resume`) and a takeover
 * (`cohort serve --recover`) read them back from the parent's journal (`started.options`, as
 * `loggedOptions` wrote them) and run by the same rules unless the resume's caller gives others.
 *
 * Every option of `RunOptions` is one of two kinds, and the types make each new option pick one:
 * a rule of the run (`rules`: how its rounds close and are combined, how its ranks' liveness is
 * judged, its bounds and its ranks' limits), carried; or something each continuation decides for
 * itself (`decidedAnew`, with why), not carried. A rule read back from a journal that does not hold
 * it, or holds a value of the wrong shape, is left to the default.
 */
import type * as Config from "../../src/core/config.ts"
import type { RunOptions } from "../record/run-types.ts"

type Reader<K extends keyof RunOptions> = (value: unknown) => RunOptions[K] | undefined

/** `value` when it is a finite number, else `undefined`: how a journal's number is read back. */
export const numberOf = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined)
const booleanOf = (value: unknown): boolean | undefined => (typeof value === "boolean" ? value : undefined)
const oneOf =
  <const A extends string>(...values: ReadonlyArray<A>) =>
  (value: unknown): A | undefined =>
    values.find((v) => v === value)

const failureLimitOf = (value: unknown): Config.FailureLimit | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const { absolute, fraction } = value as Record<string, unknown>
  return typeof absolute === "number" ? { absolute } : typeof fraction === "number" ? { fraction } : undefined
}

const rolePolicyOf = (value: unknown): Config.RolePolicy | undefined =>
  value === "fastest"
    ? "fastest"
    : typeof value === "object" && value !== null && typeof (value as { rank?: unknown }).rank === "number"
      ? { rank: (value as { rank: number }).rank }
      : undefined

/** The rules of a run (`rules`). */
export type RuleName =
  | "backend"
  | "ringSharedSlots"
  | "ringAreaMemoryMb"
  | "ringLinks"
  | "rankConnectionsMax"
  | "heartbeatTimeoutMs"
  | "heartbeatIntervalMs"
  | "saveTimeoutMs"
  | "evalTimeoutMs"
  | "beatLinks"
  | "livenessDetector"
  | "adaptiveTimeoutMinMs"
  | "coordinatorStallMs"
  | "coordinatorTimeoutMs"
  | "roundDeadlineMs"
  | "roundQuorum"
  | "roundSilenceMs"
  | "blockingSilenceMs"
  | "blockingSilenceQuietMax"
  | "aggregate"
  | "trimFraction"
  | "clipNorm"
  | "outlierFactor"
  | "outlierRoundsMax"
  | "compress"
  | "deltas"
  | "outerLr"
  | "outerMomentum"
  | "tickMs"
  | "failureLimit"
  | "rolePolicy"
  | "onRepeatedCrash"
  | "rankMemoryMb"
  | "rankNice"
  | "interruptGraceMs"

/** The rules of a run, each with how its recorded value is read back. */
const rules: { readonly [K in RuleName]: Reader<K> } = {
  backend: oneOf("cpu", "ring"),
  ringSharedSlots: numberOf,
  ringAreaMemoryMb: numberOf,
  ringLinks: oneOf("direct", "relay"),
  rankConnectionsMax: numberOf,
  heartbeatTimeoutMs: numberOf,
  heartbeatIntervalMs: numberOf,
  saveTimeoutMs: numberOf,
  evalTimeoutMs: numberOf,
  beatLinks: booleanOf,
  livenessDetector: oneOf("fixed", "adaptive"),
  adaptiveTimeoutMinMs: numberOf,
  coordinatorStallMs: numberOf,
  coordinatorTimeoutMs: numberOf,
  roundDeadlineMs: numberOf,
  roundQuorum: numberOf,
  roundSilenceMs: numberOf,
  blockingSilenceMs: numberOf,
  blockingSilenceQuietMax: numberOf,
  aggregate: oneOf("mean", "trimmed-mean", "median"),
  trimFraction: numberOf,
  clipNorm: numberOf,
  outlierFactor: numberOf,
  outlierRoundsMax: numberOf,
  compress: oneOf("none", "fp16", "int8"),
  deltas: booleanOf,
  outerLr: numberOf,
  outerMomentum: numberOf,
  tickMs: numberOf,
  failureLimit: failureLimitOf,
  rolePolicy: rolePolicyOf,
  onRepeatedCrash: oneOf("stop", "continue"),
  rankMemoryMb: numberOf,
  rankNice: numberOf,
  interruptGraceMs: numberOf
}

/**
 * The options each continuation decides for itself, and why. With `rules`, every key of
 * `RunOptions`: a new option that is in neither does not compile.
 */
export const decidedAnew: { readonly [K in Exclude<keyof RunOptions, RuleName>]-?: string } = {
  trainer: "the parent's module, checked to be the same file by each continuation",
  epochs: "the parent's: what its audits count",
  mode: "the parent's: what its assignments were made of",
  seed: "the parent's: its data order and model",
  batchSize: "the parent's: what its rounds committed",
  averageEverySteps: "the parent's: what its rounds committed",
  worldSize: "the cluster the continuation runs on",
  maxRanks: "the cluster the continuation runs on",
  minRanks: "the cluster the continuation runs on",
  transport: "the cluster the continuation runs on",
  ringAreaFolder: "the cluster the continuation runs on",
  tls: "a private key, never journaled: given again",
  outDir: "where the continuation writes",
  runId: "the continuation's own",
  resumeState: "made from the parent's records",
  kills: "a fault injected into the parent only",
  hangs: "a fault injected into the parent only",
  floods: "a fault injected into the parent only",
  collectiveFaults: "a fault injected into the parent only",
  killRequests: "a handle of the caller's process",
  coordinatorAlerts: "a handle of the caller's process",
  signal: "a handle of the caller's process",
  stopSignal: "a handle of the caller's process",
  onEvent: "a handle of the caller's process",
  onRankOutput: "a handle of the caller's process"
}

/** The rules a continuation runs by: the parent's as `started.options` records them. */
export type Rules = { -readonly [K in RuleName]?: RunOptions[K] }

/**
 * The rules of the run whose journal recorded `recorded` (`started.options`), each overridden by
 * `given`'s value where that is not `undefined`. Rules the journal lacks, or holds malformed, are
 * left out (their defaults apply).
 *
 * @since 0.1.0
 * @category options
 */
export const carriedRules = (recorded: Readonly<Record<string, unknown>>, given: Rules = {}): Rules => {
  const out: Record<string, unknown> = {}
  for (const [name, read] of Object.entries(rules) as Array<[RuleName, (value: unknown) => unknown]>) {
    const value = given[name] ?? read(recorded[name])
    if (value !== undefined) out[name] = value
  }
  return out as Rules
}

/** The names of the rules, for tests and docs. */
export const ruleNames = Object.keys(rules) as ReadonlyArray<RuleName>
