/**
 * Liveness: each rank's `lastSeenMs` and its own timeout, kept so that a tick looks only at the
 * ranks that may have expired (docs/design.md §3.1).
 *
 * Two places hold a watched rank:
 *
 * - **The list**: a doubly linked list ordered by last sighting (time never runs backwards inside
 *   the core, so moving a rank to the back on each sighting keeps it sorted). Every rank's timeout
 *   is at least `floorMs`, so a rank at the front silent for `floorMs` or less ends the scan:
 *   nobody behind it can have expired.
 * - **The suspects**: a binary min-heap keyed by deadline, holding the ranks that were silent for
 *   more than `floorMs` when a scan reached them, and the ranks sighted at a past time (`seen`:
 *   the list has no place for them). A rank silent past `floorMs` but before its
 *   deadline (a longer adaptive timeout, or a hold for a save the coordinator asked for) waits
 *   there, and a tick looks only at the heap's expired top.
 *
 * A tick then costs O(1) when nothing new passed `floorMs`, plus O(log s) per rank that did (s
 * suspects; once per silence), plus O(k) for the k expired ranks (and a sort of them). A sighting
 * is O(1) for a rank in the list and O(log s) for a suspect (it leaves the heap for the list's
 * back). With one fixed timeout and no hold, `floorMs` is that timeout and a rank passing it
 * has expired: the list alone does the work, as before.
 *
 * Per-rank timeouts (`Detector`):
 *
 * - `fixed`: every rank's timeout is `timeoutMs` (`heartbeatTimeoutMs`).
 * - `adaptive`: each rank's timeout follows its own gaps between sightings: a smoothed mean and
 *   mean deviation (gains 1/8 and 1/4, the estimator TCP uses for round trips), and the timeout
 *   `mean + deviations * deviation`, clamped to `[floorMs, timeoutMs]`. A link whose frames come
 *   late or in bursts gets a longer timeout, never longer than the fixed one; a steady one gets a
 *   shorter one, never shorter than `floorMs`. Until `samplesMin` gaps were seen it is `timeoutMs`.
 * - `hold(rank, call, id, nowMs, forMs)`: a call the coordinator asked of the rank (a checkpoint's
 *   save, an eval), which a synchronous trainer runs without sending anything. Until it is
 *   `release`d, the rank is not stale before `nowMs + timeoutMs + forMs` (calls held together run
 *   one after the other: each starts its `forMs` where the one before ends). A hold counts only
 *   once the rank was seen after the ask (ranks say so with a frame as they start the call): a
 *   rank that went silent before it read the ask (it left, its link was cut) is judged by its
 *   frames, not held for a call it never started. A rank's deadline is the later of its timeout
 *   after its last sighting and its counted holds; a hold never answered (a trainer without
 *   `evaluate`) simply runs out, and the rank is judged by its frames again.
 *   A `beaten` hold (the rank beats from a thread of its own while it runs the call) postpones
 *   nothing: the rank's beats keep it fresh, and a rank that stops beating (its process stopped
 *   or gone) is stale after its timeout, whatever call it was in. The hold then only names the
 *   call when the rank is declared past its end (`overrun`).
 *
 * Silence is counted only while the coordinator was running: `pause(l, ms)` stops the liveness
 * clock for a stall of the coordinator itself (docs/design.md §3.10). It adds to `pausedMs`, which
 * shifts every sighting and every deadline at once, so a pause is O(1) and no order changes.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"

const NONE = -1
const UNLINKED = -2
/** `prev[r]` of a rank in the suspects' heap; its `next[r]` is then its position in the heap. */
const SUSPECT = -3

/**
 * How ranks' timeouts are set (module doc): `timeoutMs` the upper bound (the fixed timeout),
 * `floorMs` the lower bound (`<= timeoutMs`; with `fixed`, equal to it), `deviations` the
 * multiple of the mean deviation added to the mean gap, `samplesMin` the gaps seen before the
 * adaptive timeout applies. All in ms but the two counts.
 *
 * @since 0.1.0
 * @category model
 */
export interface Detector {
  readonly kind: "fixed" | "adaptive"
  readonly timeoutMs: number
  readonly floorMs: number
  readonly deviations: number
  readonly samplesMin: number
}

/**
 * A detector with one fixed timeout of `timeoutMs` for every rank.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fixed = (timeoutMs: number): Detector => ({ kind: "fixed", timeoutMs, floorMs: timeoutMs, deviations: 0, samplesMin: 0 })

/**
 * A call the coordinator asked of a rank and has no answer for yet: `call` (`save` for a
 * checkpoint, `eval`), `id` (the checkpoint's version, the eval's epoch), `askedAtMs` and
 * `untilMs`, the ask and the end of its hold on the liveness clock (it counts only once the rank
 * was seen after `askedAtMs`), and `passedAtEpoch`: a frame of this epoch or a later one from
 * the rank shows it went past the call (it was asked before the rank entered that epoch; ranks
 * apply the coordinator's messages in order), even if the call sends no answer (`Eval` to a
 * trainer without `evaluate`). `Infinity` when no such epoch is known. `beatsUntilMs`, for a
 * `beaten` hold: the rank sends frames while it runs the call, from a thread that does not run the
 * trainer, up to the call's bound (`forMs` after the call starts, so not before `forMs` after the
 * ask), and the hold does not postpone its deadline (module doc); absent otherwise.
 *
 * @since 0.1.0
 * @category model
 */
export interface Hold {
  readonly call: "save" | "eval"
  readonly id: number
  readonly askedAtMs: number
  readonly untilMs: number
  readonly passedAtEpoch: number
  readonly beatsUntilMs?: number
}

/**
 * - `lastSeenMs[r]`: the last frame from `r`, in monotonic milliseconds minus `pausedMs` at the
 *   time (the liveness clock); read it with `lastSeen`.
 * - `pausedMs`: total ms the liveness clock was paused for coordinator stalls.
 * - `prev`/`next`: list links (`-1` at the ends, `-2` once a rank left, `prev` `-3` while the rank
 *   is a suspect, `next` then being its heap position).
 * - `heap`: the suspects, a min-heap on deadline (ties to the lower rank).
 * - `holds`: the calls held by rank (few: the ranks running a call the coordinator asked for),
 *   `untilMs` on the liveness clock.
 * - `meanGapMs`, `deviationGapMs`, `gaps`, `ownTimeoutMs`: the adaptive detector's estimates
 *   (empty arrays with `fixed`).
 *
 * @since 0.1.0
 * @category model
 */
export interface Liveness {
  readonly detector: Detector
  readonly lastSeenMs: Float64Array
  readonly prev: Int32Array
  readonly next: Int32Array
  head: number
  tail: number
  pausedMs: number
  readonly heap: Array<Rank>
  readonly holds: Map<Rank, Array<Hold>>
  readonly meanGapMs: Float32Array
  readonly deviationGapMs: Float32Array
  readonly gaps: Uint8Array
  readonly ownTimeoutMs: Float32Array
  /** `1` for a rank that beats while it runs a call (`setBeats`): its holds are beaten (`hold`). */
  readonly beats: Uint8Array
  /** Count of entries examined by scans: lets tests count work instead of timing it. */
  examined: number
}

/**
 * Ranks `[0, watched)` seen at `nowMs` (the coordinator's start), listed in rank order; ranks
 * `[watched, worldSize)` (vacant indices of a run that may grow) are not watched until `watch`.
 * `watched` defaults to `worldSize`; `detector` to no timeout at all (`fixed(Infinity)`).
 * O(worldSize).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (worldSize: number, nowMs: number, watched: number = worldSize, detector: Detector = fixed(Infinity)): Liveness => {
  const prev = new Int32Array(worldSize).fill(UNLINKED)
  const next = new Int32Array(worldSize).fill(UNLINKED)
  for (let r = 0; r < watched; r++) {
    prev[r] = r - 1
    next[r] = r + 1 < watched ? r + 1 : NONE
  }
  const adaptive = detector.kind === "adaptive" ? worldSize : 0
  return {
    detector,
    lastSeenMs: new Float64Array(worldSize).fill(nowMs),
    prev,
    next,
    head: watched > 0 ? 0 : NONE,
    tail: watched > 0 ? watched - 1 : NONE,
    pausedMs: 0,
    heap: [],
    holds: new Map(),
    meanGapMs: new Float32Array(adaptive),
    deviationGapMs: new Float32Array(adaptive),
    gaps: new Uint8Array(adaptive),
    ownTimeoutMs: new Float32Array(adaptive).fill(detector.timeoutMs),
    beats: new Uint8Array(worldSize),
    examined: 0
  }
}

/** True while `rank` is watched (neither removed as dead nor as exited). @since 0.1.0 @category queries */
export const isWatched = (l: Liveness, rank: Rank): boolean => l.prev[rank] !== UNLINKED

/**
 * `rank`'s timeout now, in ms: its detector's (module doc); holds come on top (`deadlineOf`).
 *
 * @since 0.1.0
 * @category queries
 */
export const timeoutOf = (l: Liveness, rank: Rank): number =>
  l.detector.kind === "adaptive" ? l.ownTimeoutMs[rank]! : l.detector.timeoutMs

/** The end of `rank`'s latest counted hold (seen since its ask, not beaten), on the liveness clock (`-Infinity` without one). */
const holdUntil = (l: Liveness, rank: Rank): number => {
  let until = -Infinity
  for (const h of l.holds.get(rank) ?? [])
    if (h.beatsUntilMs === undefined && l.lastSeenMs[rank]! > h.askedAtMs) until = Math.max(until, h.untilMs)
  return until
}

const deadline = (l: Liveness, rank: Rank): number => Math.max(l.lastSeenMs[rank]! + timeoutOf(l, rank), holdUntil(l, rank))

/**
 * When `rank` turns stale (ms, the caller's clock, as `nowMs`): the later of its timeout after its
 * last sighting and the end of its holds; stale strictly after it.
 *
 * @since 0.1.0
 * @category queries
 */
export const deadlineOf = (l: Liveness, rank: Rank): number => deadline(l, rank) + l.pausedMs

/**
 * The calls `rank` ran past (`SaveTimeout`, `EvalTimeout`): every call it holds when its holds,
 * not its frames, set its deadline; else its beaten holds, unanswered, whose beats could have run
 * out before its silence turned stale (`Hold.beatsUntilMs`: it beat for the call's whole bound).
 * Empty otherwise.
 *
 * @since 0.1.0
 * @category queries
 */
export const overrun = (l: Liveness, rank: Rank): ReadonlyArray<Hold> => {
  const holds = l.holds.get(rank) ?? []
  const staleMs = l.lastSeenMs[rank]! + timeoutOf(l, rank)
  if (holdUntil(l, rank) > staleMs) return holds
  return holds.filter((h) => h.beatsUntilMs !== undefined && staleMs > h.beatsUntilMs)
}

// --- the list ----------------------------------------------------------------------------------

const detach = (l: Liveness, rank: Rank): void => {
  const p = l.prev[rank]!
  const n = l.next[rank]!
  if (p === NONE) l.head = n
  else l.next[p] = n
  if (n === NONE) l.tail = p
  else l.prev[n] = p
}

const append = (l: Liveness, rank: Rank): void => {
  l.prev[rank] = l.tail
  l.next[rank] = NONE
  if (l.tail === NONE) l.head = rank
  else l.next[l.tail] = rank
  l.tail = rank
}

// --- the suspects' heap ------------------------------------------------------------------------

const before = (l: Liveness, a: Rank, b: Rank): boolean => {
  const da = deadline(l, a)
  const db = deadline(l, b)
  return da < db || (da === db && a < b)
}

const place = (l: Liveness, at: number, rank: Rank): void => {
  l.heap[at] = rank
  l.next[rank] = at
}

const siftUp = (l: Liveness, at: number): void => {
  const rank = l.heap[at]!
  while (at > 0) {
    const parent = (at - 1) >> 1
    const above = l.heap[parent]!
    if (!before(l, rank, above)) break
    place(l, at, above)
    at = parent
  }
  place(l, at, rank)
}

const siftDown = (l: Liveness, at: number): void => {
  const rank = l.heap[at]!
  const size = l.heap.length
  while (true) {
    const left = 2 * at + 1
    if (left >= size) break
    const right = left + 1
    const child = right < size && before(l, l.heap[right]!, l.heap[left]!) ? right : left
    if (!before(l, l.heap[child]!, rank)) break
    place(l, at, l.heap[child]!)
    at = child
  }
  place(l, at, rank)
}

const suspect = (l: Liveness, rank: Rank): void => {
  l.prev[rank] = SUSPECT
  l.heap.push(rank)
  siftUp(l, l.heap.length - 1)
}

/** Takes a suspect out of the heap (its links are left for the caller to set). */
const unsuspect = (l: Liveness, rank: Rank): void => {
  const at = l.next[rank]!
  const last = l.heap.pop()!
  if (last === rank) return
  place(l, at, last)
  siftUp(l, at)
  siftDown(l, l.next[last]!)
}

// --- mutations ---------------------------------------------------------------------------------

/**
 * Starts watching a rank that is not watched (a joiner), seen at `nowMs` (not earlier than any
 * earlier sighting): it goes to the back of the list, with no gaps measured yet. No-op for a
 * watched rank. O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const watch = (l: Liveness, rank: Rank, nowMs: number): void => {
  if (isWatched(l, rank)) return
  append(l, rank)
  l.lastSeenMs[rank] = nowMs - l.pausedMs
  if (l.detector.kind === "adaptive") {
    l.gaps[rank] = 0
    l.ownTimeoutMs[rank] = l.detector.timeoutMs
  }
}

/** The adaptive detector learns one gap between two sightings of `rank` (module doc). */
const learnGap = (l: Liveness, rank: Rank, gapMs: number): void => {
  const d = l.detector
  const seen = l.gaps[rank]!
  if (seen === 0) {
    l.meanGapMs[rank] = gapMs
    l.deviationGapMs[rank] = gapMs / 2
  } else {
    const mean = l.meanGapMs[rank]!
    l.deviationGapMs[rank] = 0.75 * l.deviationGapMs[rank]! + 0.25 * Math.abs(gapMs - mean)
    l.meanGapMs[rank] = 0.875 * mean + 0.125 * gapMs
  }
  if (seen < 255) l.gaps[rank] = seen + 1
  l.ownTimeoutMs[rank] =
    seen + 1 < d.samplesMin
      ? d.timeoutMs
      : Math.min(d.timeoutMs, Math.max(d.floorMs, l.meanGapMs[rank]! + d.deviations * l.deviationGapMs[rank]!))
}

/**
 * Records a sighting of a watched rank at `nowMs` (which must not be earlier than any earlier
 * sighting) and moves it to the list's back. O(1), or O(log s) for a suspect.
 *
 * @since 0.1.0
 * @category mutations
 */
export const touch = (l: Liveness, rank: Rank, nowMs: number): void => {
  if (!isWatched(l, rank)) return
  const clockMs = nowMs - l.pausedMs
  if (l.detector.kind === "adaptive") learnGap(l, rank, Math.max(0, clockMs - l.lastSeenMs[rank]!))
  l.lastSeenMs[rank] = clockMs
  if (l.prev[rank] === SUSPECT) {
    unsuspect(l, rank)
    append(l, rank)
    return
  }
  if (l.tail === rank) return
  detach(l, rank)
  append(l, rank)
}

/** Moves a suspect whose deadline changed to its place in the heap. */
const reposition = (l: Liveness, rank: Rank): void => {
  if (l.prev[rank] !== SUSPECT) return
  siftUp(l, l.next[rank]!)
  siftDown(l, l.next[rank]!)
}

/**
 * Records a sighting of a watched rank at `atMs`, which may be earlier than the caller's clock
 * (bytes of the rank that a transport received before the caller asked, `Seen`): its last
 * sighting becomes the later of the two, so its silence counts from `atMs`, never from the time
 * of asking. A sighting no later than the last one changes nothing. The rank goes to the
 * suspects' heap (a list ordered by sighting has no place for a past one), or to the list's back
 * when `atMs` is not earlier than the latest sighting there. O(log s).
 *
 * @since 0.1.0
 * @category mutations
 */
export const seen = (l: Liveness, rank: Rank, atMs: number): void => {
  if (!isWatched(l, rank)) return
  const clockMs = atMs - l.pausedMs
  if (!(clockMs > l.lastSeenMs[rank]!)) return
  if (l.prev[rank] !== SUSPECT && (l.tail === rank || clockMs >= l.lastSeenMs[l.tail]!)) return touch(l, rank, atMs)
  if (l.detector.kind === "adaptive") learnGap(l, rank, clockMs - l.lastSeenMs[rank]!)
  if (l.prev[rank] === SUSPECT) {
    l.lastSeenMs[rank] = clockMs
    reposition(l, rank)
    return
  }
  detach(l, rank)
  l.lastSeenMs[rank] = clockMs
  suspect(l, rank)
}

/**
 * Holds `rank` for a call asked of it at `nowMs` that may run `forMs` (module doc): once it is
 * seen after `nowMs`, it is not stale before `nowMs + timeoutMs + forMs`, or `forMs` after the end
 * of the calls it holds already; `passedAtEpoch` as in `Hold`. With `beaten` the hold only records
 * the bound (the rank beats while it runs the call: `Hold.beatsUntilMs`). Holds that ran out are
 * dropped. No-op for a rank not watched. O(holds + log s).
 *
 * @since 0.1.0
 * @category mutations
 */
export const hold = (
  l: Liveness,
  rank: Rank,
  call: Hold["call"],
  id: number,
  nowMs: number,
  forMs: number,
  passedAtEpoch: number = Infinity,
  beaten: boolean = false
): void => {
  if (!isWatched(l, rank)) return
  const clockMs = nowMs - l.pausedMs
  const kept = (l.holds.get(rank) ?? []).filter((h) => h.untilMs >= clockMs)
  const startMs = Math.max(clockMs + l.detector.timeoutMs, ...kept.map((h) => h.untilMs))
  kept.push({
    call,
    id,
    askedAtMs: clockMs,
    untilMs: startMs + forMs,
    passedAtEpoch,
    ...(beaten ? { beatsUntilMs: clockMs + forMs } : {})
  })
  l.holds.set(rank, kept)
  reposition(l, rank)
}

/**
 * Ends `rank`'s hold for the call `(call, id)` (its answer came). No-op without one. O(holds + log s).
 *
 * @since 0.1.0
 * @category mutations
 */
export const release = (l: Liveness, rank: Rank, call: Hold["call"], id: number): void =>
  void releaseWhere(l, rank, (h) => h.call === call && h.id === id)

/**
 * Ends `rank`'s holds that a frame of `epoch` shows it went past (`Hold.passedAtEpoch`); returns
 * them. O(1) for a rank without holds.
 *
 * @since 0.1.0
 * @category mutations
 */
export const passed = (l: Liveness, rank: Rank, epoch: number): ReadonlyArray<Hold> =>
  releaseWhere(l, rank, (h) => h.passedAtEpoch <= epoch)

/**
 * Ends `rank`'s holds for which `done` is true; returns the holds ended. O(holds + log s).
 *
 * @since 0.1.0
 * @category mutations
 */
export const releaseWhere = (l: Liveness, rank: Rank, done: (h: Hold) => boolean): ReadonlyArray<Hold> => {
  const holds = l.holds.get(rank)
  if (holds === undefined) return []
  const kept = holds.filter((h) => !done(h))
  if (kept.length === holds.length) return []
  if (kept.length === 0) l.holds.delete(rank)
  else l.holds.set(rank, kept)
  reposition(l, rank)
  return holds.filter(done)
}

/**
 * Pauses the liveness clock for `ms` (a stall of the coordinator): every watched rank's silence
 * stops growing for that long. O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const pause = (l: Liveness, ms: number): void => {
  if (ms > 0 && Number.isFinite(ms)) l.pausedMs += ms
}

/**
 * How long `rank` has been silent at `nowMs`, in ms, not counting pauses.
 *
 * @since 0.1.0
 * @category queries
 */
export const silentMs = (l: Liveness, rank: Rank, nowMs: number): number => nowMs - l.pausedMs - l.lastSeenMs[rank]!

/** Stops watching a rank (it died or exited). O(1), or O(log s) for a suspect. @since 0.1.0 @category mutations */
export const unwatch = (l: Liveness, rank: Rank): void => {
  if (!isWatched(l, rank)) return
  if (l.prev[rank] === SUSPECT) unsuspect(l, rank)
  else detach(l, rank)
  l.prev[rank] = UNLINKED
  l.next[rank] = UNLINKED
  l.holds.delete(rank)
  l.beats[rank] = 0
}

/**
 * Marks whether `rank` beats from a thread of its own while it runs a call the coordinator asked
 * for (its link to beat on is up, or went down): the calls asked of it from now on get beaten
 * holds (`hold`) or counted ones. Holds it has already keep their kind. Also before the rank is
 * watched (a joiner's link may be up before the core admits it); `unwatch` clears the mark.
 * O(1).
 *
 * @since 0.1.0
 * @category mutations
 */
export const setBeats = (l: Liveness, rank: Rank, on: boolean): void => {
  if (rank >= 0 && rank < l.beats.length) l.beats[rank] = on ? 1 : 0
}

/** Whether `rank` is marked as beating during calls (`setBeats`). @since 0.1.0 @category queries */
export const beats = (l: Liveness, rank: Rank): boolean => l.beats[rank] === 1

/** Moves the list's front ranks silent for more than `floorMs` at `clockMs` to the suspects. */
const admitSuspects = (l: Liveness, clockMs: number): void => {
  for (let r = l.head; r !== NONE; r = l.head) {
    l.examined += 1
    if (!(clockMs - l.lastSeenMs[r]! > l.detector.floorMs)) break
    detach(l, r)
    suspect(l, r)
  }
}

/** Pushes onto `out` the suspects in the subtree at `at` whose deadline is before `clockMs`. */
const collectExpired = (l: Liveness, at: number, clockMs: number, out: Array<Rank>): void => {
  if (at >= l.heap.length) return
  l.examined += 1
  const rank = l.heap[at]!
  if (!(clockMs > deadline(l, rank))) return // a heap: no deadline under this one is earlier
  out.push(rank)
  collectExpired(l, 2 * at + 1, clockMs, out)
  collectExpired(l, 2 * at + 2, clockMs, out)
}

/**
 * The watched ranks that are stale at `nowMs` (silent for more than their own timeout, strictly),
 * least recently seen first, ties to the lower rank. Does not unwatch them (ranks silent past
 * `floorMs` move to the suspects, which changes no answer). O(1) when nothing new passed
 * `floorMs`, plus O(log s) per rank that did, plus O(k log k) for k stale ranks (module doc).
 *
 * @since 0.1.0
 * @category queries
 */
export const expired = (l: Liveness, nowMs: number): Array<Rank> => {
  const out: Array<Rank> = []
  const clockMs = nowMs - l.pausedMs
  admitSuspects(l, clockMs)
  collectExpired(l, 0, clockMs, out)
  if (out.length > 1) out.sort((a, b) => l.lastSeenMs[a]! - l.lastSeenMs[b]! || a - b)
  return out
}

/**
 * The watched ranks silent for more than `ms` at `nowMs` (not counting pauses), whatever their
 * own timeouts and holds: the list's front up to the first rank seen within `ms`, and the
 * suspects silent that long. In no set order. Changes nothing. O(k + s) for k such ranks in the
 * list and s suspects.
 *
 * @since 0.1.0
 * @category queries
 */
export const silentBeyond = (l: Liveness, nowMs: number, ms: number): Array<Rank> => {
  const out: Array<Rank> = []
  const clockMs = nowMs - l.pausedMs
  for (let r = l.head; r !== NONE; r = l.next[r]!) {
    l.examined += 1
    if (!(clockMs - l.lastSeenMs[r]! > ms)) break
    out.push(r)
  }
  for (const r of l.heap) if (clockMs - l.lastSeenMs[r]! > ms) out.push(r)
  return out
}
