/**
 * Local ranks over the network path: a WebSocket server (`WebSocket.serve`) whose ranks are child
 * processes of this one that join it over loopback with the run token (`run({ transport:
 * "websocket" })`). Frames travel only over the sockets; each process's frame
 * channel carries nothing, and its stdout and stderr go to `onOutput` as with the child-process
 * transport.
 *
 * Two supervisors watch each rank (docs/design.md §5): the process's end and the socket's close both
 * report, and the first wins (a rank's link ends once; the core declares once). A socket that
 * closes after its process was killed or exited reads as the process's cause (`Killed{SIGKILL}`),
 * not `Disconnected{1006}`. A process that ends while its socket is still open is reported after
 * `socketEndGraceMs`, unless the socket closes first: the frames it sent before its end (its
 * `Exiting`) come through the socket, which may lag its exit event, and must be read first
 * (docs/design.md §3.1). A process that ends before it joined is reported at once.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as DeathReport from "../actor/death-report.ts"
import * as ChildProcess from "./child-process.ts"
import type * as RankOutput from "./rank-output.ts"
import * as Transport from "./transport.ts"
import * as WebSocket from "./web-socket.ts"

/**
 * Options: `WebSocket.ServerOptions` (the server's; `host` should stay loopback) and
 * `RankOutput.Options`, plus `socketEndGraceMs` (integer ms >= 0; default
 * `socketEndGraceMsDefault`, 1000): how long a process's end waits for its socket to close before
 * it is reported itself.
 *
 * @since 0.1.0
 * @category options
 */
export interface Options extends WebSocket.ServerOptions, RankOutput.Options {
  readonly socketEndGraceMs?: number
}

/** Default `socketEndGraceMs`: 1000 ms. @since 0.1.0 @category options */
export const socketEndGraceMsDefault = 1000

/**
 * The coordinator's side: the server (`url`, `refusals`, its endpoint as `transport`), `spawn`
 * (a child process per rank, as `ChildProcess.ProcessHost.spawn`; its entry joins `url` itself)
 * and `kill(rank, signal = "SIGKILL")`, whose end reads `Killed{signal}`. Closing the scope kills
 * every process and closes the server.
 *
 * @since 0.1.0
 * @category model
 */
export interface RanksHost {
  readonly server: WebSocket.ServerHandle
  readonly transport: Transport.TransportShape
  readonly spawn: (options: ChildProcess.SpawnOptions) => Effect.Effect<void, Transport.TransportError>
  readonly kill: (rank: Transport.Peer, signal?: string) => Effect.Effect<void>
}

/**
 * Serves and makes the host in the current scope. Fails with `TransportError` as `WebSocket.serve`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const host = (options: Options): Effect.Effect<RanksHost, Transport.TransportError, Scope.Scope> =>
  Effect.gen(function* () {
    const graceMs = options.socketEndGraceMs ?? socketEndGraceMsDefault
    /** What each rank's process ended with, or the signal the host killed it with. */
    const processEnds = new Map<Transport.Peer, DeathReport.DeathCause>()
    const server = yield* WebSocket.serve({
      ...options,
      endCause: (rank, closeCode) => processEnds.get(rank) ?? options.endCause?.(rank, closeCode)
    })
    const processes = yield* ChildProcess.host({
      ...(options.onOutput === undefined ? {} : { onOutput: options.onOutput }),
      ...(options.outputLineBytesMax === undefined ? {} : { outputLineBytesMax: options.outputLineBytesMax }),
      ...(options.outputLinesPerSecondMax === undefined ? {} : { outputLinesPerSecondMax: options.outputLinesPerSecondMax })
    })
    const timers = new Set<ReturnType<typeof setTimeout>>()
    yield* Effect.addFinalizer(() => Effect.sync(() => timers.forEach(clearTimeout)))
    // The processes' own channels carry no frames: only their ends come through.
    yield* Effect.gen(function* () {
      while (true) {
        const event = yield* Queue.take(processes.transport.inbox)
        if (event._tag !== "Ended") continue
        const rank = event.peer
        // The host's own kill is already recorded (its signal is the better cause).
        if (!processEnds.has(rank)) processEnds.set(rank, event.cause)
        const cause = processEnds.get(rank)!
        if (!server.connected(rank)) {
          server.end(rank, cause)
          continue
        }
        const timer = setTimeout(() => {
          timers.delete(timer)
          server.end(rank, cause)
        }, graceMs)
        timers.add(timer)
      }
    }).pipe(Effect.ignore, Effect.forkScoped)
    return {
      server,
      transport: server.transport,
      spawn: processes.spawn,
      kill: (rank, signal) =>
        Effect.suspend(() => {
          if (!processEnds.has(rank)) processEnds.set(rank, DeathReport.killed(signal ?? "SIGKILL"))
          return processes.kill(rank, signal)
        })
    }
  })
