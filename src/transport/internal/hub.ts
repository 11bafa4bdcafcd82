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
import * as Batch from "./batch.ts"

/** How the hub reaches one peer's channel. `close` asks the channel to close; its end is reported later through `Link.end`. @since 0.1.0 @category internal */
export interface Port {
  readonly post: (message: Uint8Array) => void
  readonly close: (closeCode: number) => void
}

/** What a transport reports about one peer's channel. @since 0.1.0 @category internal */
export interface Link {
  /** One underlying message (a batch) arrived. */
  readonly receive: (message: Uint8Array) => void
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
  readonly frameBytesMax: number
  readonly batchFramesMax: number
  readonly batchBytesMax: number
  readonly inboxFramesMax: number
  readonly badFramePolicy: "drop" | "close"
  readonly inspect: Transport.Inspect | undefined
}

/** Applies defaults (`Transport.Options`). @since 0.1.0 @category internal */
export const resolve = (options: Transport.Options = {}): Resolved => {
  const messageBytesMax = options.messageBytesMax ?? Transport.messageBytesMaxDefault
  return {
    messageBytesMax,
    frameBytesMax: messageBytesMax - Batch.size(1, 0),
    batchFramesMax: Math.max(1, options.batchFramesMax ?? Transport.batchFramesMaxDefault),
    batchBytesMax: Math.min(messageBytesMax, options.batchBytesMax ?? Transport.batchBytesMaxDefault),
    inboxFramesMax: options.inboxFramesMax ?? Transport.inboxFramesMaxDefault,
    badFramePolicy: options.badFramePolicy ?? "drop",
    inspect: options.inspect
  }
}

interface LinkState {
  readonly port: Port
  outbox: Array<Uint8Array>
  outboxBytes: number
  scheduled: boolean
  closing: boolean
  ended: boolean
}

/** Makes a hub for endpoint `self`. @since 0.1.0 @category internal */
export const make = (self: Transport.Peer, options: Transport.Options = {}): Effect.Effect<Hub> =>
  Effect.gen(function*() {
    const resolved = resolve(options)
    const clock = yield* Clock.Clock
    const inbox = yield* Queue.unbounded<Transport.Event, Cause.Done>()
    const links = new Map<Transport.Peer, LinkState>()
    const handles = new Map<Transport.Peer, Link>()
    const stats = { framesSent: 0, messagesSent: 0, framesReceived: 0, messagesReceived: 0, badFrames: 0, overflows: 0 }
    let open = true

    const flush = (state: LinkState): void => {
      state.scheduled = false
      if (state.outbox.length === 0 || state.ended) return
      const message = Batch.encode(state.outbox, state.outboxBytes)
      stats.framesSent += state.outbox.length
      stats.messagesSent += 1
      state.outbox = []
      state.outboxBytes = 0
      state.port.post(message)
    }

    const closeLink = (state: LinkState, closeCode: number): void => {
      if (state.closing || state.ended) return
      flush(state)
      state.closing = true
      state.port.close(closeCode)
    }

    const attach = (peer: Transport.Peer, port: Port): Link => {
      const state: LinkState = { port, outbox: [], outboxBytes: 0, scheduled: false, closing: false, ended: false }
      links.set(peer, state)
      const link: Link = {
        flush: () => flush(state),
        close: (closeCode) => closeLink(state, closeCode),
        receive: (message) => {
          if (state.closing || state.ended || !open) return
          const arrivedMs = clock.currentTimeMillisUnsafe()
          if (message.byteLength > resolved.messageBytesMax) return closeLink(state, Transport.CloseCode.MessageTooBig)
          const frames = Batch.decode(message)
          if (frames === undefined) return closeLink(state, Transport.CloseCode.BadBatch)
          stats.messagesReceived += 1
          if (Queue.sizeUnsafe(inbox) + frames.length > resolved.inboxFramesMax) {
            stats.overflows += 1
            return closeLink(state, Transport.CloseCode.InboxOverflow)
          }
          for (const bytes of frames) {
            const verdict = resolved.inspect?.(peer, bytes)
            if (verdict === undefined) {
              stats.framesReceived += 1
              Queue.offerUnsafe(inbox, { _tag: "Frame", peer, bytes, arrivedMs })
            } else if (verdict._tag === "Impersonation") {
              return closeLink(state, Transport.CloseCode.RankMismatch)
            } else {
              stats.badFrames += 1
              Queue.offerUnsafe(inbox, { _tag: "BadFrame", peer, error: verdict.error, arrivedMs })
              if (resolved.badFramePolicy === "close") return closeLink(state, verdict.closeCode)
            }
          }
        },
        end: (cause) => {
          if (state.ended) return
          state.ended = true
          state.outbox = []
          if (open) Queue.offerUnsafe(inbox, { _tag: "Ended", peer, cause })
        }
      }
      handles.set(peer, link)
      return link
    }

    const closed = new Transport.TransportError({ reason: { _tag: "Closed" } })
    const sendUnsafe = (peer: Transport.Peer, frame: Uint8Array): Transport.TransportError | undefined => {
      if (!open) return closed
      const state = links.get(peer)
      if (state === undefined) return new Transport.TransportError({ reason: { _tag: "UnknownPeer", peer } })
      if (state.ended || state.closing) return new Transport.TransportError({ reason: { _tag: "PeerGone", peer } })
      if (frame.byteLength > resolved.frameBytesMax) {
        return new Transport.TransportError({
          reason: { _tag: "FrameTooLarge", peer, bytes: frame.byteLength, frameBytesMax: resolved.frameBytesMax }
        })
      }
      if (
        state.outbox.length > 0 &&
        Batch.size(state.outbox.length + 1, state.outboxBytes + frame.byteLength) > resolved.batchBytesMax
      ) flush(state)
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
        [...links.entries()].filter(([, s]) => !s.ended && !s.closing).map(([p]) => p).sort((a, b) => a - b)
      ),
      send: Transport.sendFromUnsafe(sendUnsafe),
      sendUnsafe,
      flush: Effect.sync(flushAll),
      inbox,
      events: Stream.fromQueue(inbox),
      stats: Effect.sync(() => ({ ...stats }))
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
