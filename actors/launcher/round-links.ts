/**
 * The bytes each averaging round moved over the ranks' direct ring links, for the journal's
 * `round` event (`linkSentBytes`, `linkReceivedBytes`; docs/journal.md). Those steps go rank to
 * rank, never through the coordinator, so each rank counts them (`LinkBytes`) and carries them on
 * its `RoundDone`; when the round closes, its link bytes are the sums over every report for it or
 * an earlier round not yet closed (a round redone by a new generation reports again: both
 * reports' bytes moved, so both count; a rank that reported and then died counts too). The core
 * never reads them, like the round's loss (`round-loss.ts`).
 *
 * @since 0.1.0
 */
import type { Rank, ToCoordinator } from "../../src/core/messages.ts"

/**
 * A round's direct-link bytes, summed over ranks: `sent` and `received` (each step is counted
 * by its sender and its receiver, so the two are equal when every step arrived).
 *
 * @since 0.1.0
 * @category round-links
 */
export interface LinkBytes {
  readonly sent: number
  readonly received: number
}

/**
 * A tracker (`make`): `onFrame` for every frame the coordinator stepped (the launcher's
 * `Hooks.onFrame`), `onRound` when round `round` closes: its bytes, or `undefined` when no report
 * carried any (no direct links: relayed steps are the coordinator's own traffic).
 *
 * @since 0.1.0
 * @category round-links
 */
export interface RoundLinks {
  readonly onFrame: (rank: Rank, message: ToCoordinator) => void
  readonly onRound: (round: number) => LinkBytes | undefined
}

/**
 * Makes an empty tracker.
 *
 * @since 0.1.0
 * @category round-links
 */
export const make = (): RoundLinks => {
  const pending: Array<{ readonly round: number; readonly sent: number; readonly received: number }> = []
  return {
    onFrame: (_rank, message) => {
      if (message._tag !== "RoundDone" || message.linkSentBytes === undefined || message.linkReceivedBytes === undefined) return
      pending.push({ round: message.round, sent: message.linkSentBytes, received: message.linkReceivedBytes })
    },
    onRound: (round) => {
      let sent = 0
      let received = 0
      let counted = false
      for (let i = pending.length - 1; i >= 0; i--) {
        const entry = pending[i]!
        if (entry.round > round) continue
        sent += entry.sent
        received += entry.received
        counted = true
        pending.splice(i, 1)
      }
      return counted ? { sent, received } : undefined
    }
  }
}
