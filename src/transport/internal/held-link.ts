/**
 * The server's side of one rank's resumable link (join protocol 2): the hub's link for the rank
 * outlives its sockets. A socket that drops without a close frame leaves the link held for
 * `resumeWindowMs`, during which the rank may come back with its session id and go on where it
 * was; a later socket of the same session replaces the current one (the old one may not have
 * noticed the cut yet). The link ends when the coordinator closes it (a declared rank: its
 * socket, or at once when it has none), when the window passes, or from outside.
 *
 * @since 0.1.0
 * @internal
 */
import * as DeathReport from "../../actor/death-report.ts"
import type * as RuntimeTypes from "../../platform/types.ts"
import * as Transport from "../transport.ts"
import type * as Hub from "./hub.ts"
import * as Session from "./session.ts"

/** What holding a link needs. @since 0.1.0 @category internal */
export interface Options {
  readonly hub: Hub.Hub
  readonly rank: Transport.Peer
  readonly pieceBytes: number
  readonly resendBytesMax: number
  readonly resumeWindowMs: number
  readonly pingIntervalMs: number
  /** Pings go out only this long after the coordinator last sent the rank a message (ms). */
  readonly pingAfterSendMs: number
  /** The death cause of a link whose socket closed with `closeCode` (`ServerOptions.endCause`). */
  readonly endCause: (closeCode: number) => DeathReport.DeathCause
  /** The link ended (once). */
  readonly ended: () => void
}

/** One rank's held link. @since 0.1.0 @category internal */
export interface Held {
  /** The session id the rank resumes with. */
  readonly id: string
  /** A binary message on `socket`; ignored unless it is the current socket. */
  readonly receive: (socket: RuntimeTypes.RawSocket, data: Uint8Array) => void
  /** `socket` closed with `code`; ignored unless it is the current socket. */
  readonly closed: (socket: RuntimeTypes.RawSocket, code: number) => void
  /**
   * A resume on `socket` (attempt number `attempt`, the rank having received `received` messages):
   * `welcome(n, silentMs)` is called with the messages received from the rank so far (and the ms
   * since anything of it last arrived) before anything is sent again on it; or a refusal.
   */
  readonly resume: (
    socket: RuntimeTypes.RawSocket,
    received: number,
    attempt: number,
    welcome: (received: number, silentMs: number) => void
  ) => undefined | { readonly closeCode: number; readonly reason: string }
  /** Ends the link from outside with `cause` (nothing once it ended). */
  readonly end: (cause: DeathReport.DeathCause) => void
  /** Stops its timers without ending the link (the server is closing). */
  readonly stop: () => void
}

/** Codes a socket closes with when it dropped, not closed on purpose: the link is held for a resume. */
export const isDrop = (code: number): boolean => code === 1006 || code === 1005 || code === 1001 || code === Transport.CloseCode.Dropped

/** A new session id: 128 random bits in hex. @since 0.1.0 @category internal */
export const sessionId = (): string =>
  Array.from(globalThis.crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("")

const sinkOf = (socket: RuntimeTypes.RawSocket): Session.Sink => ({
  send: (bytes) => socket.send(bytes),
  bufferedBytes: () => socket.bufferedBytes?.()
})

/**
 * Stalls of this process seen from a ticking timer: a gap between two `note`s longer than
 * `gapMsMin` means the process was stopped or its event loop blocked, and read only afterwards
 * what happened meanwhile. `last()` is the latest: when it ended and its length (ms).
 */
const watchStalls = (gapMsMin: number) => {
  let lastNoteMs = performance.now()
  let last = { endMs: Number.NEGATIVE_INFINITY, ms: 0 }
  return {
    note: (nowMs: number): void => {
      if (nowMs - lastNoteMs > gapMsMin) last = { endMs: nowMs, ms: nowMs - lastNoteMs }
      lastNoteMs = Math.max(lastNoteMs, nowMs)
    },
    last: () => last
  }
}

/** Holds `rank`'s link from its first socket on. @since 0.1.0 @category internal */
export const hold = (options: Options, first: RuntimeTypes.RawSocket, welcome: (id: string) => void): Held => {
  // Long because it is a factory: the socket, session and timers are shared by the closures it returns.
  const id = sessionId()
  let socket: RuntimeTypes.RawSocket | undefined = first
  let attempt = 0
  /** The code the coordinator closed the link with, once it did. */
  let closing: number | undefined
  let over = false
  let windowTimer: ReturnType<typeof setTimeout> | undefined
  const finish = (cause: DeathReport.DeathCause): void => {
    if (over) return
    over = true
    clearInterval(pinger)
    if (windowTimer !== undefined) clearTimeout(windowTimer)
    session.stop()
    link.end(cause)
    options.ended()
  }
  const session = Session.make({
    pieceBytes: options.pieceBytes,
    resendBytesMax: options.resendBytesMax,
    messageBytesMax: options.hub.options.messageBytesMax,
    deliver: (message) => link.receive(message),
    touch: () => {
      heardMs = performance.now()
      link.touch()
    },
    fail: (closeCode) => link.close(closeCode)
  })
  let lastPostMs = performance.now()
  /** When anything of the rank last arrived (its clock: ms). */
  let heardMs = performance.now()
  const link: Hub.Link = options.hub.attach(options.rank, {
    post: (message) => {
      lastPostMs = performance.now()
      session.send(message)
    },
    postLoose: (message) => {
      lastPostMs = performance.now()
      session.sendLoose(message)
    },
    close: (closeCode) => {
      if (closing !== undefined) return
      closing = closeCode
      if (socket === undefined) return finish(options.endCause(closeCode))
      session.flushAll()
      socket.close(closeCode, "closed by coordinator")
    },
    // The session copies a message into its pieces and keeps it, unchanged, for a resend.
    sharesMessages: true
  })
  welcome(id)
  session.attach(sinkOf(first), 0)
  // A stall: a gap between pings longer than a ping and half the window.
  const stalls = watchStalls(options.pingIntervalMs + options.resumeWindowMs / 2)
  // A ping says the coordinator's process is there (and carries the acknowledgement).
  const pinger = setInterval(() => {
    stalls.note(performance.now())
    if (performance.now() - lastPostMs <= options.pingAfterSendMs) session.ping()
  }, options.pingIntervalMs)
  // Holds the link for a resume from `sinceMs` on; a close read just after a stall of this process
  // (or a stall during the hold) gets the stall's length on top: the rank cut its socket in the
  // coordinator's silence, its resumes piled up unanswered and are read at once at the wake (most
  // refused as a flood), and it needs retries after the wake, longer if it stalled itself then.
  const holdFor = (code: number, sinceMs: number): void => {
    stalls.note(sinceMs)
    const last = stalls.last()
    const graceMs = sinceMs - last.endMs <= options.resumeWindowMs ? last.ms : 0
    windowTimer = setTimeout(() => {
      const nowMs = performance.now()
      stalls.note(nowMs)
      if (stalls.last().endMs > sinceMs) return holdFor(code, nowMs)
      finish(options.endCause(code))
    }, options.resumeWindowMs + graceMs)
  }
  return {
    id,
    receive: (from, data) => {
      if (from === socket && !over) session.receive(data)
    },
    closed: (from, code) => {
      if (from !== socket || over) return
      socket = undefined
      session.detach()
      // The coordinator's own close ends the link with its code, whatever the socket reports.
      if (closing !== undefined) return finish(options.endCause(closing))
      if (!isDrop(code)) return finish(options.endCause(code))
      holdFor(code, performance.now())
    },
    resume: (next, received, nextAttempt, welcomeAgain) => {
      if (over || closing !== undefined) return { closeCode: Transport.CloseCode.RankDead, reason: "the rank is dead" }
      if (nextAttempt <= attempt) return { closeCode: Transport.CloseCode.DuplicateRank, reason: "a later resume already took the link" }
      const old = socket
      socket = next
      attempt = nextAttempt
      if (windowTimer !== undefined) clearTimeout(windowTimer)
      windowTimer = undefined
      // The old socket may not know it was cut: it goes, and nothing more of it is read.
      old?.close(Transport.CloseCode.Normal, "resumed on another connection")
      link.touch()
      if (!session.canResume(received)) {
        socket = undefined
        finish(DeathReport.disconnected(Transport.CloseCode.ResumeLost))
        return { closeCode: Transport.CloseCode.ResumeLost, reason: "messages the rank missed are no longer held (resendBytesMax)" }
      }
      welcomeAgain(session.received(), Math.round(performance.now() - heardMs))
      heardMs = performance.now()
      session.attach(sinkOf(next), received)
      return undefined
    },
    end: (cause) => {
      closing = Transport.CloseCode.RankDead
      socket?.close(Transport.CloseCode.RankDead, "ended")
      socket = undefined
      finish(cause)
    },
    stop: () => {
      clearInterval(pinger)
      if (windowTimer !== undefined) clearTimeout(windowTimer)
      session.stop()
    }
  }
}
