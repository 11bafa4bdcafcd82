/**
 * Where a launch's ranks run (`makeHost`): worker threads, child processes, or WebSocket ranks
 * (started here, or joining from elsewhere when the run is served), with the WebSocket server's
 * settings, the welcome a joining rank reads, and the entry module each rank starts.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as FileAllReduce from "../../src/averaging/file-all-reduce.ts"
import type * as Finite from "../../src/averaging/finite.ts"
import * as SharedAllReduce from "../../src/averaging/shared-all-reduce.ts"
import * as Core from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"
import * as Bundle from "../../src/platform/bundle.ts"
import * as Files from "../../src/platform/files.ts"
import * as ListenError from "../../src/platform/listen-error.ts"
import * as ChildProcess from "../../src/transport/child-process.ts"
import * as Credentials from "../../src/transport/credentials.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as WebSocketRanks from "../../src/transport/web-socket-ranks.ts"
import * as WireFrames from "../../src/transport/wire-frames.ts"
import * as Worker from "../../src/transport/worker.ts"
import type { Context } from "./launcher-context.ts"
import { defaults, LaunchError } from "./launch-options.ts"
import * as RankActor from "../rank/rank.ts"
import type { Listening } from "../record/run-types.ts"

/**
 * The entry each rank starts: the TypeScript entry under Bun and Deno; under Node, a bundle of it
 * with the trainer compiled in (see `src/platform/bundle.ts`), falling back to the
 * TypeScript entry (through tsx) if the bundle cannot be built.
 */
export const rankEntry = async (transport: "worker" | "process" | "websocket", trainerUrl: string): Promise<string> => {
  const entry = Files.moduleUrl(
    transport === "worker" ? "../rank/rank-worker.ts" : transport === "process" ? "../rank/rank-process.ts" : "../rank/rank-socket.ts",
    import.meta.url
  )
  if (!Bundle.needed()) return entry.href
  // Paths, not URLs: esbuild leaves `file:` URLs as external imports.
  const path = (url: string | URL): string => JSON.stringify(Files.pathOf(String(url)))
  // Worker ranks redirect what they print before the trainer module loads (ES modules evaluate
  // in import order), so that even its top-level prints stay off the coordinator's stdout.
  const redirect = Files.moduleUrl("../../src/platform/redirect-worker-output.ts", import.meta.url)
  const source =
    transport === "websocket"
      ? [
          `import * as trainer from ${path(trainerUrl)}`,
          `import * as SocketRank from ${path(Files.moduleUrl("../rank/socket-rank.ts", import.meta.url))}`,
          `await SocketRank.processMain(async () => trainer)`
        ].join("\n")
      : [
          ...(transport === "worker" ? [`import ${path(redirect)}`] : []),
          `import * as trainer from ${path(trainerUrl)}`,
          `import * as Host from ${path(Files.moduleUrl(transport === "worker" ? "../../src/transport/worker.ts" : "../../src/transport/child-process.ts", import.meta.url))}`,
          `import * as Rank from ${path(Files.moduleUrl("../rank/rank.ts", import.meta.url))}`,
          `await Rank.main(Host.connect(), async () => trainer)`
        ].join("\n")
  return Bundle.bundle(source, Files.absolutePath(".")).catch(() => entry.href)
}

/** The shared all-reduce area of a worker ring generation of `ringSize` ranks, when one is used. */
const ringArea = (
  ctx: Context,
  ringSize: number,
  paramsLength: number | undefined
): { readonly buffer: SharedArrayBuffer; readonly length: number; readonly memory: Finite.SharedMemory | undefined } | undefined => {
  const { vars } = ctx
  const { ringAreaMemoryMb } = ctx.resolved
  const fits =
    paramsLength !== undefined &&
    ringAreaMemoryMb > 0 &&
    Worker.sharedRingLinks() &&
    SharedAllReduce.areaBytes(ringSize, paramsLength) <= ringAreaMemoryMb * 2 ** 20
  // An area the runtime cannot allocate (out of memory) leaves that generation on its links: its
  // ranks must still get links, or they would never start a collective.
  let buffer: SharedArrayBuffer | undefined
  try {
    buffer = fits && (vars.ringLinksUsed === "area" || !vars.ringLinksDecided) ? SharedAllReduce.make(ringSize, paramsLength) : undefined
  } catch {
    buffer = undefined
  }
  if (!vars.ringLinksDecided) {
    vars.ringLinksDecided = true
    if (buffer !== undefined) vars.ringLinksUsed = "area"
  }
  return buffer !== undefined && paramsLength !== undefined
    ? { buffer, length: paramsLength, memory: SharedAllReduce.memoryOf(buffer) }
    : undefined
}

/**
 * Child processes: records that the ring's collectives go through the ranks' area files
 * (`FileAllReduce`), decided at the first generation with a known parameter count, as the ranks
 * decide it (a folder handed, the generation's files within `ringAreaMemoryMb`).
 */
const fileArea = (ctx: Context, ringSize: number, paramsLength: number | undefined): void => {
  const { vars } = ctx
  if (vars.ringLinksDecided || paramsLength === undefined || vars.ringAreaFolder === undefined) return
  vars.ringLinksDecided = true
  if (ringSize >= 2 && FileAllReduce.areaBytes(ringSize, paramsLength) <= ctx.resolved.ringAreaMemoryMb * 2 ** 20)
    vars.ringLinksUsed = "file"
}

/**
 * Writes `count` credentials of run `runId`, one per rank index from 0, to
 * `<runDir>/credentials/rank<r>` (mode 0600), each expiring `ttlMs` from now (never without it);
 * returns where each went.
 */
export const issueCredentials = async (
  runToken: string,
  runId: string,
  runDir: string,
  count: number,
  ttlMs: number | undefined
): Promise<ReadonlyArray<{ readonly rank: number; readonly id: string; readonly file: string }>> => {
  if (count === 0) return []
  await Files.mkdir(`${runDir}/credentials`)
  // A credential's expiry is wall-clock time: the rank's host and `cohort` commands read it too.
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

/** Tells the served run's observer where it listens; an observer that throws is ignored. */
export const observeListening = (ctx: Context, listening: Listening): void => {
  try {
    ctx.served?.onListening?.(listening)
  } catch {
    // an observer only watches
  }
}

/**
 * Whether the ranks' server hands out beat links (`RunOptions.beatLinks`; plain `ws://` only: a
 * beat link does not pin the certificate of a `wss://` server).
 */
export const beatLinks = (ctx: Context): boolean => ctx.options.beatLinks === true && ctx.tls === undefined

/** What a rank that joins from elsewhere learns of the run in its welcome (`JoinedRun`). */
const welcomeData = (ctx: Context): RankActor.JoinedRun => {
  const { options, runId, module } = ctx
  const { worldSize, batchSize, heartbeatTimeoutMs, backend, compress, deltas, ringLinks } = ctx.resolved
  return {
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
    ...(compress === "none" ? {} : { compress }),
    ...(deltas ? { deltas } : {}),
    ...(backend === "ring" ? { ringLinks: ringLinks === "relay" ? "relay" : "direct" } : {}),
    ...(beatLinks(ctx) ? { callBeatsMs: { save: ctx.state.config.saveTimeoutMs, eval: ctx.state.config.evalTimeoutMs } } : {}),
    runId
  }
}

/** The run's WebSocket settings, beside the transport's defaults. */
const serverOptions = (ctx: Context): WebSocket.ServerOptions => {
  const { state, served, runToken, runId, emit, sinceStart, joinedFrom, awaitingHello, tls, credentials } = ctx
  const { worldSize } = ctx.resolved
  const welcome = welcomeData(ctx)
  // A run that may grow checks each join after formation against the core's state;
  // the core decides again at the joiner's Hello (`Join`).
  const admit = (asked: unknown, taken: (rank: Rank) => boolean): WebSocket.Admission =>
    WebSocket.admission(asked, (index) => Core.joinVerdict(state, index, taken))
  return {
    runToken,
    worldSize,
    host: served?.host ?? WebSocket.hostDefault,
    port: served?.port ?? 0,
    welcome: () => welcome,
    // Heartbeats go between the pieces of a large Update on a resumable link.
    orderFree: WireFrames.orderFree,
    // A rank's Exiting and its end go before the other links' backlog.
    urgent: WireFrames.urgent,
    ...(served?.http === undefined ? {} : { http: served.http }),
    ...(tls === undefined ? {} : { tls }),
    // A rank whose beat link is up beats during calls; one whose link dropped is held again.
    ...(beatLinks(ctx) ? { beatLinks: true, onBeatLink: (rank: Rank, open: boolean) => Core.setBeatsDuringCalls(state, rank, open) } : {}),
    connectionsMax: ctx.rankConnectionsMax,
    onResource: ctx.rankListener.onResource,
    onJoined: (rank, address, credential) => {
      joinedFrom.set(rank, address)
      if (credential !== undefined) credentials.joined(rank, credential)
      if (ctx.vars.formedEmitted) {
        awaitingHello.set(rank, ctx.nowMs())
        ctx.connectedAtMs.set(rank, ctx.nowMs())
      }
      emit({ type: "joined", ms: sinceStart(ctx.nowMs()), rank, address, ...(credential === undefined ? {} : { credential }) })
    },
    // A served run admits ranks' own credentials too (HMACs of the run token; none is kept),
    // their expiry checked against wall-clock time, as it was written.
    ...(served === undefined
      ? {}
      : { credential: (token: string) => Credentials.check(runToken, runId, token, Date.now(), credentials.isRevoked) }),
    onRefused: (closeCode, reason, address) => emit({ type: "refused", ms: sinceStart(ctx.nowMs()), closeCode, reason, address }),
    onResumed: (rank, address, silentMs) => emit({ type: "resumed", ms: sinceStart(ctx.nowMs()), rank, address, silentMs }),
    // A run taken over after its coordinator's loss: its ranks come back with sessions of the old process.
    ...(served?.recovery === undefined ? {} : { recovering: true }),
    ...(state.config.maxRanks > worldSize || state.config.minRanks < worldSize ? { admit } : {})
  }
}

/**
 * Where the ranks run: the transport, how a rank is started and killed, and (worker threads)
 * the direct ring links of each generation (`MessageChannel`s); other hosts relay.
 *
 * @since 0.1.0
 * @category launcher
 */
export interface Host {
  readonly transport: Transport.TransportShape
  readonly spawn: (options: Worker.SpawnOptions & ChildProcess.SpawnOptions) => Effect.Effect<void, Transport.TransportError>
  readonly kill: (rank: Rank) => Effect.Effect<void>
  /** Worker threads: direct ring links per generation (`MessageChannel`s); other hosts relay. */
  readonly formRingLinks?:
    | ((generation: number, peers: ReadonlyArray<Rank>, paramsLength: number | undefined) => ((round: number) => void) | undefined)
    | undefined
}

const bindFailed = (served: Context["served"]) => (error: Transport.TransportError) =>
  Effect.die(
    new LaunchError(
      "listen",
      error.reason._tag === "ConnectFailed"
        ? `cannot listen on ${served?.host}:${served?.port}: ${ListenError.addressInUse(error.reason.detail) ? ListenError.addressInUseText : error.reason.detail}`
        : error.message
    )
  )

/**
 * Makes the host of a launch's ranks (a served run's WebSocket server sets `vars.server`).
 *
 * @since 0.1.0
 * @category launcher
 */
export const makeHost = (ctx: Context): Effect.Effect<Host, never, Scope.Scope> => {
  const { served, onOutput } = ctx
  const { transportKind, heapLimitMb, ringLinks, ringSharedSlots } = ctx.resolved
  if (served !== undefined) {
    return WebSocket.serve(serverOptions(ctx)).pipe(
      Effect.catch(bindFailed(served)),
      Effect.map((handle): Host => {
        ctx.vars.server = handle
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
      return Effect.map(
        Worker.host({ onOutput }),
        (h): Host => ({
          transport: h.transport,
          spawn: (o) => h.spawn(heapLimitMb === undefined ? o : { ...o, resourceLimits: { maxOldGenerationSizeMb: heapLimitMb } }),
          kill: h.terminate,
          formRingLinks: (generation, peers, paramsLength) => {
            const area = ringArea(ctx, peers.length, paramsLength)
            h.formRing(generation, peers, ringLinks === "shared" ? ringSharedSlots : 0, area)
            return area === undefined ? undefined : (round: number) => SharedAllReduce.commit(area.buffer, round)
          }
        })
      )
    case "process":
      return Effect.map(
        ChildProcess.host({ onOutput }),
        (h): Host => ({
          transport: h.transport,
          spawn: (o) => h.spawn(heapLimitMb === undefined ? o : { ...o, heapLimitMb }),
          kill: (r) => h.kill(r),
          formRingLinks: (_generation, peers, paramsLength) => {
            fileArea(ctx, peers.length, paramsLength)
            return undefined
          }
        })
      )
    case "websocket":
      return WebSocketRanks.host({ ...serverOptions(ctx), onOutput }).pipe(
        Effect.catch(bindFailed(served)),
        Effect.map((h): Host => {
          ctx.vars.server = h.server
          return {
            transport: h.transport,
            spawn: (o) => h.spawn(heapLimitMb === undefined ? o : { ...o, heapLimitMb }),
            kill: (r) => h.kill(r)
          }
        })
      )
  }
}
