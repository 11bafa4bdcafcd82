/**
 * What a run tells and leaves behind: its events (the journal's lines), its result (the CLI's
 * `summary.json`), where a served run listens, where a resumed run picked up; and the faults a
 * run injects, which its options give and its journal and result name. `run-types.ts` re-exports
 * every shape here beside the run's options.
 *
 * @since 0.1.0
 */
import type * as Alerts from "../../src/core/alerts.ts"
import type * as Coordinator from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"

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
  | {
      /**
       * A restarted coordinator took the run over (docs/recovery.md): the old one's last journal
       * line was at `lostMs`; the run goes on at `epoch` from round `lastRound`'s model, with
       * `committedSamples` of that epoch committed.
       */
      readonly type: "coordinatorLost"
      readonly ms: number
      readonly lostMs: number
      readonly epoch: number
      readonly lastRound: number
      readonly committedSamples: number
    }
  | {
      /**
       * The recovered run formed: `returned` ranks came back within the recovery window, `missing`
       * did not (declared dead); `withoutCoordinatorMs` from the old coordinator's last line to
       * now (the run's gap: no round closed meanwhile).
       */
      readonly type: "recovered"
      readonly ms: number
      readonly returned: ReadonlyArray<Rank>
      readonly missing: ReadonlyArray<Rank>
      readonly withoutCoordinatorMs: number
    }
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
  | { readonly type: "join"; readonly ms: number; readonly join: JoinCost }
  | {
      readonly type: "epoch"
      readonly ms: number
      readonly summary: Coordinator.EpochSummary
      readonly accuracy: number | undefined
      /** The trainer has no `evaluate` (a `noEval` came before): no accuracy follows this epoch. */
      readonly noEval?: true
    }
  | {
      /**
       * The rank asked for `epoch`'s eval went on without answering (a frame of a later epoch, or
       * its exit): its trainer has no `evaluate`, and the epoch's line said its accuracy was pending.
       */
      readonly type: "noEval"
      readonly ms: number
      readonly epoch: number
      readonly rank: Rank
    }
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
      /**
       * The bytes of the round's ring steps the ranks sent and received over direct links, summed
       * over ranks (`RoundDone`'s link bytes; absent without direct links): the coordinator never
       * sees those steps, so they are not in `receivedBytes` and `sentBytes`.
       */
      readonly linkSentBytes?: number
      readonly linkReceivedBytes?: number
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
 * A run's averaging traffic, summed over its `round` lines that counted bytes (`rounds` of them):
 * `receivedBytes` and `sentBytes` at the coordinator (contributions and updates, or relayed ring
 * steps: each relayed step counted in and out), and the bytes of ring steps over direct links that
 * the ranks sent and received (`linkSentBytes`, `linkReceivedBytes`, summed over the ranks: each
 * step counted out and in, as the relay counts it; absent without direct links). `cohort report`
 * shows them per round and per committed sample.
 *
 * @since 0.1.0
 * @category result
 */
export interface Traffic {
  readonly rounds: number
  readonly receivedBytes: number
  readonly sentBytes: number
  readonly linkSentBytes?: number | undefined
  readonly linkReceivedBytes?: number | undefined
}

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
 * What bringing one joiner up to date cost (docs/churn.md), a rank that joined the running run
 * and trained: the journal's `join` event, `RunResult.joins`.
 *
 * - `connectedMs`: since the run started: when the server let its link in.
 * - `welcomeMs`: from `connectedMs` until the coordinator welcomed it (its `Hello` and the core's
 *   decision).
 * - `trainingMs`: from `connectedMs` until its first trained batch was reported (its first
 *   `Progress` or `ChunkDone` arrived): it had its model and its first samples. A static-mode
 *   joiner gets its first partition at the next epoch, so this counts the wait for it.
 * - `bytes`: of every frame sent to it from its `Hello` until then, heartbeats aside: the
 *   welcome, roles, the model, its first ranges, ring formations (and an `Update` of a round that
 *   closed meanwhile).
 *
 * @since 0.1.0
 * @category result
 */
export interface JoinCost {
  readonly rank: Rank
  readonly epoch: number
  readonly connectedMs: number
  readonly welcomeMs: number
  readonly trainingMs: number
  readonly bytes: number
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
  /** What bringing each joiner up to date cost (`JoinCost`), in order; absent when none trained (and in older summaries). */
  readonly joins?: ReadonlyArray<JoinCost>
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
   * `area`: no steps, a shared all-reduce area per generation, `RunOptions.ringAreaMemoryMb`;
   * `file`: child processes of one machine, one token pass a round over their direct links and an
   * area file per rank in memory, `RunOptions.ringAreaMemoryMb`; a round whose files could not be
   * used went over the direct links, and its ranks said so on their output),
   * and the steps the coordinator `relayed` and `dropped` (an older generation).
   */
  readonly ring?:
    | {
        readonly generations: number
        readonly links: "relay" | "direct" | "port" | "shared" | "area" | "file"
        readonly relayed: number
        readonly dropped: number
      }
    | undefined
  /**
   * The averaging traffic over the run's rounds (`Traffic`), from its journal's `round` lines;
   * absent when no round counted any (and in summaries written before it existed).
   */
  readonly traffic?: Traffic | undefined
  /** For a resumed run (`run({ resume })`): its parent and where it picked up; else absent. */
  readonly resumed?: Resumed | undefined
  /**
   * A served run taken over after its coordinator's loss (`cohort serve --recover`, docs/recovery.md):
   * each takeover, first first: when the lost coordinator wrote its last line (`lostMs`, the run's
   * ms), how long the run went without a coordinator (`withoutCoordinatorMs`), the epoch it went
   * on in and what of it was committed, the ranks that came back and those declared.
   */
  readonly recoveries?: ReadonlyArray<RecoveryRecord> | undefined
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

/**
 * One takeover of a served run by a restarted coordinator (`RunResult.recoveries`).
 *
 * @since 0.1.0
 * @category result
 */
export interface RecoveryRecord {
  readonly lostMs: number
  readonly withoutCoordinatorMs: number
  readonly epoch: number
  readonly committedSamples: number
  readonly returned: ReadonlyArray<Rank>
  readonly missing: ReadonlyArray<Rank>
}
