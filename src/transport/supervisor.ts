/**
 * The transport supervisor: reads a transport's ordered events and turns every end of a rank
 * into a `DeathReport{rank, cause}` (docs/design.md §3.10, §5). Because a transport delivers a peer's
 * end after its last frame, the report comes after every frame the rank sent. Whether the end was
 * clean is the core's decision, not the supervisor's: a rank whose `Exiting` the core accepted has
 * already left the run, and the core drops (and counts) the report; any other end is a death,
 * whatever the exit code. The supervisor never reads frames, so a frame it cannot judge (a spoofed
 * or malformed `Exiting`) can never make a death look clean. It never restarts anything; the
 * coordinator decides.
 *
 * @since 0.1.0
 */
import * as Stream from "effect/Stream"
import * as DeathReport from "../actor/death-report.ts"
import type * as Transport from "./transport.ts"

/**
 * What the coordinator's mailbox receives from a supervised transport, in order per rank.
 *
 * @since 0.1.0
 * @category model
 */
export type Inbound = Transport.Frame | Transport.BadFrame | DeathReport.DeathReport

/**
 * Maps one transport event: frames pass, an end becomes a `DeathReport`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const classify = (event: Transport.Event): Inbound => (event._tag === "Ended" ? DeathReport.make(event.peer, event.cause) : event)

/**
 * The supervised inbound stream of `transport`: frames, bad frames and death reports, in delivery
 * order.
 *
 * @since 0.1.0
 * @category constructors
 */
export const supervise = (transport: Transport.TransportShape): Stream.Stream<Inbound> => Stream.map(transport.events, classify)
