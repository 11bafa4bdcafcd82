/**
 * Where a served run stands after its coordinator's process was lost, rebuilt from its record
 * alone (docs/recovery.md): the pure fold a restarted coordinator (`cohort serve --recover`)
 * starts its core from. Deterministic, no I/O.
 *
 * The record is a set of entries, in any order (they come from two files: the recovery log,
 * written before the frames that act on it, and the journal):
 *
 * - `Base`: where the run (or its last recovery) began: the first epoch, the first round and the
 *   ranges of that epoch committed before it (a resumed run's parent's). The last `Base` wins.
 * - `Commit`: round `round` of epoch `epoch` closed and committed `ranges`. Written, with the
 *   round's model, before its `Update` went out: no rank ever holds a model the record lacks.
 * - `Closed`: epoch `epoch` ended (its last round closed, its audit made). Written before the next
 *   epoch's first frame went out, so it precedes every commit of that epoch; its audit line in the
 *   journal comes later (it waits for the epoch's model to be written).
 * - `Audited`: epoch `epoch`'s audit is final (its model is written on the coordinator's host).
 * - `Gone`: a rank declared dead or exited; it is not waited for.
 * - `Ring` (ring backend): generation `generation` was formed. Written before its `FormRing` went
 *   out, so no rank ever saw a generation the record lacks; a ring round's `Commit` names its
 *   generation too (the members hold the round's mean, finished, confirmed or not).
 *
 * The point is the first epoch neither audited nor closed (`epochs` when none is left), the ranges of it
 * committed (the base's, when it is the base's epoch, and every commit's), the last round committed
 * (whose model the coordinator wrote), the epochs closed whose audit line was never written (the
 * restarted coordinator writes it) and the ranks gone. Commits of ended epochs, and of epochs
 * after the point's, are left out: the first are final, the second cannot be (their epoch's
 * predecessor never ended) and are trained again.
 *
 * @since 0.1.0
 */
import * as Audit from "./audit.ts"
import type { Rank } from "./messages.ts"
import type { Resume } from "./state.ts"

/**
 * One entry of a run's record (module doc). Ranges are `[offset, size]` of the epoch's permutation.
 *
 * @since 0.1.0
 * @category model
 */
export type Entry =
  | {
      readonly _tag: "Base"
      readonly epoch: number
      readonly firstRound: number
      readonly committed: ReadonlyArray<readonly [number, number]>
    }
  | {
      readonly _tag: "Commit"
      readonly epoch: number
      readonly round: number
      readonly ranges: ReadonlyArray<readonly [number, number]>
      readonly generation?: number
    }
  | { readonly _tag: "Closed"; readonly epoch: number }
  | { readonly _tag: "Audited"; readonly epoch: number }
  | { readonly _tag: "Gone"; readonly rank: Rank }
  | { readonly _tag: "Ring"; readonly generation: number }

/**
 * Where the run stands (module doc). `epoch` is in `[base epoch, epochs]` (`epochs`: the run
 * completed); `committed` is sorted, merged and clipped to `[0, epochSamples)`; `lastRound` is -1
 * when no round closed since the first `Base` (and before it, `firstRound - 1`); `unaudited`: the
 * epochs before `epoch` closed without an audit, ascending; `gone` ascending. Ring backend:
 * `generation` is the newest generation recorded (-1 when none), `ringCommitted` the last ring
 * round committed (the `Commit` with a generation and the highest round; `undefined` when none):
 * every member of its generation holds its mean. Unlike `lastRound` it never comes from a `Base`
 * (a takeover's first round is numbered past a round no ring ran).
 *
 * @since 0.1.0
 * @category model
 */
export interface Point {
  readonly epoch: number
  readonly lastRound: number
  readonly committed: ReadonlyArray<readonly [number, number]>
  readonly committedSamples: number
  readonly unaudited: ReadonlyArray<number>
  readonly gone: ReadonlyArray<Rank>
  readonly generation: number
  readonly ringCommitted: { readonly round: number; readonly generation: number } | undefined
}

/**
 * Folds a record into its point (module doc). O(entries + ranges log ranges).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fold = (epochs: number, epochSamples: number, entries: Iterable<Entry>): Point => {
  let base: Extract<Entry, { _tag: "Base" }> = { _tag: "Base", epoch: 0, firstRound: 0, committed: [] }
  const audited = new Set<number>()
  const closed = new Set<number>()
  const commits: Array<Extract<Entry, { _tag: "Commit" }>> = []
  const gone = new Set<Rank>()
  let generation = -1
  for (const entry of entries) {
    if (entry._tag === "Base") base = entry
    else if (entry._tag === "Commit") commits.push(entry)
    else if (entry._tag === "Audited") audited.add(entry.epoch)
    else if (entry._tag === "Closed") closed.add(entry.epoch)
    else if (entry._tag === "Ring") generation = Math.max(generation, entry.generation)
    else gone.add(entry.rank)
  }
  let epoch = Math.max(0, base.epoch)
  while (epoch < epochs && (audited.has(epoch) || closed.has(epoch))) epoch += 1
  // Before the base too: a takeover killed before it wrote the audit lines of its own start.
  const unaudited = [...closed].filter((e) => e < epoch && !audited.has(e)).sort((a, b) => a - b)
  let lastRound = base.firstRound - 1
  let ringCommitted: Point["ringCommitted"]
  const ranges: Array<readonly [number, number]> = epoch === base.epoch ? [...base.committed] : []
  for (const commit of commits) {
    lastRound = Math.max(lastRound, commit.round)
    if (commit.generation !== undefined && commit.round > (ringCommitted?.round ?? -1))
      ringCommitted = { round: commit.round, generation: commit.generation }
    generation = Math.max(generation, commit.generation ?? -1)
    if (commit.epoch === epoch) ranges.push(...commit.ranges)
  }
  const committed = merge(ranges, epochSamples)
  return {
    epoch,
    lastRound,
    committed,
    committedSamples: committed.reduce((sum, [, size]) => sum + size, 0),
    unaudited,
    gone: [...gone].sort((a, b) => a - b),
    generation,
    ringCommitted
  }
}

/** `ranges` clipped to `[0, epochSamples)`, sorted and merged. */
const merge = (ranges: ReadonlyArray<readonly [number, number]>, epochSamples: number): Array<readonly [number, number]> =>
  Audit.complement(Audit.complement(ranges, epochSamples), epochSamples)

/**
 * How many rounds a recovered run skips after the last one committed: rounds up to
 * `lastRound + 1` may have contributions in flight from before the restart (a rank that got the
 * last `Update` contributes to the next round), and the recovered core ignores every `Params` of a
 * round before its first (`State.firstRound`). Its first `Update` (the recovered model) is of round
 * `lastRound + 1`, and its first round `lastRound + 2`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const roundsSkipped = 2

/**
 * The resume point a recovered core starts from (`Coordinator.start`'s `resume`), or `undefined`
 * when the run had completed every epoch. Its ring generation is past every one recorded.
 *
 * @since 0.1.0
 * @category constructors
 */
export const resumeOf = (point: Point, epochs: number): Resume | undefined =>
  point.epoch >= epochs
    ? undefined
    : {
        epoch: point.epoch,
        firstRound: point.lastRound + roundsSkipped,
        committed: point.committed,
        ...(point.generation < 0 ? {} : { generation: point.generation + 1 })
      }
