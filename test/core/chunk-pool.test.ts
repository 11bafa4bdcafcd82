import { describe, expect, it } from "vitest"
import * as ChunkPool from "../../src/core/chunk-pool.ts"

describe("chunk pool (docs/design.md §3.7)", () => {
  it("spans of 70 and 30: rank 1 takes (70,30), steals (50,20) from rank 0's tail; rank 0 then gets (0,50)", () => {
    const pool = ChunkPool.make(0, [70, 30])
    expect(ChunkPool.take(pool, 1, 30)).toEqual({ offset: 70, size: 30 })
    expect(ChunkPool.take(pool, 1, 20)).toEqual({ offset: 50, size: 20 })
    expect(ChunkPool.take(pool, 0, 50)).toEqual({ offset: 0, size: 50 })
    expect(ChunkPool.take(pool, 0, 50)).toBeUndefined()
    expect(ChunkPool.remaining(pool)).toBe(0)
    expect(ChunkPool.isDone(pool)).toBe(false)
    for (const [rank, offset, size] of [
      [1, 70, 30],
      [1, 50, 20],
      [0, 0, 50]
    ] as const) {
      expect(ChunkPool.complete(pool, rank, offset, size)).toBe(true)
    }
    expect(ChunkPool.isDone(pool)).toBe(false) // done but not committed
    const committed: Array<ChunkPool.Range> = []
    ChunkPool.commit(pool, 1, (r) => committed.push(r))
    ChunkPool.commit(pool, 0, (r) => committed.push(r))
    expect(committed).toEqual([
      { offset: 70, size: 30 },
      { offset: 50, size: 20 },
      { offset: 0, size: 50 }
    ])
    expect(ChunkPool.isDone(pool)).toBe(true)
  })

  it("commit with chunksMax commits the first done chunks in completion order and keeps the later ones done; a later commit takes them", () => {
    const pool = ChunkPool.make(0, [30])
    for (let i = 0; i < 3; i++) ChunkPool.take(pool, 0, 10)
    ChunkPool.complete(pool, 0, 10, 10)
    ChunkPool.complete(pool, 0, 0, 10)
    expect(ChunkPool.doneChunks(pool, 0)).toBe(2)
    const committed: Array<ChunkPool.Range> = []
    expect(ChunkPool.commit(pool, 0, (r) => committed.push(r), 1)).toBe(10)
    expect(committed).toEqual([{ offset: 10, size: 10 }])
    ChunkPool.complete(pool, 0, 20, 10)
    expect(ChunkPool.held(pool, 0)).toEqual([
      { offset: 0, size: 10, done: true },
      { offset: 20, size: 10, done: true }
    ])
    expect(ChunkPool.commit(pool, 0, (r) => committed.push(r), 0)).toBe(0)
    expect(ChunkPool.commit(pool, 0, (r) => committed.push(r))).toBe(20)
    expect(committed).toEqual([
      { offset: 10, size: 10 },
      { offset: 0, size: 10 },
      { offset: 20, size: 10 }
    ])
    expect(ChunkPool.isDone(pool)).toBe(true)
  })

  it("forfeit puts (0,25) and (25,25) back in order; a survivor asking for 10 gets (0,10) and (10,15) stays at the front", () => {
    const pool = ChunkPool.make(0, [50, 50])
    expect(ChunkPool.take(pool, 0, 25)).toEqual({ offset: 0, size: 25 })
    expect(ChunkPool.take(pool, 0, 25)).toEqual({ offset: 25, size: 25 })
    expect(ChunkPool.forfeit(pool, 0)).toEqual([
      { offset: 0, size: 25 },
      { offset: 25, size: 25 }
    ])
    expect(ChunkPool.forfeit(pool, 0)).toEqual([])
    expect(ChunkPool.inflight(pool, 0)).toBe(0)
    expect(ChunkPool.take(pool, 1, 10)).toEqual({ offset: 0, size: 10 })
    expect(ChunkPool.reclaimed(pool)).toEqual([
      { offset: 10, size: 15 },
      { offset: 25, size: 25 }
    ])
  })

  it("forfeit returns done-but-uncommitted chunks too, in dispatch order", () => {
    const pool = ChunkPool.make(0, [30])
    ChunkPool.take(pool, 0, 10)
    ChunkPool.take(pool, 0, 10)
    ChunkPool.complete(pool, 0, 0, 10)
    expect(ChunkPool.forfeit(pool, 0)).toEqual([
      { offset: 0, size: 10 },
      { offset: 10, size: 10 }
    ])
    expect(ChunkPool.remaining(pool)).toBe(30)
  })

  it("credits a completion only for an exact chunk the rank holds", () => {
    const pool = ChunkPool.make(0, [20, 20])
    ChunkPool.take(pool, 0, 10)
    expect(ChunkPool.complete(pool, 1, 0, 10)).toBe(false)
    expect(ChunkPool.complete(pool, 0, 0, 5)).toBe(false)
    expect(ChunkPool.complete(pool, 0, 0, 10)).toBe(true)
    expect(ChunkPool.complete(pool, 0, 0, 10)).toBe(false)
  })

  it("rollback returns the last own-span take to the span, anything else to the reclaimed front", () => {
    const pool = ChunkPool.make(0, [20, 20])
    ChunkPool.take(pool, 0, 5)
    ChunkPool.take(pool, 0, 5)
    expect(ChunkPool.rollback(pool, 0, 5, 5)).toBe(true)
    expect(ChunkPool.take(pool, 0, 5)).toEqual({ offset: 5, size: 5 })
    expect(ChunkPool.rollback(pool, 0, 0, 5)).toBe(true) // not the newest: goes to the reclaimed front
    expect(ChunkPool.reclaimed(pool)).toEqual([{ offset: 0, size: 5 }])
    expect(ChunkPool.rollback(pool, 0, 0, 5)).toBe(false) // no longer held
    expect(ChunkPool.take(pool, 1, 8)).toEqual({ offset: 0, size: 5 })
  })

  it("steals from the largest span, ties to the lower rank, and never overlaps the owner", () => {
    const pool = ChunkPool.make(0, [10, 0, 10, 4])
    expect(ChunkPool.take(pool, 1, 3)).toEqual({ offset: 7, size: 3 }) // ranks 0 and 2 tie at 10
    expect(ChunkPool.take(pool, 1, 3)).toEqual({ offset: 17, size: 3 }) // rank 2 now has 10 > 7
    expect(ChunkPool.take(pool, 0, 100)).toEqual({ offset: 0, size: 7 })
    expect(ChunkPool.take(pool, 1, 100)).toEqual({ offset: 10, size: 7 })
    expect(ChunkPool.take(pool, 1, 100)).toEqual({ offset: 20, size: 4 })
    expect(ChunkPool.take(pool, 1, 100)).toBeUndefined()
  })

  it("finds idle ranks through the bitset, skipping retired and busy ones, across word and block edges", () => {
    const pool = ChunkPool.make(0, new Array(3000).fill(1), [5, 1100])
    expect(ChunkPool.nextIdle(pool, 5)).toBe(6)
    for (let r = 0; r < 3000; r++) if (r !== 31 && r !== 2047 && r !== 2999) ChunkPool.take(pool, r, 1)
    expect(ChunkPool.nextIdle(pool, 0)).toBe(31)
    expect(ChunkPool.nextIdle(pool, 32)).toBe(2047)
    expect(ChunkPool.nextIdle(pool, 2048)).toBe(2999)
    expect(ChunkPool.nextIdle(pool, 3000)).toBe(3000)
    ChunkPool.complete(pool, 1024, 1024, 1)
    expect(ChunkPool.nextIdle(pool, 32)).toBe(1024)
    ChunkPool.retire(pool, 1024)
    expect(ChunkPool.nextIdle(pool, 32)).toBe(2047)
  })

  it("admit (docs/growing.md): a retired rank with a vacant index gets the tail half of the largest span; owner and joiner then take their halves, and a thief the joiner's tail", () => {
    const pool = ChunkPool.make(0, [40, 60, 0], [2])
    expect(ChunkPool.nextIdle(pool, 2)).toBe(3) // retired: not idle
    expect(ChunkPool.take(pool, 1, 10)).toEqual({ offset: 40, size: 10 })
    // Rank 1's residue [50, 100) is the largest: the joiner's span is [75, 100).
    expect(ChunkPool.admit(pool, 2)).toBe(25)
    expect([ChunkPool.residue(pool, 1), ChunkPool.residue(pool, 2)]).toEqual([25, 25])
    expect(ChunkPool.nextIdle(pool, 2)).toBe(2)
    expect(ChunkPool.remaining(pool)).toBe(90)
    expect(ChunkPool.take(pool, 2, 10)).toEqual({ offset: 75, size: 10 })
    expect(ChunkPool.take(pool, 1, 30)).toEqual({ offset: 50, size: 25 })
    // Rank 0's residue (40) is now the largest, then the joiner's (15): a thief takes the tails in turn.
    expect(ChunkPool.take(pool, 1, 30)).toEqual({ offset: 10, size: 30 })
    expect(ChunkPool.take(pool, 1, 30)).toEqual({ offset: 85, size: 15 })
    expect(ChunkPool.admit(pool, 2)).toBe(0) // not retired any more: no-op
    expect(ChunkPool.admit(pool, 0)).toBe(0)
  })
})
