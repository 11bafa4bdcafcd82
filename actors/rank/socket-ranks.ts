/**
 * Many served ranks in one process (`cohort join --ranks N`): each rank has its own WebSocket,
 * rank state and trainer instance; the trainer module is imported once (`Bundle.importModule`
 * keeps it). The coordinator sees N ordinary ranks. For tests, benches and gateways that front
 * many small participants.
 *
 * Each rank can be made to leave in one of the three ways a participant leaves (docs/churn.md):
 * `leave` (graceful: `Exiting`, then a close handshake), `crash` (the socket is cut without a
 * close frame, as when a process dies) and `silence` (the rank stops, its socket stays open:
 * only the coordinator's heartbeat timeout sees it).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Transport from "../../src/transport/transport.ts"
import type * as WebSocket from "../../src/transport/web-socket.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import * as SocketRank from "./socket-rank.ts"

/**
 * One rank of `joinRanks`.
 *
 * - `rank()`: its index once welcomed (undefined before).
 * - `ended`: resolves with the exit code this rank would have had as a process of its own
 *   (`SocketRank.JoinExitCode`): 0 after a graceful leave, 1 after `crash`, 13 after `silence`.
 * - `leave()`, `crash()`, `silence()`: make a training rank leave (each a no-op once it ended, or
 *   before it trains); they resolve once the leave is on its way. `leave()` lets the rank finish
 *   its batch and contribute what it trained and did not contribute yet before its `Exiting`, and
 *   resolves once the rank ended; a rank that did not end within `leaveCloseMsMax` (a batch or a
 *   call that hangs) is stopped where it is and its `Exiting` sent for it.
 *
 * @since 0.1.0
 * @category join
 */
export interface JoinedRank {
  readonly rank: () => number | undefined
  readonly ended: Promise<number>
  readonly leave: () => Promise<void>
  readonly crash: () => Promise<void>
  readonly silence: () => Promise<void>
}

/**
 * Options of `joinRanks`: those of `SocketRank.joinRun` (without `leaving`, `onJoined`, `stop`),
 * plus `ranks` (integer >= 1). With an integer `rank`, the ranks are `rank .. rank + ranks - 1`;
 * with `"auto"` each takes the lowest free index. Saves go to `<saveDir>/rank<r>` as for one rank.
 *
 * @since 0.1.0
 * @category join
 */
export interface JoinRanksOptions extends Omit<SocketRank.JoinRunOptions, "leaving" | "onJoined" | "stop" | "leaveAsked" | "beforeExit"> {
  readonly ranks: number
  /**
   * Ranks that connect at once (integer >= 1, default `joinsAtOnceMaxDefault`): the next starts
   * when one is let in or ends. A server takes only so many pending joins from one address (16 by
   * default, `AddressBusy` past it, and the refused joiners retry later), so a process that
   * connected all its ranks at once would spend most of its joins on refusals and retries.
   */
  readonly joinsAtOnceMax?: number
}

/** Default `JoinRanksOptions.joinsAtOnceMax`: 8. @since 0.1.0 @category join */
export const joinsAtOnceMaxDefault = 8

/** A bound of `joinRanks` out of its range. @since 0.1.0 @category errors */
export class JoinRanksError extends Error {
  readonly _tag = "JoinRanksError"
}

/** At most `max` holders at once: `take` resolves when a place is free, `give` frees one. */
const gate = (max: number) => {
  let held = 0
  const waiting: Array<() => void> = []
  return {
    take: (): Promise<void> => (held < max ? ((held += 1), Promise.resolve()) : new Promise<void>((resolve) => waiting.push(resolve))),
    give: (): void => {
      const next = waiting.shift()
      if (next !== undefined) next()
      else held -= 1
    }
  }
}

/** Closes a leaving rank's socket, bounded by `SocketRank.leaveCloseMsMax`. */
const closeBounded = (client: WebSocket.ClientHandle, closeCode: number): Promise<void> =>
  Effect.runPromise(client.close(closeCode).pipe(Effect.timeoutOption(SocketRank.leaveCloseMsMax), Effect.ignore))

const joinOne = (options: SocketRank.JoinRunOptions, connecting: ReturnType<typeof gate>): JoinedRank => {
  let client: WebSocket.ClientHandle | undefined
  let over = false
  // Asked to leave gracefully: the rank's own loop says Exiting; crash and silence no longer apply.
  let leaving = false
  const stop = new AbortController()
  const leaveAsked = new AbortController()
  let settle: (code: number) => void = () => {}
  const ended = new Promise<number>((resolve) => (settle = resolve))
  const end = (code: number): void => {
    if (over) return
    over = true
    settle(code)
  }
  // Its place among the ranks connecting at once is given back once it is let in, or ends first.
  let placeHeld = true
  const givePlace = (): void => {
    if (!placeHeld) return
    placeHeld = false
    connecting.give()
  }
  void ended.then(givePlace)
  void connecting.take().then(() => {
    // Made to leave before its turn came (stopThen needs a client: it had none), or stopped.
    if (over || stop.signal.aborted) return givePlace()
    return SocketRank.joinRun({
      ...options,
      stop: stop.signal,
      leaveAsked: leaveAsked.signal,
      onJoined: (joined) => {
        client = joined
        givePlace()
      },
      leaving: (joined) => (code) => void closeBounded(joined, Transport.CloseCode.Normal).finally(() => end(code))
    }).then(end, () => end(JoinExitCode.crashed))
  })
  /** Stops the rank's loop and runs `then` with its client, if it trains and has not ended. */
  const stopThen = async (then: (joined: WebSocket.ClientHandle) => Promise<void>, code: number): Promise<void> => {
    const joined = client
    if (over || leaving || joined === undefined) return
    over = true
    stop.abort()
    await then(joined)
    settle(code)
  }
  /** Stops the rank's loop where it is and says Exiting for it: what it trained and did not contribute is redone. */
  const leaveNow = (): Promise<void> =>
    stopThen(async (joined) => {
      const exiting = Codec.encode(Frame.fromRank(joined.rank, { _tag: "Exiting" }))
      await Effect.runPromise(
        Effect.ignore(joined.transport.send(Transport.coordinatorPeer, exiting)).pipe(Effect.andThen(joined.transport.flush))
      )
      await closeBounded(joined, Transport.CloseCode.Normal)
    }, JoinExitCode.ok)
  return {
    rank: () => client?.rank,
    ended,
    leave: async () => {
      if (over || leaving || client === undefined) return
      leaving = true
      // The rank's loop contributes what it trained and did not contribute yet, then says
      // Exiting (`Rank.main`'s leaveAsked): its done chunks are not trained again. A loop that
      // does not get there in time (a batch or a call that hangs) is stopped and leaves as below.
      leaveAsked.abort()
      const gone = await Promise.race([
        ended.then(() => true),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), SocketRank.leaveCloseMsMax).unref?.())
      ])
      if (gone) return
      leaving = false
      return leaveNow()
    },
    crash: () => stopThen((joined) => Effect.runPromise(joined.drop), JoinExitCode.crashed),
    // The socket stays open until the coordinator closes it (its declaration) or the process ends.
    silence: () => stopThen(async () => {}, JoinExitCode.rankDead)
  }
}

const JoinExitCode = SocketRank.JoinExitCode

/**
 * Joins `options.ranks` ranks of a served run from this process and returns them at once (each
 * joins, trains and leaves on its own; see `JoinedRank`), at most `joinsAtOnceMax` connecting at
 * a time. Nothing here exits the process. Throws `JoinRanksError` for a `joinsAtOnceMax` below 1.
 *
 * @since 0.1.0
 * @category join
 */
export const joinRanks = (options: JoinRanksOptions): ReadonlyArray<JoinedRank> => {
  const { joinsAtOnceMax = joinsAtOnceMaxDefault, ranks, ...rest } = options
  if (!Number.isSafeInteger(joinsAtOnceMax) || joinsAtOnceMax < 1)
    throw new JoinRanksError(`joinsAtOnceMax must be an integer >= 1, got ${joinsAtOnceMax}`)
  const connecting = gate(joinsAtOnceMax)
  return Array.from({ length: ranks }, (_, i) =>
    joinOne(
      {
        ...rest,
        rank: rest.rank === "auto" ? "auto" : rest.rank + i,
        // Each rank its own listener: a port given is the first rank's, the next ones' follow it.
        ...(rest.ringListen === undefined || rest.ringListen.port === 0
          ? {}
          : { ringListen: { ...rest.ringListen, port: rest.ringListen.port + i } })
      },
      connecting
    )
  )
}

/**
 * The exit code of a process whose ranks ended with `codes`: the first that is not 0, else 0.
 *
 * @since 0.1.0
 * @category join
 */
export const processExitCode = (codes: ReadonlyArray<number>): number => codes.find((code) => code !== 0) ?? 0
