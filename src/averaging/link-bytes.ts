/**
 * A rank's tally of the bytes its ring steps moved over direct links (`PeerRing` between
 * processes and hosts, a worker thread's ports), by averaging round. The coordinator never sees
 * those steps, so the rank reports them with its round's `RoundDone` (`linkSentBytes`,
 * `linkReceivedBytes`) for the journal's round line (docs/journal.md). Relayed steps are not
 * counted here: the coordinator counts them as its own traffic.
 *
 * A round's report takes every round up to it, so bytes of an aborted generation's steps count
 * with the round that redoes them, and nothing is reported twice.
 *
 * @since 0.1.0
 */

/**
 * Bytes sent and received over direct links, each a non-negative integer.
 *
 * @since 0.1.0
 * @category model
 */
export interface Bytes {
  readonly sent: number
  readonly received: number
}

/**
 * The tally (`make`): `sent` and `received` add one step's `bytes` to its `round`; `take(round)`
 * gives the sum over every round up to `round` and forgets them (zeros when nothing was counted).
 * O(rounds held) a take; a rank holds at most a round or two.
 *
 * @since 0.1.0
 * @category model
 */
export interface LinkBytes {
  readonly sent: (round: number, bytes: number) => void
  readonly received: (round: number, bytes: number) => void
  readonly take: (round: number) => Bytes
}

/**
 * Makes an empty tally.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (): LinkBytes => {
  const byRound = new Map<number, { sent: number; received: number }>()
  const entry = (round: number): { sent: number; received: number } => {
    let counts = byRound.get(round)
    if (counts === undefined) {
      counts = { sent: 0, received: 0 }
      byRound.set(round, counts)
    }
    return counts
  }
  return {
    sent: (round, bytes) => {
      entry(round).sent += bytes
    },
    received: (round, bytes) => {
      entry(round).received += bytes
    },
    take: (round) => {
      let sent = 0
      let received = 0
      for (const [r, counts] of byRound) {
        if (r > round) continue
        sent += counts.sent
        received += counts.received
        byRound.delete(r)
      }
      return { sent, received }
    }
  }
}
