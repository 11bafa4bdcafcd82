/**
 * A scripted rank for transport tests: it runs on the rank's endpoint of any transport and obeys
 * JSON commands from the coordinator. Data frames are `[0x01, u32 index LE, padding]`; replies are
 * JSON text; `send` makes it send the given frames verbatim (e.g. wire frames built by the test).
 * It imports no codec, so worker and process fixtures start fast.
 */
import { getPriority } from "node:os"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Transport from "../../src/transport/transport.ts"

/** How a scripted rank leaves after a burst. */
export type Leave = "exit0" | "exit7" | "throw" | "reject" | "hang" | "oom"

export type Command =
  | { readonly op: "burst"; readonly n: number; readonly bytes: number; readonly then?: Leave }
  | { readonly op: "send"; readonly frames: ReadonlyArray<ReadonlyArray<number>> }
  | { readonly op: "stats" }
  | { readonly op: "nice" }

export interface Reply {
  readonly received: number
  readonly inOrder: boolean
  readonly stats: Transport.Stats
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export const command = (c: Command): Uint8Array => encoder.encode(JSON.stringify(c))

export const dataFrame = (index: number, bytes = 8): Uint8Array => {
  const out = new Uint8Array(Math.max(5, bytes))
  out[0] = 1
  new DataView(out.buffer).setUint32(1, index, true)
  return out
}

export const indexOf = (frame: Uint8Array): number =>
  frame[0] === 1 ? new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getUint32(1, true) : -1

export const parseReply = (frame: Uint8Array): Reply => JSON.parse(decoder.decode(frame)) as Reply

/** The calling thread's nice value (Linux), or the process's. */
export const ownNice = (): number => getPriority(0)

/** Asks the rank behind `transport`'s peer 0 for its nice value and waits for the answer. */
export const niceOf = (transport: Transport.TransportShape): Effect.Effect<number> =>
  Effect.gen(function*() {
    yield* Effect.orDie(transport.send(0, command({ op: "nice" })))
    while (true) {
      const event = yield* Effect.orDie(Queue.take(transport.inbox))
      if (event._tag === "Frame") return (JSON.parse(decoder.decode(event.bytes)) as { readonly nice: number }).nice
    }
  })

/** Runs the script until the coordinator's link ends or the rank leaves. */
export const run = (transport: Transport.TransportShape, leave: (how: Leave) => void): Effect.Effect<void> =>
  Effect.gen(function*() {
    const to = Transport.coordinatorPeer
    let received = 0
    let inOrder = true
    while (true) {
      const event = yield* Queue.take(transport.inbox).pipe(Effect.catch(() => Effect.succeed(undefined)))
      if (event === undefined || (event._tag === "Ended" && event.peer === to)) return
      if (event._tag !== "Frame") continue
      if (event.bytes[0] === 1) {
        if (indexOf(event.bytes) !== received) inOrder = false
        received += 1
        continue
      }
      const c = JSON.parse(decoder.decode(event.bytes)) as Command
      switch (c.op) {
        case "burst": {
          for (let i = 0; i < c.n; i++) yield* Effect.orDie(transport.send(to, dataFrame(i, c.bytes)))
          if (c.then !== undefined) {
            leave(c.then)
            if (c.then !== "hang") return
          }
          break
        }
        case "send": {
          for (const frame of c.frames) yield* Effect.orDie(transport.send(to, Uint8Array.from(frame)))
          break
        }
        case "nice": {
          // The calling thread's nice value on Linux (a worker's own), the process's elsewhere.
          yield* Effect.orDie(transport.send(to, encoder.encode(JSON.stringify({ nice: getPriority(0) }))))
          break
        }
        case "stats": {
          const stats = yield* transport.stats
          yield* Effect.orDie(transport.send(to, encoder.encode(JSON.stringify({ received, inOrder, stats }))))
          break
        }
      }
    }
  })
