/**
 * The in-memory transport: a real implementation of the Transport contract between endpoints of
 * one process, with injectable faults for tests (docs/design.md §5).
 *
 * Every pair of endpoints of a `Network` is linked both ways by a pipe: a FIFO of messages
 * (batches) served by its own fiber. Faults act on messages as they are posted, per directed
 * pipe; with `batchFramesMax: 1` a message is one frame. `kill(peer, cause)` flushes the peer's
 * queued frames, then delivers `Ended{peer, cause}` to every other endpoint after the last
 * message in each pipe, delays included. Time is Effect's `Clock`, so `TestClock` drives delays.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as DeathReport from "../actor/death-report.ts"
import * as Hub from "./internal/hub.ts"
import * as Transport from "./transport.ts"

/**
 * A fault on one directed pipe:
 *
 * - `Drop{count}`: drop the next `count` messages (default: every message until `heal`).
 * - `Delay{ms}`: deliver each message `ms` milliseconds (>= 0) after it was posted; order is kept.
 * - `Duplicate{count}`: deliver each of the next `count` messages twice (default: until `heal`).
 * - `Reorder{count}`: swap each of the next `count` messages with the one posted after it
 *   (default: until `heal`); a held message is released before an end.
 *
 * @since 0.1.0
 * @category faults
 */
export type Fault =
  | { readonly _tag: "Drop"; readonly count?: number }
  | { readonly _tag: "Delay"; readonly ms: number }
  | { readonly _tag: "Duplicate"; readonly count?: number }
  | { readonly _tag: "Reorder"; readonly count?: number }

/**
 * Counters of the network's fault injector, integers >= 0.
 *
 * @since 0.1.0
 * @category model
 */
export interface FaultStats {
  readonly dropped: number
  readonly duplicated: number
  readonly reordered: number
  readonly delayed: number
}

/**
 * A set of in-memory endpoints.
 *
 * - `endpoint(peer, options?)`: a new endpoint linked to every other; closing the scope makes it
 *   leave (the others see `Ended{peer, Disconnected{1000}}`).
 * - `inject(from, to, fault)`: adds `fault` to the pipe `from -> to` (replacing one of the same tag).
 * - `partition(a, b)`: drops every message between the groups `a` and `b`, both ways, until `heal`.
 * - `heal()`: removes every fault and partition.
 * - `kill(peer, cause)`: ends `peer`; the others see `Ended{peer, cause}` after its last message.
 * - `faults`: fault counters.
 *
 * @since 0.1.0
 * @category model
 */
export interface Network {
  readonly endpoint: (peer: Transport.Peer, options?: Transport.Options) => Effect.Effect<Transport.TransportShape, never, Scope.Scope>
  readonly inject: (from: Transport.Peer, to: Transport.Peer, fault: Fault) => Effect.Effect<void>
  readonly partition: (a: ReadonlyArray<Transport.Peer>, b: ReadonlyArray<Transport.Peer>) => Effect.Effect<void>
  readonly heal: Effect.Effect<void>
  readonly kill: (peer: Transport.Peer, cause: DeathReport.DeathCause) => Effect.Effect<void>
  readonly faults: Effect.Effect<FaultStats>
}

type Item =
  | { readonly _tag: "Message"; readonly message: Uint8Array; readonly dueMs: number }
  | { readonly _tag: "End"; readonly cause: DeathReport.DeathCause }

interface Pipe {
  readonly items: Queue.Queue<Item>
  held: Uint8Array | undefined
  ended: boolean
}

interface Node {
  readonly hub: Hub.Hub
  dead: boolean
}

const key = (from: Transport.Peer, to: Transport.Peer): string => `${from}>${to}`

/**
 * Makes an empty network whose pipe fibers live in the current scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Network, never, Scope.Scope> = Effect.gen(function* () {
  // Long because it is a factory: the closures it returns share its state, and each is short.
  const scope = yield* Effect.scope
  const clock = yield* Clock.Clock
  const nodes = new Map<Transport.Peer, Node>()
  const pipes = new Map<string, Pipe>()
  const faults = new Map<string, Map<Fault["_tag"], { fault: Fault; left: number }>>()
  const partitions: Array<{ readonly a: ReadonlySet<Transport.Peer>; readonly b: ReadonlySet<Transport.Peer> }> = []
  const counters = { dropped: 0, duplicated: 0, reordered: 0, delayed: 0 }

  const partitioned = (from: Transport.Peer, to: Transport.Peer): boolean =>
    partitions.some(({ a, b }) => (a.has(from) && b.has(to)) || (b.has(from) && a.has(to)))

  const take = (pipeKey: string, tag: Fault["_tag"]): Fault | undefined => {
    const entry = faults.get(pipeKey)?.get(tag)
    if (entry === undefined) return undefined
    entry.left -= 1
    if (entry.left <= 0) faults.get(pipeKey)?.delete(tag)
    return entry.fault
  }

  const enqueue = (pipe: Pipe, message: Uint8Array, delayMs: number): void => {
    Queue.offerUnsafe(pipe.items, { _tag: "Message", message, dueMs: clock.currentTimeMillisUnsafe() + delayMs })
  }

  const post = (from: Transport.Peer, to: Transport.Peer, message: Uint8Array): void => {
    const pipe = pipes.get(key(from, to))
    if (pipe === undefined || pipe.ended) return
    const pipeKey = key(from, to)
    if (partitioned(from, to) || take(pipeKey, "Drop") !== undefined) {
      counters.dropped += 1
      return
    }
    const delay = faults.get(pipeKey)?.get("Delay")?.fault
    const delayMs = delay?._tag === "Delay" ? Math.max(0, delay.ms) : 0
    if (delayMs > 0) counters.delayed += 1
    const copies = take(pipeKey, "Duplicate") === undefined ? 1 : 2
    counters.duplicated += copies - 1
    for (let i = 0; i < copies; i++) {
      if (pipe.held !== undefined) {
        enqueue(pipe, message, delayMs)
        enqueue(pipe, pipe.held, delayMs)
        pipe.held = undefined
      } else if (take(pipeKey, "Reorder") !== undefined) {
        counters.reordered += 1
        pipe.held = message
      } else {
        enqueue(pipe, message, delayMs)
      }
    }
  }

  const endPipe = (from: Transport.Peer, to: Transport.Peer, cause: DeathReport.DeathCause): void => {
    const pipe = pipes.get(key(from, to))
    if (pipe === undefined || pipe.ended) return
    if (pipe.held !== undefined) enqueue(pipe, pipe.held, 0)
    pipe.held = undefined
    pipe.ended = true
    Queue.offerUnsafe(pipe.items, { _tag: "End", cause })
  }

  const serve = (from: Transport.Peer, to: Transport.Peer, pipe: Pipe): Effect.Effect<void> =>
    Effect.gen(function* () {
      while (true) {
        const item = yield* Queue.take(pipe.items)
        const link = nodes.get(to)?.hub.link(from)
        if (item._tag === "End") {
          link?.end(item.cause)
          return
        }
        const waitMs = item.dueMs - clock.currentTimeMillisUnsafe()
        if (waitMs > 0) yield* Effect.sleep(waitMs)
        link?.receive(item.message)
      }
    })

  const openPipe = (from: Transport.Peer, to: Transport.Peer): Effect.Effect<void> =>
    Effect.gen(function* () {
      const pipe: Pipe = { items: yield* Queue.unbounded<Item>(), held: undefined, ended: false }
      pipes.set(key(from, to), pipe)
      yield* Effect.forkIn(serve(from, to, pipe), scope)
    })

  const kill = (peer: Transport.Peer, cause: DeathReport.DeathCause): void => {
    const node = nodes.get(peer)
    if (node === undefined || node.dead) return
    node.hub.flushAll()
    node.dead = true
    for (const other of nodes.keys()) {
      if (other === peer) continue
      endPipe(peer, other, cause)
      endPipe(other, peer, cause)
    }
    node.hub.shutdown()
  }

  const endpoint = (peer: Transport.Peer, options?: Transport.Options) =>
    Effect.gen(function* () {
      const hub = yield* Hub.make(peer, options)
      const node: Node = { hub, dead: false }
      for (const [other, otherNode] of nodes) {
        if (otherNode.dead) continue
        yield* openPipe(peer, other)
        yield* openPipe(other, peer)
        hub.attach(other, {
          post: (message) => post(peer, other, message),
          close: (code) => closeLink(peer, other, code)
        })
        otherNode.hub.attach(peer, {
          post: (message) => post(other, peer, message),
          close: (code) => closeLink(other, peer, code)
        })
      }
      nodes.set(peer, node)
      yield* Effect.addFinalizer(() => Effect.sync(() => kill(peer, DeathReport.disconnected(Transport.CloseCode.Normal))))
      return hub.transport
    })

  // One side closed its link: both sides see the other end with the close code, after in-flight messages.
  const closeLink = (by: Transport.Peer, other: Transport.Peer, code: number): void => {
    endPipe(by, other, DeathReport.disconnected(code))
    endPipe(other, by, DeathReport.disconnected(code))
  }

  return {
    endpoint,
    inject: (from, to, fault) =>
      Effect.sync(() => {
        const pipeKey = key(from, to)
        const map = faults.get(pipeKey) ?? new Map()
        const count = fault._tag === "Delay" ? Infinity : (fault.count ?? Infinity)
        map.set(fault._tag, { fault, left: count })
        faults.set(pipeKey, map)
      }),
    partition: (a, b) => Effect.sync(() => void partitions.push({ a: new Set(a), b: new Set(b) })),
    heal: Effect.sync(() => {
      faults.clear()
      partitions.length = 0
    }),
    kill: (peer, cause) => Effect.sync(() => kill(peer, cause)),
    faults: Effect.sync(() => ({ ...counters }))
  }
})
