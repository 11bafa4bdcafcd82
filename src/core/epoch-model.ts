/**
 * The model of each ended epoch, for the coordinator's host (docs/design.md §3.8, "exactly once
 * across crashes"). An epoch's audit is final only once the committed model after it is on the
 * coordinator's host: a resume after the coordinator's process died at any instant then loads the
 * model of the last audited epoch and trains the next one, so no audited epoch is trained twice
 * and none is lost. Internal to `src/core`.
 *
 * - `cpu`: the coordinator computed the mean itself; `EpochModel` goes out in the epoch's last step
 *   with no parameters (the shell has them).
 * - `ring`: the ranks averaged among themselves. The lowest member that holds the model (live, not
 *   a joiner waiting to enter, not one owed its own model) is asked with `RequestParams{round}`,
 *   the same exchange a ring joiner's model hand-over uses. Until the answer arrives no ring round
 *   closes, so every member still holds the mean of `round` when it reads the request (it applies
 *   every commit sent before it). The answer is checked like a joiner's model (the run's parameter
 *   count, every value finite); a refused answer, or the asked member's departure, asks the next
 *   member; with none left `EpochModel` goes out without parameters (the run is then ending: a
 *   ring needs two members).
 *
 * @since 0.1.0
 */
import { alert, path, send } from "./emit.ts"
import type { Command } from "./inputs.ts"
import * as Membership from "./membership.ts"
import type { Rank } from "./messages.ts"
import type { State } from "./state.ts"

/**
 * The lowest ring member that holds the model: live, neither a joiner waiting for the next
 * generation nor one still owed its own model, and not in `tried`. O(ranks skipped).
 *
 * @since 0.1.0
 * @category epochs
 */
export const modelHolder = (state: State, tried: ReadonlySet<Rank> | undefined): Rank | undefined => {
  const m = state.membership
  for (let r = Membership.nextLive(m, 0); r < m.worldSize; r = Membership.nextLive(m, r + 1)) {
    if (!state.joining.has(r) && !state.modelOwed.has(r) && (tried === undefined || !tried.has(r))) return r
  }
  return undefined
}

/**
 * The epoch `epoch` just ended with round `round` (its last): hands the shell its model (`cpu`),
 * or asks a ring member for it. O(ranks skipped).
 *
 * @since 0.1.0
 * @category epochs
 */
export const ask = (state: State, cmds: Array<Command>, epoch: number, round: number): void => {
  if (state.ring === undefined || round < 0) {
    cmds.push({
      _tag: "EpochModel",
      epoch,
      round,
      params: undefined,
      from: undefined,
      reason: `the model after epoch ${epoch}: the mean of round ${round}`
    })
    return
  }
  state.epochModel = { epoch, round, from: -1, tried: new Set(), finishing: false }
  // The epoch just ended: `finishing` is set by the caller afterwards, so this cannot settle a finish.
  askNext(state, cmds, `the model after epoch ${epoch}`)
}

/**
 * What an answer or a departure did: `Ignored` (not about the epoch model), `Asked` (the next
 * member was asked), `Settled` (no longer owed; `finishing`: the run completes now).
 *
 * @since 0.1.0
 * @category epochs
 */
export type Outcome = { readonly _tag: "Ignored" } | { readonly _tag: "Asked" } | { readonly _tag: "Settled"; readonly finishing: boolean }

const ignored: Outcome = { _tag: "Ignored" }

/** Asks the next member holding the model; with none left, the shell gets no parameters. */
const askNext = (state: State, cmds: Array<Command>, why: string): Outcome => {
  const owed = state.epochModel!
  const from = modelHolder(state, owed.tried)
  if (from === undefined) {
    state.epochModel = undefined
    alert(
      state,
      cmds,
      "CheckpointFailed",
      "root",
      `no ring member is left to hand over the model after epoch ${owed.epoch} (round ${owed.round})`
    )
    cmds.push({
      _tag: "EpochModel",
      epoch: owed.epoch,
      round: owed.round,
      params: undefined,
      from: undefined,
      reason: `${why}: no ring member left that holds it`
    })
    return { _tag: "Settled", finishing: owed.finishing }
  }
  owed.from = from
  owed.tried.add(from)
  send(
    cmds,
    from,
    { _tag: "RequestParams", round: owed.round },
    `${why}: the mean of round ${owed.round} from rank ${from}, for the coordinator's checkpoint`
  )
  return { _tag: "Asked" }
}

/**
 * A `Params` from ring member `rank`: the epoch model it was asked for, or `Ignored` (another
 * exchange's answer). Taken, or refused and the next member asked. O(params.length).
 *
 * @since 0.1.0
 * @category epochs
 */
export const onAnswer = (state: State, rank: Rank, round: number, params: Float32Array, cmds: Array<Command>): Outcome => {
  const owed = state.epochModel
  if (owed === undefined || owed.from !== rank || owed.round !== round) return ignored
  const expected = state.paramsLength
  let problem =
    params.length === 0
      ? "no values"
      : expected !== undefined && params.length !== expected
        ? `${params.length} values instead of ${expected}`
        : undefined
  for (let i = 0; problem === undefined && i < params.length; i++) if (!Number.isFinite(params[i]!)) problem = "non-finite values"
  if (problem === undefined) {
    state.epochModel = undefined
    cmds.push({
      _tag: "EpochModel",
      epoch: owed.epoch,
      round,
      params,
      from: rank,
      reason: `the model after epoch ${owed.epoch}: the mean of round ${round} from rank ${rank}`
    })
    return { _tag: "Settled", finishing: owed.finishing }
  }
  state.counters.modelsRefused += 1
  alert(state, cmds, "BadParams", path(state, rank), `rank ${rank}'s model after epoch ${owed.epoch} refused: ${problem}`)
  return askNext(state, cmds, `rank ${rank}'s model was refused`)
}

/**
 * A departure batch: when the asked member left before it answered, the next one is asked (or,
 * with none left, the shell gets no parameters). O(ranks skipped).
 *
 * @since 0.1.0
 * @category epochs
 */
export const reissue = (state: State, departed: ReadonlySet<Rank>, cmds: Array<Command>): Outcome => {
  const owed = state.epochModel
  if (owed === undefined || !departed.has(owed.from)) return ignored
  return askNext(state, cmds, `rank ${owed.from} left before it handed over the model after epoch ${owed.epoch}`)
}

/** True while the model of an ended epoch is owed: no ring round may close. @since 0.1.0 @category epochs */
export const isOwed = (state: State): boolean => state.epochModel !== undefined
