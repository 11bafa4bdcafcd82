/** Helpers for core tests: build a coordinator, feed inputs, read the commands. */
import { expect } from "vitest"
import type * as Config from "../../src/core/config.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import type { Rank, ToCoordinator, ToRank } from "../../src/core/messages.ts"

export const make = (options: Config.Options, nowMs = 0): Coordinator.State => {
  const state = Coordinator.make(options, nowMs)
  if ("_tag" in state) throw new Error(`invalid options: ${state.option}: ${state.reason}`)
  return state
}

export const frame = (state: Coordinator.State, rank: Rank, nowMs: number, message: ToCoordinator): Array<Coordinator.Command> =>
  Coordinator.step(state, { _tag: "Frame", rank, nowMs, message })

export const tick = (state: Coordinator.State, nowMs: number): Array<Coordinator.Command> =>
  Coordinator.step(state, { _tag: "Tick", nowMs })

export const report = (state: Coordinator.State, rank: Rank, nowMs: number): Array<Coordinator.Command> =>
  Coordinator.step(state, { _tag: "DeathReport", rank, nowMs, cause: { _tag: "Killed", signal: "SIGKILL" } })

export const params = (state: Coordinator.State, rank: Rank, nowMs: number, samplesDone: number, epoch = state.epoch) =>
  frame(state, rank, nowMs, { _tag: "Params", epoch, round: state.round, samplesDone, params: new Float32Array([rank]) })

/** Every delivery the commands imply, broadcasts expanded to the survivors after the step. */
export const deliveries = (state: Coordinator.State, cmds: ReadonlyArray<Coordinator.Command>): Array<readonly [Rank, ToRank]> => {
  const out: Array<readonly [Rank, ToRank]> = []
  for (const cmd of cmds) {
    if (cmd._tag === "Send") out.push([cmd.to, cmd.message])
    else if (cmd._tag === "Broadcast") for (const r of Coordinator.survivors(state)) out.push([r, cmd.message])
    else if (cmd._tag === "SendRanges") {
      cmd.ranks.forEach((to, i) => out.push([to, { _tag: cmd.kind, epoch: cmd.epoch, offset: cmd.offsets[i]!, size: cmd.sizes[i]! }]))
    }
  }
  return out
}

/** `[rank, offset, size]` of every message with the given tag, in command order. */
export const ranges = (
  state: Coordinator.State,
  cmds: ReadonlyArray<Coordinator.Command>,
  tag: "StartEpoch" | "ExtendPartition" | "AssignChunk"
): Array<readonly [Rank, number, number]> =>
  deliveries(state, cmds).flatMap(([to, m]) => (m._tag === tag ? [[to, m.offset, m.size] as const] : []))

export const tags = (cmds: ReadonlyArray<Coordinator.Command>): Array<string> =>
  cmds.flatMap((c) => {
    if (c._tag === "Send" || c._tag === "Broadcast") return [`${c._tag}:${c.message._tag}`]
    if (c._tag === "Alert") return [`Alert:${c.alert.class}`]
    // One tag per slice, so that expectations read like the messages that go out.
    if (c._tag === "SendRanges") return Array.from(c.ranks, () => `Send:${c.kind}`)
    return [c._tag]
  })

/** Keeps every listed rank fresh at `nowMs`. */
export const heartbeat = (state: Coordinator.State, nowMs: number, ranks: ReadonlyArray<Rank>): void => {
  for (const r of ranks) expect(frame(state, r, nowMs, { _tag: "Heartbeat" })).toEqual([])
}
