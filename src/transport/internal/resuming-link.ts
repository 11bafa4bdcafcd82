/**
 * A rank's side of a resumable link (join protocol 2): the hub's link to the coordinator outlives
 * its sockets. When the socket drops, or nothing arrives on it for `silenceMs` (a cut link is
 * silent, not closed), the rank opens a new connection every `retryMs` (each given up after
 * `attemptMs`; none while one is open and waits for its welcome) and resumes its session on the
 * first one the server welcomes, where both sides
 * send again what the other missed. The link ends when the server refuses the resume (a declared
 * rank: `RankDead`), when the rank closes it, or when no resume succeeded within `windowMs` of the
 * loss (the coordinator is gone).
 *
 * @since 0.1.0
 * @internal
 */
import * as DeathReport from "../../actor/death-report.ts"
import * as Select from "../../platform/select.ts"
import type * as RuntimeTypes from "../../platform/types.ts"
import * as Transport from "../transport.ts"
import type * as Hub from "./hub.ts"
import * as Session from "./session.ts"

/** A raw client socket that can be cut without a close handshake. @since 0.1.0 @category internal */
export type ClientSocket = RuntimeTypes.RawSocket & { readonly drop: () => void }

/** What a resuming link needs. @since 0.1.0 @category internal */
export interface Options {
  readonly hub: Hub.Hub
  readonly url: string
  /** How a `wss://` server's certificate is checked on each new connection (default the system's roots). */
  readonly trust?: RuntimeTypes.TlsTrust | undefined
  readonly sessionId: string
  /** The resume join's text for attempt `attempt`, the rank having received `received` messages. */
  readonly resumeJoin: (attempt: number, received: number) => string
  /**
   * The server's welcome of a resume: the messages it received from the rank; or, from a server
   * that took the run over after its coordinator's loss, `{recovered}`: the new session it
   * started; or undefined when it is neither.
   */
  readonly parseWelcome: (text: string) => number | { readonly recovered: string } | undefined
  /**
   * The link went on in a new session (a recovered welcome): what the old one held is dropped, the
   * rank's first message (its `Hello`) is sent again first, then everything sent from now on.
   */
  readonly recovered: (session: string) => void
  readonly pieceBytes: number
  readonly resendBytesMax: number
  readonly pingIntervalMs: number
  /** Pings go out only this long after the rank last sent a message (ms). */
  readonly pingAfterSendMs: number
  readonly silenceMs: number
  readonly retryMs: number
  readonly attemptMs: number
  readonly windowMs: number
  /** The link ended with this close code (once). */
  readonly ended: (closeCode: number) => void
}

/** A resuming link: its first socket's events, and how the rank leaves or cuts it. @since 0.1.0 @category internal */
export interface Resuming {
  readonly message: (socket: ClientSocket, data: Uint8Array | string) => void
  readonly closed: (socket: ClientSocket, code: number) => void
  /** Cuts the current socket without a handshake (as a pulled cable would); the link resumes. */
  readonly drop: () => void
  /** Stops every timer and socket without ending the link (the endpoint is closing). */
  readonly stop: () => void
}

/**
 * Whether a close code ends the link for good: the server's own codes (4000 and up: declared dead,
 * a lost session...) and protocol violations. Any other (a drop, a replaced connection) is resumed.
 *
 * @since 0.1.0
 * @category internal
 */
export const isFinal = (code: number): boolean => code >= 4000 || [1002, 1003, 1007, 1008, 1009, 1010, 1011].includes(code)

/** A refusal of one resume attempt that says to try again rather than stop. */
const isRetry = (code: number): boolean =>
  !isFinal(code) || code === Transport.CloseCode.DuplicateRank || code === Transport.CloseCode.AddressBusy

const sinkOf = (socket: RuntimeTypes.RawSocket): Session.Sink => ({
  send: (bytes) => socket.send(bytes),
  bufferedBytes: () => socket.bufferedBytes?.()
})

/** Starts resuming `first` (welcomed, the server having received `received` messages: 0). @since 0.1.0 @category internal */
export const start = (options: Options, first: ClientSocket): Resuming => {
  // Long because it is a factory: the closures it returns share its state, and each is short.
  let socket: ClientSocket | undefined = first
  let closing = false
  /** The rank closed the link while it had no socket: the code to close with once resumed, and when. */
  let closeLater: { readonly closeCode: number; readonly atMs: number } | undefined
  let over = false
  let lastArrivalMs = performance.now()
  let lostAtMs: number | undefined
  let attempts = 0
  let lastAttemptMs = Number.NEGATIVE_INFINITY
  let lastPingMs = Number.NEGATIVE_INFINITY
  let lastTickMs = performance.now()
  /** Attempts not yet welcomed: when each started, and whether its connection opened. */
  const pending = new Map<ClientSocket, { readonly startedMs: number; opened: boolean }>()
  /** Sockets this side cut: their close says nothing of the server's answer. */
  const cutByUs = new WeakSet<ClientSocket>()
  const cut = (raw: ClientSocket | undefined): void => {
    if (raw === undefined) return
    cutByUs.add(raw)
    raw.drop()
  }

  const finish = (closeCode: number): void => {
    if (over) return
    over = true
    clearInterval(timer)
    for (const raw of pending.keys()) cut(raw)
    pending.clear()
    session.stop()
    link.end(DeathReport.disconnected(closeCode))
    options.ended(closeCode)
  }
  const makeSession = (): Session.Session =>
    Session.make({
      pieceBytes: options.pieceBytes,
      resendBytesMax: options.resendBytesMax,
      messageBytesMax: options.hub.options.messageBytesMax,
      deliver: (message) => link.receive(message),
      touch: () => link.touch(),
      fail: (closeCode) => link.close(closeCode)
    })
  let session = makeSession()
  let lastPostMs = performance.now()
  /** The rank's first message (its `Hello`): a recovered link sends it again first. */
  let firstMessage: Uint8Array | undefined
  const link: Hub.Link = options.hub.attach(Transport.coordinatorPeer, {
    post: (message) => {
      lastPostMs = performance.now()
      firstMessage ??= message
      session.send(message)
    },
    postLoose: (message) => {
      lastPostMs = performance.now()
      session.sendLoose(message)
    },
    close: (closeCode) => {
      if (closing) return
      closing = true
      // Between sockets: resume once more (for at most attemptMs) so that what the rank sent last
      // (a checkpoint's result, its exit) reaches the coordinator, then close.
      if (socket === undefined) {
        closeLater = { closeCode, atMs: performance.now() }
        return
      }
      session.flushAll()
      socket.close(closeCode, "closed by rank")
    }
  })
  session.attach(sinkOf(first), 0)

  /** The current socket is gone (dropped, closed, or silent): resume on another. */
  const lose = (): void => {
    const old = socket
    socket = undefined
    session.detach()
    lostAtMs = performance.now()
    cut(old)
  }

  /** `raw` becomes the link's socket: the one before it and every other pending attempt are cut. */
  const takeSocket = (raw: ClientSocket): void => {
    const old = socket
    socket = raw
    lostAtMs = undefined
    lastArrivalMs = performance.now()
    cut(old)
    for (const other of pending.keys()) cut(other)
    pending.clear()
  }

  const adopt = (raw: ClientSocket, peerReceived: number): void => {
    pending.delete(raw)
    if (!session.canResume(peerReceived)) {
      raw.close(Transport.CloseCode.ResumeLost, "messages the server missed are no longer held")
      return finish(Transport.CloseCode.ResumeLost)
    }
    takeSocket(raw)
    link.touch()
    session.attach(sinkOf(raw), peerReceived)
    if (closeLater !== undefined) {
      session.flushAll()
      raw.close(closeLater.closeCode, "closed by rank")
    }
  }

  /** A new coordinator took the run over: a new session on `raw`, the rank's `Hello` first. */
  const recover = (raw: ClientSocket, id: string): void => {
    pending.delete(raw)
    takeSocket(raw)
    session.stop()
    session = makeSession()
    link.touch()
    session.attach(sinkOf(raw), 0)
    if (firstMessage !== undefined) session.send(firstMessage)
    options.recovered(id)
  }

  const attempt = (): void => {
    attempts += 1
    const number = attempts
    lastAttemptMs = performance.now()
    let welcomed = false
    const raw: ClientSocket = Select.connectWs(
      options.url,
      {
        open: () => {
          const entry = pending.get(raw)
          // One join at a time: each one the server takes would take the link from the one before.
          if (entry === undefined || [...pending.values()].some((other) => other.opened)) {
            pending.delete(raw)
            return cut(raw)
          }
          entry.opened = true
          raw.send(options.resumeJoin(number, session.received()))
        },
        message: (data) => {
          if (over) return
          if (welcomed) return onMessage(raw, data)
          if (typeof data !== "string") return
          const received = options.parseWelcome(data)
          if (received === undefined) return raw.close(Transport.CloseCode.BadJoin, "bad welcome")
          welcomed = true
          if (typeof received === "number") adopt(raw, received)
          else recover(raw, received.recovered)
        },
        close: (code) => {
          if (welcomed) return onClosed(raw, code)
          pending.delete(raw)
          if (cutByUs.has(raw)) return
          // The newest attempt's refusal decides; an older one may be refused as stale.
          if (!over && !isRetry(code) && number === attempts) finish(code)
        }
      },
      options.trust
    )
    pending.set(raw, { startedMs: lastAttemptMs, opened: false })
  }

  const tick = (): void => {
    if (over) return
    const nowMs = performance.now()
    // A tick this late means this thread was blocked (a synchronous save or eval): the silence
    // was its own, and what the server sent meanwhile waits unread in the socket. The socket gets
    // a whole silence window again rather than being cut for it.
    if (nowMs - lastTickMs > options.silenceMs) lastArrivalMs = nowMs
    lastTickMs = nowMs
    if (socket !== undefined) {
      // Pings fill the gaps between the rank's own frames, never outlive them: a rank whose actor
      // stopped sending is as silent to the coordinator as it was without pings.
      if (nowMs - lastPostMs <= options.pingAfterSendMs && nowMs - lastPingMs >= options.pingIntervalMs) {
        lastPingMs = nowMs
        session.ping()
      }
      if (nowMs - lastArrivalMs > options.silenceMs) lose()
      return
    }
    if (closing && (closeLater === undefined || nowMs - closeLater.atMs > options.attemptMs)) return finish(Transport.CloseCode.Abnormal)
    if (lostAtMs !== undefined && nowMs - lostAtMs > options.windowMs) return finish(Transport.CloseCode.Abnormal)
    let waiting = false
    for (const [raw, entry] of pending) {
      if (nowMs - entry.startedMs > options.attemptMs) {
        pending.delete(raw)
        cut(raw)
      } else if (entry.opened) waiting = true
    }
    // A connection that opened and waits for its welcome says the way is clear: no more attempts
    // meanwhile (each would take the link from the one before), unless it times out.
    if (!waiting && nowMs - lastAttemptMs >= options.retryMs) attempt()
  }
  const timer = setInterval(tick, Math.max(1, Math.min(options.pingIntervalMs, options.retryMs)))

  const onMessage = (raw: ClientSocket, data: Uint8Array | string): void => {
    if (raw !== socket || over) return
    lastArrivalMs = performance.now()
    if (typeof data === "string") return link.close(Transport.CloseCode.BadBatch)
    session.receive(data)
  }
  const onClosed = (raw: ClientSocket, code: number): void => {
    if (raw !== socket || over) return
    if (closing || isFinal(code)) {
      socket = undefined
      return finish(code)
    }
    lose()
    tick()
  }
  return {
    message: onMessage,
    closed: onClosed,
    drop: () => {
      if (socket !== undefined && !over) lose()
    },
    stop: () => {
      if (over) return
      over = true
      clearInterval(timer)
      for (const raw of pending.keys()) cut(raw)
      cut(socket)
      session.stop()
    }
  }
}
