/**
 * The `ring` averaging backend's collective: ring all-reduce of one round's parameters between the
 * ranks of a ring generation, reduce-scatter then all-gather (docs/design.md §1 "averaging backend",
 * §3.2 "abort in-flight collectives").
 *
 * The vector is cut into `ringSize` segments (`segmentOf`). In reduce-scatter step `s`
 * (`0 <= s < ringSize - 1`) ring rank `r` sends its partial sum of segment `(r - s) mod n` to the
 * next rank and adds the previous rank's partial sum of segment `(r - s - 1) mod n` into its own;
 * after `n - 1` steps it holds the whole sum of segment `(r + 1) mod n`, which it divides by the
 * number of contributions and rounds once to float32. In all-gather step `s` it sends the finished segment `(r + 1 - s) mod n`
 * and stores the received segment `(r - s) mod n`. Each rank sends `2 (n - 1)` messages of about
 * `length / n` values, whatever the ring size.
 *
 * Contributions: a ring member that trained nothing since its last round (an idle rank that only
 * keeps the ring whole) takes part with `contributes: false`: it adds nothing to the sums, so the
 * mean is that of the members that trained, with equal weights, as the `cpu` backend's mean of the
 * round's contributors. Each reduce-scatter message's `data` therefore holds the segment's partial
 * sum followed by one more value, the number of contributions folded into it (exact in float64).
 * When no member contributes, each segment is its owner's own values: the members all hold the
 * last average then, so the result is that average.
 *
 * Accumulation order, stated for the tests: partial sums travel as float64 (`Float64Array`), each
 * segment's sum is taken in ring order starting at the rank after its owner, and is divided and
 * rounded to float32 once. The result is therefore the float32 rounding of a float64 sum of the
 * contributions; the `cpu` backend (`Cpu.mean`) rounds a float64 sum taken in contribution order,
 * so the two agree exactly unless a float64 sum's rounding differs by order, and then by at most
 * one float32 unit in the last place.
 *
 * Generations: every message carries `(generation, round, step)`. A collective never waits on a
 * dead neighbour until a time-out: the caller interrupts it (`DeclareDead`, a newer `FormRing`), and
 * an interrupted collective changes nothing the caller holds, because it works on copies and
 * returns the mean only when every step completed. Messages of an older generation or round are
 * dropped as they arrive; those of a newer one wait (`RingInbox`) for the collective they belong to.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Finite from "./finite.ts"
import * as RingLoops from "./ring-loops.ts"
import * as RingPacked from "./ring-packed.ts"

/**
 * One message between ring neighbours: `data` is a float64 partial sum (reduce-scatter,
 * `step < ringSize - 1`) or a float32 finished segment (all-gather); with `--compress`, a packed
 * step (`RingPacked`, `RingCompressed.allReduce`) in either phase.
 *
 * @since 0.1.0
 * @category model
 */
export interface RingMessage {
  readonly generation: number
  readonly round: number
  readonly step: number
  readonly data: Float64Array | Float32Array | Uint8Array
}

/**
 * A link failed: the neighbour's channel closed or a send was refused. The caller treats it as the
 * collective's abort; the coordinator learns of the death from its own detectors.
 *
 * @since 0.1.0
 * @category errors
 */
export class RingLinkError extends Error {
  readonly _tag = "RingLinkError"
}

/**
 * A collective's view of its two neighbours. `send` delivers to the next ring rank and must keep
 * the order of sends; the sender gives up the message's `data` (a link may transfer its buffer or
 * reuse it), and `allReduce` never touches data it sent. `receive` takes the next message from the
 * previous ring rank, in the order sent; the receiver owns its `data` (`allReduce` adds into it and
 * forwards it). Worker threads implement it over `MessageChannel` ports, hosts over WebSocket links.
 *
 * @since 0.1.0
 * @category model
 */
export interface PeerLink {
  readonly send: (message: RingMessage) => Effect.Effect<void, RingLinkError>
  readonly receive: Effect.Effect<RingMessage, RingLinkError>
}

/**
 * Who takes part: this rank's position `ringRank` in `[0, ringSize)`, the ring's `generation` and
 * the averaging `round`.
 *
 * @since 0.1.0
 * @category model
 */
export interface Collective {
  readonly ringRank: number
  readonly ringSize: number
  readonly generation: number
  readonly round: number
}

/**
 * A `PeerLink` whose receiving side is fed by `push` from whatever carries the neighbour's
 * messages (the coordinator's relay, a `MessageChannel` port's listener): it keeps them, in
 * order, until a collective takes them, at most `bufferMax` (the oldest dropped first and counted
 * in `overflow`). An interrupted `receive` loses nothing: a message leaves the buffer only inside
 * the taking fiber. `fail` ends the link (the port closed): pending and later `receive`s fail.
 *
 * @since 0.1.0
 * @category model
 */
export class BufferedLink implements PeerLink {
  private readonly buffer: Array<RingMessage> = []
  private waiter: Deferred.Deferred<void> | undefined
  private failure: RingLinkError | undefined
  /** Messages dropped because `bufferMax` were already held. */
  overflow = 0

  constructor(
    readonly send: (message: RingMessage) => Effect.Effect<void, RingLinkError>,
    readonly bufferMax: number = aheadMessagesMaxDefault
  ) {}

  /** Hands the neighbour's next message to the link. */
  push(message: RingMessage): void {
    if (this.buffer.length >= this.bufferMax) {
      this.buffer.shift()
      this.overflow += 1
    }
    this.buffer.push(message)
    this.wake()
  }

  /** Ends the link: every `receive` from now on fails with `error`. */
  fail(error: RingLinkError): void {
    this.failure ??= error
    this.wake()
  }

  /** The messages held and not yet received, oldest first. */
  get pending(): ReadonlyArray<RingMessage> {
    return this.buffer
  }

  readonly receive: Effect.Effect<RingMessage, RingLinkError> = Effect.suspend(() => {
    const next = this.buffer.shift()
    if (next !== undefined) return Effect.succeed(next)
    if (this.failure !== undefined) return Effect.fail(this.failure)
    this.waiter ??= Deferred.makeUnsafe<void>()
    return Effect.flatMap(Deferred.await(this.waiter), () => this.receive)
  })

  private wake(): void {
    const waiter = this.waiter
    this.waiter = undefined
    if (waiter !== undefined) Deferred.doneUnsafe(waiter, Effect.void)
  }
}

/** Default bound on messages of later collectives kept while one runs. @since 0.1.0 @category limits */
export const aheadMessagesMaxDefault = 1024

/**
 * The receiving side of a `PeerLink` across collectives: drops messages of older collectives,
 * keeps (at most `aheadMessagesMax`, the oldest dropped first) those of newer ones for later, and
 * counts both. One per rank, reused for every collective.
 *
 * @since 0.1.0
 * @category model
 */
export class RingInbox {
  private readonly ahead: Array<RingMessage> = []
  /** Messages of an older generation or round, dropped. */
  stale = 0
  /** Messages of a newer collective dropped because `aheadMessagesMax` were already kept. */
  overflow = 0

  /**
   * Buffers of the last steps a collective received and did not forward: the next collective
   * writes its own first steps into them instead of allocating (`allReduce`). At most
   * `sparesMax`; each is the receiver's own (`PeerLink`).
   */
  private readonly spares: Array<ArrayBuffer> = []

  constructor(
    readonly link: PeerLink,
    readonly aheadMessagesMax: number = aheadMessagesMaxDefault
  ) {}

  /** Keeps the buffer under `data`, a received step's values nothing uses any more, for `spare`. */
  keep(data: ArrayBufferView): void {
    if (data.buffer instanceof ArrayBuffer && data.byteOffset === 0 && this.spares.length < sparesMax) this.spares.push(data.buffer)
  }

  /**
   * A kept buffer of at least `bytes` and less than twice that (the smallest such), taken from
   * the spares; `undefined` when none fits.
   */
  spare(bytes: number): ArrayBuffer | undefined {
    let best = -1
    for (let i = 0; i < this.spares.length; i++) {
      const size = this.spares[i]!.byteLength
      if (size >= bytes && size < 2 * bytes && (best < 0 || size < this.spares[best]!.byteLength)) best = i
    }
    return best < 0 ? undefined : this.spares.splice(best, 1)[0]
  }

  /**
   * The message for `step` of collective `(generation, round)`. Messages arrive in step order from
   * one neighbour, so the next message of the collective is the one wanted; a different step is a
   * protocol error of the neighbour (`RingLinkError`).
   */
  take(generation: number, round: number, step: number): Effect.Effect<RingMessage, RingLinkError> {
    return Effect.suspend(() => {
      const kept = this.ahead.findIndex((m) => m.generation === generation && m.round === round)
      if (kept >= 0) return Effect.succeed(this.ahead.splice(kept, 1)[0]!)
      // Anything kept for an older collective can never be used now.
      this.dropOlder(generation, round)
      return Effect.flatMap(this.link.receive, (message) => this.sort(message, generation, round, step))
    })
  }

  /**
   * Whether a message of collective `(generation, round)` is kept here (it arrived while an
   * earlier collective ran). With `pending`, the messages the link holds but has not delivered
   * yet are searched too. A rank with no work left uses it to join its neighbours' collective.
   */
  holds(generation: number, round: number, pending: Iterable<RingMessage> = []): boolean {
    for (const m of this.ahead) if (m.generation === generation && m.round === round) return true
    for (const m of pending) if (m.generation === generation && m.round === round) return true
    return false
  }

  private sort(message: RingMessage, generation: number, round: number, step: number): Effect.Effect<RingMessage, RingLinkError> {
    const order = compare(message, generation, round)
    if (order < 0) {
      this.stale += 1
      return this.take(generation, round, step)
    }
    if (order > 0) {
      if (this.ahead.length >= this.aheadMessagesMax) {
        this.ahead.shift()
        this.overflow += 1
      }
      this.ahead.push(message)
      return this.take(generation, round, step)
    }
    if (message.step !== step) {
      return Effect.fail(new RingLinkError(`expected step ${step} of round ${round} (generation ${generation}), got step ${message.step}`))
    }
    return Effect.succeed(message)
  }

  private dropOlder(generation: number, round: number): void {
    for (let i = this.ahead.length - 1; i >= 0; i--) {
      if (compare(this.ahead[i]!, generation, round) < 0) {
        this.ahead.splice(i, 1)
        this.stale += 1
      }
    }
  }
}

/** Buffers a `RingInbox` keeps for the next collective's own steps: a reduce-scatter and an all-gather step's. */
const sparesMax = 2

const compare = (message: RingMessage, generation: number, round: number): number =>
  message.generation !== generation ? message.generation - generation : message.round - round

/**
 * Segment `index` of `n` over a vector of `length` values: `[start, end)`, the first
 * `length mod n` segments one value longer. O(1).
 *
 * @since 0.1.0
 * @category averaging
 */
export const segmentOf = (length: number, n: number, index: number): readonly [start: number, end: number] => {
  const quotient = Math.floor(length / n)
  const extra = length % n
  const start = index * quotient + Math.min(index, extra)
  return [start, start + quotient + (index < extra ? 1 : 0)]
}

const mod = (a: number, n: number): number => ((a % n) + n) % n

/** The largest finite float32, `(2 - 2^-23) 2^127`. */
const float32Max = 3.4028234663852886e38

/** Whether every value is finite (no NaN, no infinity). */
const allFinite = (data: Float64Array | Float32Array): boolean => {
  for (let i = 0; i < data.length; i++) if (!Number.isFinite(data[i]!)) return false
  return true
}

/**
 * Whether `params` can be a contribution: every value finite. A rank whose parameters are not
 * (its training diverged) takes part with `contributes: false`, as the `cpu` backend leaves
 * non-finite parameters out of its mean (`BadParams`). O(length), with SIMD for a vector from
 * `Finite.alloc` (`Finite` module doc).
 *
 * @since 0.1.0
 * @category averaging
 */
export const isContribution = (params: Float32Array): boolean => Finite.allFinite(params)

/**
 * The first step number of a file area round's tokens (`FileAllReduce`: step `tokenStepBase + s`
 * for `s` in `[0, ringSize - 1)`, each one float64 value, 0, 1 or 2): far above any data step
 * (`2 (ringSize - 1)` of them), so a token is never taken for one. Defined here, beside
 * `checkStep` and `RelayOrder`, which the coordinator's relay applies to tokens too.
 *
 * @since 0.1.0
 * @category model
 */
export const tokenStepBase = 0x4000_0000

/** What a token step says is wrong with it, or `undefined` (`tokenStepBase`). */
const checkToken = (message: RingMessage, n: number): string | undefined => {
  const { step, data } = message
  if (step >= tokenStepBase + n - 1) return `token step ${step - tokenStepBase} past the last (${n - 2}) of a ring of ${n}`
  const value = data instanceof Float64Array && data.length === 1 ? data[0] : undefined
  return value === 0 || value === 1 || value === 2 ? undefined : `token step ${step - tokenStepBase} did not carry one token value`
}

/**
 * What is wrong with ring step `message` sent by ring rank `ringRank` of a ring of `ringSize`
 * over `length` parameters, or `undefined` when it is a step `allReduce` sends: `step` below
 * `2 (ringSize - 1)`; a reduce-scatter step a `Float64Array` of the sent segment's length plus
 * one, whose last value (the contribution count) is an integer in `[0, step + 1]` and whose sums
 * are each at most that count times the largest float32 in magnitude (0 with no contribution: a
 * larger finite sum would make its owner's mean infinite and fail that honest rank); an all-gather
 * step a `Float32Array` of the sent segment's length; every value finite. The coordinator's relay
 * checks each step it forwards with it, so that a rank that breaks the protocol is closed, not the
 * honest neighbour its step would have failed. A file area's token (`tokenStepBase`) is one value,
 * 0, 1 or 2, of a token step below `tokenStepBase + ringSize - 1`. O(segment length).
 *
 * @since 0.1.0
 * @category averaging
 */
export const checkStep = (
  message: RingMessage,
  shape: { readonly ringRank: number; readonly ringSize: number; readonly length: number }
): string | undefined => {
  const { ringRank: r, ringSize: n, length } = shape
  const { step, data } = message
  if (n < 2) return "a ring of one sends no step"
  if (step >= tokenStepBase) return checkToken(message, n)
  if (step >= 2 * (n - 1)) return `step ${step} past the last step (${2 * (n - 1) - 1}) of a ring of ${n}`
  if (data instanceof Uint8Array) return checkPacked(data, step, r, n, length)
  if (step < n - 1) {
    if (!(data instanceof Float64Array)) return `reduce-scatter step ${step} carried float32 values, expected float64 sums`
    const [start, end] = segmentOf(length, n, mod(r - step, n))
    if (data.length !== end - start + 1) return `step ${step} carried ${data.length} values, expected ${end - start + 1}`
    const count = data[end - start]!
    if (!Number.isInteger(count) || count < 0 || count > step + 1)
      return `step ${step} carried a contribution count of ${count}, expected an integer in [0, ${step + 1}]`
    // A sum of `count` float32 values is at most `count` times the largest float32 in magnitude (0
    // for no contribution); a larger finite sum would divide into an infinite mean at its owner,
    // whose all-gather step would then fail the honest rank instead of this one.
    const bound = count * float32Max
    for (let i = 0; i < end - start; i++) {
      const v = data[i]!
      if (v > bound || v < -bound)
        return Number.isFinite(v)
          ? `step ${step} carried a partial sum of ${v}, beyond ${count} float32 contributions`
          : `step ${step} carried a value that is not finite`
    }
  } else {
    if (!(data instanceof Float32Array)) return `all-gather step ${step} carried float64 values, expected a float32 segment`
    const [start, end] = segmentOf(length, n, mod(r + 1 - (step - (n - 1)), n))
    if (data.length !== end - start) return `step ${step} carried ${data.length} values, expected ${end - start}`
  }
  return allFinite(data) ? undefined : `step ${step} carried a value that is not finite`
}

/** `checkStep` for a packed step (`RingPacked`): its segment's length, its count, finite values. */
const checkPacked = (data: Uint8Array, step: number, r: number, n: number, length: number): string | undefined => {
  const gather = step >= n - 1
  const [start, end] = segmentOf(length, n, gather ? mod(r + 1 - (step - (n - 1)), n) : mod(r - step, n))
  const read = RingPacked.unpack(data, end - start)
  if (typeof read === "string") return `step ${step}: ${read}`
  if (!gather && read.count > step + 1)
    return `step ${step} carried a contribution count of ${read.count}, expected an integer in [0, ${step + 1}]`
  return allFinite(read.values) ? undefined : `step ${step} carried a value that is not finite`
}

/**
 * The step a sender's next relayed step must be (`RelayOrder`), after its `last` step of the same
 * round (`undefined`: none yet). A file area's round sends its tokens first (`tokenStepBase` on),
 * then, when it falls back, its data steps from 0; a token after a data step of the same round is
 * out of order. A sender with a direct link relays only the steps its link could not take, so its
 * first relayed step (and its first data step after its tokens) may be any.
 */
const expectedStep = (last: number | undefined, step: number, direct: boolean): number => {
  const token = step >= tokenStepBase
  if (last === undefined) return direct ? step : token ? tokenStepBase : 0
  if (last >= tokenStepBase && !token) return direct ? step : 0
  return last + 1
}

/**
 * The order of the steps each sender relays (the coordinator's relay, beside `checkStep`): one
 * sender's steps of the open round in the current generation come in step order from 0, each
 * once, as `allReduce` sends them (in a file area's round, its tokens first, in order from
 * `tokenStepBase`). Anything else breaks the protocol, and forwarding it would fail
 * the honest receiver instead (a repeated step is taken for the next one: `RingInbox.take`) or
 * make it keep steps of a round that never comes (up to `aheadMessagesMaxDefault` of them, each a
 * segment). No honest step is of another round: a member starts round `r + 1`'s collective only
 * after `RoundCommitted{r}`, which the coordinator sends after its round moved on, and a round
 * closes only after every member received every step of it. `check` gives the problem, or
 * `undefined` and records the step. O(1) per step; one entry per sender.
 *
 * `direct`: the sender has a direct link to its next neighbour in this generation. It falls back
 * to the relay for the rest of the collective when that link closes (its neighbour died, or the
 * link broke), so its first relayed step of a collective may be any step: the ones before it went
 * direct. The steps after it come in order as before. Nothing is lost by it: a sender with a
 * direct link can send its receiver anything on it, unchecked.
 *
 * @since 0.1.0
 * @category averaging
 */
export class RelayOrder {
  private readonly last = new Map<number, { generation: number; round: number; step: number }>()

  check(from: number, message: RingMessage, openRound: number, direct = false): string | undefined {
    const { generation, round, step } = message
    if (round !== openRound) return `a step of round ${round}, the open round is ${openRound}`
    const last = this.last.get(from)
    const started = last !== undefined && last.generation === generation && last.round === round
    const expected = expectedStep(started ? last.step : undefined, step, direct)
    if (step !== expected) return `step ${step} of round ${round} out of order, expected step ${expected}`
    if (last === undefined) this.last.set(from, { generation, round, step })
    else {
      last.generation = generation
      last.round = round
      last.step = step
    }
    return undefined
  }
}

/**
 * The element-wise mean of the contributing ring ranks' `params` for one collective, as float32:
 * runs the reduce-scatter and all-gather steps over `inbox` (module doc). `contributes` (default
 * true) says whether this rank's `params` count in the mean; a rank that trained nothing since its
 * last round passes false. `params` is only read; the result is written into `into` when it is
 * given with `params`'s length (the caller's own buffer, which nothing else reads meanwhile; an
 * aborted collective leaves it partly written), else into a new array. A ring of one returns a
 * copy at once. Fails with `RingLinkError` when a link
 * fails or a neighbour breaks the protocol; interrupt it to abort (a death, a newer generation).
 * Every rank must give the same length (the core agreed it at formation).
 *
 * @since 0.1.0
 * @category averaging
 */
export const allReduce = (
  inbox: RingInbox,
  collective: Collective,
  params: Float32Array,
  contributes = true,
  into?: Float32Array
): Effect.Effect<Float32Array, RingLinkError> =>
  Effect.gen(function* () {
    const { ringRank: r, ringSize: n, generation, round } = collective
    const length = params.length
    if (n <= 1) return Float32Array.from(params)
    const own = contributes ? 1 : 0
    const out = into !== undefined && into.length === length ? into : new Float32Array(length)
    const link = inbox.link
    // Reduce-scatter. Step 0 sends this rank's own segment r (widened to float64, with its count);
    // every later step sends the partial sum it just received with this rank's values added in
    // place, so no step allocates or copies beyond what the link itself does.
    const [firstStart, firstEnd] = segmentOf(length, n, r)
    const firstSpare = inbox.spare((firstEnd - firstStart + 1) * 8)
    let outgoing: Float64Array =
      firstSpare === undefined ? new Float64Array(firstEnd - firstStart + 1) : new Float64Array(firstSpare, 0, firstEnd - firstStart + 1)
    if (contributes) RingLoops.widen(outgoing, params, firstStart, firstEnd)
    else if (firstSpare !== undefined) outgoing.fill(0)
    outgoing[firstEnd - firstStart] = own
    for (let step = 0; step < n - 1; step++) {
      yield* link.send({ generation, round, step, data: outgoing })
      const message = yield* inbox.take(generation, round, step)
      const [start, end] = segmentOf(length, n, mod(r - step - 1, n))
      const data = message.data
      if (!(data instanceof Float64Array))
        return yield* Effect.fail(new RingLinkError(`reduce-scatter step ${step} carried float32 values, expected float64 sums`))
      if (data.length !== end - start + 1) {
        return yield* Effect.fail(new RingLinkError(`step ${step} carried ${data.length} values, expected ${end - start + 1}`))
      }
      const count = data[end - start]!
      if (!Number.isInteger(count) || count < 0 || count > step + 1) {
        return yield* Effect.fail(
          new RingLinkError(`step ${step} carried a contribution count of ${count}, expected an integer in [0, ${step + 1}]`)
        )
      }
      if (!RingLoops.addOwnFinite(data, params, start, end, contributes))
        return yield* Effect.fail(new RingLinkError(`step ${step} carried a value that is not finite`))
      data[end - start] = count + own
      outgoing = data
    }
    // The last partial sum received, with this rank's values added, is the whole sum of segment
    // (r + 1) mod n: divide and round once.
    const [ownStart, ownEnd] = segmentOf(length, n, mod(r + 1, n))
    const contributions = outgoing[ownEnd - ownStart]!
    if (contributions === 0) out.set(params.subarray(ownStart, ownEnd), ownStart)
    else RingLoops.divideInto(out, outgoing, ownStart, ownEnd, contributions)
    // The last sum received is this rank's own now (never forwarded): the next collective's.
    inbox.keep(outgoing)
    // All-gather: pass finished segments around the ring; each received segment is forwarded as
    // it came (the link hands over its own copy).
    const finishedSpare = inbox.spare((ownEnd - ownStart) * 4)
    let finished: Float32Array =
      finishedSpare === undefined ? out.slice(ownStart, ownEnd) : new Float32Array(finishedSpare, 0, ownEnd - ownStart)
    if (finishedSpare !== undefined) finished.set(out.subarray(ownStart, ownEnd))
    for (let s = 0; s < n - 1; s++) {
      const step = n - 1 + s
      yield* link.send({ generation, round, step, data: finished })
      const message = yield* inbox.take(generation, round, step)
      const [start, end] = segmentOf(length, n, mod(r - s, n))
      if (message.data instanceof Uint8Array)
        return yield* Effect.fail(new RingLinkError(`all-gather step ${step} carried a packed step, this rank does not compress`))
      if (!(message.data instanceof Float32Array))
        return yield* Effect.fail(new RingLinkError(`all-gather step ${step} carried float64 values, expected a float32 segment`))
      if (message.data.length !== end - start) {
        return yield* Effect.fail(new RingLinkError(`step ${step} carried ${message.data.length} values, expected ${end - start}`))
      }
      if (!RingLoops.storeFinite(out, start, message.data))
        return yield* Effect.fail(new RingLinkError(`step ${step} carried a value that is not finite`))
      finished = message.data
    }
    inbox.keep(finished)
    return out
  })
