/**
 * The public shapes of a training run: its options, the events it emits while running, and its
 * result. `actors/launcher/launcher.ts` implements `run(options)`; the CLI and library users build on these.
 *
 * @since 0.1.0
 */
import type * as Alerts from "../../src/core/alerts.ts"
import type * as Config from "../../src/core/config.ts"
import type * as Coordinator from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"
import type { HttpHandler } from "../../src/platform/types.ts"

/**
 * When to kill a rank's worker (or process): `atSeconds` after training started (every rank joined),
 * or once the ranks have trained `atFraction` (0..1) of epoch `atEpoch`. `plan: "demo"` marks the
 * demo's own kill (`cohort demo` without `--kill`): nobody asked for it, so a run interrupted
 * before it came records nothing about it, and a skip is told as the demo's plan, not as `--kill`.
 *
 * @since 0.1.0
 * @category options
 */
export type KillSpec =
  | { readonly rank: Rank; readonly atSeconds: number }
  | { readonly rank: Rank; readonly atEpoch: number; readonly atFraction: number; readonly plan?: "demo" }

/**
 * When a rank stops responding while its worker stays alive (only heartbeats can catch it):
 * `atSeconds` after training started.
 *
 * @since 0.1.0
 * @category options
 */
export interface HangSpec {
  readonly rank: Rank
  readonly atSeconds: number
}

/**
 * A hostile rank, for tests and benchmarks: from `atSeconds` after training started, `rank` sends
 * `framesPerSecond` extra `Heartbeat` frames (in bursts every 10 ms) on top of its training, as a
 * buggy or malicious rank that holds the run token may. The coordinator's per-link bounds decide
 * what happens to it (`Transport.Options.linkFramesMax`): a rate it keeps up with costs the others
 * one turn per backlog; a faster one closes the rank's link (`InboxOverflow`).
 *
 * @since 0.1.0
 * @category options
 */
export interface FloodSpec {
  readonly rank: Rank
  readonly atSeconds: number
  readonly framesPerSecond: number
}

/**
 * A fault inside a ring collective, for tests and benchmarks (ring backend): when `rank` is about to
 * send step `step` of averaging round `round` (steps `0 .. ringSize - 2` reduce-scatter, then
 * all-gather), it `exit`s (its worker or process ends without `Exiting`, code 70: a death the
 * supervisor reports), `hang`s (stops responding with its worker alive: only staleness catches
 * it) or sends that step `corrupt` (every value NaN: a buggy or hostile rank; over the relay the
 * coordinator closes it with `BadRingStep`, 4012). Deterministic: it fires between two steps of
 * the collective, whatever the timing.
 *
 * @since 0.1.0
 * @category options
 */
export interface CollectiveFaultSpec {
  readonly rank: Rank
  readonly round: number
  readonly step: number
  readonly fault: "exit" | "hang" | "corrupt"
}

/**
 * Options of `run`. Only `trainer` is required.
 *
 * @since 0.1.0
 * @category options
 */
export interface RunOptions {
  /** The trainer module: a path or `file:` URL of a module exporting `trainSamples` and `createTrainer`. */
  readonly trainer: string
  /** Ranks, `>= 1`. Default 4. */
  readonly worldSize?: number
  /**
   * Capacity of a run that may grow (docs/growing.md): rank indices are
   * `[0, maxRanks)`, and while the run trains a rank may join a served or WebSocket run
   * (`cohort join --rank auto`, or a vacant index) up to this many ranks in all; indices are never
   * reused. Integer `>= worldSize`, at most the transport's `worldSize` bound. Default `worldSize`:
   * the run never grows (a late join is refused with `RunFormed`, 4010). With the `ring` backend a
   * joiner takes the model from a ring member as it enters the ring (`src/core/joins.ts`).
   */
  readonly maxRanks?: number
  /**
   * Formation starts once this many ranks joined; the others may join while the run
   * trains. Integer in `[1, worldSize]` (`[2, worldSize]` with the `ring` backend). Default
   * `worldSize`.
   */
  readonly minRanks?: number
  /** Epochs, `>= 1`. Default 3. */
  readonly epochs?: number
  /** `static` (default) or `progressive`. */
  readonly mode?: "static" | "progressive"
  /**
   * Rank hosts: `worker` threads (default), child `process`es, or `websocket`: child processes
   * that join the coordinator's WebSocket server over loopback (127.0.0.1, a free port) with a
   * run token made for the run, so that the run takes the network path (`WebSocket.serve` /
   * `connect`; `src/transport/web-socket-ranks.ts`). Any other value is a `LaunchError` (option
   * `transport`).
   */
  readonly transport?: "worker" | "process" | "websocket"
  /**
   * With `transport: "websocket"` (and `serve`): the coordinator's certificate chain and private
   * key (PEM text, leaf first), so that it serves `wss://`; the local ranks pin its fingerprint.
   * Default: plain `ws://`. Ignored by the other transports. A `cert` or `key` without its PEM
   * block is a `LaunchError` (option `tls`).
   */
  readonly tls?: { readonly cert: string; readonly key: string }
  /**
   * The averaging backend (docs/design.md §1): `cpu` (default; the coordinator averages every round)
   * or `ring` (the ranks all-reduce among themselves, reduce-scatter then all-gather, and only
   * report `RoundDone`). `ring` needs `worldSize >= 2` (`LaunchError` on `backend`
   * otherwise) and ends with `SingleSurvivor` when one rank is left.
   */
  readonly backend?: "cpu" | "ring"
  /**
   * Ring backend on worker threads: each direction of a direct ring link passes its steps through
   * a shared-memory segment of this many slots (`SharedRingLink`), each slot one step's
   * data (about 8 bytes x parameters / ring size, so 4 slots at 8 ranks x 407,050 parameters take
   * 1.6 MB a link). A step that finds every slot taken travels on the link's `MessageChannel`, in
   * order. 0 keeps every step on the `MessageChannel`, as do runtimes without `Atomics.waitAsync`.
   * Default 4; an integer in [0, 64] (`LaunchError` on `ringSharedSlots` otherwise). Ignored by
   * other transports (their steps go through the coordinator's relay).
   */
  readonly ringSharedSlots?: number
  /**
   * Ring backend on worker threads: each ring generation's collectives run through one shared
   * all-reduce area (`SharedAllReduce`: one barrier wait a round instead of `2 (n - 1)` ring
   * steps) when the area, `16 + 16 n + 4 params (n + 1)` bytes for a ring of `n` (14.0 MiB at
   * 8 ranks x 407,050 parameters), is at most this many MiB; otherwise the steps take the direct
   * links (`ringSharedSlots`). 0 never uses an area. Default 256; an integer in [0, 65536]
   * (`LaunchError` on `ringAreaMemoryMb` otherwise). Ignored by other transports and by runtimes
   * without `Atomics.waitAsync`.
   */
  readonly ringAreaMemoryMb?: number
  /**
   * Ring backend: how ring steps travel between ranks. `direct` (default): rank to rank wherever
   * the transport can (worker threads: `ringAreaMemoryMb`, `ringSharedSlots`; child processes:
   * WebSocket links on loopback between ring neighbours, authenticated with a run secret, each
   * falling back to the relay where it cannot be made; over `websocket` and `serve`, the relay
   * still). `relay`: every step as a `RingData` frame through the coordinator, which checks it.
   * `LaunchError` on `ringLinks` for anything else.
   */
  readonly ringLinks?: "direct" | "relay"
  /** Faults inside ring collectives (ring backend). Default none. */
  readonly collectiveFaults?: ReadonlyArray<CollectiveFaultSpec>
  /** Kills to inject. Default none. */
  readonly kills?: ReadonlyArray<KillSpec>
  /**
   * Kills asked for while the run goes on (the dashboard's kill buttons, `--dashboard-faults`):
   * once training started, the launcher drains it every 5 ms and kills each rank named at once,
   * as a `kills` entry that is due (a `fault` event; a rank already gone gives `fault-skipped`).
   * Default none.
   */
  readonly killRequests?: { readonly drain: () => ReadonlyArray<Rank> }
  /**
   * Shortages of the coordinator's own process that something beside the run saw (the dashboard's
   * listener at its connection cap, out of file descriptors), one line each: the launcher drains
   * it every 250 ms into `CoordinatorResource` alerts (never a rank's fault). Default none.
   */
  readonly coordinatorAlerts?: { readonly drain: () => ReadonlyArray<string> } | undefined
  /**
   * Over WebSocket (`transport: "websocket"`, `serve`): connections the ranks' listener holds at
   * once (integer > 0; default `WebSocket.connectionsMaxOf(maxRanks)`: two a rank, the pending
   * joins, 64 more). Past it a connection is closed as it arrives, and a `CoordinatorResource`
   * alert names the cap (at most one a second), never a rank's fault. Enforced under Node only.
   */
  readonly rankConnectionsMax?: number
  /** Hangs to inject. Default none. */
  readonly hangs?: ReadonlyArray<HangSpec>
  /** Floods to inject (hostile ranks). Default none. */
  readonly floods?: ReadonlyArray<FloodSpec>
  /** Stale after this many ms without a frame. Default 10000. */
  readonly heartbeatTimeoutMs?: number
  /**
   * While a rank saves a checkpoint the coordinator asked of it, or runs an eval, its timeout grows
   * by this many ms (a synchronous trainer sends nothing meanwhile); past it, a `SaveTimeout` or
   * `EvalTimeout` alert and the rank is declared (docs/liveness.md). Default 600000 each.
   */
  readonly saveTimeoutMs?: number
  readonly evalTimeoutMs?: number
  /**
   * `fixed` (default): every rank's timeout is `heartbeatTimeoutMs`. `adaptive`: each rank's follows
   * the gaps between its frames, in `[adaptiveTimeoutMinMs, heartbeatTimeoutMs]` (default
   * `heartbeatTimeoutMs / 2`); docs/liveness.md.
   */
  readonly livenessDetector?: "fixed" | "adaptive"
  readonly adaptiveTimeoutMinMs?: number
  /** A rank sends a `Heartbeat` when it sent nothing for this long. Default `min(1000, heartbeatTimeoutMs / 4)`. */
  readonly heartbeatIntervalMs?: number
  /**
   * A gap of more than this many ms between two inputs of the coordinator is its own stall: the
   * ranks' silence during it is not counted, and a `CoordinatorStall` warn alert says how long it
   * was (docs/design.md §3.10). Default `heartbeatTimeoutMs / 4`; 0 turns it off.
   */
  readonly coordinatorStallMs?: number
  /**
   * `cpu` backend: a round open this many ms (from its first contribution) closes without the
   * ranks still training once `roundQuorum` of the survivors contributed; a late contribution is
   * folded into the next round, and its samples commit then (`Config.Options.roundDeadlineMs`).
   * Default 0: off, every round waits for every survivor with work.
   */
  readonly roundDeadlineMs?: number
  /** With `roundDeadlineMs`: the fraction (0, 1] of the survivors a round needs before its deadline closes it. Default 0.5. */
  readonly roundQuorum?: number
  /**
   * `cpu` backend: how a round is combined (docs/edge-averaging.md): `mean` (default),
   * `trimmed-mean` (`trimFraction` cut from each end per coordinate, default 0.25) or `median`;
   * `clipNorm` bounds each contribution's change from the last committed model (0: off);
   * `outlierFactor` flags contributions that far outside the others with an `OutlierParams` alert
   * (default 10 with a robust rule or clipping, else 0: off); `outlierRoundsMax` declares a rank dead
   * after that many outlier rounds (default 0: never). `Config.Options` holds the rules.
   */
  readonly aggregate?: "mean" | "trimmed-mean" | "median"
  /**
   * `cpu` backend: how contributions and updates travel (docs/edge-averaging.md): `none`
   * (default, float32), `fp16` (2 bytes a value) or `int8` (blockwise, 1 byte a value and a
   * scale per 64), both with error feedback. Refused with the `ring` backend.
   */
  readonly compress?: "none" | "fp16" | "int8"
  /**
   * `cpu` backend: the outer optimizer (docs/edge-averaging.md): each round's mean change from the
   * last committed model is applied with SGD, learning rate `outerLr` (> 0, default 1) and
   * Nesterov momentum `outerMomentum` ([0, 1), default 0). The defaults are plain averaging; with
   * a large `averageEverySteps` this is DiLoCo-style infrequent sync. The momentum is saved with
   * each epoch's model and restored by `resume`.
   */
  readonly outerLr?: number
  readonly outerMomentum?: number
  /**
   * `cpu` backend: ranks contribute their change since the last model they were sent instead of
   * their parameters (docs/edge-averaging.md "Deltas"), so that `compress` quantizes small changes
   * rather than whole weights; the coordinator adds each change to that model as it arrives.
   * Default: on when `compress` is `fp16` or `int8` or the outer optimizer is on, else off.
   * Refused (`LaunchError` on `deltas`) with the `ring` backend.
   */
  readonly deltas?: boolean
  readonly trimFraction?: number
  readonly clipNorm?: number
  readonly outlierFactor?: number
  readonly outlierRoundsMax?: number
  /**
   * A rank in a process of its own (`transport: "process"`) that gets no frame from the
   * coordinator for this many ms counts it gone (the coordinator beats every second, from
   * formation on): it saves under `<runDir>/save/rank<r>` with an `emergency.json`, the save
   * bounded by this too, and exits; it does the same at once when its channel closes (the
   * coordinator's process died). Worker-thread ranks share the coordinator's process and die with
   * it; they have no such check. An integer > 0; default 10000 (`RankData.coordinatorTimeoutMs`).
   */
  readonly coordinatorTimeoutMs?: number
  /** Coordinator tick period. Default 100. */
  readonly tickMs?: number
  /** Default none. */
  readonly failureLimit?: Config.FailureLimit | undefined
  /** Default `"fastest"`. */
  readonly rolePolicy?: Config.RolePolicy
  /**
   * When a second rank crashes with the same error (same message and top stack frame): `stop`
   * (default) saves and stops the run with `TrainerFault`; `continue` treats it as any death and
   * keeps redistributing (`Config.onRepeatedCrash`).
   */
  readonly onRepeatedCrash?: "stop" | "continue"
  /**
   * Each rank's memory limit in MiB, an integer >= 16, or 0 for none. Default 1024, which leaves
   * room for a few ranks and the coordinator on a small machine. A rank over it is declared
   * `Crashed` with an out-of-memory reason. Enforced as V8's old-generation limit:
   * `resourceLimits.maxOldGenerationSizeMb` for worker threads (Node, Deno) and
   * `--max-old-space-size` for child processes (Node; `--v8-flags=` under Deno). Bun ignores both
   * (its engine is JavaScriptCore): there the supervisor samples a rank process's resident memory
   * and kills it over the limit, and a worker rank checks its own heap between batches (so a single
   * batch that allocates without end is not stopped under Bun). See `actors/launcher/launcher.ts`.
   */
  readonly rankMemoryMb?: number
  /** Seed of the permutation and the model. Default 1. */
  readonly seed?: number
  /** Samples per batch. Default 32. */
  readonly batchSize?: number
  /** Batches between averaging contributions. Default 32: with the bundled 407,050-parameter model, averaging more often loads the coordinator thread enough to slow failure detection on 2 cores. */
  readonly averageEverySteps?: number
  /**
   * Nice value of the ranks' threads (worker transport, Linux only) or processes, 0 to 19.
   * Default 0: the ranks keep the launcher's priority. Above 0, busy ranks yield the CPU to the
   * coordinator's thread, which every rank waits on for failure handling and averaging: with 28
   * ranks on 2 cores, nice 10 took the median from a kill to the remainder being sent under Deno
   * from 15–52 ms to 6–10 ms. The price: the ranks also yield to every other process at normal
   * priority; with two CPU-bound neighbours an epoch of the demo took 2–2.7x as long at nice 10.
   */
  readonly rankNice?: number
  /**
   * Where a resumed run begins: the epoch, the first round's number, the ranges of that
   * epoch the parent committed (`Core.Resume`), and the parent's model (`SavedModel`: its last
   * averaged parameters), which every rank gets as an `Update` at formation (`undefined`: the
   * trainers' own initial model, when the parent never averaged). The run trains only the rest of
   * that epoch, then the remaining epochs up to `epochs`; that epoch's audit covers both runs. The
   * seed, `epochs`, mode and dataset must be the parent's. `run({ resume })` fills it from a run
   * directory; give it directly only to build such a tool yourself. Default none.
   */
  readonly resumeState?: {
    readonly epoch: number
    readonly firstRound: number
    readonly committed: ReadonlyArray<readonly [offset: number, size: number]>
    readonly params: Float32Array | undefined
    /** The outer optimizer's momentum saved with `params` (`SavedModel.outerMomentumFiles`), when it was on. */
    readonly outerMomentum?: Float32Array | undefined
  }
  /** Where runs are written: `<outDir>/<runId>/`. Default `runs`. */
  readonly outDir?: string
  /** Default 10 random letters and digits (never starting with `-`). */
  readonly runId?: string
  /**
   * Interrupts the run when aborted (the CLI aborts it on SIGINT or SIGTERM): the coordinator's
   * core sends `ShutdownWithSave{GracefulShutdown}` to the survivors, the launcher waits for their
   * saves for at most `interruptGraceMs`, stops every rank, and the run resolves with outcome
   * `interrupted` (its epoch's uncommitted ranges listed) and `exitCode` 143 when
   * `signal.reason` is the string `"SIGTERM"`, else 130. Default none.
   */
  readonly signal?: AbortSignal
  /**
   * Stops an interrupted run at once when aborted (the CLI aborts it on a second signal): the
   * grace for saves is cut short, every rank is stopped, and the journal and summary are still
   * written (ranks that had not finished their save are listed in `saves.notSaved`). Aborting it
   * first interrupts the run too. Default none.
   */
  readonly stopSignal?: AbortSignal
  /** How long an interrupted run waits for the survivors' saves, in ms. Default 30000. */
  readonly interruptGraceMs?: number
  /** Called with every event as it happens (progress, alerts, deaths, epochs). */
  readonly onEvent?: (event: RunEvent) => void
  /**
   * Called with each line a rank prints (stdout and stderr, `console.*`; without its line end),
   * within the bounds of `src/transport/rank-output.ts` (4096 bytes a line, 100 lines per rank
   * per second; the rest is cut or dropped with a note). Default: `[rank N] line` on the
   * coordinator's stderr. The same lines also go to `<outDir>/<runId>/ranks/rank<N>.log`.
   */
  readonly onRankOutput?: (rank: Rank, line: string) => void
}

/**
 * Options of `serve` (`cohort serve`): a run whose coordinator serves on a WebSocket and whose
 * ranks join from anywhere (`cohort join`, `WebSocket.connect`); nothing is started locally. As
 * `RunOptions` without the local-only ones (`transport`, faults and `killRequests`, `rankNice`, `rankMemoryMb`), plus:
 *
 * - `host` (default `"127.0.0.1"`: loopback only; a non-loopback address is an explicit choice)
 *   and `port` (default 0: a free port) to listen on.
 * - `runToken`: the secret every join must carry, at least 16 characters (a shorter one is a
 *   `LaunchError`, option `runToken`). Default: a new 22-character nanoid (132 bits), written to
 *   `<outDir>/<runId>/token` with mode 0600 (`RunResult.runDir`).
 * - `formationTimeoutMs` (integer > 0; default `serveDefaults.formationTimeoutMs`, 300000):
 *   how long the ranks have to join; past it the run ends without training: a `LaunchError`
 *   (option `formation`) naming the ranks that did not join. In a run that may grow,
 *   also how long a joiner let into the running run has to send its `Hello`: past it its link
 *   closes with `JoinTimeout` (4004), counted in `RunResult.refusals`.
 * - `onListening({url, host, port, runToken, tokenFile, runId, runDir})`: called once the server
 *   listens, before any rank joined (`tokenFile` is set when the token was generated).
 * - `worldSize`: up to `serveDefaults.worldSizeMax` (1,000,000): the ranks are not this machine's.
 * - `http`: answers plain HTTP requests on the same port (`cohort serve --serve-browser` serves
 *   the browser rank's page and data this way, `src/cli/bundle.ts`); default: 426 to each.
 * - `tls` (`{cert, key}`, PEM text: the certificate chain, leaf first, and its private key):
 *   serve `wss://` (and `https://` for `http`); `Listening.fingerprint256` then gives the leaf's
 *   SHA-256 for ranks that pin it (`cohort join --fingerprint`). Default: plain `ws://`. A `cert`
 *   or `key` without its PEM block is a `LaunchError` (option `tls`); one the runtime cannot
 *   use fails the listen (option `listen`).
 * - `issueTokens` (integer >= 0; default 0): credentials of one rank each, for indices `0` to
 *   `issueTokens - 1`, written to `<runDir>/credentials/rank<r>` (mode 0600) once the server
 *   listens (`Listening.credentials`); each admits its index only, and can be revoked while the
 *   run goes on (`cohort revoke`, `actors/launcher/revocations.ts`). The run token still admits any rank.
 * - `tokenTtlMs` (integer ms > 0; default none: never): those credentials expire this long after
 *   they were issued; a join or resume with one past it is refused (`CredentialExpired`, 4023).
 *
 * @since 0.1.0
 * @category options
 */
export interface ServeOptions
  extends Omit<RunOptions, "transport" | "kills" | "killRequests" | "hangs" | "floods" | "rankNice" | "rankMemoryMb"> {
  readonly host?: string
  readonly port?: number
  readonly runToken?: string
  readonly formationTimeoutMs?: number
  readonly onListening?: (listening: Listening) => void
  readonly http?: HttpHandler
  readonly issueTokens?: number
  readonly tokenTtlMs?: number
}

/**
 * Where a served run listens: `url` (`ws://host:port/`, `wss://` over TLS), the bound `host` and
 * `port`, the `runToken`, `tokenFile` (where the generated token was written; `undefined` when it
 * was given), `runId` and `runDir`; over TLS, `fingerprint256`: the SHA-256 of its certificate
 * (`AB:CD:...`).
 *
 * @since 0.1.0
 * @category events
 */
export interface Listening {
  readonly url: string
  readonly host: string
  readonly port: number
  readonly runToken: string
  readonly tokenFile: string | undefined
  readonly runId: string
  readonly runDir: string
  readonly fingerprint256?: string | undefined
  readonly credentials?: ReadonlyArray<{ readonly rank: number; readonly id: string; readonly file: string }>
}

/**
 * What a rank is doing, as the coordinator sees it.
 *
 * @since 0.1.0
 * @category events
 */
export type RankState = "starting" | "training" | "waiting" | "idle" | "dead" | "exited"

/**
 * Events emitted while a run goes on, and streamed to `events.ndjson` as they happen (the
 * journal: one JSON object per line, appended, never rewritten; `ms` = milliseconds since the run
 * started). Events come in the order they happened and `ms` never decreases; a death comes before
 * the decisions and alerts it caused. `started` carries the run's options (defaults filled in,
 * functions and signals left out); `formed` says every rank joined (or, with `minRanks` below the
 * world size, that `joined` of them did and training started). Over WebSocket
 * (`transport: "websocket"`, `serve`): `listening` gives the server's URL (never the token),
 * `joined` each accepted join (rank, peer address) and `refused` each refused one (close code,
 * reason, peer address; a join the coordinator refused after the joiner's `Hello` has
 * an empty address), as they happen. `welcomed`: a rank joined the running run as index
 * `rank` in `epoch`; rounds wait on it from `firstRound`; it was handed `samples` samples at once
 * (progressive: its first chunks; static: none until the next epoch's partition); `given` says
 * it in words. An `epoch` event is emitted
 * when the epoch ends, before its eval (its `accuracy` is `undefined`, absent in the journal);
 * `eval` follows when the eval result arrives. `ended` comes last, once the survivors have saved
 * (`saves`, see `RunResult`), with the run's `exitCode`. The journal keeps at most one `progress`
 * line per rank per second; observers see them all. `round`: averaging round `round` of `epoch`
 * closed (its `Update` went out) with `contributors` contributions, `openMs` milliseconds after its
 * first contribution arrived (docs/design.md §1 "commit"); the gaps between rounds' `ms` are the round
 * times; `loss` (absent when no contributor carried one) is the contributors' mean training loss
 * since their previous contributions, weighted by the samples each trained (`round-loss.ts`). One line per round, journal only (the terminal views leave them out). `failed` comes
 * last instead of `ended` when the run could not be carried out (`Launcher.run` rejects with a
 * `LaunchError`, the CLI exits 3): `stage` is the error's option (`formation`: a formation timeout
 * or a rank that left before every rank joined; `listen`; `run`: anything else), `reason` its
 * words, `formed` whether every rank had joined (false: nothing was trained). `model`: the
 * committed model after `epoch` (the mean of round `round`) was written durably on the
 * coordinator's host at `path` (`bytes` bytes of parameters, in `writeMs` ms, `afterAuditMs` ms
 * after the epoch's audit: with `ring` that includes asking a member for it), just before that
 * epoch's `epoch` line, which waits for it: a journal that audits an epoch always has its model
 * beside it. `error` says why not when it could not be written (the `epoch` line still follows).
 *
 * @since 0.1.0
 * @category events
 */
export type RunEvent =
  | {
      readonly type: "started"
      readonly ms: number
      readonly runId: string
      readonly runDir: string
      readonly worldSize: number
      readonly epochs: number
      readonly epochSamples: number
      readonly mode: "static" | "progressive"
      readonly transport: "worker" | "process" | "websocket" | "serve"
      readonly options?: Readonly<Record<string, unknown>>
      readonly resumed?: Resumed
    }
  | { readonly type: "listening"; readonly ms: number; readonly url: string }
  | { readonly type: "joined"; readonly ms: number; readonly rank: Rank; readonly address: string; readonly credential?: string }
  | { readonly type: "revoked"; readonly ms: number; readonly rank?: Rank; readonly credential?: string }
  | { readonly type: "refused"; readonly ms: number; readonly closeCode: number; readonly reason: string; readonly address: string }
  | { readonly type: "resumed"; readonly ms: number; readonly rank: Rank; readonly address: string; readonly silentMs: number }
  | { readonly type: "left"; readonly ms: number; readonly rank: Rank; readonly reason: string }
  | { readonly type: "formed"; readonly ms: number; readonly worldSize: number; readonly joined?: number | undefined }
  | {
      readonly type: "welcomed"
      readonly ms: number
      readonly rank: Rank
      readonly epoch: number
      readonly firstRound: number
      readonly samples: number
      readonly given: string
    }
  | {
      readonly type: "progress"
      readonly ms: number
      readonly rank: Rank
      readonly epoch: number
      readonly samplesDone: number
      readonly samplesPerSecond: number
      readonly state: RankState
    }
  | { readonly type: "alert"; readonly ms: number; readonly alert: Alerts.Alert }
  | { readonly type: "fault"; readonly ms: number; readonly rank: Rank; readonly fault: "kill" | "hang" }
  | { readonly type: "fault-skipped"; readonly ms: number; readonly skipped: SkippedFault }
  | { readonly type: "death"; readonly ms: number; readonly death: DeathTiming }
  | { readonly type: "leave"; readonly ms: number; readonly leave: LeaveCost }
  | { readonly type: "epoch"; readonly ms: number; readonly summary: Coordinator.EpochSummary; readonly accuracy: number | undefined }
  | {
      readonly type: "eval"
      readonly ms: number
      readonly epoch: number
      readonly rank: Rank
      readonly accuracy: number
      readonly loss: number
    }
  | {
      readonly type: "model"
      readonly ms: number
      readonly epoch: number
      readonly round: number
      readonly path: string
      readonly bytes: number
      readonly writeMs: number
      readonly afterAuditMs?: number
      readonly error?: string
    }
  | { readonly type: "decision"; readonly ms: number; readonly detail: string }
  | {
      readonly type: "round"
      readonly ms: number
      readonly epoch: number
      readonly round: number
      readonly contributors: number
      readonly openMs: number
      readonly loss?: number
      /** The round's averaging traffic at the coordinator, in bytes of frames (`Coordinator.Hooks.onRoundBytes`). */
      readonly receivedBytes?: number
      readonly sentBytes?: number
    }
  | {
      readonly type: "ended"
      readonly ms: number
      readonly outcome: Coordinator.Outcome
      readonly saves?: RunResult["saves"]
      readonly exitCode?: RunResult["exitCode"]
      readonly ring?: RunResult["ring"]
    }
  | { readonly type: "failed"; readonly ms: number; readonly stage: string; readonly reason: string; readonly formed: boolean }

/**
 * A death with wall-clock timings: `detectedAfterFaultMs` from the injected fault (if any; for a
 * hang, the rank's last frame) to the coordinator's declaration, and `recoveredAfterFaultMs` from
 * the fault to the moment the survivors were handed the dead rank's remainder (its slices given to
 * the transport, or its chunks back in the pool); `undefined` when nothing was redistributed.
 *
 * @since 0.1.0
 * @category result
 */
export interface DeathTiming {
  readonly rank: Rank
  readonly epoch: number
  readonly detector: "supervisor" | "heartbeat"
  readonly cause: string
  /** The error's stack trace of a crashed rank, when its supervisor learnt it. */
  readonly stack?: string | undefined
  readonly faultMs: number | undefined
  readonly declaredMs: number
  readonly recoveredMs: number
  readonly detectedAfterFaultMs: number | undefined
  readonly recoveredAfterFaultMs: number | undefined
  readonly remainderSamples: number
  /** False when the death ended the run (or came after its end): nothing moved then (docs/design.md §3.2). */
  readonly redistributed: boolean
}

/**
 * What one departure cost (docs/churn.md): one per rank that left while the run trained, graceful
 * exits included, in the order the coordinator took them out.
 *
 * - `kind`: `graceful` (it announced its exit), `crash` (its process, worker or socket ended
 *   without that, or it reported its trainer's error), `silent` (nothing of it arrived for the
 *   heartbeat timeout: a sleeping laptop, a frozen tab, a cut link).
 * - `declaredMs`: since the run started, when the coordinator took it out of the run.
 * - `detectionMs`: from the last thing that arrived from it to `declaredMs`: the silence a
 *   `silent` leave took to be seen; for a `crash` it includes the rank's own quiet before its end
 *   (at most its heartbeat interval while it trains), for `graceful` it is 0.
 * - `recoveryMs`: from `declaredMs` until its remainder was handed to the survivors' links (the
 *   extensions, or its chunks back in the pool and the idle survivors woken), so that they train
 *   it; `undefined` when the departure stopped the run (nothing moved).
 * - `remainderSamples`: its samples not committed at its leaving; `lostSamples`: of those, the
 *   samples no one was given (the run stopped: a resume trains them); `duplicatedSamples`: given
 *   twice (always 0: the epoch's audit checks it); `redoneSamples`: the samples the coordinator
 *   knew it had trained but not committed, trained again by the survivors.
 * - `bytesMoved`: the bytes of the control frames its declaration sent (extensions, chunks,
 *   roles, `DeclareDead`, `FormRing`), shared equally among the departures of one batch; not the
 *   parameters of a round its departure let close, nor a ring's repeated collective.
 *
 * @since 0.1.0
 * @category result
 */
export interface LeaveCost {
  readonly rank: Rank
  readonly epoch: number
  readonly kind: "graceful" | "crash" | "silent"
  readonly cause: string
  readonly declaredMs: number
  readonly detectionMs: number
  readonly recoveryMs: number | undefined
  readonly remainderSamples: number
  readonly lostSamples: number
  readonly duplicatedSamples: number
  readonly redoneSamples: number
  readonly bytesMoved: number
}

/**
 * A requested fault that never happened: the run ended first, or its rank had already left.
 *
 * @since 0.1.0
 * @category result
 */
export interface SkippedFault {
  readonly rank: Rank
  readonly fault: "kill" | "hang"
  /** The request as given: `atSeconds`, or `atEpoch` and `atFraction`. */
  readonly spec: KillSpec | HangSpec
  readonly reason: string
}

/**
 * The result of a run, also written to `summary.json`.
 *
 * - `exitCode`: 0 completed with clean audits; 1 unrecoverable (the survivors saved and stopped);
 *   4 an audit found lost or duplicated samples; 130 interrupted (`RunOptions.signal`, SIGINT),
 *   143 interrupted by SIGTERM.
 *
 * @since 0.1.0
 * @category result
 */
export interface RunResult {
  readonly runId: string
  readonly runDir: string
  readonly outcome: Coordinator.Outcome
  readonly deaths: ReadonlyArray<DeathTiming>
  /** What each departure while the run trained cost (`LeaveCost`); absent when none left (and in summaries written before it existed). */
  readonly leaves?: ReadonlyArray<LeaveCost>
  /** Requested kills and hangs that never happened (say so: a silent no-op misleads). */
  readonly skippedFaults: ReadonlyArray<SkippedFault>
  readonly alerts: ReadonlyArray<Alerts.Alert>
  /**
   * One row per finished epoch. `spansRuns` (a resumed run only): the epoch it resumed in the
   * middle of, `[parent runId, this runId]`: its audit covers the samples both runs committed.
   */
  readonly epochs: ReadonlyArray<
    Coordinator.EpochSummary & { readonly accuracy: number | undefined; readonly spansRuns?: readonly [string, string] }
  >
  readonly finalAccuracy: number | undefined
  /**
   * For an unrecoverable or interrupted run: the survivors asked to save (`ShutdownWithSave`) that finished
   * (announced their exit with the save on disk under `<runDir>/save/rank<r>`), and those that did
   * not (died, were still running when the launcher stopped them, or wrote nothing). A served
   * run's ranks save on their own hosts (`cohort join --save-dir`): there a survivor counts as
   * saved once it announced its exit, which it does after its save. `undefined`
   * when no save was asked (a completed run), or in a summary written before this field existed.
   */
  readonly saves?: { readonly saved: ReadonlyArray<Rank>; readonly notSaved: ReadonlyArray<Rank> } | undefined
  readonly durationMs: number
  readonly exitCode: 0 | 1 | 4 | 5 | 130 | 143
  /**
   * Over WebSocket (`transport: "websocket"`, `serve`): joins refused, by close code
   * (`{"4001": 2}`: two wrong tokens; `Transport.CloseCode`): by the server, and (a run that may
   * grow) by the coordinator at the joiner's `Hello` (4009 a parameter count, 4013-4020
   * the core's refusals). `undefined` for other transports.
   */
  readonly refusals?: Readonly<Record<string, number>> | undefined
  /** How the ranks ran (`RunOptions.transport`, or `serve` for `serve`); absent in summaries written before it existed. */
  readonly transport?: "worker" | "process" | "websocket" | "serve" | undefined
  /** The averaging backend the run used (`cpu` in a summary written before this field existed). */
  readonly backend?: "cpu" | "ring"
  /**
   * Ring backend: `generations` formed (1 + every re-rendezvous), the `links` every ring step took
   * (`relay`: `RingData` through the coordinator; `direct`: WebSocket links between child processes,
   * with `relayed` counting the steps that fell back to the relay; `port`: a direct `MessageChannel` between worker
   * threads; `shared`: a direct shared-memory link between worker threads, `RunOptions.ringSharedSlots`;
   * `area`: no steps, a shared all-reduce area per generation, `RunOptions.ringAreaMemoryMb`),
   * and the steps the coordinator `relayed` and `dropped` (an older generation).
   */
  readonly ring?:
    | {
        readonly generations: number
        readonly links: "relay" | "direct" | "port" | "shared" | "area"
        readonly relayed: number
        readonly dropped: number
      }
    | undefined
  /** For a resumed run (`run({ resume })`): its parent and where it picked up; else absent. */
  readonly resumed?: Resumed | undefined
  /**
   * `cohort report` only: the run that resumed this one (the `resumed-by.json` marker a resume
   * writes into its parent once it formed; `runId` `(unknown)` for an unreadable marker).
   */
  readonly resumedBy?: { readonly runId: string; readonly runDir: string } | undefined
  /**
   * A write of the run's record that failed (`storage-fault.ts`): the journal (the run stopped on
   * it: save and shut down, outcome `interrupted`), or `summary.json`; `exitCode` is then 5 and
   * the record is incomplete. Absent when every write succeeded.
   */
  readonly storageFault?: { readonly path: string; readonly error: string } | undefined
  /**
   * `cohort report` only: the journal is shorter than `summary.json` says (it was cut, or a write
   * failed), e.g. `events.ndjson ends after line 30, before the run's end that summary.json records`.
   */
  readonly journalIncomplete?: string | undefined
  /**
   * `cohort report` only: the chain of runs this one belongs to, first run first (its parents,
   * from each journal's `resumed`, then this run, then the runs that resumed it, from their
   * markers); absent for a run that neither resumed nor was resumed.
   */
  readonly chain?: ReadonlyArray<{ readonly runId: string; readonly runDir: string }> | undefined
}

/**
 * Options of `run({ resume: dir })`: continue the run in `dir` (docs/resume.md). The seed, epochs,
 * mode, batch size and averaging cadence are the parent's (from its journal's `started` event) and
 * cannot be given; the trainer is the parent's unless `trainer` names the same module elsewhere
 * (same dataset size and file contents). Everything else may be given and otherwise is the
 * parent's, except the injected faults (`kills`, `hangs`, `floods`), which default to none. The
 * resumed run is a new run directory under `outDir` (default: the folder that holds the parent's).
 *
 * @since 0.1.0
 * @category options
 */
export interface ResumeOptions
  extends Omit<RunOptions, "trainer" | "epochs" | "mode" | "seed" | "batchSize" | "averageEverySteps" | "resumeState"> {
  /** The parent run's directory (`<outDir>/<runId>`). */
  readonly resume: string
  /** The parent's trainer module when it moved: it must be the same file (contents) as the parent's. */
  readonly trainer?: string
}

/**
 * Where a resumed run picked up, as its journal's `started` event and its result record it:
 *
 * - `parent`: the run it continues (`runId`, `runDir` as the parent recorded it);
 * - `epoch`: the epoch it starts in; `committed`: that epoch's permutation ranges `[offset, size]`
 *   the parent committed (its audit counts them, recorded as rank -1), `committedSamples` their sum
 *   (0 when the epoch is trained again from its start); `firstRound`: its first averaging round;
 * - `state`: the model loaded, `save` (the survivors' saves after a save-and-shutdown or an
 *   interrupt), `checkpoint` (the model of the last epoch audited) or `start` (no epoch was
 *   audited and nothing saved: the run's initial model, from its seed); `loadedFrom`: its folder
 *   (empty for `start`);
 * - `notes`: one line each for what the user should know (a fallback to a checkpoint and why, a
 *   journal cut short, a retrained epoch).
 *
 * @since 0.1.0
 * @category result
 */
export interface Resumed {
  readonly parent: { readonly runId: string; readonly runDir: string }
  readonly epoch: number
  readonly firstRound: number
  readonly committedSamples: number
  readonly committed: ReadonlyArray<readonly [offset: number, size: number]>
  readonly state: "save" | "checkpoint" | "start"
  readonly loadedFrom: string
  readonly notes: ReadonlyArray<string>
}
