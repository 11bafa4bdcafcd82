/**
 * The launcher: starts the coordinator and `worldSize` ranks (worker threads or child processes),
 * supervises them, feeds their ends to the coordinator as death reports, injects the faults it was
 * asked for, and writes the run under `<outDir>/<runId>/`: the journal `events.ndjson`, streamed
 * as events happen and synced to disk at every death, epoch end and the run's end; `summary.json`,
 * written atomically at the end; and what each rank printed under
 * `ranks/rank<N>.log`. An interrupt (`RunOptions.signal`) asks the core to stop the run; the
 * survivors save under `save/rank<r>/` within `interruptGraceMs`.
 *
 * `launch` is a sequence of named steps over one context (`launcher-context.ts`: the options
 * resolved, the core's state, the run's folder and what the steps share). Beside it: the
 * coordinator's hooks that write the journal (`launcher-hooks.ts`), where the ranks run
 * (`launcher-hosts.ts`), fault injection (`launcher-faults.ts`), the journal's writing and
 * ordering (`launcher-journal.ts`), what it watches while the run trains (`launcher-watch.ts`), and
 * the result and `summary.json` (`launcher-result.ts`).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { nanoid } from "nanoid"
import * as Core from "../../src/core/coordinator.ts"
// Picked here, not in the ring links module: the browser rank bundles that one, and node:net with it.
import * as FreePorts from "../../src/platform/free-ports.ts"
import * as LockFile from "../../src/platform/lock-file.ts"
import * as Select from "../../src/platform/select.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as Coordinator from "../coordinator/coordinator.ts"
import * as LaunchContext from "./launcher-context.ts"
import type { Context, Served } from "./launcher-context.ts"
import * as LauncherFaults from "./launcher-faults.ts"
import * as LauncherHooks from "./launcher-hooks.ts"
import * as ChurnFaults from "./churn-faults.ts"
import * as LauncherHosts from "./launcher-hosts.ts"
import type { Host } from "./launcher-hosts.ts"
import { loggedOptions } from "./launcher-journal.ts"
import * as LauncherResult from "./launcher-result.ts"
import * as LauncherWatch from "./launcher-watch.ts"
import { check, checkTls, defaults, LaunchError, runLockFileName, serveDefaults, socketPathBytesMax } from "./launch-options.ts"
import * as RankActor from "../rank/rank.ts"
import * as Recover from "./recover.ts"
import * as Resume from "./resume.ts"
import type { Resumed, ResumeOptions, RunOptions, RunResult, ServeOptions } from "../record/run-types.ts"
import * as StorageFault from "./storage-fault.ts"

export { defaults, LaunchError, loadTrainer, runLockFileName, serveDefaults } from "./launch-options.ts"
export { newRunToken } from "./launcher-context.ts"

/**
 * Runs a training run to its end and returns its result; the journal (`events.ndjson`, streamed)
 * and summary are written under `<outDir>/<runId>/`. Rejects with `LaunchError` for bad options or
 * a bad trainer; a run that ends unrecoverable resolves normally with `exitCode` 1, and one
 * interrupted through `options.signal` with outcome `interrupted` and `exitCode` 130 (143 when the
 * signal's reason is `"SIGTERM"`).
 *
 * With `resume: dir` (`ResumeOptions`) it continues the run in `dir` instead: see
 * `actors/launcher/resume.ts` for how the state is picked and the `LaunchError`s (option `resume`) it
 * rejects with; the parent's directory is left as it was (a lock file `resume.lock` lives there
 * while the resume runs).
 *
 * @since 0.1.0
 * @category launcher
 */
export const run = async (options: RunOptions | ResumeOptions): Promise<RunResult> =>
  "resume" in options && options.resume !== undefined
    ? Resume.resume(options, (fresh, resumed, onFormed) => launch(fresh, undefined, resumed, onFormed))
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
  check(
    Number.isSafeInteger(formationTimeoutMs) && formationTimeoutMs > 0,
    "formationTimeoutMs",
    `must be an integer > 0, got ${formationTimeoutMs}`
  )
  if (options.runToken !== undefined) {
    check(
      options.runToken.length >= WebSocket.runTokenLengthMin,
      "runToken",
      `must be at least ${WebSocket.runTokenLengthMin} characters, got ${options.runToken.length}`
    )
  }
  checkTls(options.tls)
  const issueTokens = options.issueTokens ?? 0
  check(Number.isSafeInteger(issueTokens) && issueTokens >= 0, "issueTokens", `must be an integer >= 0, got ${issueTokens}`)
  if (options.tokenTtlMs !== undefined) {
    check(
      Number.isSafeInteger(options.tokenTtlMs) && options.tokenTtlMs > 0,
      "tokenTtlMs",
      `must be an integer > 0, got ${options.tokenTtlMs}`
    )
  }
  const churn = options.churn ?? 0
  check(churn === 0 || (churn > 0 && churn < 1), "churn", `must be a fraction in (0, 1), got ${churn}`)
  const heapGrowthPercent = options.heapGrowthPercent ?? serveDefaults.heapGrowthPercent
  check(
    Number.isSafeInteger(heapGrowthPercent) && heapGrowthPercent >= 0 && heapGrowthPercent <= 1000,
    "heapGrowthPercent",
    `must be an integer in [0, 1000], got ${heapGrowthPercent}`
  )
  const {
    host,
    port,
    runToken,
    formationTimeoutMs: _,
    onListening,
    http,
    tls,
    issueTokens: __,
    tokenTtlMs,
    churn: ___,
    heapGrowthPercent: ____,
    recovery,
    ...rest
  } = options
  return launch(
    { ...rest, transport: "websocket" },
    {
      host: host ?? serveDefaults.host,
      port: port ?? serveDefaults.port,
      runToken,
      formationTimeoutMs,
      onListening,
      http,
      tls,
      issueTokens,
      tokenTtlMs,
      churn,
      heapGrowthPercent,
      recovery
    }
  )
}

/**
 * Takes a served run over after its coordinator's process was lost (`cohort serve --recover`,
 * docs/recovery.md): see `actors/launcher/recover.ts` for what it reads and the `LaunchError`s
 * (option `recover`) it rejects with. The run goes on in its own directory; the result is the
 * recovered process's (its epochs are the ones it audited).
 *
 * @since 0.1.0
 * @category launcher
 */
export const recover = (options: Recover.RecoverOptions): Promise<RunResult> => Recover.recover(options, serve)

export { findLost, recoveryWindowMsDefault } from "./recover.ts"

/**
 * The journal's first events: `started` (with the options a resume needs), and where a served run
 * listens (its credentials issued, and revocations watched while the run goes on).
 */
const announce = (ctx: Context, host: Host): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { options, served, resumed, runId, runDir, module, emit, trainerUrl, trainerDigest, runToken, tokenFile, vars } = ctx
    const { worldSize, epochs, mode, transportKind, backend, batchSize, heartbeatTimeoutMs, interruptGraceMs, rankNice, rankMemoryMb } =
      ctx.resolved
    if (served?.recovery !== undefined) Recover.announce(ctx, served.recovery)
    else
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
          worldSize,
          epochs,
          mode,
          backend,
          transport: served === undefined ? transportKind : "serve",
          batchSize,
          heartbeatTimeoutMs,
          interruptGraceMs,
          runId,
          ...(served === undefined
            ? { rankNice, rankMemoryMb }
            : {
                host: served.host,
                port: served.port,
                formationTimeoutMs: served.formationTimeoutMs,
                tls: served.tls !== undefined,
                issueTokens: served.issueTokens
              }),
          // What a resume needs to continue it: the model's seed, the averaging cadence, and
          // which trainer (its absolute URL and the file's SHA-256). The resume state is not logged.
          seed: options.seed ?? defaults.seed,
          averageEverySteps: options.averageEverySteps ?? defaults.averageEverySteps,
          compress: ctx.resolved.compress,
          deltas: ctx.resolved.deltas,
          outerLr: ctx.resolved.outer.lr,
          outerMomentum: ctx.resolved.outer.momentum,
          trainerUrl,
          trainerSha256: trainerDigest,
          resumeState: undefined
        }),
        ...(resumed === undefined ? {} : { resumed })
      })
    const server = vars.server
    if (server !== undefined) {
      // A served run's own header (the URL and the join command) comes before the event's line.
      if (served !== undefined) {
        const issued = yield* Effect.promise(() =>
          LauncherHosts.issueCredentials(runToken, runId, runDir, served.issueTokens, served.tokenTtlMs)
        )
        LauncherHosts.observeListening(ctx, {
          url: server.url,
          host: server.host,
          port: server.port,
          runToken,
          tokenFile,
          runId,
          runDir,
          fingerprint256: ctx.fingerprint256,
          credentials: issued
        })
        yield* LauncherWatch.watchRevocations(ctx, host)
      }
      emit({ type: "listening", ms: ctx.sinceStart(ctx.nowMs()), url: server.url })
    }
  })

/**
 * The direct ring links of child-process ranks (`RunOptions.ringLinks` `direct`): a listener for
 * each rank and a secret of the run that a neighbour's link must present. The ranks share this
 * machine, so each listens on a Unix socket (`ringSocketPath`) in a private folder of the run's
 * own in memory (`FreePorts.socketFolder`: `/dev/shm` where it can, else the system's temporary
 * folder), removed with the run and the ranks' area files in it (`folder`, `FileAllReduce`): the
 * same stream as over TCP
 * without TCP's own work in the kernel, a third of a step's system time on loopback
 * (docs/benchmarks.md). Where no such folder can be made or a path does not fit, a port on loopback
 * instead; a port the system cannot hand out leaves every rank without one (its steps take the
 * relay). A folder asked for (`RunOptions.ringAreaFolder`) in which none can be made is a
 * `LaunchError` instead.
 */
const peerAddresses = (
  worldSize: number,
  root: string | undefined
): Effect.Effect<PeerAddresses & { readonly folder?: string }, never, Scope.Scope> =>
  Effect.gen(function* () {
    const folder = yield* Effect.acquireRelease(
      Effect.promise(() => (root === undefined ? FreePorts.socketFolder() : FreePorts.socketFolderIn(root))),
      (made) => (made === undefined ? Effect.void : Effect.promise(() => FreePorts.removeSocketFolder(made)))
    )
    if (root !== undefined && folder === undefined)
      return yield* Effect.die(
        new LaunchError("ringAreaFolder", `cannot make the run's folder in ${root} (it must be a folder this user may write in)`)
      )
    const paths = Array.from({ length: worldSize }, (_, rank) => (folder === undefined ? undefined : ringSocketPath(folder, rank)))
    if (paths.every((path) => path !== undefined))
      return { token: nanoid(32), urls: paths.map((path) => `unix:${path}`), host: peerHost, ports: paths.map(() => 0), folder: folder! }
    const ports = yield* Effect.promise(() => FreePorts.freePorts(peerHost, worldSize).catch(() => [] as ReadonlyArray<number>))
    return {
      token: nanoid(32),
      urls: Array.from({ length: worldSize }, (_, rank) => (ports[rank] === undefined ? undefined : `tcp://${peerHost}:${ports[rank]}`)),
      host: peerHost,
      ports
    }
  })
interface PeerAddresses {
  readonly token: string
  readonly urls: ReadonlyArray<string | undefined>
  readonly host: string
  readonly ports: ReadonlyArray<number>
}
const peerHost = "127.0.0.1"

/**
 * Where rank `rank` listens for its ring links when its sockets are in `folder`:
 * `ring-<rank>.sock` in it; `undefined` when the folder is not a POSIX path or the path would be
 * too long for a socket.
 *
 * @since 0.1.0
 */
export const ringSocketPath = (folder: string, rank: number): string | undefined => {
  const path = `${folder.replace(/\/+$/, "")}/ring-${rank}.sock`
  return path.startsWith("/") && new TextEncoder().encode(path).length <= socketPathBytesMax ? path : undefined
}

/** Starts the ranks this process runs (none when the run is served: they join from elsewhere). */
const spawnRanks = (ctx: Context, host: Host, entry: string): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { options, served, trainerUrl, runDirAbsolute, runToken, vars } = ctx
    const {
      worldSize,
      hangs,
      floods,
      collectiveFaults,
      backend,
      ringLinks,
      batchSize,
      heartbeatTimeoutMs,
      heapLimitMb,
      transportKind,
      rankNice,
      compress,
      deltas,
      ringAreaMemoryMb,
      ringAreaFolder
    } = ctx.resolved
    const peers =
      backend === "ring" && ringLinks === "direct" && served === undefined ? yield* peerAddresses(worldSize, ringAreaFolder) : undefined
    // The ranks' all-reduce area files live beside their sockets, in memory (`FileAllReduce`).
    const areaFolder = peers?.folder !== undefined && ringAreaMemoryMb > 0 && compress === "none" ? peers.folder : undefined
    ctx.vars.ringAreaFolder = areaFolder
    for (let rank = 0; served === undefined && rank < worldSize; rank++) {
      const hang = hangs.find((h) => h.rank === rank)
      const flood = floods.find((f) => f.rank === rank)
      const collectiveFault = collectiveFaults.find((f) => f.rank === rank)
      const data: RankActor.RankData = {
        backend,
        ...(compress === "none" ? {} : { compress }),
        ...(deltas ? { deltas } : {}),
        ringLinks: ringLinks === "relay" ? "relay" : ringLinks === "direct" ? "direct" : "port",
        ...(peers === undefined ? {} : { peerLinks: { token: peers.token, urls: peers.urls, host: peers.host, port: peers.ports[rank]! } }),
        ...(areaFolder === undefined ? {} : { ringAreaFolder: areaFolder, ringAreaBytesMax: ringAreaMemoryMb * 2 ** 20 }),
        collectiveFault:
          collectiveFault === undefined
            ? undefined
            : { round: collectiveFault.round, step: collectiveFault.step, fault: collectiveFault.fault },
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
        coordinatorTimeoutMs: transportKind === "worker" ? 0 : (options.coordinatorTimeoutMs ?? RankActor.coordinatorTimeoutMsDefault),
        ...(ctx.state.config.beatsDuringCalls || (vars.server !== undefined && LauncherHosts.beatLinks(ctx))
          ? { callBeatsMs: { save: ctx.state.config.saveTimeoutMs, eval: ctx.state.config.evalTimeoutMs } }
          : {})
      }
      const spawnData =
        vars.server === undefined
          ? data
          : { ...data, url: vars.server.url, runToken, ...(ctx.fingerprint256 === undefined ? {} : { fingerprint256: ctx.fingerprint256 }) }
      yield* host.spawn({ entry, rank, data: spawnData, nice: rankNice }).pipe(Effect.orDie)
    }
  })

/** Starts the coordinator actor over the host's transport, resuming from the parent's state if given. */
const startCoordinator = (ctx: Context, host: Host): Effect.Effect<Coordinator.Handle, never, Scope.Scope> => {
  const { options, served, state } = ctx
  const resumeState = options.resumeState
  const hooks = LauncherHooks.hooks(ctx, served === undefined ? (rank) => void Effect.runFork(host.kill(rank)) : undefined)
  const log = served === undefined ? undefined : Recover.openLog(ctx)
  if (served !== undefined && served.churn > 0) ctx.vars.churn = ChurnFaults.make(ctx, served.churn, options.seed ?? defaults.seed)
  return Coordinator.start({
    ...(ctx.vars.churn === undefined ? {} : { muted: ctx.vars.churn.muted }),
    state,
    transport: host.transport,
    tickMs: options.tickMs ?? defaults.tickMs,
    formationTimeoutMs: served?.formationTimeoutMs ?? defaults.formationTimeoutMs,
    // Ranks that join from elsewhere may leave before the run formed and others take their index.
    ...(served === undefined
      ? {}
      : {
          vacate: (rank: number, reason: string) => {
            ctx.vars.server?.vacate(rank)
            ctx.emit({ type: "left", ms: ctx.sinceStart(Date.now()), rank, reason })
          }
        }),
    // A served run's ranks run elsewhere: the hooks close their sockets instead. Its rounds
    // go to the recovery log before they go out (`recovery-log.ts`).
    // An epoch's end too, before the next epoch's frames: its audit line waits for its model.
    hooks:
      log === undefined
        ? hooks
        : {
            ...hooks,
            beforeRound: log.beforeRound,
            beforeRing: log.ring,
            onCommand: (command, commandState) => {
              if (command._tag === "EpochEnded") log.closed(command.summary)
              hooks.onCommand?.(command, commandState)
            }
          },
    ...(served?.recovery === undefined ? {} : { recovery: Recover.coordinatorRecovery(served.recovery) }),
    compress: ctx.resolved.compress,
    outer: ctx.resolved.outer,
    deltas: ctx.resolved.deltas,
    ...(resumeState?.outerMomentum === undefined ? {} : { outerMomentum: resumeState.outerMomentum }),
    ...(ctx.resolved.backend === "ring" && ctx.resolved.ringLinks !== "relay" && host.formRingLinks !== undefined
      ? { formRingLinks: host.formRingLinks }
      : {}),
    // Child processes given their neighbours' sockets (`spawnRanks`' peerLinks).
    ringPeerLinks: ctx.resolved.backend === "ring" && ctx.resolved.ringLinks === "direct" && ctx.served === undefined,
    ...(resumeState === undefined
      ? {}
      : {
          resume: {
            point: {
              epoch: resumeState.epoch,
              firstRound: resumeState.firstRound,
              committed: resumeState.committed,
              ...(served?.recovery?.generation === undefined ? {} : { generation: served.recovery.generation })
            },
            params: resumeState.params
          }
        })
  })
}

/**
 * Once the run ended: dead ranks still connected (hung) are stopped, now and as they are
 * declared; the survivors get a grace period to save and exit, and whoever is still there after
 * it is stopped with the scope.
 * The wait also lets the coordinator declare every end its supervisor saw (a survivor that crashed
 * while saving), so that the ledger is complete before the coordinator stops.
 */
const drainRanks = (ctx: Context, host: Host, outcome: Core.Outcome): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { state, options } = ctx
    // Dead ranks still connected (hung) are stopped, also those declared during the wait (a rank
    // silent at the run's end, declared at its heartbeat timeout): else its open socket held the
    // wait for the whole grace period.
    const killed = new Set<number>()
    const killDead = Effect.gen(function* () {
      for (const rank of yield* host.transport.peers) {
        if (!Core.isDead(state, rank) || killed.has(rank)) continue
        killed.add(rank)
        yield* host.kill(rank)
      }
    })
    yield* killDead
    // A joiner let in whose Hello never came is no rank of the run: nothing to wait for.
    const notJoined = outcome.status === "completed" ? Transport.CloseCode.JoinRunOver : Transport.CloseCode.JoinShuttingDown
    for (const rank of yield* host.transport.peers) if (Core.isVacant(state, rank)) host.transport.disconnect(rank, notJoined)
    // An interrupted run that never formed has nothing to save; a second signal stops at once.
    const graceMs = outcome.status !== "interrupted" ? defaults.exitGraceMs : state.started ? ctx.resolved.interruptGraceMs : 0
    const deadline = (yield* Clock.currentTimeMillis) + graceMs
    while (
      ((yield* host.transport.peers).length > 0 || Core.activeCount(state) > 0) &&
      (yield* Clock.currentTimeMillis) < deadline &&
      options.stopSignal?.aborted !== true
    ) {
      yield* Effect.sleep(20)
      yield* killDead
    }
  })

/** The run, from its host's start to its ranks' end: resolves with the core's outcome. */
const program = (ctx: Context): Effect.Effect<Core.Outcome, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { served, trainerUrl, vars } = ctx
    vars.clock = yield* Clock.Clock
    vars.startedMs = served?.recovery?.originMs ?? (yield* Clock.currentTimeMillis)
    const host = yield* LauncherHosts.makeHost(ctx)
    const entry = served === undefined ? yield* Effect.promise(() => LauncherHosts.rankEntry(ctx.resolved.transportKind, trainerUrl)) : ""
    yield* announce(ctx, host)
    yield* spawnRanks(ctx, host, entry)
    const coordinator = yield* startCoordinator(ctx, host)
    yield* LauncherWatch.watchSignals(ctx, coordinator)
    yield* LauncherWatch.watchResources(ctx, coordinator)
    yield* LauncherWatch.closeSilentJoiners(ctx, host)
    const pending = yield* LauncherFaults.inject(ctx, host)
    vars.relayStats = coordinator.relayStats
    const outcome = yield* Deferred.await(coordinator.outcome).pipe(
      Effect.catch((error) => Effect.die(new LaunchError("formation", error.message)))
    )
    yield* LauncherFaults.skipPending(ctx, pending, outcome)
    yield* drainRanks(ctx, host, outcome)
    return outcome
  })

/**
 * `run` for a fresh run, a served one (`served`: where it listens), or a resumed one (`resumed`: its
 * parent, recorded in `started` and the result; `onFormed`: marks the parent resumed).
 */
const launch = async (
  options: RunOptions,
  served: Served | undefined,
  resumed?: Resumed,
  onFormed?: Resume.OnFormed
): Promise<RunResult> => {
  const ctx = await LaunchContext.prepare(options, served, resumed, onFormed)
  // Process-wide, so only once every option passed: a refused serve changes nothing.
  if (served !== undefined) Select.setHeapGrowthPercent(served.heapGrowthPercent)
  const { state, runDir, journal, epochModels, vars } = ctx
  let finalRefusals: Record<string, number> | undefined
  // While the run trains, its folder holds `run.lock` with this process's id: `cohort resume`
  // refuses a run that is still running (a stale lock, of a process that is gone, is no bar).
  // The lock's stamp is wall-clock time: another process reads it.
  const runLock = await LockFile.acquire(`${runDir}/${runLockFileName}`, Date.now())
  const exit = await Effect.runPromiseExit(
    Effect.scoped(
      Effect.gen(function* () {
        const outcome = yield* program(ctx)
        if (vars.server !== undefined) {
          finalRefusals = { ...(yield* vars.server.refusals) }
          for (const [code, count] of Object.entries(ctx.lateRefusals)) finalRefusals[code] = (finalRefusals[code] ?? 0) + count
        }
        return outcome
      })
    )
  ).finally(() => (runLock._tag === "Acquired" ? runLock.release() : undefined))
  journal.releaseHeld()
  epochModels.releaseAll("the run ended before a ring member handed it over")
  // Every rank has ended with the scope, so every line it printed was forwarded.
  await ctx.closeRankLogs()
  if (exit._tag === "Failure") {
    const error = Cause.squash(exit.cause)
    const failure = error instanceof LaunchError ? error : new LaunchError("run", error instanceof Error ? error.message : String(error))
    // The journal's last line says the run failed (a formation timeout, a rank that left before
    // formation, a listen or spawn that failed), so that report and resume need not guess.
    ctx.emit({
      type: "failed",
      ms: ctx.sinceStart(ctx.nowMs()),
      stage: failure.option,
      reason: failure.reason,
      formed: state.started || served?.recovery !== undefined
    })
    await journal.close()
    throw failure
  }
  // The result: logged (`ended`) and written to `summary.json` (`launcher-result.ts`).
  return LauncherResult.finish({
    outcome: exit.value,
    state,
    runId: ctx.runId,
    runDir,
    runDirAbsolute: ctx.runDirAbsolute,
    resumed,
    served: served !== undefined,
    askedToSave: vars.askedToSave,
    interruptedBy: vars.interruptedBy,
    timings: ctx.timings,
    leaves: ctx.leaveCosts,
    joins: ctx.joinCosts,
    record: (death, recoveredMs, redistributed) => LauncherHooks.recordDeath(ctx, death, recoveredMs, redistributed),
    skippedFaults: ctx.skippedFaults,
    alerts: ctx.alerts,
    refusals: finalRefusals,
    startedMs: vars.startedMs,
    transport: served === undefined ? ctx.resolved.transportKind : "serve",
    backend: ctx.resolved.backend,
    ringLinks: vars.ringLinksUsed,
    relayStats: vars.relayStats,
    traffic: ctx.traffic.total(),
    journal,
    nowMs: ctx.nowMs,
    sinceStart: ctx.sinceStart,
    ...(served?.recovery === undefined
      ? {}
      : {
          recovered: {
            epochsBefore: served.recovery.epochsBefore,
            recoveries: [...served.recovery.recoveriesBefore, ...(vars.recovered === undefined ? [] : [vars.recovered])]
          }
        }),
    storageFault: () => vars.storageFault,
    storageFailed: (path, error) => ctx.storageFailed(StorageFault.of(path, error), false)
  })
}
