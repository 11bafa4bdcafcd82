/**
 * Schemas of what a run writes (`summary.json`, the lines of `events.ndjson`), so that
 * `cohort report` checks a file before it prints from it: a hand-edited or foreign file gives one
 * error naming its first bad field, never a `TypeError`.
 *
 * One definition per record: each schema decodes to exactly the type the writer uses
 * (`actors/record/run-events.ts`, and the core's `Alert`, `Death`, `EpochSummary` and `Outcome`), which
 * the checks at the end of this file prove at compile time, so a decoded file needs no cast. A
 * field that is `undefined` in memory is absent in JSON and decodes back to `undefined`; a field
 * added after the first release (`skippedFaults`, `Outcome.deaths`, `Death.afterEnd`, counters)
 * decodes to its empty value when an older run lacks it. Literals are the writer's own (alert
 * classes, detectors, rank states): a value this version never writes is a bad field.
 *
 * @since 0.1.0
 */
import { Effect, Result, Schema, SchemaIssue } from "effect"
import type * as Alerts from "../../src/core/alerts.ts"
import * as CoreOutcome from "../../src/core/outcome.ts"
import { SaveReason } from "../../src/wire/schema.ts"
import type * as RunTypes from "./run-types.ts"

const Count = Schema.Natural
const Ms = Schema.Finite
const optional = Schema.optional
const optionalKey = Schema.optionalKey

/** A key the writer leaves out when its value is `undefined` (JSON has none): absent decodes to `undefined`. */
const absentAsUndefined = <S extends Schema.Top>(schema: S) =>
  Schema.UndefinedOr(schema).pipe(Schema.withDecodingDefaultKey(Effect.succeed(undefined)))

/** A list that older runs did not write: absent decodes to an empty list. */
const absentAsEmpty = <S extends Schema.Top>(schema: S) => Schema.Array(schema).pipe(Schema.withDecodingDefaultKey(Effect.succeed([])))

const alertClasses = [
  "RankLost",
  "ControlDrop",
  "Overflow",
  "CallbackSkipped",
  "CheckpointFailed",
  "BadParams",
  "CoordinatorStall",
  "BadResume",
  "BadStart",
  "StorageFault",
  "SaveTimeout",
  "EvalTimeout",
  "CoordinatorResource",
  "OutlierParams"
] as const

const Alert = Schema.Struct({
  ts: Ms,
  severity: Schema.Literals(["critical", "warn"]),
  path: Schema.String,
  class: Schema.Literals(alertClasses),
  detail: Schema.String,
  count: Count
})

const Detector = Schema.Literals(["supervisor", "heartbeat"])

const Death = Schema.Struct({
  rank: Count,
  epoch: Count,
  detector: Detector,
  cause: Schema.String,
  stack: optional(Schema.String),
  reportedAtMs: Ms,
  declaredAtMs: Ms,
  remainderSamples: Count,
  extensions: Count,
  afterEnd: Schema.Boolean.pipe(Schema.withDecodingDefaultKey(Effect.succeed(false)))
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

/** Every counter of the core's `Counters`; one that an older run did not write reads as 0. */
const Counters = Schema.Struct(
  Object.fromEntries(
    Object.keys(CoreOutcome.zeroCounters()).map((name) => [name, Count.pipe(Schema.withDecodingDefaultKey(Effect.succeed(0)))])
  ) as {
    readonly [Name in keyof CoreOutcome.Counters]: Schema.withDecodingDefaultKey<typeof Count>
  }
)

const Outcome = Schema.Struct({
  status: Schema.Literals(["completed", "unrecoverable", "interrupted"]),
  reason: absentAsUndefined(SaveReason),
  detail: Schema.String,
  endedAtMs: Ms,
  epochsCompleted: Count,
  failures: Schema.Array(Count),
  exits: Schema.Array(Count),
  deaths: absentAsEmpty(Death),
  epochs: Schema.Array(EpochSummary),
  evals: Schema.Array(Schema.Struct({ epoch: Count, rank: Count, accuracy: Schema.Finite, loss: Schema.Finite })),
  uncommitted: absentAsUndefined(Schema.Struct({ epoch: Count, ranges: Schema.Array(Schema.Tuple([Count, Count])) })),
  counters: Counters,
  repeatedCrash: optional(
    Schema.Struct({ ranks: Schema.Tuple([Count, Count]), error: Schema.String, stack: absentAsUndefined(Schema.String) })
  ),
  joins: optional(Schema.Array(Schema.Struct({ rank: Count, atMs: Ms, epoch: Count, firstRound: Count, samples: Count })))
})

const DeathTiming = Schema.Struct({
  rank: Count,
  epoch: Count,
  detector: Detector,
  cause: Schema.String,
  stack: optional(Schema.String),
  faultMs: absentAsUndefined(Ms),
  declaredMs: Ms,
  recoveredMs: Ms,
  detectedAfterFaultMs: absentAsUndefined(Ms),
  recoveredAfterFaultMs: absentAsUndefined(Ms),
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
  recoveryMs: absentAsUndefined(Ms),
  remainderSamples: Count,
  lostSamples: Count,
  duplicatedSamples: Count,
  redoneSamples: Count,
  bytesMoved: Count
})

const JoinCost = Schema.Struct({
  rank: Count,
  epoch: Count,
  connectedMs: Ms,
  welcomeMs: Ms,
  trainingMs: Ms,
  bytes: Count
})

const SkippedFault = Schema.Struct({
  rank: Count,
  fault: Schema.Literals(["kill", "hang"]),
  spec: Schema.Union([
    Schema.Struct({ rank: Count, atSeconds: Schema.Finite }),
    Schema.Struct({ rank: Count, atEpoch: Count, atFraction: Schema.Finite, plan: optionalKey(Schema.Literal("demo")) })
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

const EpochRow = Schema.Struct({
  ...EpochSummary.fields,
  accuracy: absentAsUndefined(Schema.Finite),
  spansRuns: optionalKey(Schema.Tuple([Schema.String, Schema.String]))
})

/** `RunResult.exitCode`. */
const ExitCode = Schema.Literals([0, 1, 4, 5, 130, 143])

/** `RunResult.ring`. */
const RingSummary = Schema.Struct({
  generations: Schema.Int,
  links: Schema.Literals(["relay", "direct", "port", "shared", "area", "file"]),
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
  leaves: optionalKey(Schema.Array(LeaveCost)),
  joins: optionalKey(Schema.Array(JoinCost)),
  skippedFaults: absentAsEmpty(SkippedFault),
  alerts: Schema.Array(Alert),
  epochs: Schema.Array(EpochRow),
  finalAccuracy: absentAsUndefined(Schema.Finite),
  saves: optional(Saves),
  durationMs: Ms,
  exitCode: ExitCode,
  resumed: optional(Resumed),
  recoveries: optional(
    Schema.Array(
      Schema.Struct({
        lostMs: Schema.Number,
        withoutCoordinatorMs: Schema.Number,
        epoch: Count,
        committedSamples: Count,
        returned: Schema.Array(Count),
        missing: Schema.Array(Count)
      })
    )
  ),
  refusals: optional(Schema.Record(Schema.String, Count)),
  transport: optional(Schema.Literals(["worker", "process", "websocket", "serve"])),
  backend: optionalKey(Backend),
  ring: optional(RingSummary),
  traffic: optional(
    Schema.Struct({
      rounds: Count,
      receivedBytes: Count,
      sentBytes: Count,
      linkSentBytes: optional(Count),
      linkReceivedBytes: optional(Count)
    })
  ),
  storageFault: optional(Schema.Struct({ path: Schema.String, error: Schema.String })),
  // Added by `cohort report` as it reads a run, never in summary.json.
  resumedBy: optional(Schema.Struct({ runId: Schema.String, runDir: Schema.String })),
  journalIncomplete: optional(Schema.String),
  chain: optional(Schema.Array(Schema.Struct({ runId: Schema.String, runDir: Schema.String })))
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
    options: optionalKey(Schema.Record(Schema.String, Schema.Unknown)),
    resumed: optionalKey(Resumed)
  }),
  event("listening", { url: Schema.String }),
  event("coordinatorLost", { lostMs: Schema.Number, epoch: Count, lastRound: Schema.Number, committedSamples: Count }),
  event("recovered", { returned: Schema.Array(Count), missing: Schema.Array(Count), withoutCoordinatorMs: Count }),
  event("joined", { rank: Count, address: Schema.String, credential: optionalKey(Schema.String) }),
  event("revoked", { rank: optionalKey(Count), credential: optionalKey(Schema.String) }),
  event("refused", { closeCode: Count, reason: Schema.String, address: Schema.String }),
  event("resumed", { rank: Count, address: Schema.String, silentMs: Count }),
  event("left", { rank: Count, reason: Schema.String }),
  event("formed", { worldSize: Count, joined: optional(Count) }),
  event("welcomed", { rank: Count, epoch: Count, firstRound: Count, samples: Count, given: Schema.String }),
  event("progress", {
    rank: Count,
    epoch: Count,
    samplesDone: Count,
    samplesPerSecond: Schema.Finite,
    state: Schema.Literals(["starting", "training", "waiting", "idle", "dead", "exited"])
  }),
  event("alert", { alert: Alert }),
  event("fault", { rank: Count, fault: Schema.Literals(["kill", "hang"]) }),
  event("fault-skipped", { skipped: SkippedFault }),
  event("death", { death: DeathTiming }),
  event("leave", { leave: LeaveCost }),
  event("join", { join: JoinCost }),
  event("epoch", { summary: EpochSummary, accuracy: absentAsUndefined(Schema.Finite), noEval: optionalKey(Schema.Literal(true)) }),
  event("noEval", { epoch: Count, rank: Count }),
  event("eval", { epoch: Count, rank: Count, accuracy: Schema.Finite, loss: Schema.Finite }),
  event("model", {
    epoch: Count,
    round: Schema.Finite,
    path: Schema.String,
    bytes: Count,
    writeMs: Ms,
    afterAuditMs: optionalKey(Ms),
    error: optionalKey(Schema.String)
  }),
  event("decision", { detail: Schema.String }),
  event("round", {
    epoch: Count,
    round: Count,
    contributors: Count,
    openMs: Ms,
    loss: optionalKey(Schema.Finite),
    receivedBytes: optionalKey(Count),
    sentBytes: optionalKey(Count),
    linkSentBytes: optionalKey(Count),
    linkReceivedBytes: optionalKey(Count)
  }),
  event("ended", { outcome: Outcome, saves: optional(Saves), exitCode: optionalKey(ExitCode), ring: optional(RingSummary) }),
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
  return Result.isFailure(result) ? { bad: firstIssue(result.failure.issue) } : { ok: result.success }
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
  return Result.isFailure(result) ? { bad: firstIssue(result.failure.issue) } : { ok: result.success }
}

// ---------------------------------------------------------------------------------------------
// One definition: each schema decodes to exactly the writer's type (checked by the compiler)
// ---------------------------------------------------------------------------------------------

type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
/** Each assignable to the other: the same fields and values, but for `readonly` (the core's `Death` counts its remainder in place). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false

const alertMatchesCore: Equals<typeof Alert.Type, Alerts.Alert> = true
const deathMatchesCore: Same<typeof Death.Type, CoreOutcome.Death> = true
const epochSummaryMatchesCore: Same<typeof EpochSummary.Type, CoreOutcome.EpochSummary> = true
const outcomeMatchesCore: Same<typeof Outcome.Type, CoreOutcome.Outcome> = true
const deathTimingMatches: Equals<typeof DeathTiming.Type, RunTypes.DeathTiming> = true
const skippedFaultMatches: Same<typeof SkippedFault.Type, RunTypes.SkippedFault> = true
const resumedMatches: Equals<typeof Resumed.Type, RunTypes.Resumed> = true
const runResultMatches: Same<typeof RunResult.Type, RunTypes.RunResult> = true
const runEventMatches: Same<typeof RunEvent.Type, RunTypes.RunEvent> = true
void [
  alertMatchesCore,
  deathMatchesCore,
  epochSummaryMatchesCore,
  outcomeMatchesCore,
  deathTimingMatches,
  skippedFaultMatches,
  resumedMatches,
  runResultMatches,
  runEventMatches
]
