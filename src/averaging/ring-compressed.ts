/**
 * The ring all-reduce with packed steps (`--compress fp16|int8` on direct links and the relay;
 * docs/edge-averaging.md "Compressed ring steps"). The same reduce-scatter and all-gather as
 * `Ring.allReduce` (its module doc), with every step a packed step (`RingPacked`):
 *
 * - **Changes, not weights.** When every member holds the same committed model (`base`, the
 *   model of the round before this one), each contributes its change from it, and the mean is
 *   `base + mean change`: int8's step is then a fraction of what training moved, not of the
 *   weights. A step says which base it was made against; a member with another fails the
 *   collective (`RingLinkError`) rather than average what does not add up. Without a base (a
 *   fresh run's first round, when each rank holds its own initial model) whole values travel.
 * - **Error feedback.** A rank packs each segment once a round: its partial sums in
 *   reduce-scatter, the finished mean of the segment it owns for the all-gather. What packing
 *   dropped (for the mean, times its contribution count: the sum it stands for) is this rank's
 *   new residual, added to its next contribution, so that nothing is lost over rounds.
 * - **Identical results.** The owner packs its segment's mean once, and every member, the owner
 *   included, stores `base + unpack(bytes)` of those same bytes: every member ends with the same
 *   float32 values.
 *
 * Like `Ring.allReduce` it works on copies: an interrupted collective changes nothing, and the
 * new residual is returned with the mean, for the caller to keep once the round is committed.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Packed from "../wire/packed.ts"
import * as Ring from "./ring.ts"
import * as RingPacked from "./ring-packed.ts"

/**
 * How a rank packs its steps: `compression`, the int8 `block` (default `Packed.blockDefault`),
 * the committed model every member holds (`base`: its round and values; `undefined` sends whole
 * values) and what packing dropped last round (`residual`, one value a parameter; `undefined`:
 * zeros).
 *
 * @since 0.1.0
 * @category model
 */
export interface Codec {
  readonly compression: Exclude<Packed.Compression, "none">
  readonly block?: number
  readonly base: { readonly round: number; readonly values: Float32Array } | undefined
  readonly residual: Float32Array | undefined
}

const mod = (a: number, n: number): number => ((a % n) + n) % n

/** This rank's contribution to `[start, end)`: its change from `base` (or its values) plus its residual, in `into`. */
const own = (into: Float32Array, params: Float32Array, codec: Codec, start: number, end: number, contributes: boolean): void => {
  const base = codec.base?.values
  const residual = codec.residual
  for (let i = start; i < end; i++) {
    const value = contributes ? params[i]! - (base === undefined ? 0 : base[i]!) : 0
    into[i - start] = value + (residual === undefined || !contributes ? 0 : residual[i]!)
  }
}

/** `into[i] += values[i]`, and whether every sum is finite. */
const addFinite = (into: Float32Array, values: Float32Array): boolean => {
  let finite = true
  for (let i = 0; i < into.length; i++) {
    const v = Math.fround(into[i]! + values[i]!)
    into[i] = v
    if (v - v !== 0) finite = false
  }
  return finite
}

/** `dropped[start + i] += scale × (meant[i] - sent[i])`: what a reader of the step will not see. */
const keepDropped = (dropped: Float32Array, start: number, meant: Float32Array, sent: Float32Array, scale: number): void => {
  for (let i = 0; i < meant.length; i++) {
    const lost = scale * (meant[i]! - sent[i]!)
    dropped[start + i]! += Number.isFinite(lost) ? lost : 0
  }
}

/** `out[start + i] = base[start + i] + values[i]` (or the values, without a base), and whether all are finite. */
const storeFinite = (out: Float32Array, start: number, values: Float32Array, base: Float32Array | undefined): boolean => {
  let finite = true
  for (let i = 0; i < values.length; i++) {
    const v = base === undefined ? values[i]! : base[start + i]! + values[i]!
    out[start + i] = v
    if (!Number.isFinite(out[start + i]!)) finite = false
  }
  return finite
}

/** The next packed step of `(generation, round, step)` read as `length` values made against `base`, or the collective's failure. */
const takePacked = (inbox: Ring.RingInbox, collective: Ring.Collective, step: number, length: number, base: number) =>
  Effect.flatMap(inbox.take(collective.generation, collective.round, step), (message) => {
    const fail = (why: string) => Effect.fail(new Ring.RingLinkError(`step ${step}: ${why}`))
    if (!(message.data instanceof Uint8Array)) return fail("carried unpacked values, this ring compresses its steps")
    const read = RingPacked.unpack(message.data, length)
    if (typeof read === "string") return fail(read)
    if (read.base !== base)
      return fail(
        `made against the model of round ${read.base === RingPacked.baseNone ? "none" : read.base}, this rank holds ${base === RingPacked.baseNone ? "none" : base}'s`
      )
    return Effect.succeed({ read, bytes: message.data })
  })

/**
 * The element-wise mean of the contributing ring ranks' `params` for one collective (module doc),
 * with every step packed by `codec`; `contributes` as in `Ring.allReduce`. Returns the mean (a
 * new array, identical on every member) and this rank's new residual. A ring of one returns a
 * copy and the residual unchanged. Fails with `RingLinkError` when a link fails or a neighbour
 * breaks the protocol (a bad packed step, a step made against another base, a value that is not
 * finite). O(length) a round, plus packing.
 *
 * @since 0.1.0
 * @category averaging
 */
export const allReduce = (
  inbox: Ring.RingInbox,
  collective: Ring.Collective,
  params: Float32Array,
  contributes: boolean,
  codec: Codec
): Effect.Effect<{ readonly mean: Float32Array; readonly residual: Float32Array }, Ring.RingLinkError> =>
  Effect.gen(function* () {
    const { ringRank: r, ringSize: n, generation, round } = collective
    const length = params.length
    const residual = contributes || codec.residual === undefined ? new Float32Array(length) : codec.residual.slice()
    if (n <= 1) return { mean: Float32Array.from(params), residual: codec.residual?.slice() ?? residual }
    const ownCount = contributes ? 1 : 0
    const baseRound = codec.base?.round ?? RingPacked.baseNone
    const pack = (count: number, values: Float32Array) => RingPacked.pack(count, baseRound, values, codec.compression, codec.block)
    const out = new Float32Array(length)
    // Reduce-scatter: step 0 sends this rank's own segment r; every later step the partial sum it
    // received with this rank's values added. Each sent segment's packing loss is kept.
    let [start, end] = Ring.segmentOf(length, n, r)
    let sums = new Float32Array(end - start)
    own(sums, params, codec, start, end, contributes)
    let count = ownCount
    for (let step = 0; step < n - 1; step++) {
      const packed = pack(count, sums)
      keepDropped(residual, start, sums, packed.sent, 1)
      yield* inbox.link.send({ generation, round, step, data: packed.bytes })
      ;[start, end] = Ring.segmentOf(length, n, mod(r - step - 1, n))
      const { read } = yield* takePacked(inbox, collective, step, end - start, baseRound)
      if (read.count > step + 1)
        return yield* Effect.fail(
          new Ring.RingLinkError(`step ${step} carried a contribution count of ${read.count}, expected at most ${step + 1}`)
        )
      sums = new Float32Array(end - start)
      own(sums, params, codec, start, end, contributes)
      if (!addFinite(sums, read.values))
        return yield* Effect.fail(new Ring.RingLinkError(`step ${step} carried a value that is not finite`))
      count = read.count + ownCount
    }
    // This rank owns segment (r + 1) mod n: its mean, packed once; everyone stores what it reads back.
    const mean = new Float32Array(sums.length)
    if (count > 0) for (let i = 0; i < mean.length; i++) mean[i] = sums[i]! / count
    else if (codec.base === undefined) mean.set(params.subarray(start, end))
    const finished = pack(count, mean)
    if (count > 0) keepDropped(residual, start, mean, finished.sent, count)
    if (!storeFinite(out, start, finished.sent, codec.base?.values))
      return yield* Effect.fail(new Ring.RingLinkError("this rank's mean of its segment is not finite"))
    // All-gather: each finished segment goes on as the bytes it came in.
    let outgoing: Uint8Array = finished.bytes
    for (let s = 0; s < n - 1; s++) {
      const step = n - 1 + s
      yield* inbox.link.send({ generation, round, step, data: outgoing })
      ;[start, end] = Ring.segmentOf(length, n, mod(r - s, n))
      const { read, bytes } = yield* takePacked(inbox, collective, step, end - start, baseRound)
      if (!storeFinite(out, start, read.values, codec.base?.values))
        return yield* Effect.fail(new Ring.RingLinkError(`step ${step} carried a value that is not finite`))
      outgoing = bytes
    }
    return { mean: out, residual }
  })
