/**
 * The coordinator's frames in and out (`coordinator.ts` module doc): once the run started, every
 * input from the transport (a frame, a bad frame, a death report) goes to the core from here; a
 * `Hello` from a vacant index is a join, a `RingData` is relayed to the next ring rank,
 * a frame that does not decode closes its rank. The commands' frames go out through
 * `deliver` and `broadcast`, which hold back a ring joiner's frames until its model is out
 * (`SendModel`). What the protocol tells about a rank's end (its `Crashing` frame, the
 * reason this coordinator closed it, a join turned away) is kept here, for `causeOf`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as Deltas from "../../src/averaging/deltas.ts"
import * as Ring from "../../src/averaging/ring.ts"
import * as Core from "../../src/core/coordinator.ts"
import type { Rank, ToCoordinator, ToRank } from "../../src/core/messages.ts"
import * as DeathReport from "../../src/actor/death-report.ts"
import type * as Supervisor from "../../src/transport/supervisor.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import * as WireError from "../../src/wire/wire-error.ts"
import { RingNeighbours } from "./ring-neighbours.ts"

/**
 * Observers of what the coordinator does; each is called synchronously inside the actor, so it
 * must be quick and must not throw.
 *
 * - `onFrame`: a decoded frame from a live or late rank, before the core sees it.
 * - `onCommand`: every command, after it was carried out (alerts, epoch ends, the run's end).
 * - `onDeclared`: deaths the core just declared, with the wall time their remainders were handed
 *   to the transport (`recoveredMs`, the coordinator clock's ms).
 * - `onLeft`: departures (deaths and exits) while the run trains that the core just recorded
 *   (`Core.Leave`), with the wall time the step's commands were out (`recoveredMs`) and the bytes
 *   of the control frames that step sent (`controlBytes`: extensions, chunks, roles,
 *   `DeclareDead`, `FormRing`; not an `Update` of a round the departure let close).
 * - `onTurnedAway`: a joiner the shell closed before the core saw its join (its `Hello`
 *   gave another parameter count than the run's; `closeCode` 4009), with the reason.
 *
 * @since 0.1.0
 * @category options
 */
export interface Hooks {
  readonly onFrame?: (rank: Rank, message: ToCoordinator, nowMs: number) => void
  readonly onCommand?: (command: Core.Command, state: Core.State) => void
  readonly onDeclared?: (deaths: ReadonlyArray<Core.Death>, recoveredMs: number) => void
  readonly onLeft?: (leaves: ReadonlyArray<Core.Leave>, recoveredMs: number, controlBytes: number) => void
  readonly onTurnedAway?: (rank: Rank, closeCode: number, reason: string) => void
  /**
   * The committed model after `epoch` (`Core` command `EpochModel`): with `cpu` the mean this
   * shell broadcast for the epoch's last round, with `ring` the one a member handed over;
   * `undefined` when there is none (no usable contribution ever, or no ring member left). The
   * launcher writes it on the coordinator's host before the epoch's audit is final.
   */
  readonly onEpochModel?: (
    epoch: number,
    model: { readonly round: number; readonly params: Float32Array; readonly outerMomentum?: Float32Array } | undefined
  ) => void
  /**
   * The averaging traffic of a round that just closed, in bytes of frames, before its
   * `AverageRound` reaches `onCommand`: `received` (its `Params`, or the ring steps relayed) and
   * `sent` (its `Update` to every survivor, or the ring steps relayed). Ring steps over direct
   * links never reach the coordinator and are not counted.
   */
  readonly onRoundBytes?: (round: number, bytes: { readonly received: number; readonly sent: number }) => void
  /**
   * A round closed (`AverageRound`), before anything of it goes out: with `cpu`, `params` is the
   * model every rank will hold (the mean it broadcasts; the last one sent when the round had
   * nothing usable; `undefined` before any), with `ring` `undefined`. The recovery log writes
   * the round's commit and model here, before its `Update` or `RoundCommitted` is sent.
   */
  readonly beforeRound?: (command: Extract<Core.Command, { _tag: "AverageRound" }>, params: Float32Array | undefined) => void
  /**
   * Ring backend: generation `generation` forms, before any of its `FormRing`s is sent. The
   * recovery log records it there: a coordinator that takes the run over starts above it.
   */
  readonly beforeRing?: (generation: number) => void
  /**
   * A rank that joined the running run reported its first trained batch (its first `Progress` or
   * `ChunkDone`): `helloAtMs` when its `Hello` arrived, `trainingAtMs` when that frame arrived, and
   * `bytes` of every frame sent to it in between but `CoordHeartbeat` (its welcome, roles, model,
   * first ranges, ring formation). Once per joiner; never for one that leaves first.
   */
  readonly onJoinerTraining?: (rank: Rank, helloAtMs: number, trainingAtMs: number, bytes: number) => void
}

/**
 * What `make` needs of the coordinator: its core state and transport, its observers, how it steps
 * the core (`stepNow`: carries out at once what the core decided as far as it needs no clock, and
 * returns the effect that does the rest, `undefined` when nothing is left; `stepAndExecute`:
 * always an effect, which does it all when run), and `wake`, which queues a tick behind the
 * mailbox's inputs (after a death report).
 *
 * @since 0.1.0
 * @category model
 */
export interface CoordinatorInboundOptions {
  readonly state: Core.State
  readonly transport: Transport.TransportShape
  readonly hooks: Hooks
  readonly stepNow: (input: Core.Input) => Effect.Effect<void> | undefined
  readonly stepAndExecute: (input: Core.Input) => Effect.Effect<void>
  readonly wake: Effect.Effect<void>
  /** Ranks whose frames are dropped here, unread (injected silence: `Options.muted`). */
  readonly muted?: ReadonlySet<Rank> | undefined
  /** The ranks link to their ring neighbours over sockets they were given (`Options.ringPeerLinks`). */
  readonly ringPeerLinks?: boolean
  /**
   * `cpu` with deltas on (docs/edge-averaging.md "Deltas"): every `Update` with parameters sent
   * is told to it, and every `Params` is turned back into parameters against `base()` (the model
   * last sent) before anything else sees it.
   */
  readonly deltas?: { readonly deltas: Deltas.Deltas; readonly base: () => Float32Array | undefined }
}

/**
 * A send the transport refused. Frames are handed to the transport synchronously (a death can
 * send thousands of extensions); each refusal is fed back to the core as `SendFailed` once its
 * command is out.
 *
 * @since 0.1.0
 * @category model
 */
export interface Refused {
  readonly rank: Rank
  readonly message: ToRank
  readonly reason: string
}

/**
 * The coordinator's inbound side (`make`).
 *
 * - `inbound`: one input from the transport, once the run started: stepped at once; the effect
 *   that carries out its commands, or `undefined` when there is none.
 * - `deliver`, `broadcast` (to the survivors): encode and send a frame; a ring joiner waiting for
 *   its model gets it later (`hold`); refused sends are pushed to `refused`.
 * - `hold(rank)`: from now until its `Update` (or a shutdown), `rank`'s frames but
 *   `CoordHeartbeat` are held back, in order (`SendModel`).
 * - `ringFormed`: a `FormRing` that goes out: the relay's view of the generation's ring order.
 * - `ringNeighbours`: the listeners ranks advertised in their `Hello`; a `FormRing` goes out as
 *   its receiver's neighbours, the next one's listener and the generation's secret
 *   (`RingNeighbours.neighbourRing`).
 * - `causeOf`: a rank's end as its host reported it, made precise by what the protocol told
 *   (`Refused` when this coordinator closed it, `Crashed{error, stack}` after its `Crashing`).
 * - `crashes`: each rank's `Crashing{error, stack}` (the formation records them too).
 * - `turnedAway`: joiners the core refused or the shell turned away: their end is no death.
 * - `relayStats()`: ring steps relayed and dropped.
 * - `averagingBytes()`: the averaging traffic so far, in bytes of frames: `received` (`Params`,
 *   relayed `RingData`) and `sent` (`Update`s, one per recipient, relayed `RingData`).
 * - `controlBytes()`: bytes of the frames sent through `deliver` and `broadcast` so far, but
 *   `Update`, `RoundCommitted` and `CoordHeartbeat` (what a departure makes the coordinator send:
 *   extensions, chunks, roles, `DeclareDead`, `FormRing`).
 *
 * @since 0.1.0
 * @category model
 */
export interface CoordinatorInbound {
  readonly inbound: (event: Supervisor.Inbound) => Effect.Effect<void> | undefined
  readonly deliver: (rank: Rank, message: ToRank, refused: Array<Refused>) => void
  readonly broadcast: (message: ToRank, refused: Array<Refused>, packed?: Uint8Array) => void
  readonly hold: (rank: Rank) => void
  readonly ringFormed: (message: Extract<ToRank, { _tag: "FormRing" }>) => void
  readonly ringNeighbours: RingNeighbours
  readonly causeOf: (rank: Rank, cause: DeathReport.DeathCause) => DeathReport.DeathCause
  readonly crashes: Map<Rank, { readonly error: string; readonly stack: string }>
  readonly turnedAway: Set<Rank>
  readonly relayStats: () => { readonly relayed: number; readonly dropped: number }
  readonly averagingBytes: () => { readonly received: number; readonly sent: number }
  readonly controlBytes: () => number
}

/**
 * Runs an observer; one that throws must never take the coordinator down with it.
 *
 * @since 0.1.0
 * @category utils
 */
export const observe = (f: () => void): void => {
  try {
    f()
  } catch {
    // ignored: observers only watch
  }
}

/**
 * A frame's decoded content: what the transport's inspector decoded, else decoded here once, with
 * `params` bounded by the run's agreed parameter count before anything is copied. A frame the
 * transport gave away (`given`) is decoded with `adoptBytes`: a `Params`' values stay in the
 * received message's memory (no copy of 40 KB a rank a round, which the old generation would
 * otherwise hold until the next full collection). Call it once per event: its bytes may change.
 *
 * @since 0.1.0
 * @category utils
 */
export const decodeFrame = (
  event: Transport.Frame,
  paramsLengthMax: number | undefined
): Result.Result<Frame.Frame, WireError.WireError> =>
  isDecodedFrame(event.decoded)
    ? Result.succeed(event.decoded)
    : Codec.decode(event.bytes, {
        from: event.peer,
        ...(paramsLengthMax === undefined ? {} : { paramsLengthMax }),
        ...(event.given === true ? { adoptBytes: true } : {})
      })

const isDecodedFrame = (value: unknown): value is Frame.Frame =>
  typeof value === "object" && value !== null && "from" in value && "message" in value

/**
 * Makes the coordinator's inbound side (`CoordinatorInbound`); the coordinator calls it once, in
 * its `start`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: CoordinatorInboundOptions): CoordinatorInbound => {
  // Long because it is a factory: the closures it returns share its state, and each is short.
  const { state, transport, hooks, stepNow, stepAndExecute } = options
  /**
   * Each rank's `Crashing{error, stack}`, its last frame before it exits on an uncaught error:
   * its end is then reported as `Crashed{error, stack}` instead of the `Exited{code}` (or the
   * stackless `Crashed`) its host saw; an end by a signal or the host (`Killed`,
   * `Disconnected`) stays what it was. The frame is read here, where every frame is decoded
   * anyway; the supervisor reads none.
   */
  const crashes = new Map<Rank, { readonly error: string; readonly stack: string }>()
  // Ranks this coordinator closed for breaking the protocol, and why (their death's cause).
  const closedFor = new Map<Rank, string>()
  const causeOf = (rank: Rank, cause: DeathReport.DeathCause): DeathReport.DeathCause => {
    const closed = closedFor.get(rank)
    if (closed !== undefined) {
      closedFor.delete(rank)
      return DeathReport.refused(closed)
    }
    const crash = crashes.get(rank)
    if (crash === undefined) return cause
    crashes.delete(rank)
    // A rank that said `Crashing` and then ended its process, or closed its socket normally
    // (a joined rank leaves that way), crashed with that error.
    const ended =
      cause._tag === "Exited" ||
      cause._tag === "Crashed" ||
      (cause._tag === "Disconnected" && cause.closeCode === Transport.CloseCode.Normal)
    return ended ? DeathReport.crashed(crash.error, crash.stack) : cause
  }
  /** Joiners the core refused or the shell turned away (a parameter count): their end is no death. */
  const turnedAway = new Set<Rank>()

  /**
   * Ring joiners waiting for their model (`SendModel`): the frames held back for each,
   * in order, until its model's `Update` goes out (`coordinator.ts` module docstring).
   */
  const held = new Map<Rank, Array<{ readonly message: ToRank; readonly bytes: Uint8Array }>>()
  let sentControlBytes = 0
  // Joiners not yet seen training: when their Hello came, and the bytes sent to them since.
  const bringingUp = new Map<Rank, { readonly helloAtMs: number; bytes: number }>()
  const sendTo = (rank: Rank, message: ToRank, bytes: Uint8Array, refused: Array<Refused>): void => {
    const holding = held.get(rank)
    if (holding !== undefined && message._tag !== "CoordHeartbeat") {
      if (message._tag !== "Update" && message._tag !== "ShutdownWithSave" && message._tag !== "Shutdown") {
        holding.push({ message, bytes })
        return
      }
      held.delete(rank)
      // A shutdown drops what was held: the joiner never trained, it only has to stop.
      if (message._tag === "Update") {
        sendTo(rank, message, bytes, refused)
        for (const later of holding) sendTo(rank, later.message, later.bytes, refused)
        return
      }
    }
    if (message._tag !== "Update" && message._tag !== "RoundCommitted" && message._tag !== "CoordHeartbeat")
      sentControlBytes += bytes.length
    const joiner = bringingUp.size === 0 ? undefined : bringingUp.get(rank)
    if (joiner !== undefined && message._tag !== "CoordHeartbeat") joiner.bytes += bytes.length
    const error = transport.sendUnsafe(rank, bytes)
    if (error !== undefined) refused.push({ rank, message, reason: error.reason._tag })
    else if (message._tag === "Update" || message._tag === "RingData") bytesSent += bytes.length
    if (message._tag === "Update" && message.params.length > 0) options.deltas?.deltas.modelSent(rank, message.round)
  }
  let bytesSent = 0
  let bytesReceived = 0

  const ringNeighbours = new RingNeighbours()
  const deliver = (rank: Rank, message: ToRank, refused: Array<Refused>): void => {
    const sent = message._tag === "FormRing" ? ringNeighbours.neighbourRing(message) : message
    sendTo(rank, sent, Codec.encode(Frame.fromCoordinator(sent)), refused)
  }

  const broadcast = (message: ToRank, refused: Array<Refused>, packed?: Uint8Array): void => {
    const bytes = Codec.encodePacked(Frame.fromCoordinator(message), packed)
    for (const rank of Core.survivors(state)) sendTo(rank, message, bytes, refused)
  }

  /**
   * The ring backend's relay: a ring step from `from` goes on to its next ring rank in
   * the current generation (ring order is the survivors' ascending order, which every death or
   * exit re-forms); a step of an older generation, or from a rank no longer live, is dropped.
   * A checked step goes on as the bytes it came in, only its frame header's sender replaced
   * (`Codec.reframeFromCoordinator`); it is encoded again only if its header is not the one the
   * codec writes.
   */
  let relayed = 0
  let relayDropped = 0
  // Each sender's steps of the open round, in order (a repeated or early step would fail or load its receiver).
  const relayOrder = new Ring.RelayOrder()
  // The members of the latest generation, in ring order, as its FormRings named them.
  let relayRing: { readonly generation: number; readonly peers: ReadonlyArray<Rank>; readonly ringRankOf: Map<Rank, number> } | undefined
  const ringFormed = (message: Extract<ToRank, { _tag: "FormRing" }>): void => {
    if (relayRing?.generation === message.generation) return
    relayRing = { generation: message.generation, peers: message.peers, ringRankOf: new Map(message.peers.map((rank, i) => [rank, i])) }
  }
  /**
   * Relays one ring step; returns why the step breaks the ring protocol (`Ring.checkStep`,
   * `Ring.RelayOrder`), if
   * it does: then nothing is relayed and the caller closes the sender (`BadRingStep`), whose
   * later steps (already on their way) are dropped until its death is declared.
   */
  const relay = (from: Rank, message: Extract<ToCoordinator, { _tag: "RingData" }>, bytes: Uint8Array): string | undefined => {
    const ring = state.ring
    const members = relayRing
    const ringRank = members?.ringRankOf.get(from)
    if (
      ring === undefined ||
      members === undefined ||
      ringRank === undefined ||
      message.generation !== ring.generation ||
      members.generation !== ring.generation ||
      state.phase !== "running" ||
      !Core.isLive(state, from) ||
      state.paramsLength === undefined ||
      closedFor.has(from)
    ) {
      relayDropped += 1
      return undefined
    }
    const next = members.peers[(ringRank + 1) % members.peers.length]!
    // A sender given its next neighbour's listener may have sent this collective's first steps
    // on its direct link, and fall back here once that link closed (`Ring.RelayOrder`).
    const direct = options.ringPeerLinks === true || ringNeighbours.advertises(next)
    const problem =
      Ring.checkStep(message, { ringRank, ringSize: members.peers.length, length: state.paramsLength }) ??
      relayOrder.check(from, message, state.round, direct)
    if (problem !== undefined) return problem
    if (next === from || !Core.isLive(state, next)) {
      relayDropped += 1
      return undefined
    }
    relayed += 1
    const step = Codec.reframeFromCoordinator(bytes, from) ?? Codec.encode(Frame.fromCoordinator(message))
    const holding = held.get(next)
    // A joiner still waiting for its model gets its ring steps after it.
    if (holding !== undefined) holding.push({ message, bytes: step })
    else if (transport.sendUnsafe(next, step) === undefined) bytesSent += step.length
    return undefined
  }

  /** One input from the transport, once the run started: stepped at once; its commands' effect, if any. */
  function inbound(event: Supervisor.Inbound): Effect.Effect<void> | undefined {
    if (event._tag !== "DeathReport" && options.muted !== undefined && options.muted.has(event.peer)) return undefined
    switch (event._tag) {
      case "Frame": {
        const decoded = decodeFrame(event, state.paramsLength)
        if (Result.isFailure(decoded)) {
          // A frame that does not decode is a protocol violation, not noise (docs/security.md, "What a
          // rank is trusted with"): that rank's link closes with the reason's code (1009 a field over its
          // bound, such as more parameters than the run agreed; 1008 a frame naming another rank;
          // 1002 anything else) and it is declared dead, refused, with the reason in words.
          const code = WireError.closeCode(decoded.failure)
          if (!closedFor.has(event.peer))
            closedFor.set(event.peer, `a bad frame (close code ${code}): ${WireError.words(decoded.failure.reason)}`)
          transport.disconnect(event.peer, code)
          return stepNow({ _tag: "BadFrame", rank: event.peer, nowMs: event.arrivedMs, reason: decoded.failure.reason._tag })
        }
        const sent = decoded.success.message as ToCoordinator
        const deltas = options.deltas
        // The Params was just decoded from this frame and nothing else holds it: its change may become the parameters in place.
        const frameMessage =
          sent._tag === "Params" && deltas !== undefined ? deltas.deltas.toParams(event.peer, sent, deltas.base(), true) : sent
        if (frameMessage._tag === "Params" || frameMessage._tag === "RingData") bytesReceived += event.bytes.length
        if (frameMessage._tag === "RingData") {
          const problem = relay(event.peer, frameMessage, event.bytes)
          if (problem !== undefined) {
            // The sender broke the ring protocol: it is closed and declared dead, not the
            // neighbour its step would have failed (a relayed step is checked before it goes on).
            closedFor.set(event.peer, `a bad ring step (close code ${Transport.CloseCode.BadRingStep}): ${problem}`)
            transport.disconnect(event.peer, Transport.CloseCode.BadRingStep)
            return stepNow({ _tag: "BadFrame", rank: event.peer, nowMs: event.arrivedMs, reason: `BadRingStep: ${problem}` })
          }
        }
        if (frameMessage._tag === "Crashing") crashes.set(event.peer, { error: frameMessage.error, stack: frameMessage.stack })
        if (bringingUp.size > 0 && (frameMessage._tag === "Progress" || frameMessage._tag === "ChunkDone"))
          trainedFirst(event.peer, event.arrivedMs)
        if (frameMessage._tag === "Hello" && Core.isVacant(state, event.peer) && !turnedAway.has(event.peer)) {
          ringNeighbours.advertised(event.peer, frameMessage.ringAddress)
          return join(event.peer, frameMessage.paramsLength, event.arrivedMs)
        }
        observe(() => hooks.onFrame?.(event.peer, frameMessage, event.arrivedMs))
        return stepNow({ _tag: "Frame", rank: event.peer, nowMs: event.arrivedMs, message: frameMessage })
      }
      case "BadFrame":
        return stepNow({ _tag: "BadFrame", rank: event.peer, nowMs: event.arrivedMs, reason: String(event.error) })
      case "DeathReport":
        bringingUp.delete(event.rank)
        // A joiner turned away, or one that left before its Hello, was never a rank of the run.
        if (turnedAway.has(event.rank) || Core.isVacant(state, event.rank)) return undefined
        held.delete(event.rank)
        return Effect.gen(function* () {
          const nowMs = yield* Clock.currentTimeMillis
          yield* stepAndExecute({ _tag: "DeathReport", rank: event.rank, nowMs, cause: causeOf(event.rank, event.cause) })
          yield* options.wake
        })
    }
  }

  /**
   * A `Hello` from a vacant index once the run started: the rank's join. Its parameter
   * count must be the run's; then the core decides (`Join`).
   */
  function join(rank: Rank, paramsLength: number, nowMs: number): Effect.Effect<void> | undefined {
    if (state.paramsLength !== undefined && paramsLength !== state.paramsLength) {
      turnedAway.add(rank)
      transport.disconnect(rank, Transport.CloseCode.ParamsMismatch)
      const reason = `rank ${rank}'s Hello gave ${paramsLength} parameters; the run agreed on ${state.paramsLength}`
      observe(() => hooks.onTurnedAway?.(rank, Transport.CloseCode.ParamsMismatch, reason))
      return undefined
    }
    bringingUp.set(rank, { helloAtMs: nowMs, bytes: 0 })
    return stepNow({ _tag: "Join", rank, nowMs })
  }

  /** A joiner's first trained batch reached this coordinator: it is up to date (`Hooks.onJoinerTraining`). */
  function trainedFirst(rank: Rank, nowMs: number): void {
    const joiner = bringingUp.get(rank)
    if (joiner === undefined) return
    bringingUp.delete(rank)
    if (Core.isLive(state, rank)) observe(() => hooks.onJoinerTraining?.(rank, joiner.helloAtMs, nowMs, joiner.bytes))
  }

  return {
    inbound,
    deliver,
    broadcast,
    hold: (rank) => {
      if (!held.has(rank)) held.set(rank, [])
    },
    ringFormed,
    ringNeighbours,
    causeOf,
    crashes,
    turnedAway,
    relayStats: () => ({ relayed, dropped: relayDropped }),
    averagingBytes: () => ({ received: bytesReceived, sent: bytesSent }),
    controlBytes: () => sentControlBytes
  }
}
