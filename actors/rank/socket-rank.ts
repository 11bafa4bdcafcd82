/**
 * A rank that reaches its coordinator over a WebSocket (docs/design.md §5): a local rank
 * process of `run({ transport: "websocket" })`, or a rank of `cohort join` on any host.
 *
 * It joins with the run token (`WebSocket.connect`), runs the rank actor (`actors/rank/rank.ts`) over
 * the socket, and leaves by closing the socket with 1000 before the process exits (bounded by
 * `leaveCloseMsMax`), so that every frame it sent (its `Exiting`, a `Crashing`) reaches the
 * coordinator before the socket's end does.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as BeatLink from "../../src/platform/beat-link.ts"
import * as Bundle from "../../src/platform/bundle.ts"
import * as Files from "../../src/platform/files.ts"
import * as NodeRuntime from "../../src/platform/node.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as WireFrames from "../../src/transport/wire-frames.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
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
 * rank's `RankData`, plus the server's `url`, the `runToken` and, over TLS, the certificate's
 * `fingerprint256`.
 *
 * @since 0.1.0
 * @category model
 */
export interface ProcessData extends Rank.RankData {
  readonly url: string
  readonly runToken: string
  /** The coordinator's certificate fingerprint when it serves `wss://` (`RunOptions.tls`): the rank pins it. */
  readonly fingerprint256?: string
}

/** How long a rank's beat link waits before it opens again after a drop (ms). */
const beatLinkRetryMs = 1000

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
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    // Heartbeats go between the pieces of a large Params on a resumable link.
    const client = yield* WebSocket.connect({ orderFree: WireFrames.orderFree, ...options }).pipe(
      Scope.provide(scope),
      Effect.onError(() => Scope.close(scope, Exit.void))
    )
    const data = dataOf(client)
    // A server that hands out beat links, and a coordinator that counts on the beats: the rank
    // beats on a link of a thread of its own while a call blocks its thread (docs/liveness.md).
    const beats =
      client.beat === undefined || data?.callBeatsMs === undefined
        ? undefined
        : BeatLink.start({
            url: options.url,
            rank: client.rank,
            session: client.beat.session,
            key: client.beat.key,
            proofText: WebSocket.beatProofText(client.rank, client.beat.session),
            retryMs: beatLinkRetryMs
          })
    const link: Rank.Link = {
      transport: client.transport,
      rank: client.rank,
      data,
      ...(detach === undefined ? {} : { detach }),
      ...(beats === undefined
        ? {}
        : { beatWhile: (_frame: Uint8Array, intervalMs: number, forMs: number) => beats.beatWhile(intervalMs, forMs) })
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
export const leaveThrough =
  (client: () => WebSocket.ClientHandle | undefined, before?: (code: number) => void) =>
  (code: number): void => {
    const handle = client()
    const closing =
      handle === undefined
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
    join(
      {
        url: data.url,
        runToken: data.runToken,
        rank: parent.rank,
        ...(data.fingerprint256 === undefined ? {} : { tls: { fingerprint256: data.fingerprint256 } })
      },
      () => data,
      parent.detach
    ),
    (joined) => {
      client = joined.client
      return joined.link
    }
  )
  return Rank.main(
    connect,
    loadTrainer,
    leaveThrough(() => client)
  )
}

/**
 * Exit codes of `cohort join` (docs/serve-and-join.md): 0 a clean end (the run completed, or
 * the rank saved after `ShutdownWithSave` and left); 1 the trainer failed (the rank crashed); 2 bad
 * input; 3 the coordinator is gone (the rank saved an emergency copy); then one per refusal class,
 * each after one line on stderr and never retried: 10 wrong token (close code 4001), 11 rank
 * taken (4003; `auto` with every rank taken), 12 run already formed (4010), 13 rank declared dead
 * (4011, at the join or later while training), 14 rank out of range (4002), 15 the coordinator
 * could not be reached within `connectTimeoutMs`, 16 any other refusal (a bad join 4000, a join
 * timeout 4004 with no Hello in time, retries of 1013/4008/4004 spent, a parameter count the run did not agree on 4009, a
 * trainer whose `trainSamples` differ from the run's), 17 a join into a run that may grow refused
 * (full 4013, a bad index 4014, an exited rank's index 4016, a live or joining rank's
 * index 4017, 4018, the run saving and stopping 4019, the run over 4020; a dead rank's index,
 * 4015, is 13 as for 4011), 18 the `wss://` server's certificate failed the check (not signed by
 * a trusted root or `--ca`, another host name, or not the pinned `--fingerprint`; close code
 * 1015, reported by the rank itself: nothing was sent to that server), 19 the rank's own
 * credential was refused, at the join or later while training: another rank's (4021), revoked
 * (4022: `cohort revoke`, which also closes the rank holding it), expired (4023).
 *
 * @since 0.1.0
 * @category join
 */
export const JoinExitCode = {
  ok: 0,
  crashed: 1,
  usage: 2,
  coordinatorGone: Rank.coordinatorGoneExitCode,
  wrongToken: 10,
  rankTaken: 11,
  runFormed: 12,
  rankDead: 13,
  rankOutOfRange: 14,
  unreachable: 15,
  refused: 16,
  joinRefused: 17,
  untrusted: 18,
  credentialRefused: 19
} as const

/** A join the coordinator kept asking to come back later (`TryAgainLater`, `AddressBusy`). */
const comeBackLater = {
  code: JoinExitCode.refused,
  words:
    "the coordinator kept asking this join to come back later until --connect-timeout-ms ran out (it was full, or a run that may grow was still forming)"
}

/** The exit code and words of each refusal's close code (another close code: `refused`). */
const refusals: ReadonlyMap<number, { readonly code: number; readonly words: string }> = new Map([
  [Transport.CloseCode.WrongToken, { code: JoinExitCode.wrongToken, words: "wrong token" }],
  [Transport.CloseCode.DuplicateRank, { code: JoinExitCode.rankTaken, words: "rank taken" }],
  [Transport.CloseCode.RunFormed, { code: JoinExitCode.runFormed, words: "the run already formed" }],
  [Transport.CloseCode.RankDead, { code: JoinExitCode.rankDead, words: "the rank was declared dead" }],
  [
    Transport.CloseCode.ResumeLost,
    { code: JoinExitCode.rankDead, words: "the rank's link could not be resumed without losing messages: the coordinator counts it dead" }
  ],
  [Transport.CloseCode.RankOutOfRange, { code: JoinExitCode.rankOutOfRange, words: "rank out of range" }],
  [Transport.CloseCode.ParamsMismatch, { code: JoinExitCode.refused, words: "the trainer's parameter count differs from the run's" }],
  [
    Transport.CloseCode.JoinFull,
    {
      code: JoinExitCode.joinRefused,
      words: "no rank index is free below the run's --max-ranks (the run is full, or the index asked for is not below it)"
    }
  ],
  [Transport.CloseCode.JoinBadIndex, { code: JoinExitCode.joinRefused, words: "the rank index is not an integer >= 0" }],
  [Transport.CloseCode.JoinDeadIndex, { code: JoinExitCode.rankDead, words: "that rank index died: a dead rank's index is never reused" }],
  [Transport.CloseCode.JoinExitedIndex, { code: JoinExitCode.joinRefused, words: "that rank index exited: its index is never reused" }],
  [Transport.CloseCode.JoinLiveIndex, { code: JoinExitCode.joinRefused, words: "that rank index is live or joining" }],
  [Transport.CloseCode.JoinNotStarted, { code: JoinExitCode.joinRefused, words: "the run has not formed yet" }],
  [Transport.CloseCode.JoinShuttingDown, { code: JoinExitCode.joinRefused, words: "the run is saving and stopping" }],
  [Transport.CloseCode.JoinRunOver, { code: JoinExitCode.joinRefused, words: "the run is over" }],
  [Transport.CloseCode.CredentialMismatch, { code: JoinExitCode.credentialRefused, words: "the credential admits another rank index" }],
  [Transport.CloseCode.CredentialRevoked, { code: JoinExitCode.credentialRefused, words: "the credential was revoked" }],
  [Transport.CloseCode.CredentialExpired, { code: JoinExitCode.credentialRefused, words: "the credential expired" }],
  [Transport.CloseCode.TlsFailed, { code: JoinExitCode.untrusted, words: "the server's certificate failed the check" }],
  [Transport.CloseCode.TryAgainLater, comeBackLater],
  [Transport.CloseCode.AddressBusy, comeBackLater]
])

/** The exit code and words of a refusal's close code. */
const refusalOf = (closeCode: number): { readonly code: number; readonly words: string } =>
  refusals.get(closeCode) ?? { code: JoinExitCode.refused, words: "refused" }

/**
 * Options of `joinRun` (`cohort join`):
 *
 * - `url`, `runToken`, `rank` (an integer or `"auto"`).
 * - `trainer`: the trainer module's `file:` URL on this host (it loads its own data).
 * - `saveDir`: absolute folder for saves (`<saveDir>/rank<r>`) and checkpoints (`<saveDir>/checkpoints`).
 * - `saveDirPerRun` (default false): the folder is `<saveDir>/<runId>` instead, `runId` the run's
 *   id from the coordinator's welcome (`runSaveDir`), so that the served runs joined from one
 *   folder do not overwrite each other's saves and checkpoints (`cohort join` without `--save-dir`).
 * - `connectTimeoutMs` (integer ms > 0; default `connectTimeoutMsDefault`, 300000): how long a
 *   coordinator that cannot be reached (not up yet, connection refused) is tried again, with
 *   jittered exponential back-off from `connectRetryDelayMsBase` (100) to `connectRetryDelayMsMax`
 *   (2000), each delay scaled by 0.8–1.2; and, for what is left of it, how long `WebSocket.connect`
 *   retries a join the server asks to come back later (1013: a full server, or a run that may grow
 *   still forming; 4008).
 * - `coordinatorReconnectMs` (integer ms > 0; default `reconnectWindowMsOf`: 60000, or twice the
 *   coordinator's `heartbeatTimeoutMs` when that is longer): how long a rank whose link to its
 *   coordinator dropped or went silent keeps its state and tries to reconnect before it saves and
 *   exits 3 (docs/recovery.md).
 * - `ringListen`: where the rank listens for its ring neighbours' direct links and the host it
 *   advertises (`RankData.peerLinks`; a ring run with direct links); none: every step is relayed.
 * - `tls`: how a `wss://` server's certificate is checked (`WebSocket.ClientOptions.tls`); default
 *   the system's roots.
 * - `say(line)`: where the command's own lines go (stderr).
 * - `beforeExit(code)`: called once the rank has left, just before it exits the process with `code`
 *   (default none; `bin/cohort.mjs` learns from it that the command finished).
 *
 * @since 0.1.0
 * @category join
 */
export interface JoinRunOptions {
  readonly url: string
  readonly runToken: string
  readonly rank: number | "auto"
  readonly trainer: string
  readonly saveDir: string
  readonly saveDirPerRun?: boolean
  readonly connectTimeoutMs?: number
  readonly coordinatorReconnectMs?: number
  readonly tls?: WebSocket.ClientOptions["tls"]
  readonly ringListen?: { readonly host: string; readonly port: number; readonly advertise: string }
  readonly say: (line: string) => void
  readonly beforeExit?: (code: number) => void
  /**
   * Join with protocol 2 (a link that resumes after a cut; default true). Without it a socket that
   * drops ends the rank at once, as for a local rank.
   */
  readonly resumable?: boolean
  /**
   * How the rank leaves once it trained (default: close the socket, then exit the process): a
   * process that runs many ranks (`SocketRanks.joinRanks`) closes the rank's socket and carries on.
   */
  readonly leaving?: (client: WebSocket.ClientHandle) => (code: number) => void
  /** Told the client once the rank is welcomed and about to train. */
  readonly onJoined?: (client: WebSocket.ClientHandle) => void
  /** Aborted: the rank stops where it is (`Rank.main`'s `stop`). */
  readonly stop?: AbortSignal
  /** Aborted: the rank leaves gracefully after its current batch (`Rank.main`'s `leaveAsked`). */
  readonly leaveAsked?: AbortSignal
}

/**
 * The run id a served run's welcome carries (`run.runId`, beside the `JoinedRun` fields), if it is
 * one a run makes: 1 to 64 characters of `[A-Za-z0-9_-]`, so that it is safe as one folder name.
 *
 * @since 0.1.0
 * @category join
 */
export const welcomeRunId = (run: unknown): string | undefined => {
  const runId = typeof run === "object" && run !== null ? (run as { readonly runId?: unknown }).runId : undefined
  return typeof runId === "string" && /^[A-Za-z0-9_-]{1,64}$/.test(runId) ? runId : undefined
}

/**
 * The folder a joined rank saves under (`JoinRunOptions.saveDirPerRun`): `<saveDir>/<runId>` with
 * the welcome's run id when `perRun`, else `saveDir` (also when the welcome names no run: a
 * coordinator of an older version).
 *
 * @since 0.1.0
 * @category join
 */
export const runSaveDir = (saveDir: string, perRun: boolean, run: unknown): string => {
  const runId = perRun ? welcomeRunId(run) : undefined
  return runId === undefined ? saveDir : `${saveDir}/${runId}`
}

/**
 * Where the rank saved on `ShutdownWithSave` in this run, if it did: its save folder, when the
 * marker the rank writes there once its trainer's save resolved (`Rank.savedMarker`) is from
 * `sinceMs` on (a marker of an earlier run in a reused `--save-dir` is not this run's save).
 */
const savedFolder = async (dir: string, sinceMs: number): Promise<{ readonly dir: string; readonly reason: string } | undefined> => {
  try {
    const read = await Files.readRegularFile(`${dir}/${Rank.savedMarker}`, 64 * 1024)
    if (read._tag !== "Read") return undefined
    const marker = JSON.parse(new TextDecoder().decode(read.bytes)) as { readonly reason?: unknown; readonly savedAtMs?: unknown }
    if (typeof marker.savedAtMs !== "number" || marker.savedAtMs < sinceMs) return undefined
    return { dir, reason: typeof marker.reason === "string" ? marker.reason : "" }
  } catch {
    return undefined
  }
}

/** Default `JoinRunOptions.connectTimeoutMs`: 300000 ms (the coordinator's default formation timeout). @since 0.1.0 @category join */
export const connectTimeoutMsDefault = 300_000

/** First delay between two connection attempts of `cohort join`: 100 ms. @since 0.1.0 @category join */
export const connectRetryDelayMsBase = 100

/** Longest delay between two connection attempts of `cohort join`: 2000 ms. @since 0.1.0 @category join */
export const connectRetryDelayMsMax = 2000

/** After this long without reaching the coordinator, `joinRun` says once that it keeps trying: 3000 ms. @since 0.1.0 @category join */
export const waitingLineAfterMs = 3000

/**
 * How long `cohort join` asks the coordinator, after its link dropped without a close code, whether
 * it declared this rank dead: one join attempt with the same rank and token, bounded by this many
 * ms (3000). A refusal with `RankDead` (4011) means it did (exit 13); anything else (unreachable,
 * another refusal, no answer) leaves the rank's exit as it was (3, the coordinator is gone).
 *
 * Why: a coordinator's 4011 close can be lost with the connection (a link cut while it was sent:
 * Deno's server, seen in the network test, does not deliver the pending close frame once the link
 * returns, and the rank's socket ends without a code).
 *
 * @since 0.1.0
 * @category join
 */
export const closeProbeMsMax = 3000

/**
 * One bounded join attempt with `rank` and the run's token (`closeProbeMsMax`): the close code of
 * the refusal, if the coordinator refused it; undefined otherwise (a join that succeeds, which a
 * run that already formed never lets happen, is closed at once).
 */
const probeCloseCode = (
  url: string,
  runToken: string,
  rank: number,
  tls: WebSocket.ClientOptions["tls"]
): Effect.Effect<number | undefined> =>
  Effect.scoped(WebSocket.connect({ url, runToken, rank, joinTimeoutMs: closeProbeMsMax, tls })).pipe(
    Effect.as(undefined),
    Effect.catch((error) => Effect.succeed(error.reason._tag === "Refused" ? error.reason.closeCode : undefined)),
    Effect.timeoutOption(closeProbeMsMax),
    Effect.map((answer) => (answer._tag === "Some" ? answer.value : undefined))
  )

/**
 * Default `JoinRunOptions.coordinatorReconnectMs`: 60000 ms, long enough for a restarted
 * coordinator's pod (or process) to listen again at the same address.
 *
 * @since 0.1.0
 * @category join
 */
export const coordinatorReconnectMsDefault = 60_000

/**
 * How long a `cohort join` rank whose link dropped keeps trying to resume it (ms):
 * `coordinatorReconnectMs` when it is given; otherwise at least `coordinatorReconnectMsDefault`
 * (60000) and twice the coordinator's `heartbeatTimeoutMs` from the welcome, so that it gives up
 * only after the coordinator has declared it (and then hears so on its return: `RankDead`) or is
 * out of reach for longer than that.
 *
 * @since 0.1.0
 * @category join
 */
export const reconnectWindowMsOf = (run: unknown, coordinatorReconnectMs?: number): number => {
  if (coordinatorReconnectMs !== undefined) return coordinatorReconnectMs
  const heartbeatTimeoutMs =
    typeof run === "object" && run !== null ? (run as { readonly heartbeatTimeoutMs?: unknown }).heartbeatTimeoutMs : undefined
  return Math.max(
    coordinatorReconnectMsDefault,
    typeof heartbeatTimeoutMs === "number" && Number.isFinite(heartbeatTimeoutMs) ? 2 * heartbeatTimeoutMs : 0
  )
}

/**
 * Joins a served run as one rank in this process and trains until the run ends; resolves with
 * the process's exit code (`JoinExitCode`) instead of exiting, except once training started:
 * then the rank leaves the process itself (`process.exit`) with that code, after closing its
 * socket. A refused join is one line through `say` and its code, never retried; a coordinator
 * that cannot be reached yet is tried again until `connectTimeoutMs`.
 *
 * @since 0.1.0
 * @category join
 */
export const joinRun = async (options: JoinRunOptions): Promise<number> => {
  // Long because the join's steps in order (connect, welcome, checks, the rank's run), sharing the link's locals.
  const connectTimeoutMs = options.connectTimeoutMs ?? connectTimeoutMsDefault
  // How long the join has tried, on Effect's clock (`elapsedMs`).
  const clock = Clock.Clock.defaultValue()
  const startedMs = clock.currentTimeMillisUnsafe()
  const elapsedMs = (): number => clock.currentTimeMillisUnsafe() - startedMs
  let delayMs = connectRetryDelayMsBase
  let joined: { readonly client: WebSocket.ClientHandle; readonly link: Rank.Link } | undefined
  let badRun = false
  let waitingSaid = false
  let saveDir = options.saveDir
  while (joined === undefined) {
    // A "try again later" refusal (a full server, or a run that may grow still forming) is
    // retried by `connect` for what is left of `connectTimeoutMs`.
    const joinTimeoutMs = Math.max(1, connectTimeoutMs - elapsedMs())
    const attempt = await Effect.runPromise(
      Effect.result(
        join(
          {
            url: options.url,
            runToken: options.runToken,
            rank: options.rank,
            joinTimeoutMs,
            resumable: options.resumable ?? true,
            reconnectWindowMs: (run) => reconnectWindowMsOf(run, options.coordinatorReconnectMs),
            tls: options.tls
          },
          (client) => {
            if (!Rank.isJoinedRun(client.run)) {
              badRun = true
              return undefined as unknown as Rank.RankData
            }
            saveDir = runSaveDir(options.saveDir, options.saveDirPerRun === true, client.run)
            const data = Rank.rankDataOf(client.run, {
              trainer: options.trainer,
              saveDir,
              checkpointDir: `${saveDir}/checkpoints`,
              ringListen: options.ringListen
            })
            // A resumable link that goes silent is resumed, and ends only when the coordinator refuses
            // it or stays out of reach (`reconnectWindowMsOf`): the rank's own watch on a silent
            // coordinator (a stuck one still accepts resumes) waits that long too. Meanwhile the rank
            // keeps its state and assignment; what it sends waits in the link's resend buffer, and a
            // contribution there commits nothing until a coordinator receives it.
            const resumingMs = WebSocket.reconnectSilenceMsDefault + reconnectWindowMsOf(client.run, options.coordinatorReconnectMs)
            return client.resumable ? { ...data, coordinatorTimeoutMs: Math.max(data.coordinatorTimeoutMs ?? 0, resumingMs) } : data
          }
        )
      )
    )
    if (attempt._tag === "Success") {
      joined = attempt.success
      break
    }
    const reason = attempt.failure.reason
    if (reason._tag === "Refused") {
      const refusal = refusalOf(reason.closeCode)
      const words = reason.closeCode === Transport.CloseCode.TlsFailed ? `${refusal.words}: ${reason.detail}` : refusal.words
      options.say(`cohort join: refused by ${options.url}: ${words} (close code ${reason.closeCode})`)
      return refusal.code
    }
    if (elapsedMs() + delayMs > connectTimeoutMs) {
      options.say(
        `cohort join: cannot reach ${options.url} within ${connectTimeoutMs} ms: ${reason._tag === "ConnectFailed" ? reason.detail : reason._tag}`
      )
      return JoinExitCode.unreachable
    }
    // One line while it keeps trying, so that a join to a coordinator that is not (or no longer)
    // there does not wait silently for minutes.
    if (!waitingSaid && elapsedMs() >= waitingLineAfterMs) {
      waitingSaid = true
      options.say(
        `cohort join: ${options.url} cannot be reached yet (${reason._tag === "ConnectFailed" ? reason.detail : reason._tag}); trying again for up to ${Math.round(connectTimeoutMs / 1000)} s (--connect-timeout-ms)`
      )
    }
    await new Promise((resolve) => setTimeout(resolve, delayMs * (0.8 + 0.4 * Math.random())))
    delayMs = Math.min(delayMs * 2, connectRetryDelayMsMax)
  }
  const { client, link } = joined
  if (badRun) {
    await Effect.runPromise(client.close(Transport.CloseCode.BadJoin))
    options.say(
      `cohort join: ${options.url} sent no run description this version understands (join protocol ${WebSocket.joinProtocolVersion})`
    )
    return JoinExitCode.refused
  }
  const run = client.run as Rank.JoinedRun
  const module = (await Bundle.importModule(options.trainer)) as { readonly trainSamples?: unknown }
  if (module.trainSamples !== run.epochSamples) {
    const why = `the trainer's trainSamples (${String(module.trainSamples)}) differ from the run's (${run.epochSamples})`
    // The coordinator hears why this rank leaves (a served run keeps forming without it).
    const crashing = Codec.encode(Frame.fromRank(client.rank, { _tag: "Crashing", error: why, stack: "" }))
    await Effect.runPromise(
      link.transport.send(Transport.coordinatorPeer, crashing).pipe(Effect.andThen(link.transport.flush), Effect.ignore)
    )
    await Effect.runPromise(client.close(Transport.CloseCode.Normal))
    options.say(`cohort join: ${why}; start the same trainer as the coordinator`)
    return JoinExitCode.refused
  }
  // A rank beyond the formation's world size joined a run that grows.
  options.say(
    `cohort join: joined ${options.url} as rank ${client.rank} ${client.rank < run.worldSize ? `of ${run.worldSize}` : `(the run grew beyond the ${run.worldSize} ranks it formed with)`}`
  )
  // The rank leaves the process itself; a close code that says why it was cut off picks the exit code.
  const leave = options.leaving?.(client) ?? leaveThrough(() => client, options.beforeExit)
  // A link that dropped without a close code: ask once whether the coordinator declared us dead.
  let probed: number | undefined
  const whyEnded = Effect.suspend(() => probeCloseCode(options.url, options.runToken, client.rank, options.tls)).pipe(
    // Only a RankDead refusal says why this link ended; another (a live rank's index taken) does not.
    Effect.map((closeCode) =>
      closeCode === Transport.CloseCode.RankDead || closeCode === Transport.CloseCode.JoinDeadIndex ? closeCode : undefined
    ),
    Effect.tap((closeCode) => Effect.sync(() => (probed = closeCode)))
  )
  // Wall-clock time, as the saved marker's `savedAtMs` it is compared with (a file's stamp).
  const joinedAtMs = Date.now()
  options.onJoined?.(client)
  await Rank.main(
    Effect.succeed({ ...link, whyEnded, recoveries: client.recoveries }),
    Bundle.importModule,
    (code) => {
      const closeCode = probed ?? client.closeCode()
      if (code === Rank.coordinatorGoneExitCode && closeCode !== undefined && closeCode >= 4000) {
        const refusal = refusalOf(closeCode)
        if (refusal.code !== JoinExitCode.refused || closeCode === Transport.CloseCode.ParamsMismatch) return leave(refusal.code)
      }
      if (code !== 0) return leave(code)
      // A rank told to save and stop says where its save is: on this host, out of the coordinator's sight.
      void savedFolder(`${saveDir}/rank${client.rank}`, joinedAtMs).then((saved) => {
        if (saved !== undefined)
          options.say(
            `cohort join: rank ${client.rank} saved its state under ${saved.dir}${saved.reason === "" ? "" : ` (${saved.reason})`}`
          )
        leave(code)
      })
    },
    options.stop,
    options.leaveAsked
  )
  // Rank.main resolves once the rank decided to leave; the leave exits the process (or, with
  // `leaving`, settles what its caller waits on).
  return new Promise<number>(() => {})
}
