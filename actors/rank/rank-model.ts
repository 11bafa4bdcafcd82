/**
 * How a rank takes a model the run agreed on (`rank.ts` module doc): a committed ring round's mean
 * (from the rank's own collective or the shared area), a round's `Update` (a model, or a packed
 * change, with what the rank trained since carried onto it), the ring's state after a coordinator's
 * takeover, and the last averaged model again when its chunks were taken back.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Deltas from "../../src/averaging/deltas.ts"
import type { ToRank } from "../../src/core/messages.ts"
import type { Running, Training } from "./rank-state.ts"

/**
 * Applies a committed ring round's mean. The trainer copies it (`Trainer.setParams`). The mean is
 * kept as it is as the last average, which saves then read: a mean from the shared all-reduce area
 * (`inArea`), whose row stays unchanged until every member applied the next commit
 * (`SharedAllReduce` module doc, step 3), and which nothing writes into; any other mean is the
 * rank's own (`RankRing.committed`), and the last average it replaces, when that is the rank's own
 * too, goes back to the ring for a later collective's mean (`RankRing.recycleMean`): nothing reads
 * it any more (saves run inside this loop, and a new collective starts only at the next contribution).
 */
export const applyCommitted = (r: Running, committedRound: number, mean: Float32Array, inArea = false): void => {
  const { s } = r
  const replaced = s.lastAverage
  if (!s.lastAverageShared && replaced !== mean && replaced.length === mean.length) r.ring.recycleMean(replaced)
  s.lastAverage = mean
  s.lastAverageShared = inArea
  r.trainer.setParams(s.lastAverage)
  s.lastAverageRound = committedRound
  s.ringRound = committedRound
  s.round = committedRound + 1
  s.waitingUpdate = false
}

/** A commit the coordinator wrote into the ring's shared area: applied before anything it sent after. */
export const applyAreaCommit = (r: Running): void => {
  const committed = r.ring.areaCommitted()
  if (committed !== undefined) applyCommitted(r, committed.round, committed.mean, true)
}

/**
 * Ring, after a takeover: the new coordinator confirms the last round its log holds committed.
 * A rank that finished that round but never had its confirmation applies the round's mean now
 * (every member of the generation that committed it holds the same mean); one whose finished
 * round is not it (a later round, never committed) drops it. It waits for the `Update` still.
 */
export const ringConfirmed = (
  r: Running,
  recovery: NonNullable<Training["ringRecovery"]>,
  message: Extract<ToRank, { _tag: "RoundCommitted" }>
): void => {
  recovery.committed = message.round
  const held = recovery.held
  if (held === undefined || held.round !== message.round || held.generation !== message.generation) return
  applyCommitted(r, message.round, held.mean)
  r.s.waitingUpdate = true
}

/**
 * Ring, after a takeover: the new coordinator's first `Update{round}` (no parameters: the ranks
 * hold the model). The rank must hold the mean of the round it confirmed (`ringConfirmed`; none:
 * the trainers' initial model); that model is then numbered round `round`'s, as a resumed run's
 * is (what a `RequestParams` of the takeover's first epoch end asks for). A rank
 * that holds another (never seen in a run that lost no frame) cannot go on exactly: it ends, and
 * the coordinator hands its share to the others.
 */
export const ringTakenOver = (r: Running, round: number) =>
  Effect.gen(function* () {
    const { s } = r
    const committed = s.ringRecovery?.committed ?? -1
    s.ringRecovery = undefined
    if (s.ringRound !== committed) {
      const reason = `the run's last committed ring round is ${committed}, and this rank holds the mean of round ${s.ringRound}`
      console.error(`cohort rank ${r.rank}: taken over by a new coordinator, but ${reason}: it cannot go on exactly`)
      return yield* Effect.die(new Error(`rank ${r.rank}: ${reason}`))
    }
    s.lastAverageRound = round
    s.round = round + 1
    s.waitingUpdate = false
  })

/**
 * Applies a round's `Update`. A `cpu` rank that trained since its last contribution was not waited
 * for (`roundDeadlineMs`, `roundSilenceMs`): the round closed without that training, which its
 * samples' commit will need. It carries it onto the new model (its parameters become the new model
 * plus what it trained since the model it last applied), so its next contribution holds it, as it
 * would have had the round waited. Any other rank takes the model as it is.
 */
export const applyUpdate = (r: Running, message: Extract<ToRank, { _tag: "Update" }>) =>
  Effect.gen(function* () {
    const { s, trainer } = r
    const trained = !r.ringBackend && !s.waitingUpdate && s.batchesSinceContribution > 0
    const carried =
      trained && (message.base !== undefined || message.params.length > 0) ? Deltas.minus(r.getParams(), s.lastAverage) : undefined
    if (message.base !== undefined) {
      // A packed change to the model we hold: both ends add it the same way (`Deltas.plus`),
      // so this rank holds the coordinator's model bit for bit.
      if (message.base !== s.lastAverageRound || message.params.length !== s.lastAverage.length)
        return yield* Effect.die(
          new Error(
            `rank ${r.rank}: an Update of round ${message.round} changes the model of round ${message.base}, this rank holds round ${s.lastAverageRound}'s`
          )
        )
      s.lastAverage = Deltas.plus(s.lastAverage, message.params)
      trainer.setParams(carried === undefined ? s.lastAverage.slice() : Deltas.plus(s.lastAverage, carried))
      s.lastAverageRound = message.round
    } else if (message.params.length > 0) {
      // A copy of our own: a trainer that keeps the array it was given may train in place on it.
      s.lastAverage = message.params.slice()
      trainer.setParams(carried === undefined ? message.params : Deltas.plus(s.lastAverage, carried))
      s.lastAverageRound = message.round
    }
    s.round = message.round + 1
    s.waitingUpdate = false
  })

/**
 * Progressive `cpu`: the next epoch's first chunk came while this rank still trained the last
 * one's. The epoch ended without that work, so the coordinator took those chunks back while the
 * rank was silent (docs/design.md §3.7) and others trained them: the rank drops that training and
 * goes back to the last averaged model, as if it had never held them.
 */
export const dropTakenBack = (r: Running): void => {
  const { s } = r
  if (r.ringBackend || (s.chunks.length === 0 && s.batchesSinceContribution === 0 && s.chunksDoneSinceContribution === 0)) return
  r.trainer.setParams(s.lastAverage.slice())
  s.residual = undefined
  s.lossSum = 0
  s.lossSamples = 0
}
