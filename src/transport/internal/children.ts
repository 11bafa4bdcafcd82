/**
 * A host of child ranks (worker threads or processes): one hub link per rank, the death cause of
 * each end, and termination of every child when the scope closes.
 *
 * @since 0.1.0
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as DeathReport from "../../actor/death-report.ts"
import * as NodeRuntime from "../../platform/node.ts"
import type * as RuntimeTypes from "../../platform/types.ts"
import * as RankOutput from "../rank-output.ts"
import * as Transport from "../transport.ts"
import * as Hub from "./hub.ts"

/** Starts one raw child for `rank`. @since 0.1.0 @category internal */
export type SpawnRaw<O> = (rank: Transport.Peer, options: O, handlers: RuntimeTypes.ChildHandlers) => RuntimeTypes.RawChild

/** A host. @since 0.1.0 @category internal */
export interface Host<O> {
  readonly transport: Transport.TransportShape
  readonly spawn: (rank: Transport.Peer, options: O) => Effect.Effect<void, Transport.TransportError>
  readonly kill: (rank: Transport.Peer, signal?: string) => Effect.Effect<void>
  /**
   * Workers only: gives ring `generation`'s `peers` (ring order) direct links, each rank one to
   * its next and one from its previous neighbour; returns the peers it reached. A peer
   * without a child (gone) is skipped: its neighbours' links to it lead nowhere, and the
   * coordinator's DeclareDead aborts whatever waits on them. `sharedSlots` as `RawChild.postRing`;
   * `area`: a shared all-reduce area (`SharedAllReduce`) every peer gets with its ring rank.
   */
  readonly formRing: (
    generation: number,
    peers: ReadonlyArray<Transport.Peer>,
    sharedSlots: number,
    area?: {
      readonly buffer: SharedArrayBuffer
      readonly length: number
      readonly memory?: { readonly buffer: SharedArrayBuffer } | undefined
    }
  ) => number
}

interface Child {
  raw: RuntimeTypes.RawChild | undefined
  readonly exited: Promise<void>
  killedWith: string | undefined
  closedWith: number | undefined
  error: unknown
}

/**
 * Makes a host. Causes: the host closed the link → `Disconnected{closeCode}`; the host killed
 * it → `Killed{killSignal}` (`"terminate"` for workers); the OS killed it → `Killed{signal}`,
 * unless the raw child said it ran out of memory (`Crashed`); an `error` was seen →
 * `Crashed{message}`; else `Exited{code}`. The end is reported as soon as the
 * raw channel says `closed` (a worker's port closes well before its exit event) if the host had
 * closed the link or killed the child, or an `error` was seen; otherwise at `exit`, which brings
 * the exit code or signal. A process record over `messageBytesMax` (`handlers.oversized`) closes
 * the link with `CloseCode.MessageTooBig`: `Disconnected{1009}`. What each child prints goes
 * through a `RankOutput` splitter to `options.onOutput`; its last lines are forwarded before its end.
 *
 * @since 0.1.0
 * @category internal
 */
export const make = <O>(
  spawnRaw: SpawnRaw<O>,
  killSignal: (signal: string | undefined) => string,
  options?: Transport.Options & RankOutput.Options
): Effect.Effect<Host<O>, never, Scope.Scope> =>
  Effect.gen(function* () {
    // Long because it is a factory: the closures it returns share its state, and each is short.
    const hub = yield* Hub.make(Transport.coordinatorPeer, options)
    const children = new Map<Transport.Peer, Child>()

    const spawn = (rank: Transport.Peer, spawnOptions: O) =>
      Effect.suspend(() => {
        if (children.has(rank)) {
          return Effect.fail(new Transport.TransportError({ reason: { _tag: "SpawnFailed", detail: `rank ${rank} already has a child` } }))
        }
        return Effect.try({
          try: () => {
            let resolveExit: () => void = () => {}
            const child: Child = {
              raw: undefined,
              exited: new Promise<void>((resolve) => (resolveExit = resolve)),
              killedWith: undefined,
              closedWith: undefined,
              error: undefined
            }
            let link: Hub.Link | undefined
            let ended = false
            const end = (cause: DeathReport.DeathCause): void => {
              if (ended) return
              ended = true
              link?.end(cause)
            }
            // What is known of the end before the exit code: the host closed the link, the host
            // killed it, or the child reported an error.
            const knownCause = (): DeathReport.DeathCause | undefined =>
              child.closedWith !== undefined
                ? DeathReport.disconnected(child.closedWith)
                : child.killedWith !== undefined
                  ? DeathReport.killed(child.killedWith)
                  : child.error !== undefined
                    ? NodeRuntime.isOutOfMemory(child.error)
                      ? DeathReport.crashed(DeathReport.errorMessage(child.error)) // made by this side: its stack says nothing of the rank
                      : DeathReport.crashedBy(child.error)
                    : undefined
            const lines = RankOutput.make(rank, options)
            // The host closes the link itself (not the hub): the link is gone with this child.
            const closeWith = (closeCode: number): void => {
              child.closedWith ??= closeCode
              child.raw?.kill()
            }
            child.raw = spawnRaw(rank, spawnOptions, {
              message: (message) => link?.receive(message),
              output: lines.push,
              oversized: () => closeWith(Transport.CloseCode.MessageTooBig),
              error: (error) => {
                child.error ??= error ?? "unknown error"
              },
              // The channel closed ahead of the exit event: every message is in, so the end is
              // reported now when its cause is already known; otherwise the exit code decides.
              closed: () => {
                const cause = knownCause()
                if (cause !== undefined) end(cause)
              },
              exit: (code, signal) => {
                lines.end()
                const known = knownCause()
                end(
                  known !== undefined && known._tag !== "Crashed"
                    ? known
                    : signal !== null && !NodeRuntime.isOutOfMemory(child.error)
                      ? DeathReport.killed(signal)
                      : (known ?? DeathReport.exited(code ?? 0))
                )
                resolveExit()
              }
            })
            const raw = child.raw
            children.set(rank, child)
            link = hub.attach(rank, {
              post: raw.post,
              close: (closeCode) => {
                child.closedWith = closeCode
                raw.kill()
              }
            })
          },
          catch: (error) => new Transport.TransportError({ reason: { _tag: "SpawnFailed", detail: DeathReport.errorMessage(error) } })
        })
      })

    const killNow = (rank: Transport.Peer, signal?: string): Promise<void> => {
      const child = children.get(rank)
      if (child === undefined) return Promise.resolve()
      if (child.closedWith === undefined) child.killedWith ??= killSignal(signal)
      child.raw?.kill(signal)
      return child.exited
    }

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        hub.flushAll()
        await Promise.all([...children.keys()].map((rank) => killNow(rank)))
        hub.shutdown()
      })
    )
    const formRing = (
      generation: number,
      peers: ReadonlyArray<Transport.Peer>,
      sharedSlots: number,
      area?: {
        readonly buffer: SharedArrayBuffer
        readonly length: number
        readonly memory?: { readonly buffer: SharedArrayBuffer } | undefined
      }
    ): number => {
      const n = peers.length
      if (n < 2) return 0
      // Channel i carries ring rank i's steps to ring rank i + 1.
      const channels = peers.map(() => NodeRuntime.ringChannel())
      let reached = 0
      peers.forEach((rank, i) => {
        const raw = children.get(rank)?.raw
        if (raw?.postRing === undefined) return
        const member =
          area === undefined ? undefined : { buffer: area.buffer, ringRank: i, ringSize: n, length: area.length, memory: area.memory }
        raw.postRing(generation, channels[i]!.sender, channels[(i + n - 1) % n]!.receiver, sharedSlots, member)
        reached += 1
      })
      return reached
    }

    return { transport: hub.transport, spawn, kill: (rank, signal) => Effect.promise(() => killNow(rank, signal)), formRing }
  })

/**
 * The child's side: a hub for its rank linked to `coordinatorPeer` through `parent`. Queued
 * frames are flushed when the child calls `process.exit`; the parent's end reads
 * `Disconnected{1006}`.
 *
 * @since 0.1.0
 * @category internal
 */
export const connect = (parent: RuntimeTypes.ParentLink, options?: Transport.Options): Effect.Effect<Transport.TransportShape> =>
  Effect.gen(function* () {
    const hub = yield* Hub.make(parent.rank, options)
    const link = hub.attach(Transport.coordinatorPeer, { post: parent.post, close: () => parent.close() })
    parent.onMessage(link.receive)
    parent.onClose(() => link.end(DeathReport.disconnected(Transport.CloseCode.Abnormal)))
    parent.onExit(() => hub.flushAll())
    return hub.transport
  })
