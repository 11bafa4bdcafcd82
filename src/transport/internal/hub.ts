/**
 * The endpoint machinery every transport shares: per-peer links, send batching, the ordered
 * inbox, bad-frame policy, inbox bound and counters. A concrete transport supplies a `Port` per
 * peer (how to post one message and how to close the link) and reports what arrives and when the
 * link ended through the returned `Link`.
 *
 * @since 0.1.0
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import type * as Cause from "effect/Cause"
import type * as DeathReport from "../../actor/death-report.ts"
import * as Transport from "../transport.ts"
import * as Schedule from "../../platform/schedule.ts"
import * as Batch from "./batch.ts"

/** How the hub reaches one peer's channel. `close` asks the channel to close; its end is reported later through `Link.end`. @since 0.1.0 @category internal */
export interface Port {
  readonly post: (message: Uint8Array) => void
  /** Posts a message whose every frame `Transport.Options.orderFree` marks, ahead of what waits (a link that sends in pieces); default `post`. */
  readonly postLoose?: (message: Uint8Array) => void
  readonly close: (closeCode: number) => void
  /**
   * The channel neither changes nor transfers what it posts (it copies the bytes or only reads
   * them), so one message may be posted to several ports: a frame sent alone to many peers (a
   * round's `Update`) is then batched once for all of them. Default false.
   */
  readonly sharesMessages?: boolean
  /**
   * Posts one message made of `parts` back to back without copying them (a WebSocket message
   * in fragments): a batch that holds a long frame shared with other ports (a round's `Update`
   * beside a link's own small frames) goes out without a copy of that frame per link. Only
   * with `sharesMessages`; default: such a batch is copied whole.
   */
  readonly postParts?: (parts: ReadonlyArray<Uint8Array>) => void
  /**
   * Every message the channel reports through `Link.receive` is memory of its own that nothing
   * else reads, changes or reuses afterwards (a `ws` message on Node): the inspector may keep
   * views on its frames and change them (`Transport.Inspect`'s `given`). Default false.
   */
  readonly givesMessages?: boolean
}

/** What a transport reports about one peer's channel. @since 0.1.0 @category internal */
export interface Link {
  /** One underlying message (a batch) arrived. */
  readonly receive: (message: Uint8Array) => void
  /** Bytes of the peer arrived that are not a whole message yet (a piece, a ping): it is alive (`lastArrivalMs`). */
  readonly touch: () => void
  /** The channel ended; idempotent; delivered after every message already received. */
  readonly end: (cause: DeathReport.DeathCause) => void
  /** Hands queued frames to the channel now. */
  readonly flush: () => void
  /** Closes the link from this side with `closeCode` (the end is reported by the channel). */
  readonly close: (closeCode: number) => void
}

/** A hub. @since 0.1.0 @category internal */
export interface Hub {
  readonly transport: Transport.TransportShape
  readonly attach: (peer: Transport.Peer, port: Port) => Link
  readonly link: (peer: Transport.Peer) => Link | undefined
  readonly flushAll: () => void
  /** Ends the inbox; later sends fail with `Closed`. */
  readonly shutdown: () => void
  readonly options: Resolved
}

/** Options with defaults applied. @since 0.1.0 @category internal */
export interface Resolved {
  readonly messageBytesMax: number
  readonly messageFramesMax: number
  readonly frameBytesMax: number
  readonly batchFramesMax: number
  readonly batchBytesMax: number
  readonly inboxFramesMax: number
  readonly linkFramesMax: number
  readonly badFramePolicy: "drop" | "close"
  readonly inspect: Transport.Inspect | undefined
  readonly orderFree: ((frame: Uint8Array) => boolean) | undefined
  readonly urgent: ((frame: Uint8Array) => boolean) | undefined
}

/** Applies defaults (`Transport.Options`). @since 0.1.0 @category internal */
export const resolve = (options: Transport.Options = {}): Resolved => {
  const messageBytesMax = options.messageBytesMax ?? Transport.messageBytesMaxDefault
  return {
    messageBytesMax,
    messageFramesMax: Math.max(1, options.messageFramesMax ?? Transport.messageFramesMaxDefault),
    frameBytesMax: messageBytesMax - Batch.size(1, 0),
    batchFramesMax: Math.max(1, options.batchFramesMax ?? Transport.batchFramesMaxDefault),
    batchBytesMax: Math.min(messageBytesMax, options.batchBytesMax ?? Transport.batchBytesMaxDefault),
    inboxFramesMax: options.inboxFramesMax ?? Transport.inboxFramesMaxDefault,
    linkFramesMax: Math.max(1, options.linkFramesMax ?? Transport.linkFramesMaxDefault),
    badFramePolicy: options.badFramePolicy ?? "drop",
    inspect: options.inspect,
    orderFree: options.orderFree,
    urgent: options.urgent
  }
}

/** Frames of one received message still to hand to the inbox. */
interface Received {
  readonly frames: ReadonlyArray<Uint8Array>
  next: number
  readonly arrivedMs: number
}

interface LinkState {
  readonly peer: Transport.Peer
  readonly port: Port
  outbox: Array<Uint8Array>
  outboxBytes: number
  scheduled: boolean
  closing: boolean
  ended: boolean
  /** Received messages waiting for their turn, oldest first, and their frame count. */
  readonly received: Array<Received>
  waitingFrames: number
  /** In the ready ring. */
  ready: boolean
  /** The link's end, held until its waiting frames are delivered. */
  endCause: DeathReport.DeathCause | undefined
  lastArrivalMs: number | undefined
  /** It went to the front of the ready ring once (its end, or an urgent frame): never again. */
  jumped: boolean
}

/**
 * A frame at least this long, posted alone to ports that share messages, is batched once and the
 * batch reused for every such port (`Port.sharesMessages`). Shorter frames cost less to copy again
 * than to look up.
 */
const sharedBatchFromBytes = 4096

/** Frames of one link handed to the inbox per turn. */
const turnFrames = 64
/**
 * The pump hands frames over while the inbox holds fewer than this: one turn's worth. A deeper
 * inbox adds no throughput (its consumer is one thread) but is waited out by a link's end, which
 * goes straight to the inbox when the link has nothing waiting (a crash's death report).
 */
const inboxLowFrames = 64
/** A run of turns lasts about this long before the event loop gets to run. */
const runBudgetMs = 4
/** How long the pump waits for the consumer when the inbox stayed full for `fullPollsMax` turns of the event loop. */
const fullRetryMs = 1
const fullPollsMax = 8

/** Makes a hub for endpoint `self`. @since 0.1.0 @category internal */
export const make = (self: Transport.Peer, options: Transport.Options = {}): Effect.Effect<Hub> =>
  Effect.gen(function* () {
    // Long because it is a factory: the closures it returns share its state, and each is short.
    const resolved = resolve(options)
    const clock = yield* Clock.Clock
    const inbox = yield* Queue.unbounded<Transport.Event, Cause.Done>()
    const links = new Map<Transport.Peer, LinkState>()
    const handles = new Map<Transport.Peer, Link>()
    const stats = { framesSent: 0, messagesSent: 0, framesReceived: 0, messagesReceived: 0, badFrames: 0, overflows: 0, refusedMessages: 0 }
    let open = true
    /** Links with frames waiting, in turn order. */
    const ring: Array<LinkState> = []
    let waitingTotal = 0
    let pumping = false
    let pumpScheduled = false
    /** Turns of the event loop the inbox stayed full; the pump polls each turn, then every ms. */
    let fullPolls = 0

    /** The batch of one long frame, made once however many ports share it. */
    const loneBatches = new WeakMap<Uint8Array, Uint8Array>()
    const batchOf = (state: LinkState): Uint8Array => {
      const only = state.outbox.length === 1 ? state.outbox[0]! : undefined
      if (only === undefined || state.port.sharesMessages !== true || only.byteLength < sharedBatchFromBytes)
        return Batch.encode(state.outbox, state.outboxBytes)
      let batch = loneBatches.get(only)
      if (batch === undefined) {
        batch = Batch.encode(state.outbox, state.outboxBytes)
        loneBatches.set(only, batch)
      }
      return batch
    }

    /** The batch in parts (`Batch.parts`) for a port that posts parts and shares messages; `undefined` to batch it whole. */
    const partsOf = (state: LinkState): ReadonlyArray<Uint8Array> | undefined =>
      state.outbox.length > 1 && state.port.postParts !== undefined && state.port.sharesMessages === true
        ? Batch.parts(state.outbox, sharedBatchFromBytes)
        : undefined

    const flush = (state: LinkState): void => {
      state.scheduled = false
      if (state.outbox.length === 0 || state.ended) return
      const loose = state.port.postLoose !== undefined && resolved.orderFree !== undefined && state.outbox.every(resolved.orderFree)
      const parts = loose ? undefined : partsOf(state)
      const message = parts === undefined ? batchOf(state) : undefined
      stats.framesSent += state.outbox.length
      stats.messagesSent += 1
      state.outbox = []
      state.outboxBytes = 0
      if (parts !== undefined) state.port.postParts!(parts)
      else if (loose) state.port.postLoose!(message!)
      else state.port.post(message!)
    }

    /** Drops what a link still has waiting (it broke a rule, or it was closed). */
    const discardWaiting = (state: LinkState): void => {
      waitingTotal -= state.waitingFrames
      state.waitingFrames = 0
      state.received.length = 0
    }

    const closeLink = (state: LinkState, closeCode: number): void => {
      if (state.closing || state.ended) return
      flush(state)
      state.closing = true
      state.port.close(closeCode)
    }

    const deliverEnd = (state: LinkState): void => {
      const cause = state.endCause
      if (cause === undefined || state.waitingFrames > 0) return
      state.endCause = undefined
      if (open) Queue.offerUnsafe(inbox, { _tag: "Ended", peer: state.peer, cause })
    }

    /** Hands up to `turnFrames` of one link's waiting frames to the inbox, through the inspector. */
    const turn = (state: LinkState): void => {
      let budget = turnFrames
      while (budget > 0 && state.received.length > 0) {
        const message = state.received[0]!
        while (budget > 0 && message.next < message.frames.length) {
          const bytes = message.frames[message.next]!
          message.next += 1
          state.waitingFrames -= 1
          waitingTotal -= 1
          budget -= 1
          const given = state.port.givesMessages === true
          const verdict = resolved.inspect?.(state.peer, bytes, given)
          if (verdict === undefined) {
            stats.framesReceived += 1
            Queue.offerUnsafe(
              inbox,
              given
                ? { _tag: "Frame", peer: state.peer, bytes, arrivedMs: message.arrivedMs, given }
                : { _tag: "Frame", peer: state.peer, bytes, arrivedMs: message.arrivedMs }
            )
          } else if (verdict._tag === "Decoded") {
            stats.framesReceived += 1
            Queue.offerUnsafe(inbox, { _tag: "Frame", peer: state.peer, bytes, arrivedMs: message.arrivedMs, decoded: verdict.value })
          } else if (verdict._tag === "Impersonation") {
            discardWaiting(state)
            closeLink(state, Transport.CloseCode.RankMismatch)
            return
          } else {
            stats.badFrames += 1
            Queue.offerUnsafe(inbox, { _tag: "BadFrame", peer: state.peer, error: verdict.error, arrivedMs: message.arrivedMs })
            if (resolved.badFramePolicy === "close") {
              discardWaiting(state)
              closeLink(state, verdict.closeCode)
              return
            }
          }
        }
        if (message.next >= message.frames.length) state.received.shift()
      }
    }

    /**
     * Hands waiting frames to the inbox, one turn per ready link in ring order, while the inbox has
     * room and the run's time budget lasts; then yields to the event loop and goes on later.
     */
    const pump = (): void => {
      pumpScheduled = false
      if (pumping || !open) return
      pumping = true
      const startedMs = clock.currentTimeMillisUnsafe()
      try {
        while (ring.length > 0) {
          if (Queue.sizeUnsafe(inbox) >= inboxLowFrames) {
            fullPolls += 1
            schedulePump(fullPolls > fullPollsMax ? fullRetryMs : 0)
            return
          }
          fullPolls = 0
          const state = ring.shift()!
          turn(state)
          if (state.waitingFrames > 0) ring.push(state)
          else {
            state.ready = false
            deliverEnd(state)
          }
          if (ring.length > 0 && clock.currentTimeMillisUnsafe() - startedMs >= runBudgetMs) {
            schedulePump(0)
            return
          }
        }
      } finally {
        pumping = false
      }
    }

    /**
     * Puts a link that is leaving (its end came, or an urgent frame) at the front of the ready
     * ring, once per link: its frames and end then wait for no other link's turn. Its own frames
     * keep their order; only the order between links changes, which a transport never promised.
     */
    const jump = (state: LinkState): void => {
      if (state.jumped || !state.ready) return
      state.jumped = true
      const at = ring.indexOf(state)
      if (at <= 0) return
      ring.splice(at, 1)
      ring.unshift(state)
    }

    const schedulePump = (delayMs: number): void => {
      if (pumpScheduled) return
      pumpScheduled = true
      if (delayMs === 0) Schedule.afterIo(pump)
      else Schedule.after(delayMs, pump)
    }

    const attach = (peer: Transport.Peer, port: Port): Link => {
      const state: LinkState = {
        peer,
        port,
        outbox: [],
        outboxBytes: 0,
        scheduled: false,
        closing: false,
        ended: false,
        received: [],
        waitingFrames: 0,
        ready: false,
        endCause: undefined,
        lastArrivalMs: undefined,
        jumped: false
      }
      links.set(peer, state)
      const refuse = (closeCode: number): void => {
        stats.refusedMessages += 1
        closeLink(state, closeCode)
      }
      const link: Link = {
        flush: () => flush(state),
        close: (closeCode) => closeLink(state, closeCode),
        touch: () => {
          if (!state.ended) state.lastArrivalMs = clock.currentTimeMillisUnsafe()
        },
        receive: (message) => {
          if (state.closing || state.ended || !open) return
          const arrivedMs = clock.currentTimeMillisUnsafe()
          state.lastArrivalMs = arrivedMs
          if (message.byteLength > resolved.messageBytesMax) return refuse(Transport.CloseCode.MessageTooBig)
          // The header is checked before any frame view is built (a 16 MiB message can declare
          // four million empty frames).
          const declared = Batch.count(message)
          if (declared === undefined) return refuse(Transport.CloseCode.BadBatch)
          if (declared > resolved.messageFramesMax) return refuse(Transport.CloseCode.TooManyFrames)
          const frames = Batch.decode(message)
          if (frames === undefined) return refuse(Transport.CloseCode.BadBatch)
          stats.messagesReceived += 1
          if (frames.length === 0) return
          if (
            Queue.sizeUnsafe(inbox) + waitingTotal + frames.length > resolved.inboxFramesMax ||
            state.waitingFrames + frames.length > resolved.linkFramesMax
          ) {
            stats.overflows += 1
            return closeLink(state, Transport.CloseCode.InboxOverflow)
          }
          state.received.push({ frames, next: 0, arrivedMs })
          state.waitingFrames += frames.length
          waitingTotal += frames.length
          if (!state.ready) {
            state.ready = true
            ring.push(state)
          }
          if (!state.jumped && resolved.urgent?.(frames[frames.length - 1]!) === true) jump(state)
          // With no backlog this delivers at once, as a message arrives; a backlog waits its turn.
          if (!pumpScheduled) pump()
        },
        end: (cause) => {
          if (state.ended) return
          state.ended = true
          state.outbox = []
          state.endCause = cause
          jump(state)
          deliverEnd(state)
        }
      }
      handles.set(peer, link)
      return link
    }

    // One error for every send after the close, made at the first: capturing its stack costs each
    // hub (a rank of `cohort join --ranks` has one) more than the rest of its making.
    let closed: Transport.TransportError | undefined
    const sendUnsafe = (peer: Transport.Peer, frame: Uint8Array): Transport.TransportError | undefined => {
      if (!open) return (closed ??= new Transport.TransportError({ reason: { _tag: "Closed" } }))
      const state = links.get(peer)
      if (state === undefined) return new Transport.TransportError({ reason: { _tag: "UnknownPeer", peer } })
      if (state.ended || state.closing) return new Transport.TransportError({ reason: { _tag: "PeerGone", peer } })
      if (frame.byteLength > resolved.frameBytesMax) {
        return new Transport.TransportError({
          reason: { _tag: "FrameTooLarge", peer, bytes: frame.byteLength, frameBytesMax: resolved.frameBytesMax }
        })
      }
      if (state.outbox.length > 0 && Batch.size(state.outbox.length + 1, state.outboxBytes + frame.byteLength) > resolved.batchBytesMax)
        flush(state)
      state.outbox.push(frame)
      state.outboxBytes += frame.byteLength
      if (state.outbox.length >= resolved.batchFramesMax) flush(state)
      else if (!state.scheduled) {
        state.scheduled = true
        queueMicrotask(() => flush(state))
      }
      return undefined
    }

    const flushAll = (): void => {
      for (const state of links.values()) flush(state)
    }

    const transport: Transport.TransportShape = {
      self,
      peers: Effect.sync(() =>
        [...links.entries()]
          .filter(([, s]) => !s.ended && !s.closing)
          .map(([p]) => p)
          .sort((a, b) => a - b)
      ),
      send: Transport.sendFromUnsafe(sendUnsafe),
      sendUnsafe,
      flush: Effect.sync(flushAll),
      inbox,
      events: Stream.fromQueue(inbox),
      stats: Effect.sync(() => ({ ...stats })),
      lastArrivalMs: (peer) => links.get(peer)?.lastArrivalMs,
      disconnect: (peer, closeCode) => {
        const state = links.get(peer)
        if (state !== undefined) closeLink(state, closeCode)
      }
    }

    return {
      transport,
      attach,
      link: (peer) => handles.get(peer),
      flushAll,
      shutdown: () => {
        if (!open) return
        flushAll()
        open = false
        Queue.endUnsafe(inbox)
      },
      options: resolved
    }
  })
