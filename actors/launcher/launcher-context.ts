/**
 * One launch's context: its options resolved, the trainer, the core's state, the run's folder,
 * journal and epoch models, and the variables the launcher's steps share (`vars`). `prepare`
 * makes it before anything starts; the steps in `launcher.ts`, `launcher-hooks.ts`,
 * `launcher-hosts.ts` and `launcher-faults.ts` read it and change only `vars` and its tables.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import { customAlphabet, nanoid } from "nanoid"
import type * as Alerts from "../../src/core/alerts.ts"
import * as Core from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"
import * as Files from "../../src/platform/files.ts"
import type * as Trainer from "../../src/train/trainer.ts"
import * as Select from "../../src/platform/select.ts"
import * as ChildProcess from "../../src/transport/child-process.ts"
import * as ListenerResources from "../../src/transport/listener-resources.ts"
import * as RankOutput from "../../src/transport/rank-output.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as EpochModels from "./epoch-models.ts"
import * as LauncherJournal from "./launcher-journal.ts"
import { aggregationOptions, check, checkTls, defaults, LaunchError, loadTrainer, resolveOptions, serveDefaults } from "./launch-options.ts"
import * as Revocations from "./revocations.ts"
import * as Traffic from "../record/traffic.ts"
import * as RoundLinks from "./round-links.ts"
import * as RoundLoss from "./round-loss.ts"
import type { OnFormed } from "./resume.ts"
import * as StorageFault from "./storage-fault.ts"
import type {
  DeathTiming,
  JoinCost,
  LeaveCost,
  Listening,
  RecoveryRecord,
  Recovering,
  Resumed,
  RunOptions,
  ServeOptions,
  SkippedFault
} from "../record/run-types.ts"
import { trainerSha256 } from "./trainer-digest.ts"

/**
 * A new run token: 22 characters of nanoid's 64-letter URL-safe alphabet, 132 random bits.
 *
 * @since 0.1.0
 * @category launcher
 */
export const newRunToken = (): string => nanoid(22)

/** What a served run adds to a local one (`serve`). */
export interface Served {
  readonly host: string
  readonly port: number
  readonly runToken: string | undefined
  readonly formationTimeoutMs: number
  readonly onListening: ((listening: Listening) => void) | undefined
  readonly http: ServeOptions["http"]
  readonly tls: ServeOptions["tls"]
  readonly issueTokens: number
  readonly tokenTtlMs: number | undefined
  /** `ServeOptions.churn`: the fraction of the live ranks made to leave after each round; 0 for none. */
  readonly churn: number
  /** `ServeOptions.heapGrowthPercent`, checked: set for the process once the run's options all passed. */
  readonly heapGrowthPercent: number
  readonly recovery?: Recovering | undefined
}

/** Run ids: 10 letters and digits, so that one never starts with `-` and reads as a flag. */
const runIdOf = customAlphabet("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", 10)

/** What the launcher's steps change as the run goes. */
export interface Vars {
  /** A recovered run, once it formed: its takeover (`RunResult.recoveries`). */
  recovered?: RecoveryRecord | undefined
  /**
   * What the ring's collectives took, decided at the first generation (the largest: a worker ring
   * never grows): a shared all-reduce area when it fits `ringAreaMemoryMb`, else `ringLinks`;
   * child processes: their area files (`file`) when the ranks were handed `ringAreaFolder` and a
   * generation's files fit `ringAreaMemoryMb`.
   */
  ringLinksUsed: "area" | "file" | "shared" | "port" | "direct" | "relay"
  ringLinksDecided: boolean
  /** The folder child-process ranks keep their all-reduce area files in (`RankData.ringAreaFolder`), when handed. */
  ringAreaFolder?: string | undefined
  /** The first write of the run's journal or epoch model that failed: the run stops on it (`storageStop`). */
  storageFault: StorageFault.StorageFault | undefined
  /**
   * The clock the run's timing reads (the core's `nowMs`, the journal's `ms`, epoch rates, silent
   * joiners, the duration): Effect's default until `program` starts, then its fiber's, so that the
   * coordinator actor and the launcher's callbacks read one clock.
   */
  clock: Clock.Clock
  /** When the run started, on `clock` (ms): the journal's `ms` counts from it. */
  startedMs: number
  epochStartedMs: number
  /** The closing round's averaging traffic, told just before its AverageRound (`Coordinator.Hooks.onRoundBytes`). */
  roundBytes: { readonly received: number; readonly sent: number } | undefined
  /** The signal that interrupted the run (`SIGINT`, `SIGTERM`, or `aborted`), once one did. */
  interruptedBy: string | undefined
  formedEmitted: boolean
  /** The trainer has no `evaluate`: a rank asked for an eval went on without answering (`noEval`). */
  noEval: boolean
  /** The survivors asked to save (`ShutdownWithSave`) when the run ended unrecoverable. */
  askedToSave: ReadonlyArray<Rank>
  /** Over WebSocket: the listening server, once it listens. */
  server: WebSocket.ServerHandle | undefined
  /** `serve --churn`: the injected churn, once the coordinator starts (`churn-faults.ts`). */
  churn: { readonly afterRound: (round: number) => void; readonly muted: ReadonlySet<Rank> } | undefined
  relayStats: () => { readonly relayed: number; readonly dropped: number }
}

/**
 * One launch, as `prepare` made it.
 *
 * @since 0.1.0
 * @category launcher
 */
export interface Context {
  readonly options: RunOptions
  readonly served: Served | undefined
  readonly resumed: Resumed | undefined
  /** A resumed run's marking of its parent, once it formed (`resume.ts`). */
  readonly onFormed: OnFormed | undefined
  readonly resolved: ReturnType<typeof resolveOptions>
  readonly trainerUrl: string
  readonly module: Trainer.TrainerModule
  readonly trainerDigest: string | undefined
  readonly state: Core.State
  readonly runId: string
  readonly runDir: string
  readonly runDirAbsolute: string
  readonly journal: LauncherJournal.RunJournal
  readonly emit: LauncherJournal.RunJournal["emit"]
  readonly epochModels: EpochModels.EpochModels
  readonly alerts: Array<Alerts.Alert>
  readonly storageStop: AbortController
  /**
   * Every death the core declared, timed as the coordinator's hook saw it (the core's ledger is
   * the list: `state.deaths`, docs/design.md §3.2, §3.6).
   */
  readonly timings: Map<Core.Death, DeathTiming>
  /** What every departure while the run trained cost (`LeaveCost`), in declaration order. */
  readonly leaveCosts: Array<LeaveCost>
  /** What bringing every joiner up to date cost (`JoinCost`), in the order they trained. */
  readonly joinCosts: Array<JoinCost>
  /** When the server let each joiner's link in (`ctx.nowMs()`), until it trains or leaves. */
  readonly connectedAtMs: Map<Rank, number>
  /** When the coordinator welcomed each joiner (`ctx.nowMs()`), until it trains or leaves. */
  readonly welcomedAtMs: Map<Rank, number>
  readonly skippedFaults: Array<SkippedFault>
  readonly faultAt: Map<Rank, number>
  readonly trainedInEpoch: Map<Rank, number>
  readonly roundLoss: RoundLoss.RoundLoss
  /** The ranks' direct-link bytes of each round (`RoundDone`), for its journal line. */
  readonly roundLinks: RoundLinks.RoundLinks
  /** The run's averaging traffic, from the round lines written (`RunResult.traffic`). */
  readonly traffic: Traffic.Tally
  readonly lastProgressEventMs: Map<Rank, number>
  readonly lastRate: Map<Rank, { readonly epoch: number; readonly samples: number; readonly ms: number; readonly rate: number }>
  /**
   * Joins refused after the server let them in (a parameter count the run did not agree
   * on, 4009, or the core's `JoinRefused`, 4013-4020), by close code: counted in
   * `RunResult.refusals` with the server's own; and where each joined from, for their events.
   */
  readonly lateRefusals: Record<string, number>
  readonly joinedFrom: Map<Rank, string>
  /**
   * Joiners the server let into the running run whose `Hello` has not come yet, with
   * when (ms): one still silent after the formation timeout (how long any rank has to send its
   * `Hello`) is closed with `JoinTimeout` (4004), a refusal like the others, so that a link that
   * never becomes a rank does not hold its index until the run ends. At most `maxRanks` entries.
   */
  readonly awaitingHello: Map<Rank, number>
  /** Over WebSocket: the run token, and the file it was written to when the run made it. */
  readonly runToken: string
  readonly tokenFile: string | undefined
  /** The credentials ranks joined with, and the revocations already applied. */
  readonly credentials: ReturnType<typeof Revocations.ledger>
  /** Over TLS: a served run's certificate, or a local WebSocket run's (its ranks pin it). */
  readonly tls: RunOptions["tls"]
  readonly fingerprint256: string | undefined
  /**
   * The ranks' listener holds at most `rankConnectionsMax` connections; what it refuses or cannot
   * accept is told as the coordinator's alerts, never as a rank's fault.
   */
  readonly rankConnectionsMax: number
  readonly rankListener: ReturnType<typeof ListenerResources.make>
  readonly vars: Vars
  /** The run's time now, on `vars.clock` (ms). */
  readonly nowMs: () => number
  readonly sinceStart: (ms: number) => number
  /**
   * A write of the run's record failed: a critical alert at once; with `stop` (the journal, an
   * epoch's model), the run is asked to save and shut down, as an interrupt would, since its
   * record is no longer kept.
   */
  readonly storageFailed: (fault: StorageFault.StorageFault, stop: boolean) => void
  readonly refusedLate: (rank: Rank | undefined, closeCode: number, reason: string) => void
  /** A line a rank printed: forwarded and kept in `ranks/rank<N>.log`. */
  readonly onOutput: (rank: Rank, line: string) => void
  readonly closeRankLogs: () => Promise<unknown>
}

/** Checks what needs the trainer and makes the core's state (`LaunchError` for a bad option). */
const makeState = (
  options: RunOptions,
  served: Served | undefined,
  resolved: ReturnType<typeof resolveOptions>,
  module: Trainer.TrainerModule,
  nowMs: number
): Core.State => {
  const { worldSize, epochs, mode, backend, batchSize, heartbeatTimeoutMs } = resolved
  const maxRanks = options.maxRanks ?? worldSize
  check(
    Number.isSafeInteger(maxRanks) && maxRanks >= worldSize,
    "maxRanks",
    `must be an integer >= worldSize (${worldSize}), got ${maxRanks}`
  )
  check(
    maxRanks <= (served === undefined ? defaults.worldSizeMax : serveDefaults.worldSizeMax),
    "maxRanks",
    `at most ${served === undefined ? defaults.worldSizeMax : serveDefaults.worldSizeMax} ranks, got ${maxRanks}`
  )
  const made = Core.make(
    {
      worldSize,
      maxRanks,
      ...(options.minRanks === undefined ? {} : { minRanks: options.minRanks }),
      epochSamples: module.trainSamples,
      epochs,
      mode,
      backend,
      batchSize,
      heartbeatTimeoutMs,
      coordinatorStallMs: options.coordinatorStallMs ?? heartbeatTimeoutMs / 4,
      ...(options.saveTimeoutMs === undefined ? {} : { saveTimeoutMs: options.saveTimeoutMs }),
      ...(options.evalTimeoutMs === undefined ? {} : { evalTimeoutMs: options.evalTimeoutMs }),
      // Rank processes beat while they run a save or an eval it asked for (`RankData.callBeatsMs`).
      beatsDuringCalls: served === undefined && resolved.transportKind === "process" && ChildProcess.beatsDuringCalls(),
      ...(options.livenessDetector === undefined ? {} : { livenessDetector: options.livenessDetector }),
      ...(options.adaptiveTimeoutMinMs === undefined ? {} : { adaptiveTimeoutMinMs: options.adaptiveTimeoutMinMs }),
      ...(options.roundDeadlineMs === undefined ? {} : { roundDeadlineMs: options.roundDeadlineMs }),
      ...(options.roundQuorum === undefined ? {} : { roundQuorum: options.roundQuorum }),
      ...(options.roundSilenceMs === undefined ? {} : { roundSilenceMs: options.roundSilenceMs }),
      ...(options.blockingSilenceMs === undefined ? {} : { blockingSilenceMs: options.blockingSilenceMs }),
      ...(options.blockingSilenceQuietMax === undefined ? {} : { blockingSilenceQuietMax: options.blockingSilenceQuietMax }),
      ...aggregationOptions(options),
      failureLimit: options.failureLimit,
      rolePolicy: options.rolePolicy ?? "fastest",
      ...(options.onRepeatedCrash === undefined ? {} : { onRepeatedCrash: options.onRepeatedCrash })
    },
    nowMs
  )
  if ("_tag" in made) throw new LaunchError(made.option, made.reason)
  if (options.resumeState !== undefined) {
    const point = Core.normalizeResume(made.config, options.resumeState)
    if (typeof point === "string") throw new LaunchError("resumeState", point)
  }
  return made
}

/**
 * What ranks print: forwarded (default `[rank N] line` on stderr) and kept in
 * `ranks/rank<N>.log`, opened at a rank's first line (a silent rank has no log).
 */
const rankOutput = (options: RunOptions, runDir: string): Pick<Context, "onOutput" | "closeRankLogs"> => {
  const forward = options.onRankOutput ?? RankOutput.writeToStderr
  const rankLogs = new Map<Rank, Files.Appender>()
  const onOutput = (rank: Rank, line: string): void => {
    try {
      forward(rank, line)
    } catch {
      // An observer that throws must not stop the coordinator; the line is still logged.
    }
    let log = rankLogs.get(rank)
    if (log === undefined) {
      log = Files.openAppend(`${runDir}/ranks/rank${rank}.log`)
      rankLogs.set(rank, log)
    }
    log.write(`${line}\n`)
  }
  return { onOutput, closeRankLogs: () => Promise.all([...rankLogs.values()].map((log) => log.close())) }
}

/**
 * Prepares a launch: defaults filled in and every option checked (`launch-options.ts`), the
 * trainer loaded, the core's state made, the run's folder, journal and token file written.
 * Rejects with `LaunchError` for bad options or a bad trainer.
 *
 * @since 0.1.0
 * @category launcher
 */
export const prepare = async (
  options: RunOptions,
  served: Served | undefined,
  resumed: Resumed | undefined,
  onFormed?: OnFormed
): Promise<Context> => {
  // Long because: it builds the launch's whole context, whose fields are listed one a line.
  const resolved = resolveOptions(options, served !== undefined)
  const { url: trainerUrl, module } = await loadTrainer(options.trainer)
  const trainerDigest = await trainerSha256(trainerUrl)
  const clock = Clock.Clock.defaultValue()
  const state = makeState(options, served, resolved, module, clock.currentTimeMillisUnsafe())
  const runId = options.runId ?? runIdOf()
  const runDir = `${options.outDir ?? defaults.outDir}/${runId}`
  await Files.mkdir(`${runDir}/ranks`)
  const runDirAbsolute = Files.absolutePath(runDir)
  const startedMs = clock.currentTimeMillisUnsafe()
  const vars: Vars = {
    ringLinksUsed: resolved.ringLinks,
    ringLinksDecided: false,
    storageFault: undefined,
    clock,
    startedMs,
    epochStartedMs: startedMs,
    roundBytes: undefined,
    interruptedBy: undefined,
    formedEmitted: false,
    noEval: false,
    askedToSave: [],
    server: undefined,
    churn: undefined,
    relayStats: () => ({ relayed: 0, dropped: 0 })
  }
  const nowMs = (): number => vars.clock.currentTimeMillisUnsafe()
  const sinceStart = (ms: number): number => Math.round(ms - vars.startedMs)
  const alerts: Array<Alerts.Alert> = []
  const storageStop = new AbortController()
  const storageFailed = (fault: StorageFault.StorageFault, stop: boolean): void => {
    // An alert's `ts` is a wall-clock stamp (when, on the host's calendar), not the run's timing.
    const alert = StorageFault.alert(fault, Date.now())
    alerts.push(alert)
    emit({ type: "alert", ms: sinceStart(nowMs()), alert })
    if (!stop || vars.storageFault !== undefined) return
    vars.storageFault = fault
    storageStop.abort()
  }
  // The journal: every logged event, appended as it happens (a line is never rewritten), in the
  // order the events happened, a declared death before what it caused (`launcher-journal.ts`).
  const journalPath = `${runDir}/events.ndjson`
  const journal = await LauncherJournal.open({
    path: journalPath,
    onEvent: (event) => options.onEvent?.(event),
    deathsDeclared: () => state.deaths.length,
    onWriteError: (error) => storageFailed(StorageFault.of(journalPath, error), true)
  })
  const { emit } = journal
  // The model after each epoch, on this host; the epoch's line waits for it (`epoch-models.ts`).
  const epochModels = EpochModels.make({
    dir: `${runDirAbsolute}/checkpoints`,
    shownDir: `${runDir}/checkpoints`,
    now: () => sinceStart(nowMs()),
    // Without it the epoch's audit line stands without the model a resume needs: stop, as for the journal.
    onWriteError: (path, error) => storageFailed(StorageFault.of(path, error), true)
  })
  const lateRefusals: Record<string, number> = {}
  const joinedFrom = new Map<Rank, string>()
  const refusedLate = (rank: Rank | undefined, closeCode: number, reason: string): void => {
    lateRefusals[closeCode] = (lateRefusals[closeCode] ?? 0) + 1
    emit({ type: "refused", ms: sinceStart(nowMs()), closeCode, reason, address: rank === undefined ? "" : (joinedFrom.get(rank) ?? "") })
  }
  const { onOutput, closeRankLogs } = rankOutput(options, runDir)
  // Over WebSocket: the run token (given, or made for the run; a served run's made token is
  // written to <runDir>/token, mode 0600, for the ranks' hosts).
  const runToken = served?.runToken ?? newRunToken()
  let tokenFile: string | undefined
  if (served !== undefined && served.runToken === undefined) {
    tokenFile = `${runDir}/token`
    await Files.writeSecretFile(tokenFile, `${runToken}\n`)
  }
  const tls = served?.tls ?? (resolved.transportKind === "websocket" ? options.tls : undefined)
  if (served === undefined) checkTls(tls)
  const fingerprint256 = tls === undefined ? undefined : await Select.certificateFingerprint(tls.cert)
  const rankConnectionsMax = options.rankConnectionsMax ?? WebSocket.connectionsMaxOf(state.config.maxRanks)
  return {
    options,
    served,
    resumed,
    onFormed,
    resolved,
    trainerUrl,
    module,
    trainerDigest,
    state,
    runId,
    runDir,
    runDirAbsolute,
    journal,
    emit,
    epochModels,
    alerts,
    storageStop,
    timings: new Map(),
    leaveCosts: [],
    joinCosts: [],
    connectedAtMs: new Map(),
    welcomedAtMs: new Map(),
    skippedFaults: [],
    faultAt: new Map(),
    trainedInEpoch: new Map(),
    roundLoss: RoundLoss.make(resolved.mode),
    roundLinks: RoundLinks.make(),
    traffic: Traffic.make(served?.recovery?.trafficBefore),
    lastProgressEventMs: new Map(),
    lastRate: new Map(),
    lateRefusals,
    joinedFrom,
    awaitingHello: new Map(),
    runToken,
    tokenFile,
    credentials: Revocations.ledger(),
    tls,
    fingerprint256,
    rankConnectionsMax,
    rankListener: ListenerResources.make("the rank listener", rankConnectionsMax, "rankConnectionsMax (--rank-connections-max)"),
    vars,
    nowMs,
    sinceStart,
    storageFailed,
    refusedLate,
    onOutput,
    closeRankLogs
  }
}
