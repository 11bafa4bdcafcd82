/**
 * The alert lane: alert records with a collapse window, so that a storm of one alert folds into a
 * few records whose counts stay exact (docs/design.md §3.9, §3.10 "Alert paths").
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"

/**
 * Alert classes: `RankLost` (critical), `ControlDrop` (critical, a control send failed),
 * `Overflow` (warn, a rank reported more than it was given), `CallbackSkipped` (warn, a callback
 * fell due on a dead rank), `CheckpointFailed` (warn, no live rank could save a checkpoint),
 * `BadParams` (warn, a contribution of the wrong length or with non-finite values was left out of
 * its round's average), `CoordinatorStall` (warn, the coordinator itself did not run for a while),
 * `BadResume` (critical, a resume point the core could not use: the run started at epoch 0),
 * `BadStart` (critical, `start`'s `absent` list would leave fewer than `minRanks` ranks),
 * `StorageFault` (critical, raised by the launcher, not the core: a write of the run's record
 * failed: its journal, summary or a checkpoint), `SaveTimeout` / `EvalTimeout` (warn, a rank ran
 * past `saveTimeoutMs` / `evalTimeoutMs` on a call the coordinator asked of it, and is declared
 * dead), `CoordinatorResource` (critical, the coordinator's own process ran short of something: a
 * listener's connection cap reached, file descriptors exhausted; its ranks are not at fault),
 * `OutlierParams` (warn, a rank's contribution was far outside the others' in a round).
 *
 * @since 0.1.0
 * @category model
 */
export type AlertClass =
  | "RankLost"
  | "ControlDrop"
  | "Overflow"
  | "CallbackSkipped"
  | "CheckpointFailed"
  | "BadParams"
  | "CoordinatorStall"
  | "BadResume"
  | "BadStart"
  | "StorageFault"
  | "SaveTimeout"
  | "EvalTimeout"
  | "CoordinatorResource"
  | "OutlierParams"

/** @since 0.1.0 @category model */
export type Severity = "critical" | "warn"

/**
 * One alert record. `ts` is the core's `nowMs`; `count` is how many occurrences this record
 * stands for (1, or the folded repeats plus the current one).
 *
 * @since 0.1.0
 * @category model
 */
export interface Alert {
  readonly ts: number
  readonly severity: Severity
  readonly path: string
  readonly class: AlertClass
  readonly detail: string
  readonly count: number
}

interface Entry {
  lastEmitMs: number
  folded: number
  severity: Severity
  path: string
  class: AlertClass
  detail: string
}

/**
 * The lane's memory of recent emissions per `(class, path)`.
 *
 * @since 0.1.0
 * @category model
 */
export interface Lane {
  readonly windowMs: number
  readonly entries: Map<string, Entry>
  sweepAt: number
}

/** A lane with a collapse window of `windowMs` (default 10000). @since 0.1.0 @category constructors */
export const make = (windowMs: number): Lane => ({ windowMs, entries: new Map(), sweepAt: 1024 })

/** The severity of each class. @since 0.1.0 @category model */
export const severityOf = (c: AlertClass): Severity =>
  c === "RankLost" || c === "ControlDrop" || c === "BadResume" || c === "BadStart" || c === "StorageFault" || c === "CoordinatorResource"
    ? "critical"
    : "warn"

/**
 * The alert path of a rank: `root` for a run of one rank, `root/{host}/rank{r}` when the ranks
 * span more than one host, otherwise `root/rank{r}`.
 *
 * @since 0.1.0
 * @category paths
 */
export const rankPath = (rank: Rank, worldSize: number, hosts: ReadonlyArray<string> | undefined, multiHost: boolean): string => {
  if (worldSize === 1) return "root"
  const host = hosts?.[rank]
  return multiHost && host !== undefined ? `root/${host}/rank${rank}` : `root/rank${rank}`
}

const sweep = (lane: Lane, nowMs: number): void => {
  for (const [key, e] of lane.entries) {
    if (e.folded === 0 && nowMs - e.lastEmitMs >= lane.windowMs) lane.entries.delete(key)
  }
  lane.sweepAt = Math.max(1024, lane.entries.size * 2)
}

/**
 * Raises one occurrence at `nowMs`. Returns the record to emit, or `undefined` when the occurrence
 * folds into the previous emission of the same `(class, path)` (it arrived less than `windowMs`
 * after it; one arriving exactly `windowMs` later is emitted). O(1) amortized.
 *
 * @since 0.1.0
 * @category mutations
 */
export const raise = (lane: Lane, nowMs: number, alertClass: AlertClass, path: string, detail: string): Alert | undefined => {
  const key = `${alertClass}|${path}`
  const entry = lane.entries.get(key)
  const severity = severityOf(alertClass)
  if (entry !== undefined && nowMs - entry.lastEmitMs < lane.windowMs) {
    entry.folded += 1
    entry.detail = detail
    return undefined
  }
  const count = (entry?.folded ?? 0) + 1
  if (entry === undefined) {
    lane.entries.set(key, { lastEmitMs: nowMs, folded: 0, severity, path, class: alertClass, detail })
    if (lane.entries.size > lane.sweepAt) sweep(lane, nowMs)
  } else {
    entry.lastEmitMs = nowMs
    entry.folded = 0
    entry.detail = detail
  }
  return { ts: nowMs, severity, path, class: alertClass, detail, count }
}

/**
 * Emits every folded repeat still pending (at the end of a run), one record per `(class, path)`
 * with `count` = the folded repeats, in first-raised order.
 *
 * @since 0.1.0
 * @category mutations
 */
export const flush = (lane: Lane, nowMs: number): Array<Alert> => {
  const out: Array<Alert> = []
  for (const e of lane.entries.values()) {
    if (e.folded > 0) {
      out.push({ ts: nowMs, severity: e.severity, path: e.path, class: e.class, detail: e.detail, count: e.folded })
      e.folded = 0
      e.lastEmitMs = nowMs
    }
  }
  return out
}
