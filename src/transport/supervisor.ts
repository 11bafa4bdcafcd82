/**
 * The transport supervisor: reads a transport's ordered events and turns every end of a rank
 * into a `DeathReport{rank, cause}`, unless the rank announced `Exiting` first (DESIGN.md §3.10,
 * §5). Any end without a prior `Exiting` is a death, whatever the exit code. Because a transport
 * delivers a peer's end after its last frame, the report comes after every frame the rank sent.
 * It never restarts anything; the coordinator decides.
 *
 * @since 0.1.0
 */
import * as Stream from "effect/Stream"
import * as DeathReport from "../actor/death-report.ts"
import type * as Transport from "./transport.ts"

/**
 * A rank that announced `Exiting` and then ended: a clean exit, never a failure.
 *
 * @since 0.1.0
 * @category model
 */
export interface Left {
  readonly _tag: "Left"
  readonly rank: Transport.Peer
  readonly cause: DeathReport.DeathCause
}

/**
 * What the coordinator's mailbox receives from a supervised transport, in order per rank.
 *
 * @since 0.1.0
 * @category model
 */
export type Inbound = Transport.Frame | Transport.BadFrame | DeathReport.DeathReport | Left

/**
 * Supervisor options; both must not throw.
 *
 * - `isExiting(frame)`: whether a frame is the rank's `Exiting` announcement (with `src/wire`,
 *   decode and compare the message tag).
 * - `crashOf(frame)`: the `{error, stack}` of a rank's `Crashing` frame, its last words before it
 *   exits on an uncaught error, else `undefined` (default: never). The rank's end is then reported
 *   as `Crashed{error, stack}` instead of the `Exited{code}` (or stackless `Crashed`) its host
 *   saw; an end by the host or a signal (`Killed`, `Disconnected`) stays what it was (issue C1).
 *
 * @since 0.1.0
 * @category options
 */
export interface Options {
  readonly isExiting: (frame: Uint8Array) => boolean
  readonly crashOf?: (frame: Uint8Array) => { readonly error: string; readonly stack: string } | undefined
}

/**
 * A supervisor's state over one transport. `classify` maps each event in delivery order;
 * `exiting(rank)` records an `Exiting` learnt another way (e.g. already decoded by the caller).
 *
 * @since 0.1.0
 * @category model
 */
export interface Supervisor {
  readonly classify: (event: Transport.Event) => Inbound
  readonly exiting: (rank: Transport.Peer) => void
}

/**
 * Makes a supervisor. Exited ranks, and the crash of each rank that sent `Crashing` until its
 * end, are remembered in a set and a map bounded by the number of ranks.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Supervisor => {
  const exited = new Set<Transport.Peer>()
  const crashes = new Map<Transport.Peer, { readonly error: string; readonly stack: string }>()
  const causeOf = (peer: Transport.Peer, cause: DeathReport.DeathCause): DeathReport.DeathCause => {
    const crash = crashes.get(peer)
    if (crash === undefined) return cause
    crashes.delete(peer)
    return cause._tag === "Exited" || cause._tag === "Crashed" ? DeathReport.crashed(crash.error, crash.stack) : cause
  }
  return {
    exiting: (rank) => void exited.add(rank),
    classify: (event) => {
      switch (event._tag) {
        case "Frame": {
          if (options.isExiting(event.bytes)) exited.add(event.peer)
          const crash = options.crashOf?.(event.bytes)
          if (crash !== undefined) crashes.set(event.peer, crash)
          return event
        }
        case "BadFrame":
          return event
        case "Ended":
          return exited.has(event.peer)
            ? { _tag: "Left", rank: event.peer, cause: causeOf(event.peer, event.cause) }
            : DeathReport.make(event.peer, causeOf(event.peer, event.cause))
      }
    }
  }
}

/**
 * The supervised inbound stream of `transport`: frames, bad frames, death reports and clean
 * exits, in delivery order.
 *
 * @since 0.1.0
 * @category constructors
 */
export const supervise = (transport: Transport.TransportShape, options: Options): Stream.Stream<Inbound> => {
  const supervisor = make(options)
  return Stream.map(transport.events, supervisor.classify)
}
