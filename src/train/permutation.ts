/**
 * The seeded per-epoch permutation of sample indices (docs/design.md §1 "epoch", §3 "randomness as a
 * seed"). The coordinator plans over positions `[0, epochSamples)` of this permutation; a rank
 * maps the positions of its partitions, extensions and chunks to dataset indices with it.
 *
 * Algorithm: a Fisher–Yates shuffle driven by pure-rand's `xoroshiro128+` generator and its
 * unbiased `uniformInt` distribution, seeded with an integer mix of `(seed, epoch)` so that every
 * epoch of every run seed gets its own stream.
 * Deterministic on Node, Bun and Deno alike.
 *
 * Lives in `src/train` rather than `src/core` because `src/core` imports nothing outside itself,
 * and the PRNG comes from a library.
 *
 * @since 0.1.0
 */
import { uniformInt } from "pure-rand/distribution/uniformInt"
import { xoroshiro128plus } from "pure-rand/generator/xoroshiro128plus"

/**
 * Mixes a run seed and an epoch into one 32-bit generator seed (a 32-bit integer hash in the
 * style of MurmurHash3's finalizer). O(1).
 *
 * @since 0.1.0
 * @category permutation
 */
export const epochSeed = (seed: number, epoch: number): number => {
  let h = (seed ^ Math.imul(epoch + 1, 0x9e3779b1)) | 0
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) | 0
}

/**
 * The permutation of `[0, samples)` for `(seed, epoch)`: `result[position]` is the dataset index
 * trained at that position. `samples` is a non-negative safe integer below 2^32. O(samples).
 *
 * @since 0.1.0
 * @category permutation
 */
export const permutation = (seed: number, epoch: number, samples: number): Uint32Array => {
  const order = new Uint32Array(samples)
  for (let i = 0; i < samples; i++) order[i] = i
  const rng = xoroshiro128plus(epochSeed(seed, epoch))
  for (let i = samples - 1; i > 0; i--) {
    const j = uniformInt(rng, 0, i)
    const t = order[i]!
    order[i] = order[j]!
    order[j] = t
  }
  return order
}
