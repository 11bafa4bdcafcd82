/**
 * Schemas of what a run writes (`summary.json`, the lines of `events.ndjson`), so that
 * `cohort report` checks a file before it prints from it: a hand-edited or foreign file gives one
 * error naming its first bad field, never a `TypeError`.
 *
 * The schemas follow `actors/run-types.ts` and `src/core/coordinator.ts`. Fields that are
 * `undefined` in memory are absent in JSON, so they are optional keys here; fields added after
 * the first release (`skippedFaults`, `saves`, `Outcome.deaths`, `Death.afterEnd`, `Outcome.joins`) are optional too, so
 * older runs still read. Strings that are only printed (alert classes, detectors, causes) are any
 * string; values the report branches on (`outcome.status`, `exitCode`, event `type`) are literals.
 *
 * @since 0.1.0
 */
import { Result, Schema, SchemaIssue } from "effect"
import { SaveReason } from "../src/wire/schema.ts"
import type * as RunTypes from "./run-types.ts"

const Count = Schema.Natural
const Ms = Schema.Finite
const optional = Schema.optional

const Alert = Schema.Struct({
  ts: Ms,
  severity: Schema.String,
  path: Schema.String,
  class: Schema.String,
  detail: Schema.String,
  count: Count
})

const Death = Schema.Struct({
  rank: Count,
  epoch: Count,
  detector: Schema.String,
  cause: Schema.String,
  reportedAtMs: Ms,
  declaredAtMs: Ms,
  remainderSamples: Count,
  extensions: Count,
  afterEnd: optional(Schema.Boolean)
})

const EpochSummary = Schema.Struct({
  epoch: Count,
  epochSamples: Count,
  samplesCommitted: Count,
  lost: Count,
  duplicated: Count,
  deaths: Schema.Array(Death),
  exits: Schema.Array(Count),
  startedAtMs: Ms,
  endedAtMs: Ms
})

const Outcome = Schema.Struct({
  status: Schema.Literals(["completed", "unrecoverable", "interrupted"]),
  reason: optional(SaveReason),
  detail: Schema.String,
  endedAtMs: Ms,
  epochsCompleted: Count,
  failures: Schema.Array(Count),
  exits: Schema.Array(Count),
  deaths: optional(Schema.Array(Death)),
  epochs: Schema.Array(EpochSummary),
  evals: Schema.Array(Schema.Struct({ epoch: Count, rank: Count, accuracy: Schema.Finite, loss: Schema.Finite })),
  uncommitted: optional(Schema.Struct({ epoch: Count, ranges: Schema.Array(Schema.Tuple([Count, Count])) })),
  counters: Schema.Record(Schema.String, Schema.Finite),
  joins: optional(Schema.Array(Schema.Struct({ rank: Count, atMs: Ms, epoch: Count, firstRound: Count, samples: Count })))
})

const DeathTiming = Schema.Struct({
  rank: Count,
  epoch: Count,
  detector: Schema.String,
  cause: Schema.String,
  faultMs: optional(Ms),
  declaredMs: Ms,
  recoveredMs: Ms,
  detectedAfterFaultMs: optional(Ms),
  recoveredAfterFaultMs: optional(Ms),
  remainderSamples: Count,
  redistributed: Schema.Boolean
})

const LeaveCost = Schema.Struct({
  rank: Count,
  epoch: Count,
  kind: Schema.Literals(["graceful", "crash", "silent"]),
  cause: Schema.String,
  declaredMs: Ms,
  detectionMs: Ms,
  recoveryMs: optional(Ms),
  remainderSamples: Count,
  lostSamples: Count,
  duplicatedSamples: Count,
  redoneSamples: Count,
  bytesMoved: Count
})

const SkippedFault = Schema.Struct({
  rank: Count,
  fault: Schema.Literals(["kill", "hang"]),
  spec: Schema.Union([
    Schema.Struct({ rank: Count, atSeconds: Schema.Finite }),
    Schema.Struct({ rank: Count, atEpoch: Count, atFraction: Schema.Finite, plan: optional(Schema.Literal("demo")) })
  ]),
  reason: Schema.String
})

const Saves = Schema.Struct({ saved: Schema.Array(Count), notSaved: Schema.Array(Count) })

/** `RunTypes.Resumed`: where a resumed run picked up. */
const Resumed = Schema.Struct({
  parent: Schema.Struct({ runId: Schema.String, runDir: Schema.String }),
  epoch: Count,
  firstRound: Schema.Int,
  committedSamples: Count,
  committed: Schema.Array(Schema.Tuple([Count, Count])),
  state: Schema.Literals(["save", "checkpoint", "start"]),
  loadedFrom: Schema.String,
  notes: Schema.Array(Schema.String)
})

const EpochRow = Schema.Struct({ ...EpochSummary.fields, accuracy: optional(Schema.Finite), spansRuns: optional(Schema.Tuple([Schema.String, Schema.String])) })

/** `RunResult.exitCode`. */
const ExitCode = Schema.Literals([0, 1, 4, 5, 130, 143])

/** `RunResult.ring`. */
const RingSummary = Schema.Struct({
  generations: Schema.Int,
  links: Schema.Literals(["relay", "port", "shared", "area"]),
  relayed: Schema.Int,
  dropped: Schema.Int
})

/** `RunResult.backend`. */
const Backend = Schema.Literals(["cpu", "ring"])

/**
 * `summary.json`: a `RunResult`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunResult = Schema.Struct({
  runId: Schema.String,
  runDir: Schema.String,
  outcome: Outcome,
  deaths: Schema.Array(DeathTiming),
  leaves: optional(Schema.Array(LeaveCost)),
  skippedFaults: optional(Schema.Array(SkippedFault)),
  alerts: Schema.Array(Alert),
  epochs: Schema.Array(EpochRow),
  finalAccuracy: optional(Schema.Finite),
  saves: optional(Saves),
  durationMs: Ms,
  exitCode: ExitCode,
  resumed: optional(Resumed),
  refusals: optional(Schema.Record(Schema.String, Count)),
  transport: optional(Schema.Literals(["worker", "process", "websocket", "serve"])),
  backend: optional(Backend),
  ring: optional(RingSummary),
  storageFault: optional(Schema.Struct({ path: Schema.String, error: Schema.String }))
})

const event = <const Type extends string, const Fields extends Schema.Struct.Fields>(type: Type, fields: Fields) =>
  Schema.Struct({ type: Schema.Literal(type), ms: Ms, ...fields })

/**
 * One line of `events.ndjson`: a `RunEvent` of a known `type`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RunEvent = Schema.Union([
  event("started", {
    runId: Schema.String,
    runDir: Schema.String,
    worldSize: Count,
    epochs: Count,
    epochSamples: Count,
    mode: Schema.Literals(["static", "progressive"]),
    transport: Schema.Literals(["worker", "process", "websocket", "serve"]),
    options: optional(Schema.Record(Schema.String, Schema.Unknown)),
    resumed: optional(Resumed)
  }),
  event("listening", { url: Schema.String }),
  event("joined", { rank: Count, address: Schema.String, credential: optional(Schema.String) }),
  event("revoked", { rank: optional(Count), credential: optional(Schema.String) }),
  event("refused", { closeCode: Count, reason: Schema.String, address: Schema.String }),
  event("resumed", { rank: Count, address: Schema.String, silentMs: Count }),
  event("formed", { worldSize: Count, joined: optional(Count) }),
  event("welcomed", { rank: Count, epoch: Count, firstRound: Count, samples: Count, given: Schema.String }),
  event("progress", { rank: Count, epoch: Count, samplesDone: Count, samplesPerSecond: Schema.Finite, state: Schema.String }),
  event("alert", { alert: Alert }),
  event("fault", { rank: Count, fault: Schema.Literals(["kill", "hang"]) }),
  event("fault-skipped", { skipped: SkippedFault }),
  event("death", { death: DeathTiming }),
  event("leave", { leave: LeaveCost }),
  event("epoch", { summary: EpochSummary, accuracy: optional(Schema.Finite) }),
  event("eval", { epoch: Count, rank: Count, accuracy: Schema.Finite, loss: Schema.Finite }),
  event("model", { epoch: Count, round: Schema.Finite, path: Schema.String, bytes: Count, writeMs: Ms, afterAuditMs: optional(Ms), error: optional(Schema.String) }),
  event("decision", { detail: Schema.String }),
  event("round", { epoch: Count, round: Count, contributors: Count, openMs: Ms, loss: optional(Schema.Finite) }),
  event("ended", { outcome: Outcome, saves: optional(Saves), exitCode: optional(ExitCode), ring: optional(RingSummary) }),
  event("failed", { stage: Schema.String, reason: Schema.String, formed: Schema.Boolean })
])

/** The event types `RunEvent` knows; a line of another type is skipped (a newer writer). @since 0.1.0 @category schemas */
export const eventTypes: ReadonlySet<string> = new Set(RunEvent.members.map((member) => member.fields.type.literal))

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** `epochs[0].deaths[2].rank`, or `the top level` for an empty path. */
const pathText = (path: ReadonlyArray<PropertyKey>): string => {
  let text = ""
  for (const key of path) text += typeof key === "number" ? `[${key}]` : `${text === "" ? "" : "."}${String(key)}`
  return text === "" ? "the top level" : text
}

/** The first issue as `path: message`. */
const firstIssue = (issue: SchemaIssue.Issue): string => {
  const first = formatter(issue).issues[0]
  const path = (first?.path ?? []).map((key) => (typeof key === "object" && key !== null ? key.key : key))
  return `${pathText(path)}: ${first?.message ?? "invalid"}`
}

const decodeRunResult = Schema.decodeUnknownResult(RunResult)
const decodeRunEvent = Schema.decodeUnknownResult(RunEvent)

/**
 * Checks a parsed `summary.json`: the `RunResult` (keys absent in JSON read as `undefined`), or
 * `bad`, the first bad field and why (`epochs[0].epoch: Missing key`).
 *
 * @since 0.1.0
 * @category validation
 */
export const validateRunResult = (value: unknown): { readonly ok: RunTypes.RunResult } | { readonly bad: string } => {
  const result = decodeRunResult(value)
  // Optional keys decode to absent properties, which read as the `undefined` the writer dropped.
  return Result.isFailure(result) ? { bad: firstIssue(result.failure.issue) } : { ok: result.success as RunTypes.RunResult }
}

/**
 * Checks one parsed line of `events.ndjson` of a known type (see `eventTypes`): the `RunEvent`, or
 * `bad`, the first bad field and why.
 *
 * @since 0.1.0
 * @category validation
 */
export const validateRunEvent = (value: unknown): { readonly ok: RunTypes.RunEvent } | { readonly bad: string } => {
  const result = decodeRunEvent(value)
  return Result.isFailure(result) ? { bad: firstIssue(result.failure.issue) } : { ok: result.success as RunTypes.RunEvent }
}
