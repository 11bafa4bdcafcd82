/**
 * The child-process transport, for process-per-rank runs: the coordinator's endpoint hosts one
 * child process per rank on the current runtime (`node --import tsx`, `bun`, `deno run -A`),
 * talking over a channel of its own, the child's fd 3 (docs/design.md §5). The child's stdout and
 * stderr are its own: trainer code may print, and every line goes to the host's `onOutput`
 * (default: `[rank N] line` on the coordinator's stderr; bounds in `rank-output.ts`). A record
 * whose header announces more than `messageBytesMax` closes the link before anything of it is
 * buffered: `Disconnected{1009}` (`CloseCode.MessageTooBig`).
 *
 * A child's end is delivered after its frame channel has been read to the end, so every frame it
 * wrote comes first. Causes (TOOLCHAIN.md §7): killed by the host or the OS → `Killed{signal}`; the
 * host closed the link → `Disconnected{closeCode}`; past its heap limit → `Crashed` (out of
 * memory); otherwise `Exited{code}` whatever the code (a process that throws or rejects exits 1:
 * `Exited{1}`; a Cohort rank reports its error itself, in a `Crashing` frame, which the
 * coordinator actor folds into its death report).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as Batch from "./internal/batch.ts"
import * as Children from "./internal/children.ts"
import * as Beater from "../platform/beater.ts"
import * as NodeRuntime from "../platform/node.ts"
import type * as RankOutput from "./rank-output.ts"
import * as Transport from "./transport.ts"

/**
 * How to start one rank's process: `entry` (a `file:` URL of a TypeScript module), `rank`,
 * JSON-serialisable `data` (default `null`), read by the child from `connect().data`, and `nice`,
 * the process's nice value, 0 to 19 (default 0: the parent's).
 *
 * @since 0.1.0
 * @category options
 */
export interface SpawnOptions {
  readonly entry: string | URL
  readonly rank: Transport.Peer
  readonly data?: unknown
  readonly nice?: number
  /**
   * V8's heap limit of the process in MiB (default none), enforced by Node and Deno; reaching it
   * ends the rank as `Crashed` with an out-of-memory reason. Bun ignores it.
   */
  readonly heapLimitMb?: number
}

/**
 * The coordinator's side: its endpoint, `spawn` (fails with `TransportError` `SpawnFailed`) and
 * `kill(rank, signal = "SIGKILL")`, whose end reads `Killed{signal}`. Closing the scope kills
 * every child with SIGKILL and waits for it.
 *
 * @since 0.1.0
 * @category model
 */
export interface ProcessHost {
  readonly transport: Transport.TransportShape
  readonly spawn: (options: SpawnOptions) => Effect.Effect<void, Transport.TransportError>
  readonly kill: (rank: Transport.Peer, signal?: string) => Effect.Effect<void>
}

/**
 * Makes the coordinator's process host (peer id `coordinatorPeer`); `options` as `Transport.Options`,
 * plus `RankOutput.Options` for what the ranks print (default: `[rank N] line` on stderr).
 *
 * @since 0.1.0
 * @category constructors
 */
export const host = (options?: Transport.Options & RankOutput.Options): Effect.Effect<ProcessHost, never, Scope.Scope> =>
  Effect.map(
    Children.make<SpawnOptions>(
      (rank, spawnOptions, handlers) =>
        NodeRuntime.spawnChild(
          {
            entry: String(spawnOptions.entry),
            rank,
            data: spawnOptions.data,
            messageBytesMax: options?.messageBytesMax ?? Transport.messageBytesMaxDefault,
            ...(spawnOptions.nice === undefined ? {} : { nice: spawnOptions.nice }),
            ...(spawnOptions.heapLimitMb === undefined ? {} : { heapLimitMb: spawnOptions.heapLimitMb })
          },
          handlers
        ),
      (signal) => signal ?? "SIGKILL",
      options
    ),
    (children) => ({
      transport: children.transport,
      spawn: (spawnOptions) => children.spawn(spawnOptions.rank, spawnOptions),
      kill: (rank, signal) => children.kill(rank, signal)
    })
  )

/**
 * Whether rank processes started on this runtime beat from a thread of their own while a call
 * blocks them (`ProcessRank.beatWhile`): always under Node and Bun, under Deno where the C
 * library opens (`src/platform/beater.ts`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const beatsDuringCalls = (): boolean => Beater.supported()

/**
 * A child process's side: its endpoint (peer id = its rank, one peer: `coordinatorPeer`), rank and data.
 *
 * @since 0.1.0
 * @category model
 */
export interface ProcessRank {
  readonly transport: Transport.TransportShape
  readonly rank: Transport.Peer
  readonly data: unknown
  /**
   * Once the coordinator is gone: sends what the process prints to the coordinator's own stderr
   * (its pipes to the coordinator lead nowhere now) and returns a writer of one line there
   * (`ParentLink.detach`).
   */
  readonly detach: () => (line: string) => void
  /**
   * Sends `frame` (an encoded frame, a `Heartbeat`) to the coordinator every `intervalMs` from a
   * thread of the process's own, for up to `forMs` ms, until the returned function is called: a
   * call that blocks the process's thread does not silence the rank (`ParentLink.beatWhile`).
   */
  readonly beatWhile: (frame: Uint8Array, intervalMs: number, forMs: number) => () => void
}

/**
 * Inside a process started by `ProcessHost.spawn`: connects to the host. Frames still queued when
 * the process calls `process.exit` are written first. Fails with `TransportError` `ConnectFailed`
 * elsewhere.
 *
 * The host's death is an expected end, not an error: when the channel closes, a write to it fails
 * (`EPIPE`), or a write finds it full for more than `frameWriteBlockedMsMax` ms (default
 * `NodeRuntime.frameWriteBlockedMsMaxDefault`, 10000), the inbox gets
 * `Ended{coordinatorPeer, Disconnected{1006}}`, later sends are dropped, and nothing is thrown.
 *
 * @since 0.1.0
 * @category constructors
 */
export const connect = (
  options?: Transport.Options & { readonly frameWriteBlockedMsMax?: number }
): Effect.Effect<ProcessRank, Transport.TransportError> =>
  Effect.suspend(() => {
    const parent = NodeRuntime.processParent(
      options?.frameWriteBlockedMsMax === undefined ? undefined : { frameWriteBlockedMsMax: options.frameWriteBlockedMsMax }
    )
    if (parent === undefined) {
      return Effect.fail(new Transport.TransportError({ reason: { _tag: "ConnectFailed", detail: "not inside a Cohort child process" } }))
    }
    return Effect.map(Children.connect(parent, options), (transport) => ({
      transport,
      rank: parent.rank,
      data: parent.data,
      detach: parent.detach ?? (() => () => {}),
      // One frame in a batch of one, as the hub sends every message.
      beatWhile: (frame, intervalMs, forMs) => parent.beatWhile?.(Batch.encode([frame], frame.byteLength), intervalMs, forMs) ?? (() => {})
    }))
  })
