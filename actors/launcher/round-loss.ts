/**
 * The training loss of each averaging round, for the journal's `round` event (the dashboard's
 * loss per round): each rank carries the mean loss of the batches it trained since its last
 * contribution on that contribution (`Params.loss`, or `RoundDone.loss` with the ring backend);
 * when the round closes, its loss is the sample-weighted mean over the round's contributors that
 * carried one.
 *
 * A contributor's weight is the samples it trained since its previous contribution as the
 * coordinator saw them: in static mode the growth of its `samplesDone` in the epoch; in
 * progressive mode the sizes of its `ChunkDone`s since then. A contribution that trained nothing
 * the coordinator saw weighs 1 (its loss still counts). The core never reads a loss: this stays
 * in the actors' layer, fed from the launcher's hooks.
 *
 * @since 0.1.0
 */
import type { Rank, ToCoordinator } from "../../src/core/messages.ts"

interface Pending {
  readonly round: number
  readonly loss: number
  readonly weight: number
}

/**
 * A round-loss tracker (`make`): `onFrame` for every frame the coordinator stepped (the
 * launcher's `Hooks.onFrame`), `onRound` when a round closes with its `contributors`: the round's
 * loss, or `undefined` when no contributor carried one.
 *
 * @since 0.1.0
 * @category round-loss
 */
export interface RoundLoss {
  readonly onFrame: (rank: Rank, message: ToCoordinator) => void
  readonly onRound: (contributors: ReadonlyArray<Rank>) => number | undefined
}

/**
 * Makes a tracker for a run in `mode`.
 *
 * @since 0.1.0
 * @category round-loss
 */
export const make = (mode: "static" | "progressive"): RoundLoss => {
  const pending = new Map<Rank, Pending>()
  // Static: the epoch and samplesDone of the rank's last contribution; progressive: chunk samples since it.
  const contributedAt = new Map<Rank, { readonly epoch: number; readonly samplesDone: number }>()
  const chunkSamples = new Map<Rank, number>()

  const weightOf = (rank: Rank, epoch: number, samplesDone: number): number => {
    if (mode === "progressive") {
      const samples = chunkSamples.get(rank) ?? 0
      chunkSamples.set(rank, 0)
      return Math.max(1, samples)
    }
    const before = contributedAt.get(rank)
    contributedAt.set(rank, { epoch, samplesDone })
    const since = before !== undefined && before.epoch === epoch ? samplesDone - before.samplesDone : samplesDone
    return Math.max(1, since)
  }

  return {
    onFrame: (rank, message) => {
      switch (message._tag) {
        case "ChunkDone":
          chunkSamples.set(rank, (chunkSamples.get(rank) ?? 0) + message.size)
          return
        case "Params":
        case "RoundDone": {
          if (message.loss === undefined) return
          // A ring round redone by a new generation reports again: the first report's weight stands.
          const known = pending.get(rank)
          const weight =
            known !== undefined && known.round === message.round ? known.weight : weightOf(rank, message.epoch, message.samplesDone)
          pending.set(rank, { round: message.round, loss: message.loss, weight })
          return
        }
        default:
          return
      }
    },
    onRound: (contributors) => {
      let sum = 0
      let weights = 0
      for (const rank of contributors) {
        const entry = pending.get(rank)
        if (entry === undefined) continue
        pending.delete(rank)
        sum += entry.loss * entry.weight
        weights += entry.weight
      }
      return weights > 0 ? sum / weights : undefined
    }
  }
}
