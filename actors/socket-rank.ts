/**
 * A rank that reaches its coordinator over a WebSocket (DESIGN.md §5; issue 14): a local rank
 * process of `run({ transport: "websocket" })`, or a rank of `cohort join` on any host.
 *
 * It joins with the run token (`WebSocket.connect`), runs the rank actor (`actors/rank.ts`) over
 * the socket, and leaves by closing the socket with 1000 before the process exits (bounded by
 * `leaveCloseMsMax`), so that every frame it sent (its `Exiting`, a `Crashing`) reaches the
 * coordinator before the socket's end does.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeRuntime from "../src/platform/node.ts"
import * as Transport from "../src/transport/transport.ts"
import * as WebSocket from "../src/transport/web-socket.ts"
import * as Rank from "./rank.ts"

/**
 * How long a leaving rank waits for its socket's close handshake before it exits anyway: 2000 ms.
 *
 * @since 0.1.0
 * @category rank
 */
export const leaveCloseMsMax = 2000

/**
 * What a local WebSocket rank process gets from its launcher (its `COHORT_CHILD_DATA`): the
 * rank's `RankData`, plus the server's `url` and the `runToken`.
 *
 * @since 0.1.0
 * @category model
 */
export interface ProcessData extends Rank.RankData {
  readonly url: string
  readonly runToken: string
}

/**
 * Joins `options.url` (see `WebSocket.ClientOptions`; `rank` may be `"auto"`) in a scope that
 * lives as long as the process, and returns the client and the rank's link, whose `data` is
 * `dataOf(client)` (the client's `run` holds what the coordinator's welcome carried). Fails with
 * `TransportError` as `WebSocket.connect`.
 *
 * @since 0.1.0
 * @category rank
 */
export const join = (
  options: WebSocket.ClientOptions,
  dataOf: (client: WebSocket.ClientHandle) => Rank.RankData,
  detach?: () => (line: string) => void
): Effect.Effect<{ readonly client: WebSocket.ClientHandle; readonly link: Rank.Link }, Transport.TransportError> =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const client = yield* WebSocket.connect(options).pipe(Scope.provide(scope))
    const link: Rank.Link = {
      transport: client.transport,
      rank: client.rank,
      data: dataOf(client),
      ...(detach === undefined ? {} : { detach })
    }
    return { client, link }
  })

/**
 * A leave for `Rank.main`: closes the client's socket (at most `leaveCloseMsMax` ms), then exits
 * the process with the code, after `before(code)` if given.
 *
 * @since 0.1.0
 * @category rank
 */
export const leaveThrough = (client: () => WebSocket.ClientHandle | undefined, before?: (code: number) => void) => (code: number): void => {
  const handle = client()
  const closing = handle === undefined
    ? Promise.resolve()
    : Effect.runPromise(handle.close(Transport.CloseCode.Normal).pipe(Effect.timeoutOption(leaveCloseMsMax), Effect.ignore))
  void closing.finally(() => {
    before?.(code)
    process.exit(code)
  })
}

/**
 * The body of a local WebSocket rank process (started by the launcher with `ProcessData`):
 * joins, runs, leaves. `loadTrainer` as `Rank.main`.
 *
 * @since 0.1.0
 * @category rank
 */
export const processMain = (loadTrainer?: (url: string) => Promise<unknown>): Promise<void> => {
  const parent = NodeRuntime.processParent()
  if (parent === undefined) throw new Error("not inside a Cohort rank process")
  const data = parent.data as ProcessData
  let client: WebSocket.ClientHandle | undefined
  const connect = Effect.map(
    join({ url: data.url, runToken: data.runToken, rank: parent.rank }, () => data, parent.detach),
    (joined) => {
      client = joined.client
      return joined.link
    }
  )
  return Rank.main(connect, loadTrainer, leaveThrough(() => client))
}
