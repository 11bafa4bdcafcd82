/**
 * A run's averaging traffic (`RunTypes.Traffic`), summed from its journal's `round` lines: the
 * launcher tallies each line it writes (for `summary.json`), `cohort report` each line it reads.
 *
 * @since 0.1.0
 */
import type { RunEvent, Traffic } from "./run-events.ts"

type Round = Extract<RunEvent, { readonly type: "round" }>

/**
 * A tally (`make`): `add` one `round` line; `total()` the sums, `undefined` while no line counted
 * bytes (a journal from before bytes were counted).
 *
 * @since 0.1.0
 * @category traffic
 */
export interface Tally {
  readonly add: (round: Round) => void
  readonly total: () => Traffic | undefined
}

/**
 * Makes a tally, empty or starting from `before` (a taken-over run goes on from the sums of
 * the lost coordinator's round lines, as `cohort report` sums every line of the journal).
 *
 * @since 0.1.0
 * @category traffic
 */
export const make = (before?: Traffic): Tally => {
  let rounds = before?.rounds ?? 0
  let receivedBytes = before?.receivedBytes ?? 0
  let sentBytes = before?.sentBytes ?? 0
  let linkSentBytes: number | undefined = before?.linkSentBytes
  let linkReceivedBytes: number | undefined = before?.linkReceivedBytes
  return {
    add: (round) => {
      const links = round.linkSentBytes !== undefined && round.linkReceivedBytes !== undefined
      if (round.receivedBytes === undefined && !links) return
      rounds += 1
      receivedBytes += round.receivedBytes ?? 0
      sentBytes += round.sentBytes ?? 0
      if (links) {
        linkSentBytes = (linkSentBytes ?? 0) + round.linkSentBytes!
        linkReceivedBytes = (linkReceivedBytes ?? 0) + round.linkReceivedBytes!
      }
    },
    total: () =>
      rounds === 0
        ? undefined
        : { rounds, receivedBytes, sentBytes, ...(linkSentBytes === undefined ? {} : { linkSentBytes, linkReceivedBytes }) }
  }
}
