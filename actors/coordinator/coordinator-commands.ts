/**
 * The coordinator's commands carried out (`coordinator.ts` module doc): each `Core.Command` the
 * core decides goes out here, over `coordinator-inbound.ts`'s `deliver` and `broadcast`; a send
 * the transport refused goes back to the core as `SendFailed`, and an outlier the aggregation
 * found as `Outlier`. The `cpu` backend's averaging (aggregation, outer step, packing) and the
 * ring backend's round commits are here too, with the state they keep between rounds.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Aggregate from "../../src/averaging/aggregate.ts"
import * as Deltas from "../../src/averaging/deltas.ts"
import * as Outer from "../../src/averaging/outer.ts"
import * as Core from "../../src/core/coordinator.ts"
import type { Rank, ToRank } from "../../src/core/messages.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Packed from "../../src/wire/packed.ts"
import type * as CoordinatorInbound from "./coordinator-inbound.ts"
import { observe } from "./coordinator-inbound.ts"
import type { Hooks, Refused } from "./coordinator-inbound.ts"

/**
 * What carrying out the commands reads and keeps beside the core's state: the half of the
 * coordinator shell's state (`coordinator.ts` `Shell`) that its commands write. `options` are
 * the coordinator's `Options` of the same names.
 *
 * @since 0.1.0
 * @category model
 */
export interface CommandShell {
  readonly options: {
    readonly formRingLinks?: (
      generation: number,
      peers: ReadonlyArray<Rank>,
      paramsLength: number | undefined
    ) => ((round: number) => void) | undefined
    readonly compress?: Packed.Compression
    readonly outer?: Outer.Settings
  }
  readonly state: Core.State
  readonly transport: Transport.TransportShape
  readonly hooks: Hooks
  /** Frames in, and the commands' frames out (a ring joiner's held back until its model is out). */
  readonly io: CoordinatorInbound.CoordinatorInbound
  /**
   * The model a joiner is welcomed with: the last closed round's mean (cpu), else the
   * resumed model; `undefined` before either.
   */
  lastModel: { readonly round: number; readonly params: Float32Array } | undefined
  ended: Core.Outcome | undefined
  /** The current ring generation's commit through its shared all-reduce area, when it has one. */
  areaCommit: { readonly generation: number; readonly commit: (round: number) => void } | undefined
  /** Contributions the aggregation found far outside the others: told to the core once the step's commands are out. */
  readonly outliersFound: Array<{ readonly rank: Rank; readonly round: number; readonly detail: string }>
  /** What packing the mean dropped (error feedback: added to the next mean before it is packed). */
  updateResidual: Float32Array | undefined
  /** The outer optimizer's momentum, one value a parameter (its state, saved with each epoch model). */
  outerMomentum: Float32Array | undefined
  /** The averaging traffic when the last round closed: a round's bytes are what came since. */
  roundBytesFrom: { readonly received: number; readonly sent: number }
}

/** A generation's FormRings go out together, ring rank 0 first: its links go just ahead. */
const formRing = (shell: CommandShell, ring: Extract<ToRank, { _tag: "FormRing" }>): void => {
  if (ring.ringRank === 0) observe(() => shell.hooks.beforeRing?.(ring.generation))
  shell.io.ringFormed(ring)
  if (ring.ringRank !== 0) return
  shell.areaCommit = undefined
  observe(() => {
    const commit = shell.options.formRingLinks?.(ring.generation, ring.peers, shell.state.paramsLength)
    if (commit !== undefined) shell.areaCommit = { generation: ring.generation, commit }
  })
}

/**
 * A round's average: confirmed to a ring (in its shared area when it has one), or the cpu
 * average broadcast; then the round's bytes told (`Hooks.onRoundBytes`).
 */
const averageRound = (shell: CommandShell, command: Extract<Core.Command, { _tag: "AverageRound" }>, refused: Array<Refused>): void => {
  if (command.generation !== undefined) {
    // Ring backend: the ranks averaged among themselves; the round is confirmed,
    // in the generation's shared area when it has one (written before any later frame).
    observe(() => shell.hooks.beforeRound?.(command, undefined))
    if (shell.areaCommit?.generation === command.generation) shell.areaCommit.commit(command.round)
    else shell.io.broadcast({ _tag: "RoundCommitted", round: command.round, generation: command.generation }, refused)
  } else {
    averageCpu(shell, command, refused)
  }
  const bytes = shell.io.averagingBytes()
  const round = { received: bytes.received - shell.roundBytesFrom.received, sent: bytes.sent - shell.roundBytesFrom.sent }
  shell.roundBytesFrom = bytes
  observe(() => shell.hooks.onRoundBytes?.(command.round, round))
}

/**
 * `cpu`: combines the round (`Aggregate`: the core left unusable contributions out; with none
 * left, the Update carries no parameters and ranks keep their own), takes the outer step, packs
 * it when asked, and broadcasts it. The model every rank then holds is the unpacked one: it is
 * the one kept.
 */
const averageCpu = (shell: CommandShell, command: Extract<Core.Command, { _tag: "AverageRound" }>, refused: Array<Refused>): void => {
  const combined = Aggregate.combine(command.params, shell.state.config.aggregation, shell.lastModel?.params)
  let params = "_tag" in combined ? new Float32Array(0) : combined.params
  if (!("_tag" in combined)) {
    for (const o of combined.outliers) {
      const detail = `${o.distance.toPrecision(3)} from the coordinate-wise median, ${(o.distance / o.medianDistance).toPrecision(3)} times the median distance ${o.medianDistance.toPrecision(3)}`
      shell.outliersFound.push({ rank: command.paramRanks[o.index]!, round: command.round, detail })
    }
  }
  // The outer step needs the model every rank started the round from: the last one sent.
  const outer = shell.options.outer
  const base = shell.lastModel?.params
  if (Outer.isOn(outer) && base !== undefined && params.length > 0 && params.length === base.length) {
    const stepped = Outer.step(base, params, outer, shell.outerMomentum)
    params = stepped.params
    shell.outerMomentum = stepped.momentum
  }
  const packed = packUpdate(shell, params)
  if (packed !== undefined) params = packed.held
  if (params.length > 0) shell.lastModel = { round: command.round, params }
  observe(() => shell.hooks.beforeRound?.(command, params.length > 0 ? params : shell.lastModel?.params))
  const update =
    packed?.base === undefined
      ? { _tag: "Update" as const, round: command.round, params }
      : { _tag: "Update" as const, round: command.round, params: packed.change, base: packed.base }
  shell.io.broadcast(update, refused, packed?.bytes)
}

/**
 * The round's model packed for its `Update` (`compress` fp16 or int8; `undefined` otherwise or
 * with no model): the change from the model every survivor holds (the last one sent, `lastModel`:
 * each got every Update since, or that model when welcomed), with error feedback, as `bytes`
 * and `base` (its round); or the whole model when there is none yet. `held` is what each rank
 * holds once it applied the bytes (`base`'s model plus the unpacked change, float32 additions as
 * the rank makes them): the model kept, committed and saved. `change` is the unpacked change.
 */
const packUpdate = (
  shell: CommandShell,
  params: Float32Array
):
  | { readonly bytes: Uint8Array; readonly held: Float32Array; readonly change: Float32Array; readonly base: number | undefined }
  | undefined => {
  const compress = shell.options.compress ?? "none"
  if (params.length === 0 || compress === "none") return undefined
  const last = shell.lastModel
  if (last === undefined || last.params.length !== params.length) {
    const out = Packed.withFeedback(params, shell.updateResidual, compress)
    shell.updateResidual = out.residual
    const held = Packed.unpack(out.bytes) as Float32Array
    return { bytes: out.bytes, held, change: held, base: undefined }
  }
  const out = Packed.withFeedback(Deltas.minus(params, last.params), shell.updateResidual, compress)
  shell.updateResidual = out.residual
  const change = Packed.unpack(out.bytes) as Float32Array
  return { bytes: out.bytes, held: Deltas.plus(last.params, change), change, base: last.round }
}

/** Carries out one of the core's commands, at once; sends the transport refused go to `refused`. */
const carryOut = (shell: CommandShell, command: Core.Command, refused: Array<Refused>): void => {
  const { state, transport, hooks, io } = shell
  switch (command._tag) {
    case "Send":
      if (command.message._tag === "FormRing") formRing(shell, command.message)
      io.deliver(command.to, command.message, refused)
      break
    case "Broadcast":
      io.broadcast(command.message, refused)
      break
    case "SendRanges":
      for (let i = 0; i < command.ranks.length; i++) {
        const message = { _tag: command.kind, epoch: command.epoch, offset: command.offsets[i]!, size: command.sizes[i]! }
        io.deliver(command.ranks[i]!, message, refused)
      }
      break
    case "AverageRound":
      averageRound(shell, command, refused)
      break
    case "Welcome": {
      // The roles, then the model; its first chunks (or its empty StartEpoch) follow.
      io.deliver(command.rank, { _tag: "SetRoles", ...command.roles }, refused)
      // Ring: the model comes from a member when the joiner enters the ring (SendModel).
      if (command.model === "peer") break
      const round = shell.lastModel?.round ?? Math.max(0, command.firstRound - 2)
      io.deliver(command.rank, { _tag: "Update", round, params: shell.lastModel?.params ?? new Float32Array(0) }, refused)
      break
    }
    case "JoinRefused":
      if (command.rank !== undefined && !Core.isLive(state, command.rank)) {
        io.turnedAway.add(command.rank)
        transport.disconnect(command.rank, Transport.joinRefusalCloseCode[command.reason])
      }
      break
    case "SendModel":
      // Hold the joiner's frames until its model is out; ask the member for it (module docstring).
      io.hold(command.to)
      io.deliver(command.from, { _tag: "RequestParams", round: command.round }, refused)
      break
    case "EpochModel": {
      // cpu: the outer optimizer's momentum goes with the model it was last updated with.
      const last = shell.lastModel
      const model =
        command.params !== undefined
          ? { round: command.round, params: command.params }
          : state.ring === undefined && last !== undefined
            ? { ...last, ...(shell.outerMomentum === undefined ? {} : { outerMomentum: shell.outerMomentum }) }
            : undefined
      observe(() => hooks.onEpochModel?.(command.epoch, model))
      break
    }
    case "Alert":
    case "EpochEnded":
      break
    case "RunEnded":
      // Resolved by `settle`, once the step's observers ran: whoever awaits the outcome may
      // close this actor's scope at once, and must not cut the last step short.
      shell.ended = command.outcome
      break
  }
}

/**
 * Carries out `commands` in order, a refused send stepped as `SendFailed` and its commands carried
 * out before the next command. Every command goes out at the call until a send is refused (the
 * clock must be read then): the effect that does the rest, or `undefined` when nothing is left.
 * Most steps (a chunk handed out, a round's close) need no effect at all, and at 256 ranks they
 * are hundreds a round.
 */
const carryOutAll = (shell: CommandShell, commands: ReadonlyArray<Core.Command>): Effect.Effect<void> | undefined => {
  for (let i = 0; i < commands.length; i++) {
    const command = commands[i]!
    const refused: Array<Refused> = []
    carryOut(shell, command, refused)
    observe(() => shell.hooks.onCommand?.(command, shell.state))
    if (refused.length > 0)
      return Effect.gen(function* () {
        for (const { rank, message, reason } of refused) {
          const nowMs = yield* Clock.currentTimeMillis
          const after = carryOutAll(shell, Core.step(shell.state, { _tag: "SendFailed", rank, nowMs, message, reason }))
          if (after !== undefined) yield* after
        }
        const rest = carryOutAll(shell, commands.slice(i + 1))
        if (rest !== undefined) yield* rest
      })
  }
  return undefined
}

/**
 * Carries out the commands of one core step in order, each seen by `Hooks.onCommand` once it is
 * out; a send the transport refused is stepped as `SendFailed` and its commands carried out at
 * once. An outlier the round's aggregation found is stepped as `Outlier` after the whole step:
 * the death it may declare comes after the step's own commands (the next epoch's `StartEpoch`
 * before that epoch's remainders), as the core decided them.
 *
 * @since 0.1.0
 * @category utils
 */
export const execute = (shell: CommandShell, commands: ReadonlyArray<Core.Command>): Effect.Effect<void> =>
  Effect.suspend(() => executeNow(shell, commands) ?? Effect.void)

/**
 * `execute`, its commands carried out at the call as far as they go without the clock (a refused
 * send, an outlier): the effect that does the rest, `undefined` when nothing is left.
 *
 * @since 0.1.0
 * @category utils
 */
export const executeNow = (shell: CommandShell, commands: ReadonlyArray<Core.Command>): Effect.Effect<void> | undefined => {
  const rest = carryOutAll(shell, commands)
  if (rest === undefined && shell.outliersFound.length === 0) return undefined
  return Effect.gen(function* () {
    if (rest !== undefined) yield* rest
    for (const { rank, round, detail } of shell.outliersFound.splice(0)) {
      const nowMs = yield* Clock.currentTimeMillis
      yield* execute(shell, Core.step(shell.state, { _tag: "Outlier", rank, nowMs, round, detail }))
    }
  })
}
