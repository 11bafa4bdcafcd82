/**
 * One side of a resumable WebSocket link (join protocol 2): what travels between the join and the
 * link's end, under the hub's batches.
 *
 * Each hub message (a batch) gets a sequence number and travels in pieces of at most `pieceBytes`,
 * so that the peer sees bytes arrive (a sign of life) while a large `Params` or `Update` is still
 * in flight, and a piece goes out only while the socket holds less than `pieceBytes` unsent, so
 * that pings are not queued behind megabytes. Every piece and every ping carries how many whole
 * messages this side has received (an ack): the peer drops what was acked from its resend buffer.
 * When a socket is replaced (a reconnect), each side tells the other how many messages it
 * received, and the other sends again from there; a partial message is sent again whole.
 *
 * A message the hub marks order-free (every frame in it may overtake the frames sent before it:
 * a heartbeat) does not wait behind the pieces of a large message: `sendLoose` writes it whole,
 * unnumbered, between two pieces, and the peer delivers it as it arrives. It is not kept for a
 * resend (a heartbeat lost in a cut says nothing the resume does not); with no socket, or while
 * nothing waits to be written, it goes the ordered way.
 *
 * Layout, little endian, 12 bytes of header: `u8 kind` (1 piece, 2 ping, 3 loose message), `u8
 * last` (1 on a message's last piece), `u16 0`, `u32 seq` (the message's number, from 0; 0 in a
 * ping or a loose message), `u32 ack`, then the piece's bytes (none in a ping; the whole message in
 * a loose one).
 *
 * @since 0.1.0
 * @internal
 */
import * as Schedule from "../../platform/schedule.ts"
import * as Transport from "../transport.ts"

/** Bytes of a piece's or ping's header. @since 0.1.0 @category internal */
export const headerBytes = 12

const kindPiece = 1
const kindPing = 2
const kindLoose = 3

/** Where a session writes: the current socket. @since 0.1.0 @category internal */
export interface Sink {
  readonly send: (bytes: Uint8Array) => void
  /** Bytes handed to the socket and not yet taken by the network; `undefined` when the runtime cannot say. */
  readonly bufferedBytes: () => number | undefined
}

/** What a session needs. @since 0.1.0 @category internal */
export interface Options {
  readonly pieceBytes: number
  readonly resendBytesMax: number
  readonly messageBytesMax: number
  /** A whole message arrived. */
  readonly deliver: (message: Uint8Array) => void
  /** Some bytes arrived (a piece or a ping). */
  readonly touch: () => void
  /** The peer broke the protocol, or the resend buffer went over its bound: close with this code. */
  readonly fail: (closeCode: number, reason: string) => void
}

/** One side of a resumable link. @since 0.1.0 @category internal */
export interface Session {
  /** Queues one hub message; it goes out in pieces on the current socket, if any. */
  readonly send: (message: Uint8Array) => void
  /** Sends an order-free hub message ahead of the pieces still waiting (see the module doc). */
  readonly sendLoose: (message: Uint8Array) => void
  /** One binary WebSocket message from the peer. */
  readonly receive: (data: Uint8Array) => void
  /**
   * Writes to `sink` from now on, starting again at the peer's `peerReceived` messages; a partial
   * message received so far is dropped (the peer sends it again whole). False when messages the
   * peer still needs were already dropped from the resend buffer.
   */
  readonly attach: (sink: Sink, peerReceived: number) => boolean
  /** Whether `attach` with `peerReceived` would succeed. */
  readonly canResume: (peerReceived: number) => boolean
  /** Stops writing (the socket is gone); messages keep queueing for the next `attach`. */
  readonly detach: () => void
  /** Sends a ping (carrying the ack) on the current socket. */
  readonly ping: () => void
  /** Writes every queued piece to the current socket now, without waiting for it to drain. */
  readonly flushAll: () => void
  /** Whole messages received so far. */
  readonly received: () => number
  /** Stops the pacing timer. */
  readonly stop: () => void
}

interface Outgoing {
  readonly seq: number
  readonly bytes: Uint8Array
}

/** How long a paced sender waits before it looks at the socket's unsent bytes again. */
const drainPollMs = 5

const header = (kind: number, last: boolean, seq: number, ack: number, payloadBytes: number): Uint8Array => {
  const out = new Uint8Array(headerBytes + payloadBytes)
  const view = new DataView(out.buffer)
  view.setUint8(0, kind)
  view.setUint8(1, last ? 1 : 0)
  view.setUint32(4, seq >>> 0, true)
  view.setUint32(8, ack >>> 0, true)
  return out
}

/** Makes one side of a resumable link. @since 0.1.0 @category internal */
export const make = (options: Options): Session => {
  // Long because it is a factory: the closures it returns share its state, and each is short.
  const { pieceBytes } = options
  /** Messages not yet acked by the peer, oldest first (sent or not). */
  const buffer: Array<Outgoing> = []
  let bufferBytes = 0
  let nextSeq = 0
  /** The next message to write: its index in `buffer` and the offset of its next piece. */
  let sendIndex = 0
  let sendOffset = 0
  let sink: Sink | undefined
  let waiting = false
  let stopped = false
  /** Messages received whole, and the pieces of the next one so far. */
  let received = 0
  let assembly: Array<Uint8Array> = []
  let assemblyBytes = 0

  /** Writes one piece of `buffer[sendIndex]`. */
  const writePiece = (target: Sink): void => {
    const message = buffer[sendIndex]!
    const end = Math.min(message.bytes.byteLength, sendOffset + pieceBytes)
    const last = end === message.bytes.byteLength
    const piece = header(kindPiece, last, message.seq, received, end - sendOffset)
    piece.set(message.bytes.subarray(sendOffset, end), headerBytes)
    target.send(piece)
    if (last) {
      sendIndex += 1
      sendOffset = 0
    } else sendOffset = end
  }

  const pump = (): void => {
    waiting = false
    if (stopped) return
    while (sink !== undefined && sendIndex < buffer.length) {
      const unsent = sink.bufferedBytes()
      if (unsent !== undefined && unsent >= pieceBytes) {
        waiting = true
        Schedule.after(drainPollMs, pump)
        return
      }
      writePiece(sink)
    }
  }

  const trim = (ack: number): void => {
    while (buffer.length > 0 && buffer[0]!.seq < ack && sendIndex > 0) {
      bufferBytes -= buffer.shift()!.bytes.byteLength
      sendIndex -= 1
    }
  }

  /** Keeps the resend buffer under its bound: sent messages go first; unsent ones over it fail the link. */
  const bound = (): void => {
    while (bufferBytes > options.resendBytesMax && sendIndex > 0 && buffer.length > 1) {
      bufferBytes -= buffer.shift()!.bytes.byteLength
      sendIndex -= 1
    }
    if (bufferBytes > options.resendBytesMax && buffer.length > 1) {
      options.fail(Transport.CloseCode.ResumeLost, `over resendBytesMax ${options.resendBytesMax} bytes waiting to be sent`)
    }
  }

  const receivePiece = (view: DataView, data: Uint8Array): void => {
    const seq = view.getUint32(4, true)
    if (seq !== received >>> 0) {
      return options.fail(Transport.CloseCode.BadBatch, `piece of message ${seq}, expected ${received >>> 0}`)
    }
    const payload = data.subarray(headerBytes)
    if (assemblyBytes + payload.byteLength > options.messageBytesMax) {
      return options.fail(Transport.CloseCode.MessageTooBig, `a message over messageBytesMax ${options.messageBytesMax}`)
    }
    const last = view.getUint8(1) === 1
    if (last && assembly.length === 0) {
      received += 1
      return options.deliver(payload)
    }
    assembly.push(payload)
    assemblyBytes += payload.byteLength
    if (!last) return
    const whole = new Uint8Array(assemblyBytes)
    let at = 0
    for (const part of assembly) {
      whole.set(part, at)
      at += part.byteLength
    }
    assembly = []
    assemblyBytes = 0
    received += 1
    options.deliver(whole)
  }

  const send = (message: Uint8Array): void => {
    buffer.push({ seq: nextSeq, bytes: message })
    nextSeq += 1
    bufferBytes += message.byteLength
    bound()
    if (!waiting) pump()
  }

  const canResume = (peerReceived: number): boolean =>
    Number.isSafeInteger(peerReceived) && peerReceived >= (buffer.length > 0 ? buffer[0]!.seq : nextSeq) && peerReceived <= nextSeq

  return {
    send,
    sendLoose: (message) => {
      if (sink === undefined || sendIndex >= buffer.length || message.byteLength > pieceBytes) return send(message)
      const loose = header(kindLoose, true, 0, received, message.byteLength)
      loose.set(message, headerBytes)
      sink.send(loose)
    },
    receive: (data) => {
      if (data.byteLength < headerBytes) return options.fail(Transport.CloseCode.BadBatch, "a piece shorter than its header")
      const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
      options.touch()
      // Acks count messages; the header holds them modulo 2^32.
      const ack = view.getUint32(8, true)
      const base = buffer.length > 0 ? buffer[0]!.seq : nextSeq
      const acked = base + ((ack - (base >>> 0)) >>> 0)
      if (acked <= nextSeq) trim(acked)
      const kind = view.getUint8(0)
      if (kind === kindPiece) return receivePiece(view, data)
      if (kind === kindLoose) return options.deliver(data.subarray(headerBytes))
      if (kind !== kindPing) return options.fail(Transport.CloseCode.BadBatch, `unknown piece kind ${kind}`)
    },
    canResume: (peerReceived) => canResume(peerReceived),
    attach: (target, peerReceived) => {
      assembly = []
      assemblyBytes = 0
      if (!canResume(peerReceived)) return false
      while (buffer.length > 0 && buffer[0]!.seq < peerReceived) bufferBytes -= buffer.shift()!.bytes.byteLength
      sendIndex = 0
      sendOffset = 0
      sink = target
      if (!waiting) pump()
      return true
    },
    detach: () => {
      sink = undefined
    },
    ping: () => sink?.send(header(kindPing, false, 0, received, 0)),
    flushAll: () => {
      while (sink !== undefined && sendIndex < buffer.length) writePiece(sink)
    },
    received: () => received,
    stop: () => {
      stopped = true
    }
  }
}
