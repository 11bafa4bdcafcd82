/**
 * The dashboard's page model: what the run page shows (rank rows, the timeline, the round and
 * epoch charts, audits, deaths, alerts), folded from the run's journal events (`events.ndjson`,
 * `actors/record/run-events.ts` `RunEvent`) one at a time. The same fold serves the live page (events
 * streamed as they happen) and the static report (every event of a finished journal), so the page
 * never keeps a record of its own.
 *
 * Pure: no clock, no I/O; it runs in the browser and under Node, Bun and Deno alike. Events are
 * taken as parsed JSON (`unknown`): a line of another shape, or an event type the page does not
 * show, is skipped. Times are the journal's `ms` (milliseconds since the run started).
 *
 * @since 0.1.0
 */

/**
 * What a rank is doing as the page shows it: `joining` (before the run formed), `training`,
 * `waiting` (its contribution to the open round is in), `idle` (no chunk to train), `saving`
 * (asked to save and stop), `exited` (left cleanly, or the run ended), `dead` (declared dead;
 * `RankRow.detector` says who found it).
 *
 * @since 0.1.0
 * @category model
 */
export type RankStatus = "joining" | "training" | "waiting" | "idle" | "saving" | "exited" | "dead"

/**
 * One rank's row: status, the detector and cause of its death (`dead` only), its epoch and the
 * samples it trained in it, its rate (samples per second, from the last progress event), and
 * `lastFrameMs`, the journal time of its last progress (`undefined` before any).
 *
 * @since 0.1.0
 * @category model
 */
export interface RankRow {
  readonly rank: number
  status: RankStatus
  detector: string | undefined
  cause: string | undefined
  epoch: number | undefined
  samplesDone: number
  samplesPerSecond: number
  lastFrameMs: number | undefined
}

/**
 * One averaging round (a journal `round` line): when it closed (`ms`), its epoch and number (as the
 * journal counts them, from 0 over the run), its contributors, `openMs` (how long it waited after
 * its first contribution), `roundMs`, the time since the previous round closed (or since the run
 * formed, for the first), and `loss`, the contributors' mean training loss (`undefined` when the
 * journal has none for the round); `receivedBytes` and `sentBytes`, the round's averaging traffic
 * at the coordinator (`undefined` in an older journal); `linkSentBytes` and `linkReceivedBytes`,
 * the bytes of the round's ring steps the ranks moved over direct links, which the coordinator
 * never sees (`undefined` without direct links).
 *
 * @since 0.1.0
 * @category model
 */
export interface RoundPoint {
  readonly ms: number
  readonly epoch: number
  readonly round: number
  readonly contributors: number
  readonly openMs: number
  readonly roundMs: number
  readonly loss: number | undefined
  readonly receivedBytes?: number | undefined
  readonly sentBytes?: number | undefined
  readonly linkSentBytes?: number | undefined
  readonly linkReceivedBytes?: number | undefined
}

/**
 * One departure's cost line (the journal's `leave` event, `RunTypes.LeaveCost`; docs/churn.md):
 * its kind, when it was declared (ms since the run started), detection and recovery (ms;
 * recovery `undefined` when nothing moved) and its samples and bytes.
 *
 * @since 0.1.0
 * @category model
 */
export interface LeaveRow {
  readonly rank: number
  readonly epoch: number
  readonly kind: string
  readonly declaredMs: number
  readonly detectionMs: number
  readonly recoveryMs: number | undefined
  readonly remainderSamples: number
  readonly lostSamples: number
  readonly duplicatedSamples: number
  readonly redoneSamples: number
  readonly bytesMoved: number
}

/**
 * What bringing one joiner up to date cost (the journal's `join` event, `RunTypes.JoinCost`;
 * docs/churn.md): when it connected (ms since the run started), the ms from then to its welcome
 * and to its first trained batch, and the bytes sent to it meanwhile.
 *
 * @since 0.1.0
 * @category model
 */
export interface JoinRow {
  readonly rank: number
  readonly epoch: number
  readonly connectedMs: number
  readonly welcomeMs: number
  readonly trainingMs: number
  readonly bytes: number
}

/**
 * A death's three marks, in journal ms: `faultMs` (the injected fault, or a hung rank's first
 * silence; `undefined` when nothing was injected), `declaredMs` (the coordinator declared it) and
 * `recoveredMs` (the survivors held its remainder; `undefined` when nothing was redistributed),
 * with the milliseconds between them (docs/design.md §3.2, §3.8).
 *
 * @since 0.1.0
 * @category model
 */
export interface DeathMarks {
  readonly rank: number
  readonly epoch: number
  readonly detector: string
  readonly cause: string
  readonly faultMs: number | undefined
  readonly declaredMs: number
  readonly recoveredMs: number | undefined
  readonly detectedAfterFaultMs: number | undefined
  readonly recoveredAfterDeclaredMs: number | undefined
  readonly remainderSamples: number
}

/**
 * One finished epoch: its audit (`samplesCommitted` of `epochSamples`; `lost` and `duplicated`
 * must be 0, docs/design.md §3.8), the deaths in it, when it ended (`ms`), and its eval (test
 * `accuracy` and `loss`) once it arrived.
 *
 * @since 0.1.0
 * @category model
 */
export interface EpochRow {
  readonly epoch: number
  readonly ms: number
  readonly epochSamples: number
  readonly samplesCommitted: number
  readonly lost: number
  readonly duplicated: number
  readonly deaths: number
  accuracy: number | undefined
  loss: number | undefined
}

/** An alert as the journal holds it (docs/design.md §3.9), with the journal time it came at. @since 0.1.0 @category model */
export interface AlertRow {
  readonly ms: number
  readonly severity: string
  readonly path: string
  readonly class: string
  readonly detail: string
  readonly count: number
}

/**
 * The whole page: the run (`undefined` fields until its `started` event), `nowMs` (the latest
 * journal time seen, or the live server's clock), and everything folded so far. `ended` is the
 * outcome once the run ended; `failed` the journal's `failed` event (the run could not be carried
 * out: `formed` false when it failed at formation).
 *
 * @since 0.1.0
 * @category model
 */
export interface Model {
  runId: string | undefined
  worldSize: number
  epochs: number
  epochSamples: number
  mode: string | undefined
  transport: string | undefined
  resumedFrom: string | undefined
  formedMs: number | undefined
  nowMs: number
  readonly ranks: Array<RankRow>
  readonly rounds: Array<RoundPoint>
  readonly deaths: Array<DeathMarks>
  readonly leaves: Array<LeaveRow>
  readonly joins: Array<JoinRow>
  readonly epochRows: Array<EpochRow>
  readonly alerts: Array<AlertRow>
  readonly faults: Array<{ readonly ms: number; readonly rank: number; readonly fault: string }>
  failed: { readonly ms: number; readonly stage: string; readonly reason: string; readonly formed: boolean } | undefined
  ended:
    | {
        readonly ms: number
        readonly status: string
        readonly reason: string | undefined
        readonly detail: string
        readonly exitCode: number | undefined
      }
    | undefined
}

/** An empty page, before any event. @since 0.1.0 @category constructors */
export const empty = (): Model => ({
  runId: undefined,
  worldSize: 0,
  epochs: 0,
  epochSamples: 0,
  mode: undefined,
  transport: undefined,
  resumedFrom: undefined,
  formedMs: undefined,
  nowMs: 0,
  ranks: [],
  rounds: [],
  deaths: [],
  leaves: [],
  joins: [],
  epochRows: [],
  alerts: [],
  faults: [],
  failed: undefined,
  ended: undefined
})

type Json = Record<string, unknown>

const isRecord = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)
const num = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined)
const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** Ranks are rows `0..worldSize-1`, and those a `welcomed` added; any other index is not shown. */
const rowOf = (model: Model, rank: unknown): RankRow | undefined => {
  const r = num(rank)
  return r === undefined || !Number.isInteger(r) ? undefined : model.ranks[r]
}

/** The highest rank index a `welcomed` event may add a row for (a bound on a journal's rows). */
const welcomedRankMax = 65_536

const alive = (row: RankRow): boolean => row.status !== "dead" && row.status !== "exited"

/**
 * The journal event types the page folds: the rest (`decision` lines other than a save, `joined`
 * refusals, `listening`) are left out of the static report.
 *
 * @since 0.1.0
 * @category model
 */
export const shownTypes: ReadonlySet<string> = new Set([
  "started",
  "joined",
  "welcomed",
  "formed",
  "progress",
  "alert",
  "fault",
  "death",
  "leave",
  "join",
  "epoch",
  "eval",
  "round",
  "ended",
  "failed",
  "decision"
])

/** True when a journal event matters to the page (a `decision` only when it asks the ranks to save). @since 0.1.0 @category model */
export const isShown = (event: unknown): boolean =>
  isRecord(event) &&
  typeof event.type === "string" &&
  shownTypes.has(event.type) &&
  (event.type !== "decision" || (str(event.detail) ?? "").startsWith("ShutdownWithSave"))

/**
 * Folds one journal event into `model` (changed in place, for the live page's sake; returns it).
 * An event that is not a record with a known `type`, or lacks the fields the page reads, changes
 * nothing but `nowMs`.
 *
 * @since 0.1.0
 * @category model
 */
export const apply = (model: Model, event: unknown): Model => {
  // Long because it is one case per journal event kind; each case is a few lines.
  if (!isRecord(event)) return model
  const ms = num(event.ms)
  if (ms !== undefined) model.nowMs = Math.max(model.nowMs, ms)
  const at = ms ?? model.nowMs
  switch (event.type) {
    case "started": {
      model.runId = str(event.runId)
      model.worldSize = Math.max(0, Math.floor(num(event.worldSize) ?? 0))
      model.epochs = num(event.epochs) ?? 0
      model.epochSamples = num(event.epochSamples) ?? 0
      model.mode = str(event.mode)
      model.transport = str(event.transport)
      const parent = isRecord(event.resumed) && isRecord(event.resumed.parent) ? str(event.resumed.parent.runId) : undefined
      model.resumedFrom = parent
      model.ranks.length = 0
      for (let rank = 0; rank < model.worldSize; rank++) {
        model.ranks.push({
          rank,
          status: "joining",
          detector: undefined,
          cause: undefined,
          epoch: undefined,
          samplesDone: 0,
          samplesPerSecond: 0,
          lastFrameMs: undefined
        })
      }
      return model
    }
    case "joined": {
      const row = rowOf(model, event.rank)
      if (row !== undefined) row.lastFrameMs = at
      return model
    }
    case "welcomed": {
      // A rank that joined the running run: its row, after every index below it (an
      // index between is vacant and may still join).
      const rank = num(event.rank)
      if (rank === undefined || !Number.isInteger(rank) || rank < 0 || rank >= welcomedRankMax) return model
      while (model.ranks.length <= rank) {
        model.ranks.push({
          rank: model.ranks.length,
          status: "joining",
          detector: undefined,
          cause: undefined,
          epoch: undefined,
          samplesDone: 0,
          samplesPerSecond: 0,
          lastFrameMs: undefined
        })
      }
      const row = model.ranks[rank]!
      if (row.status === "joining") row.status = "training"
      row.epoch = num(event.epoch) ?? row.epoch
      row.lastFrameMs = at
      return model
    }
    case "formed":
      model.formedMs = at
      for (const row of model.ranks) if (row.status === "joining") row.status = "training"
      return model
    case "progress": {
      const row = rowOf(model, event.rank)
      if (row === undefined) return model
      // A rank's last progress may come after its death or exit (a live page that opens late gets
      // each rank's latest progress after the events): its samples count, and it stays dead or
      // exited. A dead rank's progress from after its death (a hung rank that woke) does not.
      if (!alive(row)) {
        let death: DeathMarks | undefined
        for (const d of model.deaths) if (row.status === "dead" && d.rank === row.rank) death = d
        if ((death !== undefined && at > death.declaredMs) || (row.lastFrameMs !== undefined && at < row.lastFrameMs)) return model
        row.epoch = num(event.epoch) ?? row.epoch
        row.samplesDone = num(event.samplesDone) ?? row.samplesDone
        row.lastFrameMs = at
        return model
      }
      row.epoch = num(event.epoch) ?? row.epoch
      row.samplesDone = num(event.samplesDone) ?? row.samplesDone
      row.samplesPerSecond = num(event.samplesPerSecond) ?? row.samplesPerSecond
      row.lastFrameMs = at
      const state = str(event.state)
      if (row.status !== "saving" && (state === "training" || state === "waiting" || state === "idle")) row.status = state
      return model
    }
    case "decision":
      if ((str(event.detail) ?? "").startsWith("ShutdownWithSave")) {
        for (const row of model.ranks) if (alive(row)) row.status = "saving"
      }
      return model
    case "fault": {
      const rank = num(event.rank)
      if (rank !== undefined) model.faults.push({ ms: at, rank, fault: str(event.fault) ?? "fault" })
      return model
    }
    case "leave": {
      const leave = isRecord(event.leave) ? event.leave : undefined
      if (leave === undefined) return model
      model.leaves.push({
        rank: num(leave.rank) ?? -1,
        epoch: num(leave.epoch) ?? 0,
        kind: str(leave.kind) ?? "unknown",
        declaredMs: num(leave.declaredMs) ?? at,
        detectionMs: num(leave.detectionMs) ?? 0,
        recoveryMs: num(leave.recoveryMs),
        remainderSamples: num(leave.remainderSamples) ?? 0,
        lostSamples: num(leave.lostSamples) ?? 0,
        duplicatedSamples: num(leave.duplicatedSamples) ?? 0,
        redoneSamples: num(leave.redoneSamples) ?? 0,
        bytesMoved: num(leave.bytesMoved) ?? 0
      })
      return model
    }
    case "join": {
      const join = isRecord(event.join) ? event.join : undefined
      if (join === undefined) return model
      model.joins.push({
        rank: num(join.rank) ?? -1,
        epoch: num(join.epoch) ?? 0,
        connectedMs: num(join.connectedMs) ?? at,
        welcomeMs: num(join.welcomeMs) ?? 0,
        trainingMs: num(join.trainingMs) ?? 0,
        bytes: num(join.bytes) ?? 0
      })
      return model
    }
    case "death": {
      const death = isRecord(event.death) ? event.death : undefined
      if (death === undefined) return model
      const declaredMs = num(death.declaredMs) ?? at
      const faultMs = num(death.faultMs)
      const recoveredMs = death.redistributed === false ? undefined : num(death.recoveredMs)
      const marks: DeathMarks = {
        rank: num(death.rank) ?? -1,
        epoch: num(death.epoch) ?? 0,
        detector: str(death.detector) ?? "unknown",
        cause: str(death.cause) ?? "",
        faultMs,
        declaredMs,
        recoveredMs,
        detectedAfterFaultMs: num(death.detectedAfterFaultMs) ?? (faultMs === undefined ? undefined : declaredMs - faultMs),
        recoveredAfterDeclaredMs: recoveredMs === undefined ? undefined : recoveredMs - declaredMs,
        remainderSamples: num(death.remainderSamples) ?? 0
      }
      model.deaths.push(marks)
      const row = rowOf(model, death.rank)
      if (row !== undefined) {
        row.status = "dead"
        row.detector = marks.detector
        row.cause = marks.cause
        row.samplesPerSecond = 0
      }
      return model
    }
    case "round": {
      const epoch = num(event.epoch)
      const round = num(event.round)
      if (epoch === undefined || round === undefined) return model
      const previous = model.rounds.at(-1)?.ms ?? model.formedMs ?? 0
      model.rounds.push({
        ms: at,
        epoch,
        round,
        contributors: num(event.contributors) ?? 0,
        openMs: num(event.openMs) ?? 0,
        roundMs: Math.max(0, at - previous),
        loss: num(event.loss),
        receivedBytes: num(event.receivedBytes),
        sentBytes: num(event.sentBytes),
        linkSentBytes: num(event.linkSentBytes),
        linkReceivedBytes: num(event.linkReceivedBytes)
      })
      return model
    }
    case "epoch": {
      const summary = isRecord(event.summary) ? event.summary : undefined
      const epoch = summary === undefined ? undefined : num(summary.epoch)
      if (summary === undefined || epoch === undefined) return model
      model.epochRows.push({
        epoch,
        ms: at,
        epochSamples: num(summary.epochSamples) ?? 0,
        samplesCommitted: num(summary.samplesCommitted) ?? 0,
        lost: num(summary.lost) ?? 0,
        duplicated: num(summary.duplicated) ?? 0,
        deaths: Array.isArray(summary.deaths) ? summary.deaths.length : 0,
        accuracy: num(event.accuracy),
        loss: undefined
      })
      if (Array.isArray(summary.exits)) {
        for (const rank of summary.exits) {
          const row = rowOf(model, rank)
          if (row !== undefined && row.status !== "dead") row.status = "exited"
        }
      }
      return model
    }
    case "eval": {
      const row = model.epochRows.find((e) => e.epoch === num(event.epoch))
      if (row !== undefined) {
        row.accuracy = num(event.accuracy)
        row.loss = num(event.loss)
      }
      return model
    }
    case "alert": {
      const alert = isRecord(event.alert) ? event.alert : undefined
      if (alert === undefined) return model
      model.alerts.push({
        ms: at,
        severity: str(alert.severity) ?? "",
        path: str(alert.path) ?? "",
        class: str(alert.class) ?? "",
        detail: str(alert.detail) ?? "",
        count: num(alert.count) ?? 1
      })
      return model
    }
    case "failed":
      model.failed = { ms: at, stage: str(event.stage) ?? "run", reason: str(event.reason) ?? "", formed: event.formed === true }
      for (const row of model.ranks) if (alive(row)) row.status = "exited"
      return model
    case "ended": {
      const outcome = isRecord(event.outcome) ? event.outcome : {}
      model.ended = {
        ms: at,
        status: str(outcome.status) ?? "unknown",
        reason: str(outcome.reason),
        detail: str(outcome.detail) ?? "",
        exitCode: num(event.exitCode)
      }
      for (const row of model.ranks) if (alive(row)) row.status = "exited"
      return model
    }
    default:
      return model
  }
}

/** The page of a whole journal: `apply` over `events` in order. @since 0.1.0 @category constructors */
export const fromEvents = (events: Iterable<unknown>): Model => {
  const model = empty()
  for (const event of events) apply(model, event)
  return model
}
