import { describe, expect, it } from "vitest"
import type * as Config from "../../src/core/config.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"
import { deliveries, frame, make, tick } from "./harness.ts"

/**
 * Ranks of a progressive cpu run, driven by hand: each holds the chunks the commands gave it, and
 * `train(rank)` reports every chunk it holds done and then contributes.
 */
const cohort = (options: Partial<Config.Options> = {}) => {
  const s = make({
    worldSize: 4,
    epochSamples: 40,
    epochs: 2,
    mode: "progressive",
    chunkSamples: 5,
    chunksInflightMax: 1,
    heartbeatTimeoutMs: 2000,
    blockingSilenceMs: 750,
    ...options
  })
  const held = new Map<Rank, Array<readonly [number, number]>>()
  const asked: Array<readonly [Rank, string]> = []
  const take = (cmds: ReadonlyArray<Coordinator.Command>) => {
    for (const [to, m] of deliveries(s, cmds)) {
      if (m._tag === "AssignChunk") held.set(to, [...(held.get(to) ?? []), [m.offset, m.size]])
      if (m._tag === "Checkpoint" || m._tag === "Eval") asked.push([to, m._tag])
    }
    return cmds
  }
  take(Coordinator.start(s, 0))
  /** `rank` trains what it holds (and the refills) and contributes once it holds nothing. */
  const train = (rank: Rank, nowMs: number): Array<Coordinator.Command> => {
    const out: Array<Coordinator.Command> = []
    const epoch = s.epoch
    while ((held.get(rank) ?? []).length > 0) {
      const [offset, size] = held.get(rank)!.shift()!
      out.push(...take(frame(s, rank, nowMs, { _tag: "ChunkDone", epoch, offset, size })))
    }
    out.push(...take(frame(s, rank, nowMs, { _tag: "Params", epoch, round: s.round, samplesDone: 0, params: Float32Array.of(rank) })))
    return out
  }
  return { s, held, asked, take, train }
}

describe("a rank asked for a call at an epoch's end, then silent, never stands the run still", () => {
  it("the checkpoint and eval holder that went silent after a frame sent past the ask: the next epoch trains and ends without it", () => {
    const { s, held, asked, take, train } = cohort({ roundStallMs: 60_000 })
    // Epoch 0: every rank trains its share; the last contribution ends the epoch.
    let t = 10
    while (s.epoch === 0) for (const rank of [0, 1, 2, 3]) if (s.epoch === 0) train(rank, (t += 10))
    const holder = s.roles.checkpoint
    expect(asked).toContainEqual([holder, "Checkpoint"])
    expect(asked).toContainEqual([holder, "Eval"])
    // The holder's frame arrives after the ask (a beat it sent as it started the save, or one in
    // flight), and then nothing: it left silently (a sleeping laptop, a cut link) mid-save.
    take(frame(s, holder, (t += 5), { _tag: "Heartbeat" }))
    const others = [0, 1, 2, 3].filter((r) => r !== holder)
    // The others train on; the holder never contributes.
    for (let i = 0; i < 200 && s.phase === "running"; i++) {
      t += 50
      for (const rank of others) if ((held.get(rank) ?? []).length > 0) train(rank, t)
      for (const rank of others) take(frame(s, rank, t, { _tag: "Heartbeat" }))
      take(tick(s, t))
    }
    // 10 s after the ask: epoch 1 is trained and audited without the silent holder, and the run
    // did not stop at roundStallMs.
    expect(t).toBeLessThan(20_000)
    expect(s.summaries.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([
      [0, 40, 0, 0],
      [1, 40, 0, 0]
    ])
    expect(s.phase).toBe("completed")
  })

  it("the saving rank takes no chunk of the next epoch until its checkpoint's result; then it is filled at once", () => {
    const { s, held, take, train } = cohort()
    let t = 10
    while (s.epoch === 0) for (const rank of [0, 1, 2, 3]) if (s.epoch === 0) train(rank, (t += 10))
    const holder = s.roles.checkpoint
    expect(held.get(holder) ?? []).toEqual([])
    for (const rank of [0, 1, 2, 3]) if (rank !== holder) expect(held.get(rank)?.length).toBe(1)
    take(frame(s, holder, (t += 5), { _tag: "Heartbeat" }))
    const after = take(frame(s, holder, (t += 5), { _tag: "CheckpointResult", version: 0, ok: true, detail: "v0" }))
    expect(
      deliveries(s, after)
        .filter(([, m]) => m._tag === "AssignChunk")
        .map(([to]) => to)
    ).toEqual([holder])
    expect(s.evalsUnanswered).toBe(true) // it answered the checkpoint asked after the eval, not the eval
  })
})
