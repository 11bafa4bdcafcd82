/**
 * Contributions as changes (docs/edge-averaging.md "Deltas"): with deltas on, a `cpu` rank that
 * applied a model from the coordinator contributes its change since that model instead of its
 * parameters, so that a packed contribution quantizes small changes rather than whole weights.
 * The coordinator turns each change back into parameters as it arrives (the model it last sent
 * plus the change), so that everything after it (exactly-once commits, aggregation, the outer
 * step, epoch models) is unchanged.
 *
 * **Which contributions are changes**, with no field on the wire for it: a rank sends a change
 * once it applied an `Update` that carried parameters, and its parameters before (a fresh run's
 * first round, a joiner welcomed without a model). A rank contributes to round `q` after it
 * applied the `Update` of round `q - 1` and every earlier one (they arrive in order, rounds
 * increasing), and no later one. So the contribution is a change exactly when the coordinator had
 * sent that rank a model of round `q - 1` or earlier: `Deltas` keeps, per rank, the round of the
 * first model sent to it. A late contribution (its round closed at a deadline without it) started
 * from an older model than the one it is added to: its change is added to the newer one.
 *
 * @since 0.1.0
 */
import type { Params, Rank } from "../core/messages.ts"

/**
 * One coordinator's view of which ranks hold a model of its (`make`).
 *
 * - `modelSent(rank, round)`: an `Update` of `round` with parameters went to `rank` (a round's
 *   mean, a joiner's welcome, a resumed run's model).
 * - `toParams(rank, message, base)`: the contribution as parameters: `base + change` when it is
 *   a change (module doc) and `base` has its length, else `message` itself (a contribution of
 *   the wrong length is then refused as any other). O(parameters) for a change, O(1) otherwise.
 *   `reuse`: the caller alone holds `message.params` (a vector just decoded from a frame), so the
 *   sum may be written over it when it owns its whole buffer (no new vector a contribution; the
 *   same float32 values).
 *
 * @since 0.1.0
 * @category model
 */
export interface Deltas {
  readonly modelSent: (rank: Rank, round: number) => void
  readonly toParams: (rank: Rank, message: Params, base: Float32Array | undefined, reuse?: boolean) => Params
}

/**
 * A fresh `Deltas`: no rank has been sent a model yet.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (): Deltas => {
  const firstModelRound = new Map<Rank, number>()
  return {
    modelSent: (rank, round) => {
      const first = firstModelRound.get(rank)
      if (first === undefined || round < first) firstModelRound.set(rank, round)
    },
    toParams: (rank, message, base, reuse = false) => {
      const first = firstModelRound.get(rank)
      if (first === undefined || first > message.round - 1 || base === undefined || base.length !== message.params.length) return message
      const change = message.params
      // A view into a larger buffer (a frame's bytes) is never written: only a vector of its own.
      if (reuse && change.byteOffset === 0 && change.byteLength === change.buffer.byteLength) {
        for (let j = 0; j < base.length; j++) change[j] = base[j]! + change[j]!
        return { ...message, params: change }
      }
      return { ...message, params: plus(base, change) }
    }
  }
}

/**
 * `base + change`, rounded to float32 per value: a change turned back into parameters (here, and
 * at a rank applying an `Update` with a `base`).
 *
 * @since 0.1.0
 * @category averaging
 */
export const plus = (base: Float32Array, change: Float32Array): Float32Array => {
  const out = new Float32Array(base.length)
  for (let j = 0; j < base.length; j++) out[j] = base[j]! + change[j]!
  return out
}

/**
 * `params - base`, rounded to float32 per value: the change a packed `Update` carries (the rank
 * adds it back with `plus`, so both ends hold the same float32 model). Same lengths.
 *
 * @since 0.1.0
 * @category averaging
 */
export const minus = (params: Float32Array, base: Float32Array): Float32Array => {
  const out = new Float32Array(params.length)
  for (let j = 0; j < params.length; j++) out[j] = params[j]! - base[j]!
  return out
}
