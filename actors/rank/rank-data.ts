/**
 * What a rank is given and what it leaves behind (docs/design.md §3.3, §4, §8): the launcher's
 * `RankData`, a joined rank's `JoinedRun`, the rank's `Link` to its coordinator, the ring fault
 * model, the exit codes and the files a save writes. `rank.ts` re-exports all of it; import it from
 * there.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type { Rank } from "../../src/core/messages.ts"
import type * as RuntimeTypes from "../../src/platform/types.ts"
import type * as PeerRing from "../../src/transport/peer-ring.ts"
import type * as Transport from "../../src/transport/transport.ts"
import type * as Packed from "../../src/wire/packed.ts"

/**
 * The file a rank writes in its save folder (`<saveDir>/rank<r>/`) once the trainer's `save`
 * resolved after a `ShutdownWithSave`, and Cohort's own resumable model (`SavedModel`: the last
 * averaged parameters) was written beside it: `{rank, reason, savedAtMs}`. Its absence means the
 * save failed, hung or never ran. Checkpoints (`checkpoints/v<E>/`) and emergency saves hold a
 * `SavedModel` too.
 *
 * @since 0.1.0
 * @category model
 */
export const savedMarker = "cohort-saved.json"

/**
 * What the launcher hands each rank (structured-cloneable / JSON).
 *
 * - `trainer`: the trainer module's `file:` URL.
 * - `hangAfterMs`: ms after the run started (the rank's first epoch plan arrived) at which the rank
 *   stops responding while its worker stays alive (fault injection; `undefined` never).
 * - `saveDir`: where `ShutdownWithSave` saves (`<saveDir>/rank<r>`); `checkpointDir` likewise.
 *
 * @since 0.1.0
 * @category model
 */
export interface RankData {
  readonly trainer: string
  readonly worldSize: number
  readonly seed: number
  readonly batchSize: number
  readonly averageEverySteps: number
  readonly heartbeatIntervalMs: number
  /**
   * A `Progress` goes out once the rank trained this long (ms of its batches, not its waits) since
   * the last one, or `RankReports.progressWaitingMs` passed; batches in between are reported by the next.
   */
  readonly progressIntervalMs: number
  readonly hangAfterMs: number | undefined
  /**
   * Fault injection of a hostile rank (`FloodSpec`): `afterMs` after the run started, send
   * `framesPerSecond` extra `Heartbeat` frames, in bursts every 10 ms; `undefined` never.
   */
  readonly flood?: { readonly afterMs: number; readonly framesPerSecond: number } | undefined
  /**
   * A memory limit in MiB that the rank enforces itself, checking its engine's memory (heap and
   * typed arrays, `engineMemoryBytes`) after each batch, at most every `progressIntervalMs`: over
   * it (after a full collection under Bun), the rank crashes with an out-of-memory error. It
   * complements V8's heap limit, which counts no typed array and which Bun lacks;
   * `undefined`: no check.
   */
  readonly heapCheckMb?: number | undefined
  readonly saveDir: string
  readonly checkpointDir: string
  /**
   * Milliseconds without any frame from the coordinator (it sends `CoordHeartbeat` every
   * `coordHeartbeatMs`, 1000 by default, from formation on) after which the rank counts it gone,
   * saves (`EmergencySave`) and exits; also the bound on that save. Default
   * `coordinatorTimeoutMsDefault` (10000); `0`: no silence check (worker-thread ranks, which
   * share the coordinator's process: its silence is a stall, and its death is theirs).
   */
  readonly coordinatorTimeoutMs?: number | undefined
  /** The averaging backend (docs/design.md §1): `cpu` (default, `Params`/`Update`) or `ring` (module doc). */
  readonly backend?: "cpu" | "ring" | undefined
  /**
   * Fault injection inside a ring collective (tests and benches, keyed by round and step like
   * torchft's): when the rank is about to send step `step` of round `round`, it `exit`s (its
   * worker or process ends with `collectiveFaultExitCode`, without `Exiting`: a death),
   * `hang`s (stops responding with its worker alive; only staleness can catch it) or sends the
   * step `corrupt` (every value NaN).
   */
  readonly collectiveFault?: CollectiveFault | undefined
  /**
   * How ring steps travel (ring backend): `relay` (default) as `RingData` frames through the
   * coordinator, which forwards them to the next ring rank; `port` over direct links the host
   * hands over per generation (`Link.onRingPorts`: `MessageChannel`s between worker threads);
   * `direct` over WebSocket links this rank opens to its next ring neighbour's listener
   * (`peerLinks`; processes), each falling back to the relay where it cannot be made.
   */
  readonly ringLinks?: "relay" | "port" | "direct" | undefined
  /** With `ringLinks` `direct`: the run's token, every rank's listener URL and this rank's own (`PeerRing.PeerAddresses`). */
  readonly peerLinks?: PeerRing.PeerAddresses | undefined
  /**
   * With `peerLinks` between processes of one machine: the run's private folder (in memory,
   * `/dev/shm` where there is one) where the ranks' all-reduce area files live (`FileAllReduce`);
   * absent: collectives go over the links only. `ringAreaBytesMax` bounds a generation's files
   * together (`FileAllReduce.areaBytes`, from `RunOptions.ringAreaMemoryMb`): a larger model's
   * rounds go over the links.
   */
  readonly ringAreaFolder?: string | undefined
  readonly ringAreaBytesMax?: number | undefined
  /**
   * How a `cpu` contribution travels (docs/edge-averaging.md): `none` (default, float32), `fp16`
   * or `int8` (`Packed`), with error feedback: the rank keeps what quantization dropped and adds
   * it to its next contribution.
   */
  readonly compress?: Packed.Compression | undefined
  /**
   * `cpu` backend (docs/edge-averaging.md "Deltas"): once the rank applied a model from the
   * coordinator, it contributes its change since that model instead of its parameters, so that a
   * packed contribution quantizes small changes rather than whole weights. Before it (a fresh run's
   * first round, a joiner welcomed without a model) it sends its parameters; the coordinator tells
   * which by the contribution's round (`src/averaging/deltas.ts`).
   */
  readonly deltas?: boolean | undefined
  /**
   * The coordinator's bounds on a save and an eval it asks for (`saveTimeoutMs`, `evalTimeoutMs`),
   * given when it counts on the rank to beat while it runs them (`Link.beatWhile`, a rank
   * process): the rank's beats stop at the bound, so a call stuck past it still ends in a death.
   * Absent: the rank does not beat during calls.
   */
  readonly callBeatsMs?: { readonly save: number; readonly eval: number } | undefined
}

/**
 * What a rank that joins from another host learns of the run in the coordinator's welcome
 * (`WebSocket` join protocol 1, the welcome's `run`): the run-wide part of `RankData`, plus
 * `epochSamples`, the samples of one epoch by the coordinator's trainer module (a joining rank
 * whose own trainer module says otherwise refuses to train), and the averaging `backend` (absent:
 * `cpu`; a joined rank's ring links go through the coordinator's relay). Its own `trainer`,
 * `saveDir` and `checkpointDir` are the joining host's (`rankDataOf`).
 *
 * @since 0.1.0
 * @category model
 */
export interface JoinedRun {
  readonly worldSize: number
  readonly epochSamples: number
  readonly seed: number
  readonly batchSize: number
  readonly averageEverySteps: number
  readonly heartbeatIntervalMs: number
  readonly progressIntervalMs: number
  readonly coordinatorTimeoutMs: number
  /**
   * The coordinator's `heartbeatTimeoutMs` (absent from an older coordinator): a rank whose link
   * dropped keeps trying to resume it for at least twice this long (`cohort join`).
   */
  readonly heartbeatTimeoutMs?: number
  readonly backend?: "cpu" | "ring"
  /** How contributions travel (`RankData.compress`; absent: `none`). */
  readonly compress?: Packed.Compression
  /** Whether contributions are changes since the last model (`RankData.deltas`; absent: parameters). */
  readonly deltas?: boolean
  /** The run's id (its folder's name under the coordinator's `--out`): `cohort join` saves under it by default. */
  readonly runId?: string
  /**
   * Ring backend: whether a joined rank that listens links to its neighbours directly (`direct`;
   * the coordinator hands out addresses and secrets with `FormRing`) or every step goes through
   * the relay (`relay`, and absent: an older coordinator).
   */
  readonly ringLinks?: "direct" | "relay"
  /**
   * The coordinator's call bounds when its server hands out beat links (`RankData.callBeatsMs`):
   * the joined rank beats on one while it runs a save or an eval it asked for. Absent: it does not.
   */
  readonly callBeatsMs?: { readonly save: number; readonly eval: number }
}

/** Call bounds in a welcome: both positive numbers (ms). */
const isCallBounds = (value: unknown): boolean => {
  const bounds = value as { save?: unknown; eval?: unknown } | null
  return typeof bounds === "object" && bounds !== null && [bounds.save, bounds.eval].every((ms) => typeof ms === "number" && ms > 0)
}

/**
 * Whether a welcome's `run` value is a `JoinedRun` (every field a finite number, counts integers >
 * 0; `backend`, when present, `cpu` or `ring`).
 *
 * @since 0.1.0
 * @category model
 */
export const isJoinedRun = (value: unknown): value is JoinedRun => {
  if (typeof value !== "object" || value === null) return false
  const run = value as Record<string, unknown>
  const positiveInteger = (key: string) => typeof run[key] === "number" && Number.isSafeInteger(run[key]) && (run[key] as number) > 0
  const nonNegative = (key: string) => typeof run[key] === "number" && Number.isFinite(run[key]) && (run[key] as number) >= 0
  return (
    ["worldSize", "epochSamples", "batchSize", "averageEverySteps"].every(positiveInteger) &&
    ["seed", "heartbeatIntervalMs", "progressIntervalMs", "coordinatorTimeoutMs"].every(nonNegative) &&
    (run.backend === undefined || run.backend === "cpu" || run.backend === "ring") &&
    (run.compress === undefined || run.compress === "none" || run.compress === "fp16" || run.compress === "int8") &&
    (run.callBeatsMs === undefined || isCallBounds(run.callBeatsMs)) &&
    (run.deltas === undefined || typeof run.deltas === "boolean")
  )
}

/**
 * The `RankData` of a rank that joined from elsewhere: the run's part from the welcome, the
 * rest from the joining host (`trainer` URL, `saveDir`, `checkpointDir`, `ringListen`); no fault
 * injection and no memory check of its own.
 *
 * @since 0.1.0
 * @category model
 */
export const rankDataOf = (
  run: JoinedRun,
  local: {
    readonly trainer: string
    readonly saveDir: string
    readonly checkpointDir: string
    /** Where this rank listens for its ring neighbours and the host it advertises (`PeerRing`); none: relay only. */
    readonly ringListen?: { readonly host: string; readonly port: number; readonly advertise: string } | undefined
  }
): RankData => ({
  trainer: local.trainer,
  worldSize: run.worldSize,
  seed: run.seed,
  batchSize: run.batchSize,
  averageEverySteps: run.averageEverySteps,
  heartbeatIntervalMs: run.heartbeatIntervalMs,
  progressIntervalMs: run.progressIntervalMs,
  hangAfterMs: undefined,
  saveDir: local.saveDir,
  checkpointDir: local.checkpointDir,
  coordinatorTimeoutMs: run.coordinatorTimeoutMs,
  ...(run.callBeatsMs === undefined ? {} : { callBeatsMs: run.callBeatsMs }),
  ...(run.backend === "ring" ? { backend: "ring" as const, ringLinks: "relay" as const } : {}),
  ...(run.backend === "ring" && run.ringLinks === "direct" && local.ringListen !== undefined
    ? {
        ringLinks: "direct" as const,
        peerLinks: {
          token: "",
          urls: [],
          host: local.ringListen.host,
          port: local.ringListen.port,
          listen: true,
          advertise: local.ringListen.advertise
        }
      }
    : {}),
  ...(run.compress === undefined ? {} : { compress: run.compress }),
  ...(run.deltas === true ? { deltas: true } : {})
})

/**
 * A fault at one step of one ring collective (`RankData.collectiveFault`).
 *
 * @since 0.1.0
 * @category model
 */
export interface CollectiveFault {
  readonly round: number
  readonly step: number
  readonly fault: "exit" | "hang" | "corrupt"
}

/** The exit code of a rank that `exit`s by an injected `CollectiveFault`: 70. @since 0.1.0 @category rank */
export const collectiveFaultExitCode = 70

/** Default `RankData.coordinatorTimeoutMs`: 10000 ms. @since 0.1.0 @category defaults */
export const coordinatorTimeoutMsDefault = 10_000

/**
 * The exit code of a rank whose coordinator is gone (its link closed, or it went silent for
 * `coordinatorTimeoutMs`), after its emergency save: 3. A clean leave is 0 and a crash 1.
 *
 * @since 0.1.0
 * @category rank
 */
export const coordinatorGoneExitCode = 3

/**
 * What a rank writes as `emergency.json` beside its model (`<saveDir>/rank<r>/emergency.json`)
 * when it saved because its coordinator was gone, not because it was asked to:
 *
 * - `reason`: `ChannelClosed` (the link to the coordinator ended; `closeCode` says how, 1006 when
 *   it dropped) or `CoordinatorSilent` (no frame for `silentMs` >= `coordinatorTimeoutMs`).
 * - `detail`: the same in words, as the rank's line on stderr says it.
 * - `at`: when the rank noticed (ISO 8601); `epoch`: the epoch it was training (-1 before any).
 * - `saved`: whether the trainer's `save` finished within `coordinatorTimeoutMs`; `error`: why not.
 *
 * @since 0.1.0
 * @category model
 */
export interface EmergencySave {
  readonly emergency: true
  readonly rank: Rank
  readonly reason: "ChannelClosed" | "CoordinatorSilent"
  readonly closeCode?: number
  readonly silentMs?: number
  readonly detail: string
  readonly at: string
  readonly epoch: number
  readonly saved: boolean
  readonly error?: string
}

/**
 * The rank's link to the coordinator, as a transport's `connect()` gives it.
 *
 * @since 0.1.0
 * @category model
 */
export interface Link {
  readonly transport: Transport.TransportShape
  readonly rank: Rank
  readonly data: unknown
  /**
   * Called once the coordinator is gone; returns where the rank's last line goes. A child
   * process's link sends it (and whatever the process prints from then on) to the coordinator's
   * own stderr (`ChildProcess.ProcessRank.detach`); default: the rank's `console.error`.
   */
  readonly detach?: () => (line: string) => void
  /**
   * Told the rank's progress whenever it sends a `Progress` (at most every `progressIntervalMs`):
   * the epoch, the samples this rank trained in it, and the samples it trained in all. A browser rank shows it on its page; it must not throw.
   */
  readonly status?: (status: { readonly epoch: number; readonly samplesDone: number; readonly samplesTotal: number }) => void
  /** Worker threads: the direct ring links of each generation (`RankData.ringLinks` `port`). */
  readonly onRingPorts?: (callback: (ports: RuntimeTypes.RingPorts) => void) => void
  /**
   * Asked once when the coordinator's link ended without a close code (a dropped connection):
   * learns, bounded, the code the coordinator would have closed it with, if any (`cohort join`
   * asks the server whether it declared this rank dead: `RankDead`, 4011). Must not fail.
   */
  readonly whyEnded?: Effect.Effect<number | undefined>
  /**
   * How many times a coordinator took the run over after the last one's loss (a recovered link,
   * docs/recovery.md). When it grows the rank drops its assignment and holds back until the new
   * coordinator's `Update` and plan arrive. Default: never.
   */
  readonly recoveries?: () => number
  /**
   * Rank processes: sends `frame` every `intervalMs` from a thread that does not run the trainer,
   * for up to `forMs` ms, until the returned function is called (`ChildProcess.ProcessRank`):
   * the rank is heard from while a call the coordinator asked for blocks its thread.
   */
  readonly beatWhile?: (frame: Uint8Array, intervalMs: number, forMs: number) => () => void
}
