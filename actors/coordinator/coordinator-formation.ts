/**
 * The coordinator before its run starts: every rank's `Hello` gathered, the run's parameter count
 * agreed, the core started (with a resumed or recovered run's model first), or the formation
 * failed (`FormationError`). See `coordinator.ts` for the rules.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Core from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import { decodeFrame } from "./coordinator-inbound.ts"
import { execute } from "./coordinator-commands.ts"
import type { Message, Shell } from "./coordinator-shell.ts"
import { FormationError, settle, stepAndExecute } from "./coordinator-shell.ts"

/**
 * The run's parameter count from the ranks' `Hello`s: the count most ranks gave, ties to the one
 * the lowest rank gave. One rank cannot impose its count on the others.
 */
const agreedParamsLength = (joined: ReadonlyMap<Rank, number>): number | undefined => {
  const votes = new Map<number, { count: number; lowestRank: Rank }>()
  for (const [rank, length] of joined) {
    const vote = votes.get(length)
    if (vote === undefined) votes.set(length, { count: 1, lowestRank: rank })
    else {
      vote.count += 1
      vote.lowestRank = Math.min(vote.lowestRank, rank)
    }
  }
  let best: { length: number; count: number; lowestRank: Rank } | undefined
  for (const [length, vote] of votes) {
    if (best === undefined || vote.count > best.count || (vote.count === best.count && vote.lowestRank < best.lowestRank)) {
      best = { length, ...vote }
    }
  }
  return best?.length
}

/**
 * Room a model's frame keeps beside its values (bytes): the frame's own fields (a `Params`' round,
 * loss and committed chunks, an `Update`'s base), so that a model that fits at formation never
 * meets the limit later with a longer list of commits.
 */
const frameRoomBytes = 64 * 1024

/**
 * Why a model of `paramsLength` float32 values cannot run, or `undefined`: every model goes
 * through the coordinator's links whole at some point (a `Params`, an `Update`, a joiner's model,
 * the model after each epoch), and a frame over the links' message limit is refused by the
 * sender's transport, so the run would stand still at its first round rather than fail.
 */
const modelTooLarge = (paramsLength: number): string | undefined => {
  const limit = Transport.messageBytesMaxDefault
  const largest = Math.floor((limit - frameRoomBytes) / 4)
  if (paramsLength <= largest) return undefined
  return `the trainer's model has ${paramsLength.toLocaleString("en-US")} parameters (${(4 * paramsLength).toLocaleString("en-US")} bytes as float32); a model travels whole in one message beside ${frameRoomBytes.toLocaleString("en-US")} bytes kept for the frame's other fields, so the links' message limit of ${limit.toLocaleString("en-US")} bytes fits at most ${largest.toLocaleString("en-US")} parameters`
}

/**
 * Before the run starts: wait for every rank's Hello; any end of a rank fails the run (or, in a
 * served run, frees its index: `Options.vacate`). The run
 * starts at the Hello that completes it; the rest of its batch is then ordinary input.
 */
export const form = (shell: Shell, message: Message): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { state, outcome, joined, io } = shell
    if (message._tag !== "Inbound") return yield* checkFormation(shell, yield* Clock.currentTimeMillis)
    for (const event of message.events) {
      if (state.started || (yield* Deferred.isDone(outcome))) {
        const effect = state.started ? io.inbound(event) : undefined
        if (effect !== undefined) yield* effect
        continue
      }
      if (event._tag === "DeathReport") {
        const cause = io.causeOf(event.rank, event.cause)
        const vacate = shell.options.vacate
        if (vacate !== undefined) {
          joined.delete(event.rank)
          io.crashes.delete(event.rank)
          io.ringNeighbours.advertised(event.rank, undefined)
          vacate(event.rank, cause._tag === "Crashed" ? cause.error : Core.causeText(cause))
          continue
        }
        const at = cause._tag === "Crashed" && cause.stack !== undefined ? DeathReport.topFrame(cause.stack) : ""
        yield* Deferred.fail(
          outcome,
          new FormationError(`rank ${event.rank} ${Core.causeText(cause)} before the run formed${at === "" ? "" : ` (${at})`}`)
        )
        return
      }
      if (event._tag === "Frame") {
        const decoded = decodeFrame(event, state.paramsLength)
        const frameMessage = Result.isSuccess(decoded) ? decoded.success.message : undefined
        if (frameMessage?._tag === "Hello" && !joined.has(event.peer)) {
          joined.set(event.peer, frameMessage.paramsLength)
          shell.io.ringNeighbours.advertised(event.peer, frameMessage.ringAddress)
        }
        if (frameMessage?._tag === "Crashing") io.crashes.set(event.peer, { error: frameMessage.error, stack: frameMessage.stack })
      }
      yield* checkFormation(shell, yield* Clock.currentTimeMillis)
    }
  })

/** Starts the core once enough ranks joined: the resumed model first, then a rank whose count differs is refused. */
const startRun = (shell: Shell, nowMs: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { state, transport, joined, outcome } = shell
    const paramsLength = agreedParamsLength(joined)
    const tooLarge = paramsLength === undefined ? undefined : modelTooLarge(paramsLength)
    if (tooLarge !== undefined) return yield* Deferred.fail(outcome, new FormationError(tooLarge))
    const resume = shell.options.resume
    if (resume?.params !== undefined) {
      if (resume.params.length !== paramsLength) {
        const error = new FormationError(
          `the saved model has ${resume.params.length} parameters; the trainer's model has ${paramsLength ?? "no agreed count of"} parameters`
        )
        return yield* Deferred.fail(outcome, error)
      }
      const round = Math.max(0, resume.point.firstRound - 1)
      const update = Codec.encode(Frame.fromCoordinator({ _tag: "Update", round, params: resume.params }))
      for (const rank of joined.keys()) if (transport.sendUnsafe(rank, update) === undefined) shell.deltas?.modelSent(rank, round)
    } else if (resume !== undefined && shell.options.recovery !== undefined) {
      // A run taken over before any round closed, or a ring run: its ranks went back to their last
      // averaged model and wait for an Update; one without parameters has them keep it. A ring's
      // ranks first learn which round's mean that must be (`recovery.ringCommitted`).
      const committed = shell.options.recovery.ringCommitted
      const confirm = committed === undefined ? undefined : Codec.encode(Frame.fromCoordinator({ _tag: "RoundCommitted", ...committed }))
      const update = Codec.encode(
        Frame.fromCoordinator({ _tag: "Update", round: Math.max(0, resume.point.firstRound - 1), params: new Float32Array(0) })
      )
      for (const rank of joined.keys()) {
        if (confirm !== undefined) transport.sendUnsafe(rank, confirm)
        transport.sendUnsafe(rank, update)
      }
    }
    // Formation ranks not here yet are vacant; they join later (`minRanks`). A recovered run's are
    // declared dead once it started (below).
    const recovery = shell.options.recovery
    const missing = Array.from({ length: state.config.worldSize }, (_, r) => r).filter((r) => !joined.has(r))
    const absent = recovery === undefined ? missing : []
    const startOptions = {
      ...(paramsLength === undefined ? {} : { paramsLength }),
      ...(resume === undefined ? {} : { resume: resume.point }),
      ...(absent.length === 0 ? {} : { absent }),
      ...(recovery?.owedModel === undefined ? {} : { owedModel: recovery.owedModel })
    }
    yield* execute(shell, Core.start(state, nowMs, startOptions))
    for (const rank of recovery === undefined ? [] : missing) {
      yield* stepAndExecute(shell, { _tag: "DeathReport", rank, nowMs, cause: DeathReport.refused(recovery!.causeOf(rank)) })
    }
    if (missing.length > 0 && recovery !== undefined) yield* stepAndExecute(shell, { _tag: "Tick", nowMs })
    for (const [rank, length] of joined) {
      if (length === paramsLength) continue
      const reason = `its Hello gave ${length} parameter${length === 1 ? "" : "s"}; the run agreed on ${paramsLength} (the count most ranks gave)`
      yield* stepAndExecute(shell, { _tag: "DeathReport", rank, nowMs, cause: DeathReport.refused(reason) })
      transport.disconnect(rank, Transport.CloseCode.ParamsMismatch)
    }
    if ([...joined.values()].some((length) => length !== paramsLength)) yield* stepAndExecute(shell, { _tag: "Tick", nowMs })
    yield* settle(shell)
  })

/**
 * Where the formation stands: starts the run once `minRanks` ranks joined, fails it once the
 * formation timed out, and otherwise beats for the ranks that wait.
 */
const checkFormation = (shell: Shell, nowMs: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { state, transport, joined, outcome, formationTimeoutMs } = shell
    if (yield* Deferred.isDone(outcome)) return
    const recovery = shell.options.recovery
    const waited = shell.formingSinceMs !== undefined && nowMs - shell.formingSinceMs > (recovery?.windowMs ?? 0)
    if (
      recovery === undefined
        ? joined.size >= state.config.minRanks
        : recovery.expected.every((r) => joined.has(r)) || (waited && joined.size > 0)
    ) {
      yield* startRun(shell, nowMs)
    } else if (shell.formingSinceMs !== undefined && nowMs - shell.formingSinceMs > formationTimeoutMs) {
      const missing = Array.from({ length: state.config.worldSize }, (_, r) => r).filter((r) => !joined.has(r))
      yield* Deferred.fail(
        outcome,
        new FormationError(`${missing.length === 1 ? "rank" : "ranks"} ${missing.join(", ")} did not join within ${formationTimeoutMs} ms`)
      )
    } else if (nowMs - shell.lastBeatMs >= shell.coordHeartbeatMs) {
      // Ranks that joined wait for the others: beat for them too, so that a rank process
      // never takes a slow formation for a coordinator that is gone (`coordinatorTimeoutMs`).
      shell.lastBeatMs = nowMs
      const beat = Codec.encode(Frame.fromCoordinator({ _tag: "CoordHeartbeat" }))
      for (const rank of joined.keys()) transport.sendUnsafe(rank, beat)
    }
  })
