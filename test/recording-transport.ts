/**
 * A coordinator-side transport with no links, for the coordinator actor's unit tests
 * (test/actors/coordinator.test.ts) and the join bench (bench/join.ts): frames reach the actor
 * by hand through `inbox`, and every frame the actor sends is handed to `sendUnsafe` at the
 * moment of the send, which records what it needs and may refuse it with a `TransportError`
 * (as a link that ended while its `Ended` event still waits in the mailbox). Its stats stay 0
 * and it has no peers.
 */
import * as Effect from "effect/Effect"
import type * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Transport from "../src/transport/transport.ts"

/** The transport over `inbox`; `disconnect(peer, closeCode)` is called as the actor closes a link (default: nothing). */
export const make = (
  inbox: Queue.Queue<Transport.Event, never>,
  sendUnsafe: (peer: number, frame: Uint8Array) => Transport.TransportError | undefined,
  disconnect: (peer: number, code: number) => void = () => {}
): Transport.TransportShape => ({
  self: Transport.coordinatorPeer,
  peers: Effect.succeed([]),
  send: Transport.sendFromUnsafe(sendUnsafe),
  sendUnsafe,
  flush: Effect.void,
  inbox,
  events: Stream.fromQueue(inbox),
  stats: Effect.succeed({
    framesSent: 0,
    messagesSent: 0,
    framesReceived: 0,
    messagesReceived: 0,
    badFrames: 0,
    overflows: 0,
    refusedMessages: 0
  }),
  lastArrivalMs: () => undefined,
  disconnect
})
