/**
 * `cohort serve --recover RUN_DIR` (docs/recovery.md): a restarted coordinator takes a served
 * run over in its own run directory, with the same token and address. It reads the journal (the
 * run's options, the epochs audited, the ranks declared dead) and the recovery log (the rounds
 * committed and the last round's model, `recovery-log.ts`), folds them into the run's point
 * (`Recovery.fold`), and serves the run again from there, as a resumed run whose ranks are the
 * ones still running: each comes back on its link (a recovered resume, `WebSocket` server option
 * `recovering`), says `Hello` again, and gets the last committed model and the rest of the epoch
 * re-planned over the ranks that returned. Ranks not back within the recovery window are
 * declared dead with the cause "did not return after the coordinator's restart".
 *
 * @since 0.1.0
 */
import * as Recovery from "../../src/core/recovery.ts"
import type { Rank } from "../../src/core/messages.ts"
import * as Files from "../../src/platform/files.ts"
import * as Hmac from "../../src/platform/hmac.ts"
import * as LockFile from "../../src/platform/lock-file.ts"
import * as SyncFiles from "../../src/platform/sync-files.ts"
import { parseJournal, readText, reportDefaults } from "../record/read-run.ts"
import type { Recovering, RunResult, ServeOptions } from "../record/run-types.ts"
import type { Context } from "./launcher-context.ts"
import { carriedRules, numberOf, type RuleName, type Rules } from "./carried-options.ts"
import { defaults, LaunchError, runLockFileName } from "./launch-options.ts"
import * as RecoveryLog from "./recovery-log.ts"
import * as StorageFault from "./storage-fault.ts"

/**
 * Default `RecoverOptions.recoveryWindowMs`: 60000 ms, the ranks' own default wait for their
 * coordinator (`cohort join --coordinator-reconnect-ms`).
 *
 * @since 0.1.0
 * @category recover
 */
export const recoveryWindowMsDefault = 60_000

/** The cause of a rank the recovered run did not get back. @since 0.1.0 @category recover */
export const didNotReturn = "did not return after the coordinator's restart"

/**
 * - `runDir`: the run's directory (`<outDir>/<runId>`), as the lost coordinator wrote it.
 * - `runToken`: the run's token; default the `token` file the run wrote (a run served with a
 *   given token needs it given again).
 * - `recoveryWindowMs` (integer ms > 0, default `recoveryWindowMsDefault`): how long the ranks
 *   have to come back.
 * - `host`, `port`: where to listen; default where the run listened.
 * - `given`, `onIgnored`: rules of a run (`carried-options.ts`) the caller was given; the takeover
 *   runs by the run's own (the ranks were told some of them at their join), and `onIgnored` gets
 *   each given one that differs from the run's, with the run's value (`undefined`: its default).
 * - The rest as `ServeOptions`.
 *
 * @since 0.1.0
 * @category recover
 */
export interface RecoverOptions
  extends Pick<ServeOptions, "signal" | "stopSignal" | "onEvent" | "onListening" | "onRankOutput" | "http" | "tls"> {
  readonly runDir: string
  readonly runToken?: string
  readonly recoveryWindowMs?: number
  readonly host?: string
  readonly port?: number
  readonly given?: Rules
  readonly onIgnored?: (ignored: ReadonlyArray<{ readonly name: RuleName; readonly given: unknown; readonly run: unknown }>) => void
}

const fail = (reason: string): never => {
  throw new LaunchError("recover", reason)
}

/**
 * What the journal says (`parseJournal`, as `cohort report` reads it): the run's `started` event,
 * the epochs audited, the ranks gone, whether it ended or formed, its last time, its takeovers,
 * and the first alert of a recovery log write that failed. A journal `parseJournal` refuses (a
 * whole line that is no run event, no `started` event) gives its error line.
 */
const readJournal = (text: string, source: string) => {
  const parsed = parseJournal(text, source)
  if (typeof parsed === "string") return parsed
  const { started, result, formed, recoveries } = parsed
  const entries: Array<Recovery.Entry> = [
    ...result.epochs.map((e): Recovery.Entry => ({ _tag: "Audited", epoch: e.epoch })),
    ...result.deaths.map((d): Recovery.Entry => ({ _tag: "Gone", rank: d.rank })),
    // A rank that left cleanly (`cohort leave`, `Exiting`) does not come back either.
    ...(result.leaves ?? []).flatMap((l): Array<Recovery.Entry> => (l.kind === "graceful" ? [{ _tag: "Gone", rank: l.rank }] : []))
  ]
  const logFault = result.alerts.find((a) => a.detail.includes(`/${RecoveryLog.dirName}/`))?.detail
  return {
    started,
    ended: result.outcome !== undefined,
    lastMs: result.durationMs,
    entries,
    epochsBefore: result.epochs,
    recoveries,
    formed,
    logFault,
    traffic: result.traffic
  }
}

/** What the log keeps of the run's token: a keyed hash that tells a wrong token, not the token. */
const tokenCheck = (token: string): string => Hmac.hmacSha256(token, "cohort recovery token check")

/**
 * The audit lines a run lost after its last epoch ended never wrote, appended to its journal from
 * its recovery log; their summaries. Throws what the append throws.
 */
const writeOwed = (
  runDir: string,
  lastMs: number,
  point: Recovery.Point,
  log: ReturnType<typeof RecoveryLog.read>
): ReadonlyArray<{ readonly epoch: number }> => {
  const owed = point.unaudited.flatMap((epoch) => {
    const found = log.closed.get(epoch)
    return found === undefined ? [] : [found.summary]
  })
  const ms = lastMs + Math.max(0, Date.now() - (SyncFiles.modifiedMs(`${runDir}/events.ndjson`) ?? Date.now()))
  for (const summary of owed) SyncFiles.append(`${runDir}/events.ndjson`, `${JSON.stringify({ type: "epoch", ms, summary })}\n`)
  return owed
}

/**
 * The port the journal's last `listening` event names (`ws://127.0.0.1:38923/`): a run served on
 * port 0 got a free one, which its ranks reconnect to.
 */
const listenedPortOf = (journalText: string): number | undefined => {
  let port: number | undefined
  for (const found of journalText.matchAll(/"type":"listening"[^\n]*?"url":"wss?:\/\/(?:\[[^\]]*\]|[^/:"]*):(\d+)/g))
    port = Number(found[1])
  return port
}

/**
 * A ring run's point as its takeover needs it: the round whose mean every returning rank must
 * hold (the last ring round the log holds committed, with its generation) and the generation its ring
 * forms in first, past every one the lost coordinator formed (a rank ignores an older `FormRing`).
 */
const ringPoint = (point: Recovery.Point): Pick<Recovering, "ringCommitted" | "generation"> => ({
  ...(point.ringCommitted === undefined ? {} : { ringCommitted: point.ringCommitted }),
  generation: point.generation + 1
})

/**
 * The epochs that ended without their audit line, from the log: their audit, and their model when
 * the log holds it (`cpu`). A ring's log holds no model: the epoch's is asked of a member
 * (`fromRanks`), which holds it while no ring round closed after it (none can before the lost
 * coordinator had it: `EpochModel.isOwed`).
 */
const owedAudits = (point: Recovery.Point, log: ReturnType<typeof RecoveryLog.read>, ring: boolean): Recovering["closed"] =>
  point.unaudited.flatMap((epoch) => {
    const found = log.closed.get(epoch)
    if (found === undefined) return []
    const params = ring ? undefined : log.model(found.round)
    const fromRanks = ring && found.round >= 0 && found.round === point.ringCommitted?.round
    return [{ summary: found.summary, model: params === undefined ? undefined : { round: found.round, params }, fromRanks }]
  })

/** Refuses a folder with no journal, most often the --out folder given instead of one of its runs: names those. */
const refuseNoJournal = (runDir: string): void => {
  if (SyncFiles.modifiedMs(`${runDir}/events.ndjson`) !== undefined) return
  const runs = SyncFiles.list(runDir).filter((name) => SyncFiles.modifiedMs(`${runDir}/${name}/events.ndjson`) !== undefined)
  const examples = runs.slice(0, 3).map((name) => `${runDir}/${name}`)
  fail(
    `${runDir} is not a run directory (it has no events.ndjson): give the run's own folder, <out>/<runId>${examples.length === 0 ? "" : `, e.g. ${examples.join(", ")}`}`
  )
}

/** The folder that holds `dir`, and its last name. */
const splitDir = (dir: string): { readonly outDir: string; readonly runId: string } => {
  const trimmed = dir.replace(/(.)\/+$/, "$1")
  const at = trimmed.lastIndexOf("/")
  return at < 0 ? { outDir: ".", runId: trimmed } : { outDir: at === 0 ? "/" : trimmed.slice(0, at), runId: trimmed.slice(at + 1) }
}

/**
 * Takes the run in `options.runDir` over through `serve` (the launcher's). Rejects with
 * `LaunchError` (option `recover`) before anything is written when the run is still running (its
 * lock's process is alive), ended, has no journal or no `started` event, has every epoch audited, has no recovery log (no `base` line) while its journal says it
 * formed or its log failed, or lacks the model of its last committed round (`cpu`); with option
 * `runToken` when no token is given or found.
 *
 * @since 0.1.0
 * @category recover
 */
export const recover = async (options: RecoverOptions, serve: (options: ServeOptions) => Promise<RunResult>): Promise<RunResult> => {
  const runDir = options.runDir.replace(/(.)\/+$/, "$1")
  const running = await LockFile.inspect(`${runDir}/${runLockFileName}`)
  if (running._tag === "Live") fail(`run ${runDir} is still running in process ${running.owner.pid}: nothing to take over`)
  refuseNoJournal(runDir)
  const read = await readText(`${runDir}/events.ndjson`, reportDefaults.fileBytesMax).catch(() => "unreadable")
  if (typeof read === "string") return fail(`${runDir}/events.ndjson cannot be read: ${read}`)
  const journal = readJournal(read.text, `${runDir}/events.ndjson`)
  if (typeof journal === "string") return fail(`${journal}: not a run's journal that can be taken over`)
  const started = journal.started
  if (journal.ended) fail(`run ${started.runId} ended: nothing to take over (cohort resume continues a run that ended unrecoverable)`)
  const o = started.options ?? {}
  if (started.transport !== "serve") fail(`run ${started.runId} was not served (cohort serve): its ranks died with their coordinator`)
  const ring = o.backend === "ring"
  const log = RecoveryLog.read(runDir)
  // A served run writes its base line before its first frame: a run lost before it has sent
  // nothing (the ranks hold the trainers' initial model), but one that formed, or whose log could
  // not be written, may have committed rounds no record holds.
  if (!log.entries.some((e) => e._tag === "Base") && (journal.formed || journal.logFault !== undefined))
    fail(
      `${runDir}/${RecoveryLog.dirName} holds no recovery log${journal.logFault === undefined ? "" : ` (${journal.logFault})`}: the run cannot be taken over exactly (cohort resume continues it from its last checkpoint)`
    )
  const point = Recovery.fold(started.epochs, started.epochSamples, [...journal.entries, ...log.entries])
  const resume = Recovery.resumeOf(point, started.epochs)
  if (resume === undefined) {
    // Lost after its last epoch ended (its ranks were told to stop in the same step) but before
    // that epoch's audit line: the line is written from the log, and nothing is left to serve.
    const owed = writeOwed(runDir, journal.lastMs, point, log)
    return fail(
      `run ${started.runId} audited all ${started.epochs} epochs${owed.length === 0 ? "" : ` (the audit of epoch ${owed.map((e) => e.epoch).join(", ")} written now from ${runDir}/${RecoveryLog.dirName}: its coordinator was lost before it wrote it)`}: nothing to take over`
    )
  }
  // No round ever closed: the model is the trainers' initial one, which the ranks go back to.
  // A ring's coordinator never holds the model: the ranks do (`Recovering.ringCommitted`).
  const params = point.lastRound < 0 || ring ? undefined : log.model(point.lastRound)
  if (params === undefined && !ring && log.entries.some((e) => e._tag === "Commit"))
    fail(`the model of round ${point.lastRound} is missing from ${runDir}/${RecoveryLog.dirName}: the run cannot be taken over exactly`)
  // Epochs that ended without their audit line (the kill came while their model was written):
  // the recovered run writes it, with the epoch's model when the log still holds it.
  const closed = owedAudits(point, log, ring)
  const asked = closed.find((c) => c.fromRanks)
  const tokenFile = await Files.readFile(`${runDir}/token`).catch(() => undefined)
  const tokenText = options.runToken ?? (tokenFile === undefined ? undefined : new TextDecoder().decode(tokenFile).trim())
  if (tokenText === undefined || tokenText === "")
    throw new LaunchError("runToken", `run ${started.runId} was served with a token it did not write: give it (--token)`)
  // A takeover with another token would have every returning rank refused (and exit): refuse it here.
  const check = log.tokenCheck()
  if (check !== undefined && check !== tokenCheck(tokenText))
    throw new LaunchError("runToken", `is not run ${started.runId}'s token: its ranks would refuse the takeover and exit`)
  const windowMs = options.recoveryWindowMs ?? recoveryWindowMsDefault
  if (!Number.isSafeInteger(windowMs) || windowMs <= 0) throw new LaunchError("recoveryWindowMs", `must be an integer > 0, got ${windowMs}`)
  const lostAtMs = SyncFiles.modifiedMs(`${runDir}/events.ndjson`) ?? Date.now()
  const gone = new Set(point.gone)
  const recovery: Recovering = {
    windowMs,
    expected: Array.from({ length: started.worldSize }, (_, r) => r).filter((r) => !gone.has(r)),
    gone: point.gone,
    originMs: lostAtMs - journal.lastMs,
    lostAtMs,
    epoch: point.epoch,
    lastRound: point.lastRound,
    committedSamples: point.committedSamples,
    epochsBefore: [
      ...journal.epochsBefore.filter((e) => e.epoch < point.epoch),
      ...closed.map((c) => ({ ...c.summary, accuracy: undefined }))
    ].sort((a, b) => a.epoch - b.epoch),
    recoveriesBefore: journal.recoveries,
    ...(journal.traffic === undefined ? {} : { trafficBefore: journal.traffic }),
    closed,
    ...(ring ? ringPoint(point) : {}),
    // The ranks hold it numbered as the takeover's Update numbers it (`Recovery.resumeOf`).
    ...(asked === undefined ? {} : { owedModel: { epoch: asked.summary.epoch, round: resume.firstRound - 1 } })
  }
  const { outDir, runId } = splitDir(runDir)
  const trainer = typeof o.trainerUrl === "string" ? o.trainerUrl : typeof o.trainer === "string" ? o.trainer : undefined
  if (trainer === undefined) return fail(`${runDir}/events.ndjson does not name its trainer`)
  const rules = carriedRules(o)
  const ignored = (Object.keys(options.given ?? {}) as Array<RuleName>)
    .map((name) => ({ name, given: options.given?.[name], run: rules[name] }))
    .filter(({ given, run }) => given !== undefined && JSON.stringify(given) !== JSON.stringify(run))
  if (ignored.length > 0) options.onIgnored?.(ignored)
  const given = <K extends string, V>(key: K, value: V | undefined): { readonly [k in K]?: V } =>
    (value === undefined ? {} : { [key]: value }) as { readonly [k in K]?: V }
  return serve({
    trainer,
    epochs: started.epochs,
    mode: started.mode,
    worldSize: started.worldSize,
    seed: numberOf(o.seed) ?? defaults.seed,
    batchSize: numberOf(o.batchSize) ?? defaults.batchSize,
    averageEverySteps: numberOf(o.averageEverySteps) ?? defaults.averageEverySteps,
    // The parent's rules: how rounds close and combine (how the ranks' frames are packed is theirs:
    // they were told at their join, and the takeover reads and relays them the same way), liveness,
    // bounds (`carried-options.ts`).
    ...rules,
    ...given("maxRanks", numberOf(o.maxRanks)),
    outDir,
    runId,
    runToken: tokenText,
    host: options.host ?? (typeof o.host === "string" ? o.host : undefined) ?? "127.0.0.1",
    // The port the ranks know: the one bound, not a 0 the run was given.
    port: options.port ?? (numberOf(o.port) || listenedPortOf(read.text)) ?? 0,
    formationTimeoutMs: windowMs + 1000,
    recovery,
    resumeState: { ...resume, params },
    ...given("signal", options.signal),
    ...given("stopSignal", options.stopSignal),
    ...given("onEvent", options.onEvent),
    ...given("onListening", options.onListening),
    ...given("onRankOutput", options.onRankOutput),
    ...given("http", options.http),
    ...given("tls", options.tls)
  })
}

/**
 * The recovery log of a served run, opened once the run's folder exists, with its `base` line
 * (where the run begins, and its model) written before any frame goes out.
 *
 * @since 0.1.0
 * @category recover
 */
export const openLog = (ctx: Context): RecoveryLog.RecoveryLog => {
  const log = RecoveryLog.open(ctx.runDirAbsolute, (path, error) => ctx.storageFailed(StorageFault.of(path, error), true))
  log.token(tokenCheck(ctx.runToken))
  const resumed = ctx.options.resumeState
  log.base(resumed === undefined ? { epoch: 0, firstRound: 0, committed: [] } : resumed, resumed?.params)
  return log
}

/**
 * An epoch that ended before the coordinator was lost and whose audit line it never wrote: the
 * line is written now (after the epoch's model, as always). Its `closed` line stays in the log: a
 * takeover of this takeover, before the line is out, writes it then.
 */
const auditClosed = (ctx: Context, closed: Recovering["closed"][number]): void => {
  const { summary, model } = closed
  ctx.journal.hold(ctx.epochModels.written(summary.epoch))
  // A ring member hands it over once the run formed (`Recovering.owedModel`).
  if (closed.fromRanks !== true) ctx.epochModels.deliver(summary.epoch, model)
  ctx.emit({ type: "epoch", ms: ctx.sinceStart(ctx.nowMs()), summary, accuracy: undefined })
}

/**
 * The coordinator actor's `recovery` option for a recovered run.
 *
 * @since 0.1.0
 * @category recover
 */
export const coordinatorRecovery = (recovery: Recovering) => ({
  windowMs: recovery.windowMs,
  expected: recovery.expected,
  causeOf: (rank: Rank): string => (recovery.gone.includes(rank) ? "declared dead before the coordinator's restart" : didNotReturn),
  ringCommitted: recovery.ringCommitted,
  owedModel: recovery.owedModel
})

/**
 * A recovered run's first journal line (instead of a second `started`), then the audit lines the
 * lost coordinator did not write.
 *
 * @since 0.1.0
 * @category recover
 */
export const announce = (ctx: Context, recovery: Recovering): void => {
  ctx.emit({
    type: "coordinatorLost",
    ms: ctx.sinceStart(ctx.nowMs()),
    lostMs: ctx.sinceStart(recovery.lostAtMs),
    epoch: recovery.epoch,
    lastRound: recovery.lastRound,
    committedSamples: recovery.committedSamples
  })
  for (const closed of recovery.closed) auditClosed(ctx, closed)
}

/**
 * A recovered run formed: who came back, who did not, and how long the run went without a
 * coordinator.
 *
 * @since 0.1.0
 * @category recover
 */
export const formed = (ctx: Context, recovery: Recovering): void => {
  const nowMs = ctx.nowMs()
  const returned = recovery.expected.filter((r) => ctx.vars.server?.connected(r) === true)
  const missing = [...recovery.gone, ...recovery.expected.filter((r) => !returned.includes(r))].sort((a, b) => a - b)
  const withoutCoordinatorMs = Math.max(0, Math.round(nowMs - recovery.lostAtMs))
  ctx.emit({ type: "recovered", ms: ctx.sinceStart(nowMs), returned, missing, withoutCoordinatorMs })
  ctx.vars.recovered = {
    lostMs: ctx.sinceStart(recovery.lostAtMs),
    withoutCoordinatorMs,
    epoch: recovery.epoch,
    committedSamples: recovery.committedSamples,
    returned,
    missing
  }
}

/**
 * The served runs under `outDir` that lost their coordinator and may still be taken over: a
 * journal with a `started` event of a served run, neither `ended` nor `failed`, written to within
 * the last `windowMs` (ms, before `nowMs`, wall-clock: its ranks may still wait), whose `run.lock`
 * names no live process, and with an epoch not ended (neither audited nor closed in its recovery
 * log). Such a run whose every epoch ended is not listed: the audit lines it owes (lost after its
 * last epoch's end, before that epoch's line) are appended to its journal from its log. Their
 * directories, oldest name first. Never rejects.
 *
 * @since 0.1.0
 * @category recover
 */
export const findLost = async (outDir: string, windowMs: number, nowMs: number): Promise<Array<string>> => {
  const found: Array<string> = []
  for (const name of SyncFiles.list(outDir)) {
    const dir = `${outDir}/${name}`
    const writtenMs = SyncFiles.modifiedMs(`${dir}/events.ndjson`)
    if (writtenMs === undefined || nowMs - writtenMs > windowMs) continue
    const text = new TextDecoder().decode(SyncFiles.readIfAny(`${dir}/events.ndjson`) ?? new Uint8Array(0))
    const journal = readJournal(text, `${dir}/events.ndjson`)
    if (typeof journal === "string" || journal.started.transport !== "serve" || journal.ended || /"type":"failed"/.test(text)) continue
    // Every epoch ended (audited, or closed in its recovery log): nothing is left to take over,
    // but the audit lines it owes are written.
    const lock = await LockFile.inspect(`${dir}/${runLockFileName}`)
    if (lock._tag !== "Stale") continue
    const log = RecoveryLog.read(dir)
    const point = Recovery.fold(journal.started.epochs, journal.started.epochSamples, [...journal.entries, ...log.entries])
    if (point.epoch < journal.started.epochs) found.push(dir)
    else
      try {
        writeOwed(dir, journal.lastMs, point, log)
      } catch {
        // A journal that cannot be written: `--recover` says so.
      }
  }
  return found
}
