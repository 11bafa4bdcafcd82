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
 *   before it trains); they resolve once the leave is on its way.
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
export interface JoinRanksOptions extends Omit<SocketRank.JoinRunOptions, "leaving" | "onJoined" | "stop" | "beforeExit"> {
  readonly ranks: number
}

/** Closes a leaving rank's socket, bounded by `SocketRank.leaveCloseMsMax`. */
const closeBounded = (client: WebSocket.ClientHandle, closeCode: number): Promise<void> =>
  Effect.runPromise(client.close(closeCode).pipe(Effect.timeoutOption(SocketRank.leaveCloseMsMax), Effect.ignore))

const joinOne = (options: SocketRank.JoinRunOptions): JoinedRank => {
  let client: WebSocket.ClientHandle | undefined
  let over = false
  const stop = new AbortController()
  let settle: (code: number) => void = () => {}
  const ended = new Promise<number>((resolve) => (settle = resolve))
  const end = (code: number): void => {
    if (over) return
    over = true
    settle(code)
  }
  void SocketRank.joinRun({
    ...options,
    stop: stop.signal,
    onJoined: (joined) => (client = joined),
    leaving: (joined) => (code) => void closeBounded(joined, Transport.CloseCode.Normal).finally(() => end(code))
  }).then(end, () => end(JoinExitCode.crashed))
  /** Stops the rank's loop and runs `then` with its client, if it trains and has not ended. */
  const stopThen = async (then: (joined: WebSocket.ClientHandle) => Promise<void>, code: number): Promise<void> => {
    const joined = client
    if (over || joined === undefined) return
    over = true
    stop.abort()
    await then(joined)
    settle(code)
  }
  return {
    rank: () => client?.rank,
    ended,
    leave: () =>
      stopThen(async (joined) => {
        const exiting = Codec.encode(Frame.fromRank(joined.rank, { _tag: "Exiting" }))
        await Effect.runPromise(
          Effect.ignore(joined.transport.send(Transport.coordinatorPeer, exiting)).pipe(Effect.andThen(joined.transport.flush))
        )
        await closeBounded(joined, Transport.CloseCode.Normal)
      }, JoinExitCode.ok),
    crash: () => stopThen((joined) => Effect.runPromise(joined.drop), JoinExitCode.crashed),
    // The socket stays open until the coordinator closes it (its declaration) or the process ends.
    silence: () => stopThen(async () => {}, JoinExitCode.rankDead)
  }
}

const JoinExitCode = SocketRank.JoinExitCode

/**
 * Joins `options.ranks` ranks of a served run from this process and returns them at once (each
 * joins, trains and leaves on its own; see `JoinedRank`). Nothing here exits the process.
 *
 * @since 0.1.0
 * @category join
 */
export const joinRanks = (options: JoinRanksOptions): ReadonlyArray<JoinedRank> =>
  Array.from({ length: options.ranks }, (_, i) =>
    joinOne({
      ...options,
      rank: options.rank === "auto" ? "auto" : options.rank + i,
      // Each rank its own listener: a port given is the first rank's, the next ones' follow it.
      ...(options.ringListen === undefined || options.ringListen.port === 0
        ? {}
        : { ringListen: { ...options.ringListen, port: options.ringListen.port + i } })
    })
  )

/**
 * The exit code of a process whose ranks ended with `codes`: the first that is not 0, else 0.
 *
 * @since 0.1.0
 * @category join
 */
export const processExitCode = (codes: ReadonlyArray<number>): number => codes.find((code) => code !== 0) ?? 0
