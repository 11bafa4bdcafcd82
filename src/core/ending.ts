/**
 * Ending epochs and the run (docs/design.md §3.7, §3.8): an epoch's audit and its callbacks (eval,
 * checkpoint), the next epoch's start, and the run's `Outcome` once it completes or stops.
 * Internal to `src/core`.
 *
 * @since 0.1.0
 */
import * as Alerts from "./alerts.ts"
import * as Audit from "./audit.ts"
import * as EpochModel from "./epoch-model.ts"
import { alert, broadcast, path, send } from "./emit.ts"
import { startEpoch } from "./epochs.ts"
import type { Command } from "./inputs.ts"
import * as Membership from "./membership.ts"
import type { SaveReason } from "./messages.ts"
import type { EpochSummary, Outcome } from "./outcome.ts"
import { failoverCheckpoint } from "./role-moves.ts"
import type { State } from "./state.ts"

export const finish = (
  state: State,
  cmds: Array<Command>,
  status: Outcome["status"],
  reason: SaveReason | undefined,
  detail: string,
  midEpoch: boolean
): void => {
  state.phase = status
  for (const record of Alerts.flush(state.lane, state.clockMs)) cmds.push({ _tag: "Alert", alert: record })
  const outcome: Outcome = {
    status,
    reason,
    detail,
    endedAtMs: state.clockMs,
    epochsCompleted: state.firstEpoch + state.summaries.length,
    failures: Membership.deadRanks(state.membership),
    exits: [...state.exits],
    deaths: [...state.deaths],
    epochs: [...state.summaries],
    evals: [...state.evals],
    uncommitted: midEpoch ? { epoch: state.epoch, ranges: Audit.uncommitted(state.log) } : undefined,
    counters: { ...state.counters },
    repeatedCrash: state.repeatedCrash,
    ...(state.joins.length > 0 ? { joins: [...state.joins] } : {})
  }
  state.outcome = outcome
  cmds.push({ _tag: "RunEnded", outcome })
}

export const endEpoch = (state: State, cmds: Array<Command>): void => {
  const { config } = state
  const result = Audit.audit(state.log)
  const summary: EpochSummary = {
    ...result,
    deaths: [...state.epochDeaths],
    exits: [...state.epochExits],
    startedAtMs: state.epochStartedMs,
    endedAtMs: state.clockMs
  }
  state.summaries.push(summary)
  cmds.push({ _tag: "EpochEnded", summary })
  const ended = state.epoch
  // The epoch's model for the coordinator's host; its audit is final once that is written.
  EpochModel.ask(state, cmds, ended, state.round - 1)
  const number = ended + 1
  if (config.evalEveryEpochs > 0 && number % config.evalEveryEpochs === 0) {
    const holder = state.roles.eval
    if (Membership.isLive(state.membership, holder)) {
      state.evalsAsked.set(ended, holder)
      send(cmds, holder, { _tag: "Eval", epoch: ended }, `eval after epoch ${ended}`)
    } else
      alert(
        state,
        cmds,
        "CallbackSkipped",
        path(state, holder),
        `eval after epoch ${ended} skipped: rank ${holder}, which holds the eval role, is not live`
      )
  }
  if (config.checkpointEveryEpochs > 0 && number % config.checkpointEveryEpochs === 0) {
    // A newer checkpoint supersedes a pending one; a late result for the old one counts as stale.
    const holder = state.roles.checkpoint
    state.checkpoint = { version: ended, rank: holder, tried: new Set([holder]) }
    if (Membership.isLive(state.membership, holder))
      send(cmds, holder, { _tag: "Checkpoint", version: ended }, `checkpoint after epoch ${ended}`)
    else failoverCheckpoint(state, cmds, `its holder ${holder} is not live`, true)
  }
  if (number >= config.epochs) {
    // A ring member still has to hand over the last epoch's model: the run completes when it did.
    if (state.epochModel !== undefined) state.epochModel.finishing = true
    else complete(state, cmds)
    return
  }
  state.epoch = number
  startEpoch(state, cmds)
}

/**
 * The last epoch ended and its model is in (or no member was left to hand it over): the ranks
 * are told to stop and the run completes.
 */
export const complete = (state: State, cmds: Array<Command>): void => {
  const { config } = state
  const trained = config.epochs === 1 ? "the one epoch trained" : `all ${config.epochs} epochs trained`
  broadcast(cmds, { _tag: "Shutdown" }, trained)
  finish(state, cmds, "completed", undefined, `${trained} and audited`, false)
}
