import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as Coordinator from "../../actors/coordinator.ts"
import * as Core from "../../src/core/coordinator.ts"
import type { ToRank } from "../../src/core/messages.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"

/**
 * A unit-test transport: it records every frame handed to it and refuses those for `refuse`
 * with `PeerGone`, as a link that ended while its `Ended` event still waits in the mailbox.
 */
const recordingTransport = (refuse: number) =>
  Effect.gen(function*() {
    const inbox = yield* Queue.unbounded<Transport.Event, never>()
    const sent: Array<readonly [number, ToRank]> = []
    const sendUnsafe = (peer: number, frame: Uint8Array): Transport.TransportError | undefined => {
      if (peer === refuse) return new Transport.TransportError({ reason: { _tag: "PeerGone", peer } })
      const decoded = Codec.decode(frame, { from: "coordinator" })
      if (Result.isSuccess(decoded)) sent.push([peer, decoded.success.message as ToRank])
      return undefined
    }
    const transport: Transport.TransportShape = {
      self: Transport.coordinatorPeer,
      peers: Effect.succeed([]),
      send: Transport.sendFromUnsafe(sendUnsafe),
      sendUnsafe,
      flush: Effect.void,
      inbox,
      events: Stream.fromQueue(inbox),
      stats: Effect.succeed({ framesSent: 0, messagesSent: 0, framesReceived: 0, messagesReceived: 0, badFrames: 0, overflows: 0, refusedMessages: 0 }),
      lastArrivalMs: () => undefined,
      disconnect: () => {}
    }
    const hello = (rank: number) =>
      Queue.offer(inbox, { _tag: "Frame", peer: rank, bytes: Codec.encode(Frame.fromRank(rank, { _tag: "Hello", paramsLength: 2 })), arrivedMs: 0 })
    return { transport, sent, hello }
  })

describe("coordinator actor", () => {
  it.live("a frame the transport refuses goes back to the core as SendFailed: a ControlDrop alert, the others still sent", () =>
    Effect.scoped(Effect.gen(function*() {
      const made = Core.make({ worldSize: 3, epochSamples: 30, epochs: 1 }, 0)
      if ("_tag" in made) return assert.fail(made.reason)
      const { transport, sent, hello } = yield* recordingTransport(1)
      const alerts: Array<string> = []
      const handle = yield* Coordinator.start({
        state: made,
        transport,
        tickMs: 10_000,
        coordHeartbeatMs: Number.POSITIVE_INFINITY,
        hooks: { onCommand: (command) => void (command._tag === "Alert" && alerts.push(`${command.alert.class}: ${command.alert.detail}`)) }
      })
      for (const rank of [0, 1, 2]) yield* hello(rank)
      while (handle.state.counters.sendFailures < 2) yield* Effect.sleep(1)
      const roles = { _tag: "SetRoles", checkpoint: 0, eval: 0, epochFn: 0 } as const
      assert.deepStrictEqual(sent, [
        [0, roles],
        [2, roles],
        [0, { _tag: "StartEpoch", epoch: 0, offset: 0, size: 10 }],
        [2, { _tag: "StartEpoch", epoch: 0, offset: 20, size: 10 }]
      ])
      assert.strictEqual(handle.state.counters.sendFailures, 2)
      // Both refusals raise ControlDrop for rank 1; the alert lane folds the second into the first.
      assert.deepStrictEqual(alerts, ["ControlDrop: SetRoles to rank 1 failed: PeerGone"])
      assert.isFalse(yield* Deferred.isDone(handle.outcome))
    })))
})
