/**
 * The worker-thread transport: the coordinator's endpoint hosts one `node:worker_threads` worker
 * per rank, identical on Node, Bun and Deno (docs/design.md §5, TOOLCHAIN.md §3).
 *
 * Each worker gets a dedicated `MessageChannel` port; frames travel as batches in transferred
 * buffers. When a worker ends, its port is drained before `Ended{rank, cause}` is delivered, so
 * every frame it posted comes first. The cause follows TOOLCHAIN.md §7: the host terminated it
 * → `Killed{"terminate"}`; the host closed the link (bad-frame policy, overflow) →
 * `Disconnected{closeCode}`; an `error` event was seen (throw, rejection, out of memory) →
 * `Crashed{message}`; otherwise `Exited{code}`, whatever the code.
 *
 * What a worker prints (`console.*`, `process.stdout.write`, ...) goes on a second port to the
 * host's `onOutput` (default: `[rank N] line` on the coordinator's stderr; bounds in
 * `rank-output.ts`), never to the coordinator's stdout.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as Children from "./internal/children.ts"
import * as SharedRingLink from "../platform/shared-ring-link.ts"
import * as NodeRuntime from "../platform/node.ts"
import type * as RuntimeTypes from "../platform/types.ts"
import type * as RankOutput from "./rank-output.ts"
import * as Transport from "./transport.ts"

/**
 * How to start one rank's worker.
 *
 * - `entry`: the worker's TypeScript module, a `file:` URL (string or `URL`).
 * - `rank`: the rank it hosts; its peer id.
 * - `data`: structured-cloneable data the worker reads from `connect().data` (default `undefined`).
 * - `resourceLimits`: V8 heap limits in MiB (default none); Bun ignores them.
 * - `nice`: the worker thread's nice value, 0 to 19 (default 0): above 0 the rank yields a busy
 *   CPU to the coordinator's thread. Linux only (a nice value is per thread there); elsewhere
 *   ignored.
 *
 * @since 0.1.0
 * @category options
 */
export interface SpawnOptions {
  readonly entry: string | URL
  readonly rank: Transport.Peer
  readonly data?: unknown
  readonly resourceLimits?: RuntimeTypes.ResourceLimits
  readonly nice?: number
}

/**
 * The coordinator's side: its endpoint, `spawn` to start a rank's worker (fails with
 * `TransportError` `SpawnFailed`, e.g. for a rank that already has one), `terminate` to stop one
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
  /**
   * The ring backend's direct links: gives every rank of ring `generation` (`peers` in
   * ring order) a `MessageChannel` to its next neighbour and one from its previous neighbour,
   * transferred on its frame port ahead of the frames sent after this call. Returns how many ranks
   * it reached. Ranks close a generation's ports when a newer one arrives. `sharedSlots` (default
   * `SharedRingLink.slotsDefault`, 4): the steps travel through a shared-memory segment of that
   * many slots per direction where the runtime has `Atomics.waitAsync` (`SharedRingLink`), each
   * slot one step's data (about 8 bytes a parameter / ring size); 0 keeps them on the ports.
   * `area` (a `SharedArrayBuffer` of `SharedAllReduce.areaBytes(peers.length, length)` bytes, the
   * parameter `length`, and the shared WebAssembly `memory` the buffer lies in, if any): every rank also gets the generation's shared all-reduce area with its
   * ring rank (`RingPorts.area`), and runs its collectives there instead of over the links.
   */
  readonly formRing: (
    generation: number,
    peers: ReadonlyArray<Transport.Peer>,
    sharedSlots?: number,
    area?: {
      readonly buffer: SharedArrayBuffer
      readonly length: number
      readonly memory?: { readonly buffer: SharedArrayBuffer } | undefined
    }
  ) => number
}

/**
 * Makes the coordinator's worker host (peer id `coordinatorPeer`); `options` as `Transport.Options`,
 * plus `RankOutput.Options` for what the ranks print (default: `[rank N] line` on stderr).
 *
 * @since 0.1.0
 * @category constructors
 */
export const host = (options?: Transport.Options & RankOutput.Options): Effect.Effect<WorkerHost, never, Scope.Scope> =>
  Effect.map(
    Children.make<SpawnOptions>(
      (rank, spawnOptions, handlers) =>
        NodeRuntime.spawnWorker(
          {
            entry: String(spawnOptions.entry),
            rank,
            data: spawnOptions.data,
            ...(spawnOptions.resourceLimits === undefined ? {} : { resourceLimits: spawnOptions.resourceLimits }),
            ...(spawnOptions.nice === undefined ? {} : { nice: spawnOptions.nice })
          },
          handlers
        ),
      () => "terminate",
      options
    ),
    (children) => ({
      transport: children.transport,
      spawn: (spawnOptions) => children.spawn(spawnOptions.rank, spawnOptions),
      terminate: (rank) => children.kill(rank),
      formRing: (generation, peers, sharedSlots = SharedRingLink.slotsDefault, area) =>
        children.formRing(generation, peers, sharedSlots, area)
    })
  )

/**
 * Whether worker ring links can use shared memory in this runtime (`SharedRingLink`:
 * `SharedArrayBuffer` and `Atomics.waitAsync`); where not, `WorkerHost.formRing` keeps every step
 * on the ports.
 *
 * @since 0.1.0
 * @category model
 */
export const sharedRingLinks = (): boolean => SharedRingLink.sharedMemoryAvailable()

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
  /** The ring links the host hands over (`WorkerHost.formRing`), one `RingPorts` per generation. */
  readonly onRingPorts: (callback: (ports: RuntimeTypes.RingPorts) => void) => void
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
  Effect.suspend(() => {
    const parent = NodeRuntime.workerParent()
    if (parent === undefined) {
      return Effect.fail(new Transport.TransportError({ reason: { _tag: "ConnectFailed", detail: "not inside a Cohort worker" } }))
    }
    return Effect.map(Children.connect(parent, options), (transport) => ({
      transport,
      rank: parent.rank,
      data: parent.data,
      onRingPorts: (callback: (ports: RuntimeTypes.RingPorts) => void) => parent.onRingPorts?.(callback)
    }))
  })
