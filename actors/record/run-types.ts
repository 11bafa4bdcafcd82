/**
 * The public shapes of a training run: its options, the events it emits while running, and its
 * result. `actors/launcher/launcher.ts` implements `run(options)`; the CLI and library users build on these.
 * The options are here; the events, the result and the fault specs are `run-events.ts`, re-exported here.
 *
 * @since 0.1.0
 */
import type * as Config from "../../src/core/config.ts"
import type { EpochSummary } from "../../src/core/outcome.ts"
import type { Rank } from "../../src/core/messages.ts"
import type { HttpHandler } from "../../src/platform/types.ts"
import type { CollectiveFaultSpec, FloodSpec, HangSpec, KillSpec, Listening, RecoveryRecord, RunEvent, RunResult } from "./run-events.ts"

export type * from "./run-events.ts"

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
   * links (`ringSharedSlots`). Child processes with direct links (`ringLinks` `direct`): each
   * generation's collectives run through one area file per rank in the run's private folder in
   * `/dev/shm` (`FileAllReduce`: one token pass a round over the links) when the files, `4 params
   * (n + 1)` bytes together, are at most this many MiB, and not with `compress`; a round whose
   * files cannot be used (`ENOSPC`, ...) goes over the links. 0 never uses an area or area files.
   * Default 256; an integer in [0, 65536] (`LaunchError` on `ringAreaMemoryMb` otherwise). Ignored
   * by other transports and, for worker threads, by runtimes without `Atomics.waitAsync`.
   */
  readonly ringAreaMemoryMb?: number
  /**
   * Ring backend, child processes with direct links: the folder in which the run makes its
   * private folder for the ranks' Unix sockets and area files (`FileAllReduce`). Default:
   * `/dev/shm` where this process may write in it, else the system's temporary folder. A tmpfs
   * mounted with huge pages (`huge=always`) makes the area files' copies cheaper
   * (docs/ring.md). A relative path is from the current folder. `LaunchError` on `ringAreaFolder`
   * when it is not a folder in which the run can make its own, or its absolute path is over 71
   * bytes (the ranks' Unix sockets in it must fit 100).
   */
  readonly ringAreaFolder?: string
  /**
   * Ring backend: how ring steps travel between ranks. `direct` (default): rank to rank wherever
   * the transport can (worker threads: `ringAreaMemoryMb`, `ringSharedSlots`; child processes:
   * area files in memory with a token over the links, `ringAreaMemoryMb`, and links over Unix
   * sockets (or TCP on loopback) between ring neighbours, authenticated with a run secret, each
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
   * WebSocket ranks (`cohort join`, `transport: "websocket"`): each Node, Bun or Deno rank keeps a
   * beat link, a second connection of a thread of its own, and beats on it while it runs a save or
   * an eval the coordinator asked for; a rank whose beat link is up is not held for the call's
   * bound, so a stopped one is declared at its timeout (docs/liveness.md). Plain `ws://` only.
   * Default false: every WebSocket rank is held.
   */
  readonly beatLinks?: boolean
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
   * `cpu` backend: the open round does not wait on a rank that owes it a contribution but sent
   * nothing for more than this many ms; it is not declared, and a contribution it sends later is
   * folded into the round open then. Progressive mode: its chunks are taken back once they are all
   * the epoch has left (`Config.Options.roundSilenceMs`). Default 0: off.
   */
  readonly roundSilenceMs?: number
  /**
   * A rank the open round waits on (or, in progressive mode, the epoch's last chunks) that sent
   * nothing for more than this many ms is declared dead as a silent leave, before
   * `heartbeatTimeoutMs` (`Config.Options.blockingSilenceMs`). Set it above the longest gap
   * between a training rank's frames. Default 0: off.
   */
  readonly blockingSilenceMs?: number
  /**
   * With `blockingSilenceMs`: the largest share (0, 1] of the live ranks that may be silent past
   * it at once for it to declare any (`Config.Options.blockingSilenceQuietMax`). Default 1.
   */
  readonly blockingSilenceQuietMax?: number
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
   * Default: on when `compress` is `fp16` or `int8`, the outer optimizer is on, or a round may close
   * without a rank (`roundDeadlineMs`, `roundSilenceMs`: its late contribution, as a whole model,
   * would take away what the rounds it missed committed), else off.
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
 * - `heapGrowthPercent` (integer 0 to 1000; default 300): V8's old-generation growing factor of the
 *   serving process, `1 + heapGrowthPercent / 100`, set when the run is served and kept for the
 *   process's life (Node only; `src/platform/node.ts` `setHeapGrowthPercent` says why); 0 leaves
 *   V8's own choice.
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
  readonly heapGrowthPercent?: number
  /**
   * Injected churn (docs/churn.md): after every averaging round this fraction, in (0, 1), of the
   * live ranks leave, a third each gracefully (`Shutdown`), by a crash (socket cut) and silently
   * (their frames dropped); picked with the run's seed. Default: none.
   */
  readonly churn?: number
  /** A run taken over after its coordinator's process was lost: filled by `recover` (docs/recovery.md). */
  readonly recovery?: Recovering
}

/**
 * How a restarted coordinator takes a served run over (docs/recovery.md): the ranks it waits for
 * (`expected`, those the journal holds alive) at most `windowMs` (ms), those it does not (`gone`:
 * declared dead or exited before), the journal's time origin (`originMs`, wall-clock ms: the
 * recovered process's event times go on from the old one's) and the old coordinator's last
 * write to the journal (`lostAtMs`, wall-clock ms), and where the run stands.
 *
 * @since 0.1.0
 * @category options
 */
export interface Recovering {
  readonly windowMs: number
  readonly expected: ReadonlyArray<Rank>
  readonly gone: ReadonlyArray<Rank>
  readonly originMs: number
  readonly lostAtMs: number
  readonly epoch: number
  readonly lastRound: number
  readonly committedSamples: number
  /** The epochs the journal holds audited: the recovered run's result lists them first. */
  readonly epochsBefore: RunResult["epochs"]
  /** Earlier takeovers of the run, from the journal. */
  readonly recoveriesBefore: ReadonlyArray<RecoveryRecord>
  /** The averaging traffic of the journal's round lines (`RunResult.traffic`): the run's goes on from it. */
  readonly trafficBefore?: RunResult["traffic"]
  /**
   * Epochs that ended before the loss without an audit line in the journal (from the recovery
   * log): their audit, and the epoch's model when the log still holds it. The recovered run
   * writes their lines.
   */
  readonly closed: ReadonlyArray<{
    readonly summary: EpochSummary
    readonly model: { readonly round: number; readonly params: Float32Array } | undefined
    /** Ring: the epoch's model is asked of a member (`owedModel`), not taken from the log. */
    readonly fromRanks?: boolean
  }>
  /**
   * Ring backend: the last round the log holds committed and the generation that committed it,
   * whose mean every returning rank must hold (`undefined` before any), and the generation the
   * recovered ring forms in first.
   */
  readonly ringCommitted?: { readonly round: number; readonly generation: number } | undefined
  readonly generation?: number | undefined
  /**
   * Ring: the ended epoch of `closed` whose model the members hold, as the mean the takeover's
   * `Update` numbers round `round`; asked of one at the start.
   */
  readonly owedModel?: { readonly epoch: number; readonly round: number } | undefined
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
