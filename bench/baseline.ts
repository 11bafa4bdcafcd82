/**
 * The baseline: the same static-mode decisions the coordinator core makes, made the way floDl 0.7
 * makes them (reference/flodl-semantics.md §8): a full O(worldSize) staleness scan every tick, and
 * per death an O(worldSize) dead count and an O(worldSize) survivor list, with per-rank extension
 * lists in plain arrays and one message object per slice. It keeps Cohort's fixed semantics
 * (extensions count in the remainder) so that both produce the same messages on the same inputs,
 * and the benches check that they do.
 */

/** An `ExtendPartition` as the baseline produces it: `[rank, offset, size]`. */
export type Extension = readonly [rank: number, offset: number, size: number]

export class FlodlStyle {
  readonly lastSeenMs: Float64Array
  readonly dead: Uint8Array
  readonly committed: Float64Array
  readonly partitionOffset: Float64Array
  readonly partitionSize: Float64Array
  readonly extensions: Array<Array<number> | undefined>
  readonly reports: Array<number> = []
  activeCount: number
  /** Ranks examined by staleness scans (the work a tick does). */
  examined = 0

  constructor(
    readonly worldSize: number,
    readonly epochSamples: number,
    readonly timeoutMs: number,
    nowMs: number
  ) {
    this.lastSeenMs = new Float64Array(worldSize).fill(nowMs)
    this.dead = new Uint8Array(worldSize)
    this.committed = new Float64Array(worldSize)
    this.partitionOffset = new Float64Array(worldSize)
    this.partitionSize = new Float64Array(worldSize)
    this.extensions = new Array(worldSize).fill(undefined)
    this.activeCount = worldSize
    const quotient = Math.floor(epochSamples / worldSize)
    const extra = epochSamples % worldSize
    let offset = 0
    for (let r = 0; r < worldSize; r++) {
      const size = quotient + (r < extra ? 1 : 0)
      this.partitionOffset[r] = offset
      this.partitionSize[r] = size
      offset += size
    }
  }

  heartbeat(rank: number, nowMs: number): void {
    if (this.dead[rank] === 0) this.lastSeenMs[rank] = nowMs
  }

  report(rank: number): void {
    this.reports.push(rank)
  }

  private remainder(rank: number): Array<readonly [number, number]> {
    const entries: Array<readonly [number, number]> = [[this.partitionOffset[rank]!, this.partitionSize[rank]!]]
    const ext = this.extensions[rank]
    if (ext !== undefined) for (let i = 0; i < ext.length; i += 2) entries.push([ext[i]!, ext[i + 1]!])
    const out: Array<readonly [number, number]> = []
    let skip = this.committed[rank]!
    for (const [offset, size] of entries) {
      if (size === 0) continue
      const taken = Math.min(skip, size)
      skip -= taken
      if (size - taken > 0) out.push([offset + taken, size - taken])
    }
    return out
  }

  /** One tick: drain reports, scan every rank for staleness, declare and redistribute. */
  tick(nowMs: number): Array<Extension> {
    const batch: Array<number> = []
    for (const rank of this.reports.splice(0)) if (this.dead[rank] === 0 && !batch.includes(rank)) batch.push(rank)
    for (let r = 0; r < this.worldSize; r++) {
      this.examined += 1
      if (this.dead[r] === 0 && nowMs - this.lastSeenMs[r]! > this.timeoutMs && !batch.includes(r)) batch.push(r)
    }
    const remainders: Array<Array<readonly [number, number]>> = []
    for (const rank of batch) {
      remainders.push(this.remainder(rank))
      this.dead[rank] = 1
      this.activeCount = Math.max(0, this.activeCount - 1)
    }
    if (batch.length === 0) return []
    let deadCount = 0
    for (let r = 0; r < this.worldSize; r++) deadCount += this.dead[r]!
    if (deadCount >= this.worldSize) return []
    const survivors: Array<number> = []
    for (let r = 0; r < this.worldSize; r++) if (this.dead[r] === 0) survivors.push(r)
    const out: Array<Extension> = []
    for (const ranges of remainders) {
      // The ranges laid end to end and cut into one equal part per survivor, a part spanning
      // ranges where it must (so a remainder of k ranges gives at most k + S - 1 slices).
      let total = 0
      for (const [, size] of ranges) total += size
      const quotient = Math.floor(total / survivors.length)
      const extra = total % survivors.length
      let range = 0
      let used = 0
      for (let i = 0; i < survivors.length; i++) {
        let part = quotient + (i < extra ? 1 : 0)
        if (part === 0) break
        const rank = survivors[i]!
        while (part > 0) {
          const [offset, size] = ranges[range]!
          const take = Math.min(part, size - used)
          out.push([rank, offset + used, take])
          const ext = this.extensions[rank] ?? (this.extensions[rank] = [])
          ext.push(offset + used, take)
          part -= take
          used += take
          if (used === size) {
            range += 1
            used = 0
          }
        }
      }
    }
    return out
  }
}
