/**
 * A run's result (`launcher.ts` module doc): once every rank ended, the coordinator's outcome with
 * the exits and deaths that followed it, each epoch's accuracy, the saves, the deaths' timings and
 * the exit code; logged as the journal's `ended` event and written atomically to
 * `<runDir>/summary.json`.
 *
 * @since 0.1.0
 */
import type * as Alerts from "../../src/core/alerts.ts"
import type * as Core from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"
import * as Files from "../../src/platform/files.ts"
import type { RunJournal } from "./launcher-journal.ts"
import * as StorageFault from "./storage-fault.ts"
import * as RankActor from "../rank/rank.ts"
import type { DeathTiming, JoinCost, LeaveCost, RecoveryRecord, Resumed, RunResult, SkippedFault } from "../record/run-types.ts"

/**
 * What `finish` needs of a run that ran (its scope closed, every rank ended):
 *
 * - `outcome`: the coordinator's outcome; `state`: the core's state at the end.
 * - `runId`, `runDir` (as given), `runDirAbsolute`: where its saves are (`save/rank<r>/`).
 * - `resumed`: a resumed run's parent, else `undefined`; `served`: a served run (its ranks save on
 *   their own hosts).
 * - `askedToSave`: the survivors asked to save when the run ended unrecoverable or interrupted.
 * - `interruptedBy`: the signal that interrupted the run (`SIGINT`, `SIGTERM`, `aborted`), if any.
 * - `timings`, `record`: each declared death's timing, and how a death the coordinator's hook did
 *   not see is timed and logged (`record(death, recoveredMs, redistributed)`).
 * - `skippedFaults`, `alerts`, `refusals` (`RunResult`), `startedMs` (ms the run started, on the run's clock),
 *   `transport` and `backend` (`RunResult`).
 * - `ringLinks`, `relayStats`: the links the ring's steps took, and the steps the coordinator relayed.
 * - `journal`, `nowMs` (the run's clock, ms), `sinceStart` (its ms to ms since the start): the
 *   `ended` event goes there.
 * - `storageFault`: the journal's write that failed (the run stopped on it), if any;
 *   `storageFailed(path, error)`: raises the alert of another failed write (`summary.json`).
 *
 * @since 0.1.0
 * @category model
 */
export interface RunEnd {
  readonly outcome: Core.Outcome
  readonly state: Core.State
  readonly runId: string
  readonly runDir: string
  readonly runDirAbsolute: string
  readonly resumed: Resumed | undefined
  readonly served: boolean
  readonly askedToSave: ReadonlyArray<Rank>
  readonly interruptedBy: string | undefined
  readonly timings: ReadonlyMap<Core.Death, DeathTiming>
  readonly leaves: ReadonlyArray<LeaveCost>
  readonly joins: ReadonlyArray<JoinCost>
  readonly record: (death: Core.Death, recoveredMs: number, redistributed: boolean) => void
  readonly skippedFaults: ReadonlyArray<SkippedFault>
  readonly alerts: ReadonlyArray<Alerts.Alert>
  readonly refusals: Record<string, number> | undefined
  readonly startedMs: number
  readonly transport: NonNullable<RunResult["transport"]>
  readonly backend: NonNullable<RunResult["backend"]>
  readonly ringLinks: NonNullable<RunResult["ring"]>["links"]
  readonly relayStats: () => { readonly relayed: number; readonly dropped: number }
  /** The run's averaging traffic (`RunResult.traffic`), when a round counted any. */
  readonly traffic?: RunResult["traffic"]
  readonly journal: RunJournal
  readonly nowMs: () => number
  readonly sinceStart: (ms: number) => number
  readonly storageFault: () => StorageFault.StorageFault | undefined
  readonly storageFailed: (path: string, error: unknown) => void
  /** A recovered run: the epochs audited before it took over, and every takeover (docs/recovery.md). */
  readonly recovered?: { readonly epochsBefore: RunResult["epochs"]; readonly recoveries: ReadonlyArray<RecoveryRecord> } | undefined
}

/**
 * Builds a run's result, logs it (`ended`), closes the journal and writes `summary.json`
 * atomically; resolves with the result. A run whose journal or summary could not be written
 * resolves with `storageFault` (the first such write) and `exitCode` 5, never as clean. Rejects
 * when the save markers cannot be read (`Files`).
 *
 * @since 0.1.0
 * @category launcher
 */
export const finish = async (end: RunEnd): Promise<RunResult> => {
  const { state, runId, runDir, runDirAbsolute, resumed, askedToSave, interruptedBy, timings, record, journal, sinceStart } = end
  // The outcome is the core's snapshot at the end of the run; the clean exits and deaths that
  // followed it (survivors leaving after their save; deaths marked `afterEnd`) belong in the result
  // too, and so do the evals: the last epoch's arrives after the run ended, and the journal's
  // `eval` event, the epochs' accuracy and the outcome must list the same ones.
  const evals = [...state.evals]
  const outcome: Core.Outcome = { ...end.outcome, exits: [...state.exits], deaths: [...state.deaths], evals }
  const accuracyOf = new Map(evals.map((e) => [e.epoch, e.accuracy]))
  const epochsWithAccuracy = outcome.epochs.map((summary) => ({
    ...summary,
    accuracy: accuracyOf.get(summary.epoch),
    // The epoch a resume picked up in the middle of: its audit covers both runs.
    ...(resumed !== undefined && resumed.committedSamples > 0 && summary.epoch === resumed.epoch
      ? { spansRuns: [resumed.parent.runId, runId] as const }
      : {})
  }))
  // A survivor finished its save when it announced its exit (ranks save first) and wrote its save
  // marker (`save/rank<r>/cohort-saved.json`, once the trainer's save resolved); one that died,
  // hung past the grace period, or whose save failed did not.
  const saved: Array<Rank> = []
  const notSaved: Array<Rank> = []
  for (const rank of askedToSave) {
    // A served run's ranks save on their own hosts: there, announcing the exit (after the save) is all it can see.
    const done =
      state.exits.includes(rank) && (end.served || (await Files.exists(`${runDirAbsolute}/save/rank${rank}/${RankActor.savedMarker}`)))
    ;(done ? saved : notSaved).push(rank)
  }
  const saves = outcome.status !== "completed" ? { saved, notSaved } : undefined
  // Deaths the hook did not see (declared by a step the coordinator's stop cut short) came after
  // the end: nothing moved for them.
  for (const death of state.deaths) record(death, death.declaredAtMs, false)
  const deaths = state.deaths.map((death) => timings.get(death)!)
  const auditClean = outcome.epochs.every((e) => e.lost === 0 && e.duplicated === 0)
  const journalFault = end.storageFault()
  const exitCode: RunResult["exitCode"] = !auditClean
    ? 4
    : journalFault !== undefined
      ? 5
      : outcome.status === "completed"
        ? 0
        : outcome.status === "interrupted"
          ? interruptedBy === "SIGTERM"
            ? 143
            : 130
          : 1
  const ring: RunResult["ring"] =
    state.ring === undefined ? undefined : { generations: state.ring.generation + 1, links: end.ringLinks, ...end.relayStats() }
  journal.emit({ type: "ended", ms: sinceStart(end.nowMs()), outcome, saves, exitCode, ...(ring === undefined ? {} : { ring }) })
  let result: RunResult = {
    runId,
    runDir,
    outcome,
    deaths,
    ...(end.leaves.length === 0 ? {} : { leaves: end.leaves }),
    ...(end.joins.length === 0 ? {} : { joins: end.joins }),
    skippedFaults: end.skippedFaults,
    alerts: end.alerts,
    epochs: [...(end.recovered?.epochsBefore ?? []), ...epochsWithAccuracy],
    finalAccuracy: evals.length === 0 ? undefined : evals[evals.length - 1]!.accuracy,
    saves,
    durationMs: end.nowMs() - end.startedMs,
    exitCode,
    ...(end.refusals === undefined ? {} : { refusals: end.refusals }),
    transport: end.transport,
    ...(resumed === undefined ? {} : { resumed }),
    ...(end.recovered === undefined ? {} : { recoveries: end.recovered.recoveries }),
    backend: end.backend,
    ring,
    ...(end.traffic === undefined ? {} : { traffic: end.traffic }),
    ...(journalFault === undefined ? {} : { storageFault: journalFault })
  }
  await journal.close()
  // An epoch whose model could not be written has no audit line in the journal (a resume trains
  // it again): the summary claims no audit of it either, so the chain counts it once.
  const withheld = journal.withheld()
  if (withheld.size > 0) result = { ...result, epochs: result.epochs.filter((e) => !withheld.has(e.epoch)) }
  const summaryPath = `${runDir}/summary.json`
  try {
    await Files.writeFileAtomic(summaryPath, `${JSON.stringify(result, null, 2)}\n`)
  } catch (error) {
    // No summary: the journal is the run's record (a resume and a report read it); say so loudly.
    end.storageFailed(summaryPath, error)
    return { ...result, storageFault: result.storageFault ?? StorageFault.of(summaryPath, error), exitCode: auditClean ? 5 : exitCode }
  }
  return result
}
