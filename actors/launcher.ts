/**
 * The launcher: starts the coordinator and `worldSize` ranks (worker threads or child processes),
 * supervises them, feeds their ends to the coordinator as death reports, injects the faults it was
 * asked for, and writes the run under `<outDir>/<runId>/`: the journal `events.ndjson`, streamed
 * as events happen and synced to disk at every death, epoch end and the run's end; `summary.json`,
 * written atomically at the end; and what each rank printed under
 * `ranks/rank<N>.log`. An interrupt (`RunOptions.signal`) asks the core to stop the run; the
 * survivors save under `save/rank<r>/` within `interruptGraceMs`. The journal's writing and
 * ordering are `launcher-journal.ts`; the result and `summary.json`, `launcher-result.ts`.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { customAlphabet, nanoid } from "nanoid"
import * as SharedAllReduce from "../src/averaging/shared-all-reduce.ts"
import type * as Alerts from "../src/core/alerts.ts"
import * as Core from "../src/core/coordinator.ts"
import * as Liveness from "../src/core/liveness.ts"
import type { Rank } from "../src/core/messages.ts"
import * as ChildProcess from "../src/transport/child-process.ts"
import * as ListenerResources from "../src/transport/listener-resources.ts"
import * as Bundle from "../src/platform/bundle.ts"
import * as Files from "../src/platform/files.ts"
import * as LockFile from "../src/platform/lock-file.ts"
import * as Select from "../src/platform/select.ts"
import * as RankOutput from "../src/transport/rank-output.ts"
import * as Credentials from "../src/transport/credentials.ts"
import * as Transport from "../src/transport/transport.ts"
import * as WebSocket from "../src/transport/web-socket.ts"
import * as WebSocketRanks from "../src/transport/web-socket-ranks.ts"
import * as WireFrames from "../src/transport/wire-frames.ts"
import * as Worker from "../src/transport/worker.ts"
import * as Coordinator from "./coordinator.ts"
import * as EpochModels from "./epoch-models.ts"
import * as LauncherJournal from "./launcher-journal.ts"
import { loggedOptions } from "./launcher-journal.ts"
import * as LauncherResult from "./launcher-result.ts"
import { check, defaults, LaunchError, loadTrainer, resolveOptions, runLockFileName, serveDefaults } from "./launch-options.ts"
import * as RankActor from "./rank.ts"
import * as Resume from "./resume.ts"
import * as Revocations from "./revocations.ts"
import * as RoundLoss from "./round-loss.ts"
import * as StorageFault from "./storage-fault.ts"
import type { DeathTiming, KillSpec, LeaveCost, Listening, RankState, ResumeOptions, Resumed, RunEvent, RunOptions, RunResult, ServeOptions, SkippedFault } from "./run-types.ts"
import { trainerSha256 } from "./trainer-digest.ts"

export { defaults, LaunchError, loadTrainer, runLockFileName, serveDefaults } from "./launch-options.ts"

/**
 * A new run token: 22 characters of nanoid's 64-letter URL-safe alphabet, 132 random bits.
 *
 * @since 0.1.0
 * @category launcher
 */
export const newRunToken = (): string => nanoid(22)

/** What a served run adds to a local one (`serve`). */
interface Served {
  readonly host: string
  readonly port: number
  readonly runToken: string | undefined
  readonly formationTimeoutMs: number
  readonly onListening: ((listening: Listening) => void) | undefined
  readonly http: ServeOptions["http"]
  readonly tls: ServeOptions["tls"]
  readonly issueTokens: number
  readonly tokenTtlMs: number | undefined
}

/** Checks a `tls` option's PEM blocks (`LaunchError`, option `tls`). */
const checkTls = (tls: RunOptions["tls"]): void => {
  if (tls === undefined) return
  check(/-----BEGIN [A-Z ]*CERTIFICATE-----/.test(tls.cert), "tls", "cert holds no PEM certificate block")
  check(/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(tls.key), "tls", "key holds no PEM private key block")
}

/**
 * Writes `count` credentials of run `runId`, one per rank index from 0, to
 * `<runDir>/credentials/rank<r>` (mode 0600), each expiring `ttlMs` from now (never without it);
 * returns where each went.
 */
const issueCredentials = async (
  runToken: string,
  runId: string,
  runDir: string,
  count: number,
  ttlMs: number | undefined
): Promise<ReadonlyArray<{ readonly rank: number; readonly id: string; readonly file: string }>> => {
  if (count === 0) return []
  await Files.mkdir(`${runDir}/credentials`)
  const expiresAtMs = ttlMs === undefined ? undefined : Date.now() + ttlMs
  const issued: Array<{ readonly rank: number; readonly id: string; readonly file: string }> = []
  for (let rank = 0; rank < count; rank++) {
    const id = Credentials.newId()
    const file = `${runDir}/credentials/rank${rank}`
    await Files.writeSecretFile(file, `${Credentials.issue(runToken, runId, { id, rank, expiresAtMs })}\n`)
    issued.push({ rank, id, file })
  }
  return issued
}

/** Run ids: 10 letters and digits, so that one never starts with `-` and reads as a flag. */
const runIdOf = customAlphabet("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", 10)

/**
 * The entry each rank starts: the TypeScript entry under Bun and Deno; under Node, a bundle of it
 * with the trainer compiled in (see `src/platform/bundle.ts`), falling back to the
 * TypeScript entry (through tsx) if the bundle cannot be built.
 */
const rankEntry = async (transport: "worker" | "process" | "websocket", trainerUrl: string): Promise<string> => {
  const entry = Files.moduleUrl(transport === "worker" ? "./rank-worker.ts" : transport === "process" ? "./rank-process.ts" : "./rank-socket.ts", import.meta.url)
  if (!Bundle.needed()) return entry.href
  // Paths, not URLs: esbuild leaves `file:` URLs as external imports.
  const path = (url: string | URL): string => JSON.stringify(Files.pathOf(String(url)))
  // Worker ranks redirect what they print before the trainer module loads (ES modules evaluate
  // in import order), so that even its top-level prints stay off the coordinator's stdout.
  const redirect = Files.moduleUrl("../src/platform/redirect-worker-output.ts", import.meta.url)
  const source = transport === "websocket" ? [
    `import * as trainer from ${path(trainerUrl)}`,
    `import * as SocketRank from ${path(Files.moduleUrl("./socket-rank.ts", import.meta.url))}`,
    `await SocketRank.processMain(async () => trainer)`
  ].join("\n") : [
    ...(transport === "worker" ? [`import ${path(redirect)}`] : []),
    `import * as trainer from ${path(trainerUrl)}`,
    `import * as Host from ${path(Files.moduleUrl(transport === "worker" ? "../src/transport/worker.ts" : "../src/transport/child-process.ts", import.meta.url))}`,
    `import * as Rank from ${path(Files.moduleUrl("./rank.ts", import.meta.url))}`,
    `await Rank.main(Host.connect(), async () => trainer)`
  ].join("\n")
  return Bundle.bundle(source, Files.absolutePath(".")).catch(() => entry.href)
}

/** Completes once `signal` is aborted (at once if it already is). */
const aborted = (signal: AbortSignal): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (signal.aborted) return resume(Effect.void)
    const onAbort = () => resume(Effect.void)
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.sync(() => signal.removeEventListener("abort", onAbort))
  })

/**
 * Runs a training run to its end and returns its result; the journal (`events.ndjson`, streamed)
 * and summary are written under `<outDir>/<runId>/`. Rejects with `LaunchError` for bad options or
 * a bad trainer; a run that ends unrecoverable resolves normally with `exitCode` 1, and one
 * interrupted through `options.signal` with outcome `interrupted` and `exitCode` 130 (143 when the
 * signal's reason is `"SIGTERM"`).
 *
 * With `resume: dir` (`ResumeOptions`) it continues the run in `dir` instead: see
 * `actors/resume.ts` for how the state is picked and the `LaunchError`s (option `resume`) it
 * rejects with; the parent's directory is left as it was (a lock file `resume.lock` lives there
 * while the resume runs).
 *
 * @since 0.1.0
 * @category launcher
 */
export const run = async (options: RunOptions | ResumeOptions): Promise<RunResult> =>
  "resume" in options && options.resume !== undefined
    ? Resume.resume(options, (fresh, resumed) => launch(fresh, undefined, resumed))
    : launch(options as RunOptions, undefined)

/**
 * Serves a run (`cohort serve`): the coordinator listens on a WebSocket (`ServeOptions.host`,
 * loopback by default) and its `worldSize` ranks join from anywhere with the run token
 * (`cohort join`, `WebSocket.connect`); the run starts when the last one joined (its `Hello`),
 * then goes on exactly as `run` does: journal, audits, summary, exit codes. Refused joins are
 * logged (`refused` events) and counted (`RunResult.refusals`); a rank the core declares dead has
 * its socket closed with `CloseCode.RankDead` (4011). Rejects with `LaunchError` for bad options,
 * a bad trainer (the coordinator loads it too, for its sample count), a token under 16
 * characters (option `runToken`), an address it cannot bind (option `listen`), or a run that did
 * not form within `formationTimeoutMs` (option `formation`).
 *
 * @since 0.1.0
 * @category launcher
 */
export const serve = (options: ServeOptions): Promise<RunResult> => {
  const formationTimeoutMs = options.formationTimeoutMs ?? serveDefaults.formationTimeoutMs
  check(Number.isSafeInteger(formationTimeoutMs) && formationTimeoutMs > 0, "formationTimeoutMs", `must be an integer > 0, got ${formationTimeoutMs}`)
  if (options.runToken !== undefined) {
    check(options.runToken.length >= WebSocket.runTokenLengthMin, "runToken", `must be at least ${WebSocket.runTokenLengthMin} characters, got ${options.runToken.length}`)
  }
  checkTls(options.tls)
  const issueTokens = options.issueTokens ?? 0
  check(Number.isSafeInteger(issueTokens) && issueTokens >= 0, "issueTokens", `must be an integer >= 0, got ${issueTokens}`)
  if (options.tokenTtlMs !== undefined) {
    check(Number.isSafeInteger(options.tokenTtlMs) && options.tokenTtlMs > 0, "tokenTtlMs", `must be an integer > 0, got ${options.tokenTtlMs}`)
  }
  const { host, port, runToken, formationTimeoutMs: _, onListening, http, tls, issueTokens: __, tokenTtlMs, ...rest } = options
  return launch({ ...rest, transport: "websocket" }, {
    host: host ?? serveDefaults.host,
    port: port ?? serveDefaults.port,
    runToken,
    formationTimeoutMs,
    onListening,
    http,
    tls,
    issueTokens,
    tokenTtlMs
  })
}

/**
 * The journal's one decision for a ring generation's `FormRing`s (docs/design.md §3.10), which the core
 * sends one per member with the same reason: `FormRing generation G to ranks 0, 1, 3: <reason>`
 * (at most 16 ranks named, then how many more).
 */
const formRingDecision = (message: { readonly generation: number; readonly peers: ReadonlyArray<number> }, reason: string): string =>
  `FormRing generation ${message.generation} to ranks ${message.peers.slice(0, 16).join(", ")}${
    message.peers.length > 16 ? ` and ${message.peers.length - 16} more` : ""
  }: ${reason}`

/**
 * `run` for a fresh run, a served one (`served`: where it listens), or a resumed one (`resumed`: its
 * parent, recorded in `started` and the result).
 */
const launch = async (options: RunOptions, served: Served | undefined, resumed?: Resumed): Promise<RunResult> => {
  // Long because it is still one closure over the run's state: splitting it into named steps is pending.
  // Defaults filled in and every option checked (`launch-options.ts`).
  const {
    worldSize, epochs, mode, transportKind, kills, hangs, floods, backend, collectiveFaults, batchSize, heartbeatTimeoutMs,
    ringSharedSlots, ringLinks, ringAreaMemoryMb, interruptGraceMs, rankNice, rankMemoryMb, heapLimitMb
  } = resolveOptions(options, served !== undefined)
  // What the ring's collectives took, decided at the first generation (the largest: a worker ring
  // never grows): a shared all-reduce area when it fits `ringAreaMemoryMb`, else `ringLinks`.
  let ringLinksUsed: "area" | "shared" | "port" | "relay" = ringLinks
  let ringLinksDecided = false
  /** The shared all-reduce area of a worker ring generation of `ringSize` ranks, when one is used. */
  const ringArea = (ringSize: number, paramsLength: number | undefined): { readonly buffer: SharedArrayBuffer; readonly length: number } | undefined => {
    const fits = paramsLength !== undefined && ringAreaMemoryMb > 0 && Worker.sharedRingLinks() &&
      SharedAllReduce.areaBytes(ringSize, paramsLength) <= ringAreaMemoryMb * 2 ** 20
    // An area the runtime cannot allocate (out of memory) leaves that generation on its links: its
    // ranks must still get links, or they would never start a collective.
    let buffer: SharedArrayBuffer | undefined
    try {
      buffer = fits && (ringLinksUsed === "area" || !ringLinksDecided) ? SharedAllReduce.make(ringSize, paramsLength) : undefined
    } catch {
      buffer = undefined
    }
    if (!ringLinksDecided) {
      ringLinksDecided = true
      if (buffer !== undefined) ringLinksUsed = "area"
    }
    return buffer !== undefined && paramsLength !== undefined ? { buffer, length: paramsLength } : undefined
  }
  const { url: trainerUrl, module } = await loadTrainer(options.trainer)
  const trainerDigest = await trainerSha256(trainerUrl)
  const maxRanks = options.maxRanks ?? worldSize
  check(Number.isSafeInteger(maxRanks) && maxRanks >= worldSize, "maxRanks", `must be an integer >= worldSize (${worldSize}), got ${maxRanks}`)
  check(maxRanks <= (served === undefined ? defaults.worldSizeMax : serveDefaults.worldSizeMax), "maxRanks", `at most ${served === undefined ? defaults.worldSizeMax : serveDefaults.worldSizeMax} ranks, got ${maxRanks}`)
  const made = Core.make({
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
    ...(options.livenessDetector === undefined ? {} : { livenessDetector: options.livenessDetector }),
    ...(options.adaptiveTimeoutMinMs === undefined ? {} : { adaptiveTimeoutMinMs: options.adaptiveTimeoutMinMs }),
    ...(options.roundDeadlineMs === undefined ? {} : { roundDeadlineMs: options.roundDeadlineMs }),
    ...(options.roundQuorum === undefined ? {} : { roundQuorum: options.roundQuorum }),
    failureLimit: options.failureLimit,
    rolePolicy: options.rolePolicy ?? "fastest",
    ...(options.onRepeatedCrash === undefined ? {} : { onRepeatedCrash: options.onRepeatedCrash })
  }, Date.now())
  if ("_tag" in made) throw new LaunchError(made.option, made.reason)
  const state = made
  if (options.resumeState !== undefined) {
    const point = Core.normalizeResume(state.config, options.resumeState)
    if (typeof point === "string") throw new LaunchError("resumeState", point)
  }
  const runId = options.runId ?? runIdOf()
  const runDir = `${options.outDir ?? defaults.outDir}/${runId}`
  await Files.mkdir(`${runDir}/ranks`)
  const runDirAbsolute = Files.absolutePath(runDir)
  // The journal: every logged event, appended as it happens (a line is never rewritten), in the
  // order the events happened, a declared death before what it caused (`launcher-journal.ts`).
  const journalPath = `${runDir}/events.ndjson`
  const journal = await LauncherJournal.open({
    path: journalPath,
    onEvent: (event) => options.onEvent?.(event),
    deathsDeclared: () => state.deaths.length,
    onWriteError: (error) => storageFailed(StorageFault.of(journalPath, error), true)
  })
  const { emit, releaseHeld } = journal
  // The model after each epoch, on this host; the epoch's line waits for it (`epoch-models.ts`).
  const epochModels = EpochModels.make({
    dir: `${runDirAbsolute}/checkpoints`,
    shownDir: `${runDir}/checkpoints`,
    now: () => sinceStart(Date.now()),
    // Without it the epoch's audit line stands without the model a resume needs: stop, as for the journal.
    onWriteError: (path, error) => storageFailed(StorageFault.of(path, error), true)
  })

  const alerts: Array<Alerts.Alert> = []
  /** The first write of the run's journal or epoch model that failed: the run stops on it (`storageStop`). */
  let storageFault: StorageFault.StorageFault | undefined
  const storageStop = new AbortController()
  /**
   * A write of the run's record failed: a critical alert at once; with `stop` (the journal, an
   * epoch's model), the run is asked to save and shut down, as an interrupt would, since its
   * record is no longer kept.
   */
  const storageFailed = (fault: StorageFault.StorageFault, stop: boolean): void => {
    const alert = StorageFault.alert(fault, Date.now())
    alerts.push(alert)
    emit({ type: "alert", ms: sinceStart(Date.now()), alert })
    if (!stop || storageFault !== undefined) return
    storageFault = fault
    storageStop.abort()
  }
  // Every death the core declared, timed as the coordinator's hook saw it (the core's ledger is the
  // list: `state.deaths`, docs/design.md §3.2, §3.6).
  const timings = new Map<Core.Death, DeathTiming>()
  const leaveCosts: Array<LeaveCost> = []
  const skippedFaults: Array<SkippedFault> = []
  const faultAt = new Map<Rank, number>()
  const trainedInEpoch = new Map<Rank, number>()
  const roundLoss = RoundLoss.make(mode)
  const lastProgressEventMs = new Map<Rank, number>()
  const lastRate = new Map<Rank, { readonly epoch: number; readonly samples: number; readonly ms: number; readonly rate: number }>()
  let startedMs = Date.now()
  let epochStartedMs = startedMs
  const sinceStart = (ms: number): number => Math.round(ms - startedMs)
  /** The signal that interrupted the run (`SIGINT`, `SIGTERM`, or `aborted`), once one did. */
  let interruptedBy: string | undefined

  let formedEmitted = false
  /**
   * Joins refused after the server let them in (a parameter count the run did not agree
   * on, 4009, or the core's `JoinRefused`, 4013-4020), by close code: counted in
   * `RunResult.refusals` with the server's own; and where each joined from, for their events.
   */
  const lateRefusals: Record<string, number> = {}
  const joinedFrom = new Map<Rank, string>()
  /**
   * Joiners the server let into the running run whose `Hello` has not come yet, with
   * when (ms): one still silent after the formation timeout (how long any rank has to send its
   * `Hello`) is closed with `JoinTimeout` (4004), a refusal like the others, so that a link that
   * never becomes a rank does not hold its index until the run ends. At most `maxRanks` entries.
   */
  const awaitingHello = new Map<Rank, number>()
  const refusedLate = (rank: Rank | undefined, closeCode: number, reason: string): void => {
    lateRefusals[closeCode] = (lateRefusals[closeCode] ?? 0) + 1
    emit({ type: "refused", ms: sinceStart(Date.now()), closeCode, reason, address: rank === undefined ? "" : joinedFrom.get(rank) ?? "" })
  }
  /** The survivors asked to save (`ShutdownWithSave`) when the run ended unrecoverable. */
  let askedToSave: ReadonlyArray<Rank> = []
  // What ranks print: forwarded (default `[rank N] line` on stderr) and kept in
  // `ranks/rank<N>.log`, opened at a rank's first line (a silent rank has no log).
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
  const closeRankLogs = () => Promise.all([...rankLogs.values()].map((log) => log.close()))

  const rankState = (rank: Rank): RankState => {
    if (Core.isDead(state, rank)) return "dead"
    if (!Core.isLive(state, rank)) return "exited"
    return state.contributed[rank] === 1 ? "waiting" : "training"
  }

  const hooks: Coordinator.Hooks = {
    onFrame: (rank, message, nowMs) => {
      // A frame from a rank that is not live (an admitted joiner before its Hello, a dead or
      // exited rank) changes nothing in the core: nor in the journal, the bars or the losses.
      if (!Core.isLive(state, rank)) return
      roundLoss.onFrame(rank, message)
      if (message._tag === "Progress" && message.epoch === state.epoch) {
        if (mode === "static") trainedInEpoch.set(rank, message.samplesDone)
        // A progressive rank's samplesDone (its static list's position) stays 0: its samples are
        // the chunks it completed in the epoch.
        const samplesDone = mode === "static" ? message.samplesDone : trainedInEpoch.get(rank) ?? 0
        const last = lastProgressEventMs.get(rank) ?? 0
        // Samples per second from successive reports (a batch's own time says nothing about the
        // waits between batches).
        const previous = lastRate.get(rank)
        // The first report of an epoch counts from the epoch's start (a batch's own time leaves
        // out every wait, and a tiny model trains a batch in microseconds).
        // (A progressive rank's samples grow a chunk at a time: its rate is the epoch's average.)
        const rate = mode === "static" && previous !== undefined && previous.epoch === message.epoch && nowMs > previous.ms
          ? ((samplesDone - previous.samples) * 1000) / (nowMs - previous.ms)
          : nowMs > epochStartedMs ? (samplesDone * 1000) / (nowMs - epochStartedMs) : 0
        lastRate.set(rank, { epoch: message.epoch, samples: samplesDone, ms: nowMs, rate: Math.max(0, rate) })
        const progress: RunEvent = {
          type: "progress",
          ms: sinceStart(nowMs),
          rank,
          epoch: message.epoch,
          samplesDone,
          samplesPerSecond: Math.max(0, rate),
          state: rankState(rank)
        }
        // The log keeps at most one progress line per rank per second; observers see them all.
        emit(progress, nowMs - last >= 1000)
        if (nowMs - last >= 1000) lastProgressEventMs.set(rank, nowMs)
      } else if ((message._tag === "Params" || message._tag === "RoundDone") && message.epoch === state.epoch && mode === "static") {
        trainedInEpoch.set(rank, Math.max(trainedInEpoch.get(rank) ?? 0, message.samplesDone))
      } else if (message._tag === "ChunkDone" && message.epoch === state.epoch) {
        trainedInEpoch.set(rank, (trainedInEpoch.get(rank) ?? 0) + message.size)
      } else if (message._tag === "EvalResult" && state.evalsAsked.get(message.epoch) === rank) {
        // The epoch's line went out with its accuracy pending; this is the accuracy. Only the
        // rank asked for that epoch's eval gives it (the core records no other: a rank that
        // holds the token must not put an accuracy in the journal for an eval nobody asked).
        emit({ type: "eval", ms: sinceStart(nowMs), epoch: message.epoch, rank, accuracy: message.accuracy, loss: message.loss })
      } else if (message._tag === "CheckpointResult" && !message.ok && StorageFault.isStorageError(message.detail)) {
        // The core fails the checkpoint over to another rank; the operator hears of the disk now.
        storageFailed(StorageFault.of(`${runDir}/checkpoints/v${message.version}`, message.detail), false)
      }
    },
    onCommand: (command) => {
      const ms = sinceStart(Date.now())
      if (!formedEmitted && state.started) {
        formedEmitted = true
        server?.markFormed()
        const present = Core.activeCount(state)
        emit({ type: "formed", ms, worldSize, ...(present < worldSize ? { joined: present } : {}) })
      }
      switch (command._tag) {
        case "Alert":
          alerts.push(command.alert)
          emit({ type: "alert", ms, alert: command.alert })
          return
        case "EpochEnded": {
          // Progress reports are spaced (progressIntervalMs): the last one may be batches short.
          // What each live rank trained of the epoch goes to the observers (the bars, the live
          // page) before the epoch's line, so that a finished bar shows it, whole.
          for (const [rank, samplesDone] of trainedInEpoch) {
            if (!Core.isLive(state, rank)) continue
            const last = lastRate.get(rank)
            const samplesPerSecond = last !== undefined && last.epoch === command.summary.epoch ? last.rate : 0
            emit({ type: "progress", ms, rank, epoch: command.summary.epoch, samplesDone, samplesPerSecond, state: rankState(rank) }, false)
          }
          trainedInEpoch.clear()
          // Final once the epoch's model is written here: the line, and all after it, wait for it.
          journal.hold(epochModels.written(command.summary.epoch))
          // Final as written: the accuracy comes in its own `eval` event.
          emit({ type: "epoch", ms, summary: command.summary, accuracy: undefined })
          return
        }
        case "Welcome": {
          // The core recorded the join when it decided it (its first chunks' samples included).
          const record = [...state.joins].reverse().find((j) => j.rank === command.rank)
          emit({ type: "welcomed", ms, rank: command.rank, epoch: command.epoch, firstRound: command.firstRound, samples: record?.samples ?? 0, given: command.reason })
          return
        }
        case "JoinRefused":
          refusedLate(command.rank, Transport.joinRefusalCloseCode[command.reason], command.detail)
          return
        case "RunEnded":
          if (command.outcome.status !== "completed") askedToSave = Core.survivors(state)
          // The `ended` event closes the journal once the run is over, survivors' exits included.
          return
        case "Send":
          // A generation's FormRings (one per member, same reason) are one decision, naming its members.
          if (command.message._tag === "FormRing") {
            if (command.message.ringRank === 0) emit({ type: "decision", ms, detail: formRingDecision(command.message, command.reason) })
            return
          }
          // Chunk refills after every ChunkDone are routine, not decisions worth a line each.
          if (command.message._tag !== "AssignChunk") {
            emit({ type: "decision", ms, detail: `${command.message._tag} to rank ${command.to}: ${command.reason}` })
          }
          return
        case "Broadcast":
          if (command.message._tag !== "CoordHeartbeat" && command.message._tag !== "Update") {
            emit({ type: "decision", ms, detail: `${command.message._tag} to every survivor: ${command.reason}` })
          }
          return
        case "SendRanges":
          if (command.kind === "StartEpoch") epochStartedMs = Date.now()
          emit({ type: "decision", ms, detail: `${command.ranks.length} × ${command.kind}: ${command.reason}` })
          return
        case "AverageRound": {
          const loss = roundLoss.onRound(command.contributors)
          emit({
            type: "round",
            ms,
            epoch: command.epoch,
            round: command.round,
            contributors: command.contributors.length,
            openMs: Math.max(0, state.clockMs - command.openedAtMs),
            ...(loss === undefined ? {} : { loss })
          })
          return
        }
      }
    },
    onLeft: (left, recoveredMs, controlBytes) => {
      for (const leave of left) {
        const cost = leaveCost(leave, recoveredMs, Math.round(controlBytes / left.length))
        leaveCosts.push(cost)
        emit({ type: "leave", ms: cost.declaredMs, leave: cost })
      }
    },
    onTurnedAway: (rank, closeCode, reason) => refusedLate(rank, closeCode, reason),
    onEpochModel: (epoch, model) => epochModels.deliver(epoch, model),
    onDeclared: (declared, recoveredMs) => {
      // Called right after the declaring step: if the run is over, that batch moved nothing.
      const redistributed = state.phase === "running"
      for (const death of declared) record(death, recoveredMs, redistributed)
      releaseHeld()
      // A rank declared dead over WebSocket hears it: its socket closes with RankDead (a hung or
      // cut-off rank's socket may still be open; a rank elsewhere then leaves with one line).
      if (server !== undefined) for (const death of declared) server.transport.disconnect(death.rank, Transport.CloseCode.RankDead)
    }
  }

  /** A departure's cost line (`LeaveCost`), from the core's record and the step's wall time and bytes. */
  const leaveCost = (leave: Core.Leave, recoveredMs: number, bytesMoved: number): LeaveCost => ({
    rank: leave.rank,
    epoch: leave.epoch,
    kind: leave.kind,
    cause: leave.cause,
    declaredMs: sinceStart(leave.declaredAtMs),
    detectionMs: Math.max(0, leave.declaredAtMs - leave.lastSeenAtMs),
    recoveryMs: leave.redistributed ? Math.max(0, recoveredMs - leave.declaredAtMs) : undefined,
    remainderSamples: leave.remainderSamples,
    lostSamples: leave.redistributed ? 0 : leave.remainderSamples,
    duplicatedSamples: 0,
    redoneSamples: leave.redistributed ? leave.redoneSamples : 0,
    bytesMoved
  })

  /** Times a declared death and logs it, once per death. */
  const record = (death: Core.Death, recoveredMs: number, redistributed: boolean): void => {
    if (timings.has(death)) return
    // A hung rank's fault is best timed by its last frame: the moment it went silent.
    const faultMs = death.detector === "heartbeat" && faultAt.has(death.rank)
      ? death.declaredAtMs - Liveness.silentMs(state.liveness, death.rank, death.declaredAtMs)
      : faultAt.get(death.rank)
    const timing: DeathTiming = {
      rank: death.rank,
      epoch: death.epoch,
      detector: death.detector,
      cause: death.cause,
      ...(death.stack === undefined ? {} : { stack: death.stack }),
      faultMs: faultMs === undefined ? undefined : sinceStart(faultMs),
      declaredMs: sinceStart(death.declaredAtMs),
      recoveredMs: sinceStart(recoveredMs),
      detectedAfterFaultMs: faultMs === undefined ? undefined : death.declaredAtMs - faultMs,
      recoveredAfterFaultMs: faultMs === undefined || !redistributed ? undefined : recoveredMs - faultMs,
      remainderSamples: death.remainderSamples,
      redistributed
    }
    timings.set(death, timing)
    emit({ type: "death", ms: sinceStart(death.declaredAtMs), death: timing })
  }

  // Over WebSocket: the run token (given, or made for the run; a served run's made token is
  // written to <runDir>/token, mode 0600, for the ranks' hosts).
  const runToken = served?.runToken ?? newRunToken()
  let tokenFile: string | undefined
  if (served !== undefined && served.runToken === undefined) {
    tokenFile = `${runDir}/token`
    await Files.writeSecretFile(tokenFile, `${runToken}\n`)
  }
  let server: WebSocket.ServerHandle | undefined
  const credentials = Revocations.ledger()
  const observeListening = (listening: Listening): void => {
    try {
      served?.onListening?.(listening)
    } catch {
      // an observer only watches
    }
  }
  // Over TLS: a served run's certificate, or a local WebSocket run's (its ranks pin it).
  const tls = served?.tls ?? (transportKind === "websocket" ? options.tls : undefined)
  if (served === undefined) checkTls(tls)
  const fingerprint256 = tls === undefined ? undefined : await Select.certificateFingerprint(tls.cert)
  // The ranks' listener holds at most this many connections; what it refuses or cannot accept
  // is told as the coordinator's alerts, never as a rank's fault.
  const rankConnectionsMax = options.rankConnectionsMax ?? WebSocket.connectionsMaxOf(state.config.maxRanks)
  const rankListener = ListenerResources.make("the rank listener", rankConnectionsMax, "rankConnectionsMax (--rank-connections-max)")
  // The run's WebSocket settings, beside the transport's defaults.
  const serverOptions = (): WebSocket.ServerOptions => ({
    runToken,
    worldSize,
    host: served?.host ?? WebSocket.hostDefault,
    port: served?.port ?? 0,
    welcome: () => welcomeData,
    // Heartbeats go between the pieces of a large Update on a resumable link.
    orderFree: WireFrames.orderFree,
    ...(served?.http === undefined ? {} : { http: served.http }),
    ...(tls === undefined ? {} : { tls }),
    connectionsMax: rankConnectionsMax,
    onResource: rankListener.onResource,
    onJoined: (rank, address, credential) => {
      joinedFrom.set(rank, address)
      if (credential !== undefined) credentials.joined(rank, credential)
      if (formedEmitted) awaitingHello.set(rank, Date.now())
      emit({ type: "joined", ms: sinceStart(Date.now()), rank, address, ...(credential === undefined ? {} : { credential }) })
    },
    // A served run admits ranks' own credentials too (HMACs of the run token; none is kept).
    ...(served === undefined ? {} : { credential: (token: string) => Credentials.check(runToken, runId, token, Date.now(), credentials.isRevoked) }),
    onRefused: (closeCode, reason, address) => emit({ type: "refused", ms: sinceStart(Date.now()), closeCode, reason, address }),
    onResumed: (rank, address, silentMs) => emit({ type: "resumed", ms: sinceStart(Date.now()), rank, address, silentMs }),
    // A run that may grow checks each join after formation against the core's state;
    // the core decides again at the joiner's Hello (`Join`).
    ...(state.config.maxRanks > worldSize || state.config.minRanks < worldSize ? { admit } : {})
  })
  const admit = (asked: unknown, taken: (rank: Rank) => boolean): WebSocket.Admission =>
    WebSocket.admission(asked, (index) => Core.joinVerdict(state, index, taken))
  // What a rank that joins from elsewhere learns of the run in its welcome (`JoinedRun`).
  const welcomeData: RankActor.JoinedRun = {
    worldSize,
    epochSamples: module.trainSamples,
    seed: options.seed ?? defaults.seed,
    batchSize,
    averageEverySteps: options.averageEverySteps ?? defaults.averageEverySteps,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? Math.min(defaults.heartbeatIntervalMs, heartbeatTimeoutMs / 4),
    progressIntervalMs: defaults.progressIntervalMs,
    coordinatorTimeoutMs: options.coordinatorTimeoutMs ?? RankActor.coordinatorTimeoutMsDefault,
    heartbeatTimeoutMs,
    backend,
    runId
  }
  interface Host {
    readonly transport: Transport.TransportShape
    readonly spawn: (options: Worker.SpawnOptions & ChildProcess.SpawnOptions) => Effect.Effect<void, Transport.TransportError>
    readonly kill: (rank: Rank) => Effect.Effect<void>
    /** Worker threads: direct ring links per generation (`MessageChannel`s); other hosts relay. */
    readonly formRingLinks?: ((generation: number, peers: ReadonlyArray<Rank>, paramsLength: number | undefined) => ((round: number) => void) | undefined) | undefined
  }
  const bindFailed = (error: Transport.TransportError) =>
    Effect.die(new LaunchError("listen", error.reason._tag === "ConnectFailed" ? `cannot listen on ${served?.host}:${served?.port}: ${error.reason.detail}` : error.message))
  const makeHost = (): Effect.Effect<Host, never, Scope.Scope> => {
    if (served !== undefined) {
      return WebSocket.serve(serverOptions()).pipe(
        Effect.catch(bindFailed),
        Effect.map((handle): Host => {
          server = handle
          return {
            transport: handle.transport,
            spawn: () => Effect.void,
            kill: (rank) => Effect.sync(() => handle.transport.disconnect(rank, Transport.CloseCode.RankDead))
          }
        })
      )
    }
    switch (transportKind) {
      case "worker":
        return Effect.map(Worker.host({ onOutput }), (h): Host => ({
          transport: h.transport,
          spawn: (o) => h.spawn(heapLimitMb === undefined ? o : { ...o, resourceLimits: { maxOldGenerationSizeMb: heapLimitMb } }),
          kill: h.terminate,
          formRingLinks: (generation, peers, paramsLength) => {
            const area = ringArea(peers.length, paramsLength)
            h.formRing(generation, peers, ringLinks === "shared" ? ringSharedSlots : 0, area)
            return area === undefined ? undefined : (round: number) => SharedAllReduce.commit(area.buffer, round)
          }
        }))
      case "process":
        return Effect.map(ChildProcess.host({ onOutput }), (h): Host => ({
          transport: h.transport,
          spawn: (o) => h.spawn(heapLimitMb === undefined ? o : { ...o, heapLimitMb }),
          kill: (r) => h.kill(r)
        }))
      case "websocket":
        return WebSocketRanks.host({ ...serverOptions(), onOutput }).pipe(
          Effect.catch(bindFailed),
          Effect.map((h): Host => {
            server = h.server
            return {
              transport: h.transport,
              spawn: (o) => h.spawn(heapLimitMb === undefined ? o : { ...o, heapLimitMb }),
              kill: (r) => h.kill(r)
            }
          })
        )
    }
  }

  const program = Effect.gen(function*() {
    // Long because it is still one closure over the run's state: splitting it into named steps is pending.
    startedMs = yield* Clock.currentTimeMillis
    const host = yield* makeHost()
    const entry = served === undefined ? yield* Effect.promise(() => rankEntry(transportKind, trainerUrl)) : ""
    emit({
      type: "started",
      ms: 0,
      runId,
      runDir,
      worldSize,
      epochs,
      epochSamples: module.trainSamples,
      mode,
      transport: served === undefined ? transportKind : "serve",
      options: loggedOptions(served === undefined ? options : { ...options, transport: "serve" }, {
        worldSize, epochs, mode, backend, transport: served === undefined ? transportKind : "serve", batchSize, heartbeatTimeoutMs, interruptGraceMs, runId,
        ...(served === undefined ? { rankNice, rankMemoryMb } : { host: served.host, port: served.port, formationTimeoutMs: served.formationTimeoutMs, tls: served.tls !== undefined, issueTokens: served.issueTokens }),
        // What a resume needs to continue it: the model's seed, the averaging cadence, and
        // which trainer (its absolute URL and the file's SHA-256). The resume state is not logged.
        seed: options.seed ?? defaults.seed,
        averageEverySteps: options.averageEverySteps ?? defaults.averageEverySteps,
        trainerUrl,
        trainerSha256: trainerDigest,
        resumeState: undefined
      }),
      ...(resumed === undefined ? {} : { resumed })
    })
    if (server !== undefined) {
      // A served run's own header (the URL and the join command) comes before the event's line.
      if (served !== undefined) {
        const issued = yield* Effect.promise(() => issueCredentials(runToken, runId, runDir, served.issueTokens, served.tokenTtlMs))
        observeListening({ url: server.url, host: server.host, port: server.port, runToken, tokenFile, runId, runDir, fingerprint256, credentials: issued })
        // Revocations while the run goes on (`cohort revoke`): the holder is closed with its own code.
        yield* Effect.promise(() => Revocations.read(runDir)).pipe(
          Effect.flatMap((all) => Effect.sync(() => {
            for (const revocation of credentials.fresh(all)) {
              const { rank, credential } = credentials.revoke(revocation)
              emit({ type: "revoked", ms: sinceStart(Date.now()), ...(rank === undefined ? {} : { rank }), ...(credential === undefined ? {} : { credential }) })
              if (rank !== undefined) host.transport.disconnect(rank, Transport.CloseCode.CredentialRevoked)
            }
          })),
          Effect.repeat(Schedule.spaced(Revocations.revocationPollMs)),
          Effect.forkScoped
        )
      }
      emit({ type: "listening", ms: sinceStart(Date.now()), url: server.url })
    }
    for (let rank = 0; served === undefined && rank < worldSize; rank++) {
      const hang = hangs.find((h) => h.rank === rank)
      const flood = floods.find((f) => f.rank === rank)
      const collectiveFault = collectiveFaults.find((f) => f.rank === rank)
      const data: RankActor.RankData = {
        backend,
        ringLinks: ringLinks === "relay" ? "relay" : "port",
        collectiveFault: collectiveFault === undefined ? undefined : { round: collectiveFault.round, step: collectiveFault.step, fault: collectiveFault.fault },
        trainer: trainerUrl,
        worldSize,
        seed: options.seed ?? defaults.seed,
        batchSize,
        averageEverySteps: options.averageEverySteps ?? defaults.averageEverySteps,
        heartbeatIntervalMs: options.heartbeatIntervalMs ?? Math.min(defaults.heartbeatIntervalMs, heartbeatTimeoutMs / 4),
        progressIntervalMs: defaults.progressIntervalMs,
        hangAfterMs: hang === undefined ? undefined : hang.atSeconds * 1000,
        flood: flood === undefined ? undefined : { afterMs: flood.atSeconds * 1000, framesPerSecond: flood.framesPerSecond },
        heapCheckMb: heapLimitMb,
        saveDir: `${runDirAbsolute}/save`,
        checkpointDir: `${runDirAbsolute}/checkpoints`,
        // Worker threads die with this process; only a rank process can outlive the coordinator.
        coordinatorTimeoutMs: transportKind === "worker" ? 0 : options.coordinatorTimeoutMs ?? RankActor.coordinatorTimeoutMsDefault
      }
      const spawnData = server === undefined ? data : { ...data, url: server.url, runToken, ...(fingerprint256 === undefined ? {} : { fingerprint256 }) }
      yield* host.spawn({ entry, rank, data: spawnData, nice: rankNice }).pipe(Effect.orDie)
    }
    const resumeState = options.resumeState
    const coordinator = yield* Coordinator.start({
      state,
      transport: host.transport,
      tickMs: options.tickMs ?? defaults.tickMs,
      formationTimeoutMs: served?.formationTimeoutMs ?? defaults.formationTimeoutMs,
      hooks,
      ...(backend === "ring" && host.formRingLinks !== undefined ? { formRingLinks: host.formRingLinks } : {}),
      ...(resumeState === undefined ? {} : {
        resume: {
          point: { epoch: resumeState.epoch, firstRound: resumeState.firstRound, committed: resumeState.committed },
          params: resumeState.params
        }
      })
    })
    // An interrupt (or an immediate stop) asks the core to end the run; it decides.
    const stopSignal = options.stopSignal
    const interruptSignal = options.signal
    const detailOf = (signal: AbortSignal): string =>
      typeof signal.reason === "string" && /^SIG[A-Z]+$/.test(signal.reason) ? signal.reason : "aborted"
    for (const signal of [interruptSignal, stopSignal, storageStop.signal]) {
      if (signal === undefined) continue
      yield* aborted(signal).pipe(
        Effect.flatMap(() => {
          if (signal === storageStop.signal && storageFault !== undefined) return coordinator.interrupt(StorageFault.text(storageFault))
          if (interruptedBy === undefined) interruptedBy = detailOf(signal)
          return coordinator.interrupt(`interrupted by ${interruptedBy}`)
        }),
        Effect.forkScoped
      )
    }

    // The coordinator process's own shortages, never a rank's fault: what others saw (the
    // dashboard's listener at its cap), and its file descriptors, probed once a second (worker
    // ranks share them: out of them, their saves fail for a reason that is not theirs).
    const coordinatorAlerts = options.coordinatorAlerts
    if (coordinatorAlerts !== undefined) {
      yield* Effect.suspend(() => Effect.forEach(coordinatorAlerts.drain(), coordinator.resource, { discard: true })).pipe(
        Effect.repeat(Schedule.spaced(250)),
        Effect.forkScoped
      )
    }
    if (transportKind === "websocket") {
      yield* Effect.suspend(() => Effect.forEach(rankListener.drain(Date.now()), coordinator.resource, { discard: true })).pipe(
        Effect.repeat(Schedule.spaced(250)),
        Effect.forkScoped
      )
    }
    yield* Effect.promise(() => Files.descriptorShortage(runDirAbsolute)).pipe(
      Effect.flatMap((shortage) =>
        shortage === undefined ? Effect.void : coordinator.resource(
          `the coordinator's process is out of file descriptors (${shortage.message}): files it and its worker ranks open fail (checkpoints, logs) until some close; raise its limit (ulimit -n) or lower what holds them (--dashboard-connections-max)`
        )
      ),
      Effect.repeat(Schedule.spaced(1000)),
      Effect.forkScoped
    )

    const helloTimeoutMs = served?.formationTimeoutMs ?? defaults.formationTimeoutMs
    const silentJoiners = Effect.sync(() => {
      const now = Date.now()
      for (const [rank, atMs] of awaitingHello) {
        if (Core.isVacant(state, rank) && now - atMs <= helloTimeoutMs) continue
        awaitingHello.delete(rank)
        // A rank now, or a link that already ended (turned away, or left): nothing to close.
        if (!Core.isVacant(state, rank) || server?.connected(rank) !== true) continue
        host.transport.disconnect(rank, Transport.CloseCode.JoinTimeout)
        refusedLate(rank, Transport.CloseCode.JoinTimeout, `rank ${rank} sent no Hello within ${helloTimeoutMs} ms of its join`)
      }
    })
    yield* silentJoiners.pipe(Effect.repeat(Schedule.spaced(Math.min(1000, helloTimeoutMs))), Effect.forkScoped)

    // Fault injection, timed from the moment training started (every rank joined): kills by time
    // or by progress into an epoch; hangs by time (the rank hangs itself, this only records it).
    const skip = (skipped: SkippedFault, now: number): void => {
      skippedFaults.push(skipped)
      emit({ type: "fault-skipped", ms: sinceStart(now), skipped })
    }
    const pendingKills = new Set<KillSpec>(kills)
    const pendingHangs = new Set(hangs)
    let trainingSinceMs: number | undefined
    const faults = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (!state.started) return
      trainingSinceMs ??= now
      // A kill asked for now is due now: `atSeconds` measured from training's start.
      for (const rank of options.killRequests?.drain() ?? []) pendingKills.add({ rank, atSeconds: (now - trainingSinceMs) / 1000 })
      for (const kill of pendingKills) {
        const due = "atSeconds" in kill
          ? now - trainingSinceMs >= kill.atSeconds * 1000
          : state.phase === "running" && (state.epoch > kill.atEpoch || (state.epoch === kill.atEpoch &&
            [...trainedInEpoch.values()].reduce((a, b) => a + b, 0) >= kill.atFraction * module.trainSamples))
        if (!due) continue
        pendingKills.delete(kill)
        if (!Core.isLive(state, kill.rank)) {
          skip({ rank: kill.rank, fault: "kill", spec: kill, reason: `rank ${kill.rank} had already left` }, now)
          continue
        }
        faultAt.set(kill.rank, yield* Clock.currentTimeMillis)
        emit({ type: "fault", ms: sinceStart(now), rank: kill.rank, fault: "kill" })
        yield* host.kill(kill.rank)
      }
      for (const hang of pendingHangs) {
        if (now - trainingSinceMs < hang.atSeconds * 1000) continue
        pendingHangs.delete(hang)
        if (!Core.isLive(state, hang.rank)) {
          skip({ rank: hang.rank, fault: "hang", spec: hang, reason: `rank ${hang.rank} had already left` }, now)
          continue
        }
        faultAt.set(hang.rank, trainingSinceMs + hang.atSeconds * 1000)
        emit({ type: "fault", ms: sinceStart(now), rank: hang.rank, fault: "hang" })
      }
    })
    yield* faults.pipe(Effect.repeat(Schedule.spaced(5)), Effect.forkScoped)

    relayStats = coordinator.relayStats
    const outcome = yield* Deferred.await(coordinator.outcome).pipe(
      Effect.catch((error) => Effect.die(new LaunchError("formation", error.message)))
    )
    // Faults still waiting when the run ended never happened: say so. The demo's own kill, which
    // nobody asked for, is no news when the user interrupted the run before it came.
    const endedMs = yield* Clock.currentTimeMillis
    const trained = trainingSinceMs === undefined ? "before training started" : `after ${((endedMs - trainingSinceMs) / 1000).toFixed(1)} s of training`
    for (const kill of pendingKills) {
      if ("plan" in kill && kill.plan === "demo" && outcome.status === "interrupted") continue
      skip({ rank: kill.rank, fault: "kill", spec: kill, reason: `the run ended ${trained}` }, endedMs)
    }
    for (const hang of pendingHangs) skip({ rank: hang.rank, fault: "hang", spec: hang, reason: `the run ended ${trained}` }, endedMs)
    // Dead ranks still connected (hung) are stopped now; the survivors get a grace period to save
    // and exit, and whoever is still there after it is stopped with the scope. The wait also lets
    // the coordinator declare every end its supervisor saw (a survivor that crashed while saving),
    // so that the ledger is complete before the coordinator stops.
    for (const rank of yield* host.transport.peers) if (Core.isDead(state, rank)) yield* host.kill(rank)
    // A joiner let in whose Hello never came is no rank of the run: nothing to wait for.
    const notJoined = outcome.status === "completed" ? Transport.CloseCode.JoinRunOver : Transport.CloseCode.JoinShuttingDown
    for (const rank of yield* host.transport.peers) if (Core.isVacant(state, rank)) host.transport.disconnect(rank, notJoined)
    // An interrupted run that never formed has nothing to save; a second signal stops at once.
    const graceMs = outcome.status !== "interrupted" ? defaults.exitGraceMs : state.started ? interruptGraceMs : 0
    const deadline = (yield* Clock.currentTimeMillis) + graceMs
    while (
      ((yield* host.transport.peers).length > 0 || Core.activeCount(state) > 0) && (yield* Clock.currentTimeMillis) < deadline &&
      stopSignal?.aborted !== true
    ) {
      yield* Effect.sleep(20)
    }
    return outcome
  })

  let finalRefusals: Record<string, number> | undefined
  let relayStats: () => { readonly relayed: number; readonly dropped: number } = () => ({ relayed: 0, dropped: 0 })
  // While the run trains, its folder holds `run.lock` with this process's id: `cohort resume`
  // refuses a run that is still running (a stale lock, of a process that is gone, is no bar).
  const runLock = await LockFile.acquire(`${runDir}/${runLockFileName}`, Date.now())
  const exit = await Effect.runPromiseExit(Effect.scoped(Effect.gen(function*() {
    const outcome = yield* program
    if (server !== undefined) {
      finalRefusals = { ...(yield* server.refusals) }
      for (const [code, count] of Object.entries(lateRefusals)) finalRefusals[code] = (finalRefusals[code] ?? 0) + count
    }
    return outcome
  }))).finally(() => (runLock._tag === "Acquired" ? runLock.release() : undefined))
  releaseHeld()
  epochModels.releaseAll("the run ended before a ring member handed it over")
  // Every rank has ended with the scope, so every line it printed was forwarded.
  await closeRankLogs()
  if (exit._tag === "Failure") {
    const error = Cause.squash(exit.cause)
    const failure = error instanceof LaunchError ? error : new LaunchError("run", error instanceof Error ? error.message : String(error))
    // The journal's last line says the run failed (a formation timeout, a rank that left before
    // formation, a listen or spawn that failed), so that report and resume need not guess.
    emit({ type: "failed", ms: sinceStart(Date.now()), stage: failure.option, reason: failure.reason, formed: state.started })
    await journal.close()
    throw failure
  }
  // The result: logged (`ended`) and written to `summary.json` (`launcher-result.ts`).
  return LauncherResult.finish({
    outcome: exit.value,
    state,
    runId,
    runDir,
    runDirAbsolute,
    resumed,
    served: served !== undefined,
    askedToSave,
    interruptedBy,
    timings,
    leaves: leaveCosts,
    record,
    skippedFaults,
    alerts,
    refusals: finalRefusals,
    startedMs,
    transport: served === undefined ? transportKind : "serve",
    backend,
    ringLinks: ringLinksUsed,
    relayStats,
    journal,
    sinceStart,
    storageFault: () => storageFault,
    storageFailed: (path, error) => storageFailed(StorageFault.of(path, error), false)
  })
}
