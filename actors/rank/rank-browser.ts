/**
 * Entry of a browser rank: the body of the Web Worker that `cohort bundle` builds with the
 * user's trainer compiled in, and that the page (`index.html`) starts.
 *
 * The page sends the coordinator's WebSocket URL, the run token and the rank to ask for
 * (`Browser.BrowserJoin`, `"auto"` by default); the worker joins over the browser's own
 * `WebSocket` (`WebSocket.connect`), takes the run's settings from the welcome, and then runs
 * the same rank loop as a process or a worker thread (`Rank.main`). It tells the page when it
 * joined, how training goes (at most every `progressIntervalMs`) and how it ended
 * (`Browser.BrowserStatus`; when the coordinator is gone, the rank's own line saying why, which a
 * process prints on stderr). Closing the tab ends the worker and its socket: the coordinator sees
 * the connection close and declares the rank dead (`Disconnected`), like any other death.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as Browser from "../../src/platform/browser.ts"
import * as Transport from "../../src/transport/transport.ts"
// The client alone: the server side (and its HMAC on node:crypto) has no place in a browser bundle.
import * as WebSocket from "../../src/transport/web-socket-client.ts"
import * as Rank from "./rank.ts"

/** What the exit codes of a rank mean, for the page's last line. */
const endDetail = (code: number): string =>
  code === 0
    ? "left the run cleanly"
    : code === Rank.coordinatorGoneExitCode
      ? "the coordinator is gone"
      : "crashed (the coordinator shows the error)"

/** What a refusal's close code means, in the words `cohort join` uses. */
const refusalWords = (closeCode: number): string => {
  switch (closeCode) {
    case Transport.CloseCode.WrongToken:
      return "wrong token"
    case Transport.CloseCode.DuplicateRank:
      return "rank taken (with auto: every rank is taken)"
    case Transport.CloseCode.RunFormed:
      return "the run already formed"
    case Transport.CloseCode.RankDead:
      return "the rank was declared dead"
    case Transport.CloseCode.RankOutOfRange:
      return "rank out of range"
    default:
      return "refused"
  }
}

/** How long a leaving browser rank waits for its socket's close handshake: 2000 ms. @since 0.1.0 @category rank */
export const leaveCloseMsMax = 2000

/**
 * Joins and runs the rank; `trainer` is the bundled trainer module. Resolves once the rank has
 * left. A join the coordinator refuses, or a welcome that is not a `Rank.JoinedRun`, is reported
 * to the page as `ended` with code 1 and a line saying why. A welcome whose `epochSamples` differs
 * from the bundled trainer's `trainSamples` (the page was built from another trainer) closes the
 * socket and ends likewise, before any training.
 *
 * @since 0.1.0
 * @category rank
 */
export const main = async (trainer: unknown): Promise<void> => {
  const page = Browser.pageLink()
  const join = await page.join
  let client: WebSocket.ClientHandle | undefined
  let ended = false
  // The rank's own last line (the coordinator is gone: why, and that the save failed), if it said one.
  let lastLine: string | undefined
  // Close the socket first (bounded), so that the rank's last frames arrive before its end.
  const leave = (code: number, detail = lastLine ?? endDetail(code)) => {
    if (ended) return
    ended = true
    const closing =
      client === undefined
        ? Promise.resolve()
        : Effect.runPromise(client.close(Transport.CloseCode.Normal).pipe(Effect.timeoutOption(leaveCloseMsMax), Effect.ignore))
    void closing.finally(() => {
      page.post({ _tag: "ended", code, detail })
      Browser.closeWorker()
    })
  }
  const trainSamples = (trainer as { readonly trainSamples?: unknown }).trainSamples
  const connect = Effect.gen(function* () {
    const scope = yield* Scope.make()
    const joined = yield* WebSocket.connect({ url: join.url, runToken: join.token, rank: join.rank }).pipe(Scope.provide(scope))
    client = joined
    if (!Rank.isJoinedRun(joined.run)) {
      leave(1, "the coordinator's welcome did not describe the run (another version of cohort?)")
      return yield* Effect.never
    }
    if (joined.run.epochSamples !== trainSamples) {
      leave(
        1,
        `the coordinator's trainer has ${joined.run.epochSamples} samples an epoch, this page's ${String(trainSamples)}: the page was built from another trainer`
      )
      return yield* Effect.never
    }
    page.post({ _tag: "joined", rank: joined.rank })
    const link: Rank.Link = {
      transport: joined.transport,
      rank: joined.rank,
      data: Rank.rankDataOf(joined.run, { trainer: "bundled", saveDir: "save", checkpointDir: "checkpoints" }),
      detach: () => (line) => {
        lastLine = line
      },
      status: (status) => page.post({ _tag: "training", rank: joined.rank, ...status })
    }
    return link
  }).pipe(
    Effect.tapError((error) =>
      Effect.sync(() =>
        leave(
          1,
          error.reason._tag === "Refused"
            ? `the coordinator refused the join: ${refusalWords(error.reason.closeCode)} (close code ${error.reason.closeCode})`
            : `cannot reach the coordinator at ${join.url}`
        )
      )
    )
  )
  await Rank.main(connect, async () => trainer, leave).catch(() => leave(1))
}
