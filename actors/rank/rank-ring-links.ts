/**
 * A rank's ring links (`rank-ring.ts` module doc): how its ring steps travel in each generation.
 * Through the coordinator (`RingData`, one relay for every generation), over direct
 * `MessageChannel` ports between worker threads handed over per generation (with the generation's
 * shared all-reduce area when the host made one), or over direct sockets between processes opened
 * from each generation's `FormRing`, with the relay where a link cannot be made. Injected faults
 * (`RankData.collectiveFault`) fire as a step is sent, and the bytes that went over direct links are
 * counted for the rank's `RoundDone` (the coordinator never sees them).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as FileAllReduce from "../../src/averaging/file-all-reduce.ts"
import * as LinkBytes from "../../src/averaging/link-bytes.ts"
import * as Ring from "../../src/averaging/ring.ts"
import * as RingSimd from "../../src/averaging/ring-simd.ts"
import * as SharedAllReduce from "../../src/averaging/shared-all-reduce.ts"
import type { FormRing, RingData, ToCoordinator } from "../../src/core/messages.ts"
import * as PeerRing from "../../src/transport/peer-ring.ts"
import { collectiveFaultExitCode } from "./rank-data.ts"
import type { Link, RankData } from "./rank-data.ts"

/**
 * One generation's way to its ring neighbours: its buffered link and inbox, how to close it, and,
 * for worker threads, the generation's shared all-reduce area (collectives run there, not over the
 * link).
 *
 * @since 0.1.0
 * @category model
 */
export interface RingChannel {
  readonly link: Ring.BufferedLink
  readonly inbox: Ring.RingInbox
  readonly close: () => void
  /** The generation's shared all-reduce area (worker threads): collectives run there, not over the link. */
  readonly area?: SharedAllReduce.Area | undefined
  /** Sends on the generation's direct link only (a file area's notice, `FileAllReduce.noticeStep`). */
  readonly directOnly?: ((step: Ring.RingMessage) => void) | undefined
  /** Whether an idle rank watches the area for a collective it is not in yet. */
  watching?: boolean
}

/**
 * What `make` needs of the rank ring: the rank's data and link, how it sends to the coordinator,
 * leaves with an exit code and stops responding (injected faults), how its loop is woken, whether
 * it is idle (no collective running or waiting for its commit: only then does a neighbour's step
 * wake it), the latest `FormRing` (a generation's ports older than it are refused), and what to do
 * with a file area's notice that a row was not finite (`forward` passes it on to the next neighbour).
 *
 * @since 0.1.0
 * @category model
 */
export interface RingLinksOptions {
  readonly data: RankData
  readonly link: Link
  readonly send: (message: ToCoordinator) => Effect.Effect<void>
  readonly leave: (code: number) => void
  readonly hang: () => void
  readonly wake: () => void
  readonly idle: () => boolean
  readonly view: () => FormRing | undefined
  readonly noticed: (step: Ring.RingMessage, forward: (step: Ring.RingMessage) => void) => void
}

/**
 * A rank's ring links (`make`).
 *
 * - `usePorts`: worker threads' direct ports; `peers`: processes' direct sockets (else the relay).
 * - `linkBytes`: the bytes of the steps that went over direct links, by round.
 * - `channelFor(generation)`: that generation's channel, once its links are there.
 * - `channel(generation)`: the generation's direct channel, if any (never the relay).
 * - `formed(message)`: a newer `FormRing` arrived: older generations' ports close, its peers open.
 * - `relayed(message)`: a step the coordinator relayed.
 * - `way(generation)`: whether that generation's outgoing steps went `direct` or through the `relay`.
 * - `areaFaults(round, ringSize)`: the injected fault as a shared area's hooks.
 *
 * @since 0.1.0
 * @category model
 */
export interface RingLinks {
  readonly usePorts: boolean
  readonly peers: PeerRing.PeerRing | undefined
  readonly linkBytes: LinkBytes.LinkBytes
  readonly channelFor: (generation: number) => RingChannel | undefined
  readonly channel: (generation: number) => RingChannel | undefined
  readonly formed: (message: FormRing) => void
  readonly relayed: (message: RingData) => void
  readonly way: (generation: number) => "direct" | "relay" | undefined
  readonly areaFaults: (round: number, ringSize: number) => SharedAllReduce.Faults
}

/**
 * Makes a rank's ring links (`RingLinks`); with `RankData.ringLinks` `port`, registers for the
 * link's direct ring ports of each generation.
 *
 * @since 0.1.0
 * @category rank
 */
export const make = (options: RingLinksOptions): RingLinks => {
  // Long because it is a factory: the closures it returns share the generations' channels, and
  // each is short.
  const { data, link, send } = options
  const faultOr = (message: Ring.RingMessage, deliver: (message: Ring.RingMessage) => Effect.Effect<void>) =>
    faultBefore(options, message, deliver)
  // The bytes of the steps that went over direct links, reported with each RoundDone (the
  // coordinator never sees them); relayed steps it counts itself.
  const linkBytes = LinkBytes.make()
  // Wakes the main loop when a direct link delivers (an idle rank may have to join a collective).
  const notify = options.wake
  /** The relay (`RingData` through the coordinator): one link for every generation. */
  const relayLink = new Ring.BufferedLink((message) =>
    faultOr(message, (step) => send({ _tag: "RingData", generation: step.generation, round: step.round, step: step.step, data: step.data }))
  )
  const relay: RingChannel = { link: relayLink, inbox: new Ring.RingInbox(relayLink), close: () => {} }
  /** Direct links by generation (worker threads); superseded ones are closed and dropped. */
  const usePorts = data.ringLinks === "port" && link.onRingPorts !== undefined
  const portChannels = new Map<number, RingChannel>()
  const dropPortsBefore = (generation: number): void => {
    for (const [g, channel] of portChannels) {
      if (g >= generation) continue
      channel.close()
      portChannels.delete(g)
    }
  }
  if (usePorts) {
    link.onRingPorts!((ports) => {
      const view = options.view()
      if (view !== undefined && ports.generation < view.generation) return ports.close()
      const direct = new Ring.BufferedLink((message) =>
        faultOr(message, (step) =>
          Effect.sync(() => {
            linkBytes.sent(step.round, step.data.byteLength)
            ports.send(step)
          })
        )
      )
      ports.onMessage((message) => {
        linkBytes.received(message.round, message.data.byteLength)
        direct.push(message)
        // Only an idle rank acts on a neighbour's step (it joins the collective); one whose
        // collective runs or waits for its RoundCommitted would wake its loop for nothing, once
        // a step.
        if (options.idle()) notify()
      })
      // The host makes an area only where this runtime can wait on one (`Worker.sharedRingLinks`).
      const area = ports.area === undefined ? undefined : new SharedAllReduce.Area(ports.area)
      portChannels.set(ports.generation, { link: direct, inbox: new Ring.RingInbox(direct), close: ports.close, area })
      notify()
    })
  }
  /**
   * Direct links between processes (`RankData.ringLinks` `direct`): opened per generation from its
   * `FormRing`; a generation whose outgoing link cannot be made sends through the relay, and the
   * relay's steps of a generation go to its channel, so a receiver takes steps from both.
   */
  const peers =
    data.ringLinks === "direct" && data.peerLinks !== undefined && link.rank !== undefined
      ? PeerRing.start({ ...data.peerLinks, rank: link.rank, allocateStep: RingSimd.stepBuffer })
      : undefined
  const relaySend = (step: Ring.RingMessage): Effect.Effect<void> =>
    send({ _tag: "RingData", generation: step.generation, round: step.round, step: step.step, data: step.data })
  /** How the current generation's outgoing steps went: over its direct link, or the relay. */
  const peerUsed = new Map<number, "direct" | "relay">()
  const openPeers = (message: FormRing): void => {
    if (peers === undefined || portChannels.has(message.generation)) return
    // The coordinator sends each member its neighbours (with, between hosts, the next one's
    // listener and the generation's secret); the whole ring order serves as well.
    const end = peers.open(
      message.generation,
      message.prev !== undefined && message.next !== undefined
        ? { prev: message.prev, next: message.next, nextUrl: message.nextAddress, secret: message.ringSecret }
        : PeerRing.neighboursOf(message.peers, message.ringRank)
    )
    // Known once the link is made or given up: later steps go out without waiting on the promise
    // (an async turn of the collective's fiber a step).
    let made: boolean | undefined
    void end.connected.then((connected) => {
      made = connected
    })
    const sendOn = (step: Ring.RingMessage, connected: boolean): Effect.Effect<void> => {
      const way = connected && end.send(step) ? "direct" : "relay"
      if (peerUsed.get(step.generation) !== way) peerUsed.set(step.generation, way)
      if (way === "direct") linkBytes.sent(step.round, PeerRing.stepBytes(step))
      return way === "direct" ? Effect.void : relaySend(step)
    }
    const direct = new Ring.BufferedLink((message) =>
      faultOr(message, (step) =>
        made === undefined
          ? Effect.flatMap(
              Effect.promise(() => end.connected),
              (connected) => sendOn(step, connected)
            )
          : sendOn(step, made)
      )
    )
    end.onMessage((step) => {
      linkBytes.received(step.round, PeerRing.stepBytes(step))
      if (step.step === FileAllReduce.noticeStep) return options.noticed(step, (on) => void end.send(on))
      direct.push(step)
      if (options.idle()) notify()
    })
    portChannels.set(message.generation, {
      link: direct,
      inbox: new Ring.RingInbox(direct),
      close: end.close,
      directOnly: (step) => void end.send(step)
    })
  }
  return {
    usePorts,
    peers,
    linkBytes,
    channelFor: (generation) => (usePorts || peers !== undefined ? portChannels.get(generation) : relay),
    channel: (generation) => portChannels.get(generation),
    formed: (message) => {
      dropPortsBefore(message.generation)
      openPeers(message)
    },
    relayed: (message) =>
      (peers === undefined ? relayLink : portChannels.get(message.generation)?.link)?.push({
        generation: message.generation,
        round: message.round,
        step: message.step,
        data: message.data
      }),
    way: (generation) => peerUsed.get(generation),
    areaFaults: (round, ringSize) => areaFaults(options, round, ringSize)
  }
}

/** Sends one ring step with `deliver`, unless an injected fault (`collectiveFault`) fires first. */
const faultBefore = (
  options: RingLinksOptions,
  message: Ring.RingMessage,
  deliver: (message: Ring.RingMessage) => Effect.Effect<void>
): Effect.Effect<void, Ring.RingLinkError> =>
  Effect.suspend(() => {
    const fault = options.data.collectiveFault
    if (fault !== undefined && fault.round === message.round && fault.step === message.step) {
      if (fault.fault === "corrupt") return deliver({ ...message, data: message.data.map(() => Number.NaN) })
      if (fault.fault === "exit") options.leave(collectiveFaultExitCode)
      else options.hang()
      return Effect.never
    }
    return deliver(message)
  })

/**
 * The injected fault as the shared all-reduce's hooks (`SharedAllReduce.Faults`): a step of the
 * ring's reduce-scatter (`step < ringSize - 1`) fires before the first barrier, an all-gather step
 * after the rank's reduction, before it arrives at the second (so it never reports `RoundDone`);
 * `corrupt` writes NaN into the rank's row at either.
 */
const areaFaults = (options: RingLinksOptions, round: number, ringSize: number): SharedAllReduce.Faults => {
  const fault = options.data.collectiveFault
  if (fault === undefined || fault.round !== round) return {}
  if (fault.fault === "corrupt") return { corrupt: true }
  const phase = fault.step < ringSize - 1 ? 0 : 1
  return {
    before: (at) => {
      if (at !== phase) return false
      if (fault.fault === "exit") options.leave(collectiveFaultExitCode)
      else options.hang()
      return true
    }
  }
}
