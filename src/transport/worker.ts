/**
 * The worker-thread transport: the coordinator's endpoint hosts one `node:worker_threads` worker
 * per rank, identical on Node, Bun and Deno (DESIGN.md §5, TOOLCHAIN.md §3).
 *
 * Each worker gets a dedicated `MessageChannel` port; frames travel as batches in transferred
 * buffers. When a worker ends, its port is drained before `Ended{rank, cause}` is delivered, so
 * every frame it posted comes first. The cause follows TOOLCHAIN.md §7: the host terminated it
 * → `Killed{"terminate"}`; the host closed the link (bad-frame policy, overflow) →
 * `Disconnected{closeCode}`; an `error` event was seen (throw, rejection, out of memory) →
 * `Crashed{message}`; otherwise `Exited{code}`, whatever the code.
 *
 * @since 0.1.0
 */
import { Effect, Scope } from "effect"
import * as DeathReport from "../actor/death-report.ts"
import * as Hub from "./internal/hub.ts"
import * as NodeRuntime from "./runtime/node.ts"
import type * as RuntimeTypes from "./runtime/types.ts"
import * as Transport from "./transport.ts"

/**
 * How to start one rank's worker.
 *
 * - `entry`: the worker's TypeScript module, a `file:` URL (string or `URL`).
 * - `rank`: the rank it hosts; its peer id.
 * - `data`: structured-cloneable data the worker reads from `connect().data` (default `undefined`).
 * - `resourceLimits`: V8 heap limits in MiB (default none); Bun ignores them.
 *
 * @since 0.1.0
 * @category options
 */
export interface SpawnOptions {
  readonly entry: string | URL
  readonly rank: Transport.Peer
  readonly data?: unknown
  readonly resourceLimits?: RuntimeTypes.ResourceLimits
}

/**
 * The coordinator's side: its endpoint, `spawn` to start a rank's worker, `terminate` to stop one
 * (its end reads `Killed{"terminate"}`). Closing the scope terminates every worker and waits for
 * them to exit.
 *
 * @since 0.1.0
 * @category model
 */
export interface WorkerHost {
  readonly transport: Transport.TransportShape
  readonly spawn: (options: SpawnOptions) => Effect.Effect<void, Transport.TransportError>
  readonly terminate: (rank: Transport.Peer) => Effect.Effect<void>
}

interface Child {
  readonly raw: RuntimeTypes.RawChild
  readonly exited: Promise<void>
  terminated: boolean
  closedWith: number | undefined
  error: unknown
}

/**
 * Makes the coordinator's worker host (peer id `coordinatorPeer`); `options` as `Transport.Options`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const host = (options?: Transport.Options): Effect.Effect<WorkerHost, never, Scope.Scope> =>
  Effect.gen(function*() {
    const hub = yield* Hub.make(Transport.coordinatorPeer, options)
    const children = new Map<Transport.Peer, Child>()

    const spawn = (spawnOptions: SpawnOptions) =>
      Effect.suspend(() => {
        const rank = spawnOptions.rank
        if (children.has(rank)) {
          return Effect.fail(
            new Transport.TransportError({ reason: { _tag: "SpawnFailed", detail: `rank ${rank} already has a worker` } })
          )
        }
        return Effect.try({
          try: () => {
            let resolveExit: () => void = () => {}
            const exited = new Promise<void>((resolve) => (resolveExit = resolve))
            const child: Child = { raw: undefined as never, exited, terminated: false, closedWith: undefined, error: undefined }
            let link: Hub.Link | undefined
            const raw = NodeRuntime.spawnWorker(
              {
                entry: String(spawnOptions.entry),
                rank,
                data: spawnOptions.data,
                ...(spawnOptions.resourceLimits === undefined ? {} : { resourceLimits: spawnOptions.resourceLimits })
              },
              {
                message: (message) => link?.receive(message),
                error: (error) => {
                  if (child.error === undefined) child.error = error ?? "unknown error"
                },
                exit: (code) => {
                  link?.end(
                    child.closedWith !== undefined
                      ? DeathReport.disconnected(child.closedWith)
                      : child.terminated
                      ? DeathReport.killed("terminate")
                      : child.error !== undefined
                      ? DeathReport.crashed(DeathReport.errorMessage(child.error))
                      : DeathReport.exited(code ?? 0)
                  )
                  resolveExit()
                }
              }
            )
            ;(child as { raw: RuntimeTypes.RawChild }).raw = raw
            children.set(rank, child)
            link = hub.attach(rank, {
              post: raw.post,
              close: (closeCode) => {
                child.closedWith = closeCode
                raw.kill()
              }
            })
          },
          catch: (error) =>
            new Transport.TransportError({ reason: { _tag: "SpawnFailed", detail: DeathReport.errorMessage(error) } })
        })
      })

    const terminate = (rank: Transport.Peer) =>
      Effect.promise(() => {
        const child = children.get(rank)
        if (child === undefined) return Promise.resolve()
        if (child.closedWith === undefined) child.terminated = true
        child.raw.kill()
        return child.exited
      })

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        hub.flushAll()
        await Promise.all([...children.keys()].map((rank) => Effect.runPromise(terminate(rank))))
        hub.shutdown()
      })
    )
    return { transport: hub.transport, spawn, terminate }
  })

/**
 * A worker's side: its endpoint (peer id = its rank, one peer: `coordinatorPeer`), its rank and
 * the host's `data`.
 *
 * @since 0.1.0
 * @category model
 */
export interface WorkerRank {
  readonly transport: Transport.TransportShape
  readonly rank: Transport.Peer
  readonly data: unknown
}

/**
 * Inside a worker started by `WorkerHost.spawn`: connects to the host. Frames still queued when
 * the worker calls `process.exit` are flushed first. If the host's port closes, the inbox gets
 * `Ended{coordinatorPeer, Disconnected{1006}}`. Fails with `TransportError` `ConnectFailed`
 * outside such a worker.
 *
 * @since 0.1.0
 * @category constructors
 */
export const connect = (options?: Transport.Options): Effect.Effect<WorkerRank, Transport.TransportError> =>
  Effect.gen(function*() {
    const parent = NodeRuntime.workerParent()
    if (parent === undefined) {
      return yield* Effect.fail(
        new Transport.TransportError({ reason: { _tag: "ConnectFailed", detail: "not inside a Cohort worker" } })
      )
    }
    const hub = yield* Hub.make(parent.rank, options)
    const link = hub.attach(Transport.coordinatorPeer, {
      post: parent.post,
      close: () => parent.close()
    })
    parent.onMessage(link.receive)
    parent.onClose(() => link.end(DeathReport.disconnected(Transport.CloseCode.Abnormal)))
    parent.onExit(() => hub.flushAll())
    return { transport: hub.transport, rank: parent.rank, data: parent.data }
  })
