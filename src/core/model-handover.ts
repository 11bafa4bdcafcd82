/**
 * The model hand-over to a joiner with the ring backend (the `SendModel` a joiner is owed when it
 * enters the rounds, `Joins.enterRounds`): checking the asked member's `Params` and relaying it, and
 * asking the next member when the asked one is refused, silent or gone. The rules are the "Model
 * hand-over" items of the joins module's docstring (docs/design.md §3.11). Apart from `joins.ts`
 * because stopping the run (`ReduceStall`) sits above the rounds that joiners enter.
 *
 * @since 0.1.0
 */
import { alert, path } from "./emit.ts"
import { modelHolder } from "./epoch-model.ts"
import type { Command } from "./inputs.ts"
import type { Rank } from "./messages.ts"
import type { ModelOwed, State } from "./state.ts"
import { saveAndStop } from "./stops.ts"

/** Asks the next member for `to`'s model (`SendModel` for ring `generation`); false when none is left. */
const askNext = (state: State, cmds: Array<Command>, to: Rank, owed: ModelOwed, generation: number, why: string): boolean => {
  const from = modelHolder(state, owed.tried)
  if (from === undefined) return false
  owed.from = from
  owed.tried.add(from)
  cmds.push({
    _tag: "SendModel",
    to,
    from,
    round: owed.round,
    generation,
    reason: `${why}: rank ${to} gets the model of round ${owed.round} from rank ${from} instead`
  })
  return true
}

/**
 * A `Params` with the ring backend: the model hand-over `SendModel` asked `rank` for.
 * Forwards it to every joiner owed a model by `rank` as `Update{round, params}`, or refuses it (see
 * the module docstring, "Model hand-over"). O(joiners owed a model + params.length).
 */
export const onModel = (state: State, rank: Rank, round: number, params: Float32Array, cmds: Array<Command>): void => {
  const owedBy = [...state.modelOwed].filter(([, owed]) => owed.from === rank).sort(([a], [b]) => a - b)
  if (owedBy.length === 0) {
    state.counters.staleRoundDone += 1
    return
  }
  const expected = state.paramsLength
  let problem =
    expected === undefined
      ? params.length === 0
        ? "no values"
        : undefined
      : params.length === expected
        ? undefined
        : `${params.length} values instead of ${expected}`
  for (let i = 0; problem === undefined && i < params.length; i++) if (!Number.isFinite(params[i]!)) problem = "non-finite values"
  for (const [to, owed] of owedBy) {
    const why = owed.round !== round ? `the model of round ${round} instead of ${owed.round}` : problem
    if (why === undefined) {
      state.modelOwed.delete(to)
      cmds.push({
        _tag: "Send",
        to,
        message: { _tag: "Update", round, params },
        reason: `rank ${to}'s model: round ${round} from rank ${rank}`
      })
      continue
    }
    state.counters.modelsRefused += 1
    alert(state, cmds, "BadParams", path(state, rank), `rank ${rank}'s model for joiner ${to} refused: ${why}`)
    if (!askNext(state, cmds, to, owed, state.ring!.generation, `rank ${rank}'s model was refused`)) {
      return saveAndStop(state, cmds, "ReduceStall", `no ring member left to hand joiner ${to} the model of round ${owed.round}`)
    }
  }
}

/**
 * A ring rendezvous timed out (`tick`, before the ring re-forms as `generation`): a joiner still
 * owed its model is what holds the rendezvous up when its asked member has not answered (a slow or
 * broken member: the joiner gets its `FormRing` only after its model), so its model is asked of the
 * next member holding it not asked yet. With none left it keeps waiting on the members asked; the
 * rendezvous attempts then end the run (`ReduceStall`, docs/design.md §3.10), as for a member that never
 * sends `RingReady`. O(joiners owed a model + ranks skipped).
 *
 * @since 0.1.0
 * @category joins
 */
export const reaskModels = (state: State, cmds: Array<Command>, generation: number): void => {
  for (const [to, owed] of [...state.modelOwed].sort(([a], [b]) => a - b)) {
    askNext(state, cmds, to, owed, generation, `rank ${owed.from} did not hand the model over before the ring rendezvous timed out`)
  }
}

/**
 * A departure batch (`declareBatch`, before the ring re-forms as `generation`): a departed joiner
 * is owed nothing any more, and a joiner whose asked member departed is asked for from the next
 * member (`SendModel` for `generation`). Returns false when it stopped the run (no member left
 * holds the model: `ReduceStall`). O(joiners owed a model + ranks skipped).
 */
export const reissueModels = (state: State, departed: ReadonlySet<Rank>, cmds: Array<Command>, generation: number): boolean => {
  for (const rank of departed) state.modelOwed.delete(rank)
  const stranded = [...state.modelOwed].filter(([, owed]) => departed.has(owed.from)).sort(([a], [b]) => a - b)
  for (const [to, owed] of stranded) {
    if (!askNext(state, cmds, to, owed, generation, `rank ${owed.from} left before it sent the model`)) {
      saveAndStop(
        state,
        cmds,
        "ReduceStall",
        `no ring member left to hand joiner ${to} the model of round ${owed.round}: every rank that held it is gone`
      )
      return false
    }
  }
  return true
}
