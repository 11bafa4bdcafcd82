/**
 * The launcher's options (`RunOptions`, `ServeOptions`): their defaults, the checks that refuse bad
 * ones with a `LaunchError` naming the option, and the trainer module's loading. `launcher.ts`
 * re-exports what is public here.
 *
 * @since 0.1.0
 */
import * as Trainer from "../../src/train/trainer.ts"
import * as Bundle from "../../src/platform/bundle.ts"
import * as Files from "../../src/platform/files.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as Worker from "../../src/transport/worker.ts"
import type { RunOptions } from "../record/run-types.ts"

/**
 * Why a run could not start: bad options, or a trainer module that cannot be loaded.
 *
 * @since 0.1.0
 * @category errors
 */
export class LaunchError extends Error {
  readonly _tag = "LaunchError"
  constructor(
    readonly option: string,
    readonly reason: string
  ) {
    super(`${option}: ${reason}`)
  }
}

/**
 * The lock file a run holds in its folder while it trains (`<runDir>/run.lock`, holding its
 * process id; `src/platform/lock-file.ts`): `cohort resume` refuses a run whose lock is held by a
 * live process. A run whose process was killed leaves it behind, stale, which is no bar.
 *
 * @since 0.1.0
 * @category launcher
 */
export const runLockFileName = "run.lock"

/**
 * Defaults of `RunOptions`.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults = {
  worldSize: 4,
  epochs: 3,
  mode: "static",
  backend: "cpu",
  transport: "worker",
  /** Slots of each worker ring link's shared-memory segment (`RunOptions.ringSharedSlots`); 0: ports only. */
  ringSharedSlots: 4,
  ringSharedSlotsMax: 64,
  /** Largest shared all-reduce area of a worker ring generation, MiB (`RunOptions.ringAreaMemoryMb`); 0: none. */
  ringAreaMemoryMb: 256,
  ringAreaMemoryMbMax: 65_536,
  heartbeatTimeoutMs: 10_000,
  /** At most this, and at most a quarter of `heartbeatTimeoutMs`. */
  heartbeatIntervalMs: 1_000,
  /** A rank reports `Progress` at most this often. */
  progressIntervalMs: 100,
  tickMs: 100,
  seed: 1,
  batchSize: 32,
  averageEverySteps: 32,
  rankNice: 0,
  /**
   * Each rank's memory limit in MiB (0: none): enough for a few ranks of the bundled model beside
   * the coordinator on a small machine, and a bound on a rank that allocates without end.
   */
  rankMemoryMb: 1024,
  outDir: "runs",
  /** Ranks one launcher starts on this machine (threads or processes); the core itself takes 1e6. */
  worldSizeMax: 1024,
  /** How long the launcher waits for ranks to save and exit after the run ended. */
  exitGraceMs: 15_000,
  /** How long an interrupted run waits for the survivors' saves (`RunOptions.interruptGraceMs`). */
  interruptGraceMs: 30_000,
  /** How long the ranks of a local run have to join (send their `Hello`). */
  formationTimeoutMs: 120_000
} as const

/**
 * Defaults of `ServeOptions`: `formationTimeoutMs` 5 minutes (ranks on other hosts may start
 * late), `worldSizeMax` 1,000,000 ranks (the core's bound; none runs on this machine), `host`
 * loopback and `port` 0 (any free port), `heapGrowthPercent` 300 (V8's old generation grows to four
 * times what a full collection left: about a quarter less CPU a round for a coordinator of 256
 * ranks, whose socket reads V8 counts against that limit; docs/benchmarks.md).
 *
 * @since 0.1.0
 * @category defaults
 */
export const serveDefaults = {
  formationTimeoutMs: 300_000,
  heapGrowthPercent: 300,
  worldSizeMax: 1_000_000,
  host: WebSocket.hostDefault,
  port: 0
} as const

/** The transports `RunOptions.transport` takes. */
const transports = ["worker", "process", "websocket"] as const

/**
 * Loads and checks a trainer module in the calling thread. Rejects with `LaunchError` (option
 * `trainer`) when the file is missing, fails to load, or does not export the trainer contract.
 *
 * @since 0.1.0
 * @category launcher
 */
export const loadTrainer = async (trainer: string): Promise<{ readonly url: string; readonly module: Trainer.TrainerModule }> => {
  const url = Files.fileUrl(trainer)
  if (!trainer.startsWith("file:") && !(await Files.exists(Files.absolutePath(trainer)))) {
    throw new LaunchError("trainer", `no such file: ${trainer}`)
  }
  let loaded: unknown
  try {
    loaded = await Bundle.importModule(url)
  } catch (error) {
    throw new LaunchError("trainer", `cannot load ${trainer}: ${error instanceof Error ? error.message : String(error)}`)
  }
  const module = Trainer.validateTrainerModule(loaded)
  if (typeof module === "string") throw new LaunchError("trainer", `${trainer}: ${module}`)
  return { url, module }
}

/** Longest Unix socket path taken, in bytes: the system's limit is 104 to 108 with its final zero. */
export const socketPathBytesMax = 100

/**
 * The longest `RunOptions.ringAreaFolder`, in bytes: a rank's socket, `<folder>/cohort-XXXXXX/ring-1023.sock`,
 * must fit `socketPathBytesMax` (the launcher's `ringSocketPath`), else its links would quietly take
 * ports and the area files would not be used.
 */
const ringAreaFolderBytesMax = socketPathBytesMax - "/cohort-XXXXXX/ring-1023.sock".length

/** Throws `LaunchError(option, reason)` unless `ok`. */
export const check = (ok: boolean, option: string, reason: string): void => {
  if (!ok) throw new LaunchError(option, reason)
}

/** Checks a `tls` option's PEM blocks (`LaunchError`, option `tls`). */
export const checkTls = (tls: RunOptions["tls"]): void => {
  if (tls === undefined) return
  check(/-----BEGIN [A-Z ]*CERTIFICATE-----/.test(tls.cert), "tls", "cert holds no PEM certificate block")
  check(/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(tls.key), "tls", "key holds no PEM private key block")
}

/**
 * `options` with every default filled in and every check of its own made (`LaunchError` naming the
 * option otherwise); `served`: the ranks join from elsewhere (`serve`), which lifts the one-machine
 * bound on `worldSize`. The trainer-dependent checks (`maxRanks` after the trainer loaded) stay in
 * the launcher.
 *
 * @since 0.1.0
 * @category launcher
 */
export const resolveOptions = (options: RunOptions, served: boolean) => {
  // Long because one check per run option, in the options' order; pieces would only move the list.
  const worldSize = options.worldSize ?? defaults.worldSize
  const epochs = options.epochs ?? defaults.epochs
  const mode = options.mode ?? defaults.mode
  const transportKind = options.transport ?? defaults.transport
  check(
    (transports as ReadonlyArray<string>).includes(transportKind),
    "transport",
    `must be "worker", "process" or "websocket", got ${JSON.stringify(transportKind)}`
  )
  const kills = options.kills ?? []
  const hangs = options.hangs ?? []
  const floods = options.floods ?? []
  const backend = options.backend ?? defaults.backend
  const collectiveFaults = options.collectiveFaults ?? []
  // Worker threads link ring neighbours directly (shared memory where the runtime can wait on it
  // without blocking, else MessageChannel); processes go through the relay.
  const ringSharedSlots = options.ringSharedSlots ?? defaults.ringSharedSlots
  check(
    Number.isSafeInteger(ringSharedSlots) && ringSharedSlots >= 0 && ringSharedSlots <= defaults.ringSharedSlotsMax,
    "ringSharedSlots",
    `must be an integer in [0, ${defaults.ringSharedSlotsMax}], got ${ringSharedSlots}`
  )
  const ringLinksAsked = options.ringLinks ?? "direct"
  check(
    ringLinksAsked === "direct" || ringLinksAsked === "relay",
    "ringLinks",
    `must be "direct" or "relay", got ${JSON.stringify(ringLinksAsked)}`
  )
  // Ranks that joined from other hosts link directly where they advertised a listener (docs/ring.md).
  const ringLinks: "shared" | "port" | "direct" | "relay" =
    ringLinksAsked === "relay" || (!served && transportKind !== "worker" && transportKind !== "process")
      ? "relay"
      : transportKind === "process" || served
        ? "direct"
        : ringSharedSlots > 0 && Worker.sharedRingLinks()
          ? "shared"
          : "port"
  const ringAreaMemoryMb = options.ringAreaMemoryMb ?? defaults.ringAreaMemoryMb
  check(
    Number.isSafeInteger(ringAreaMemoryMb) && ringAreaMemoryMb >= 0 && ringAreaMemoryMb <= defaults.ringAreaMemoryMbMax,
    "ringAreaMemoryMb",
    `must be an integer in [0, ${defaults.ringAreaMemoryMbMax}], got ${ringAreaMemoryMb}`
  )
  check(
    options.ringAreaFolder === undefined || (typeof options.ringAreaFolder === "string" && options.ringAreaFolder !== ""),
    "ringAreaFolder",
    `must be a folder's path, got ${JSON.stringify(options.ringAreaFolder)}`
  )
  const ringAreaFolder = options.ringAreaFolder === undefined ? undefined : Files.absolutePath(options.ringAreaFolder)
  const ringAreaFolderBytes = ringAreaFolder === undefined ? 0 : new TextEncoder().encode(ringAreaFolder).length
  check(
    ringAreaFolderBytes <= ringAreaFolderBytesMax,
    "ringAreaFolder",
    `${ringAreaFolder} is ${ringAreaFolderBytes} bytes long; the ranks' Unix sockets in the run's folder there need it at most ${ringAreaFolderBytesMax}`
  )
  const batchSize = options.batchSize ?? defaults.batchSize
  check(Number.isSafeInteger(worldSize) && worldSize >= 1, "worldSize", `must be an integer >= 1, got ${worldSize}`)
  if (!served) {
    check(worldSize <= defaults.worldSizeMax, "worldSize", `at most ${defaults.worldSizeMax} ranks run on one machine, got ${worldSize}`)
  } else {
    check(worldSize <= serveDefaults.worldSizeMax, "worldSize", `at most ${serveDefaults.worldSizeMax} ranks, got ${worldSize}`)
  }
  check(Number.isSafeInteger(epochs) && epochs >= 1, "epochs", `must be an integer >= 1, got ${epochs}`)
  const positive = (value: number | undefined, option: string, integer: boolean): void => {
    if (value === undefined) return
    check(
      value > 0 && Number.isFinite(value) && (!integer || Number.isSafeInteger(value)),
      option,
      `must be ${integer ? "an integer" : "a number"} > 0, got ${value}`
    )
  }
  positive(options.heartbeatIntervalMs, "heartbeatIntervalMs", false)
  positive(options.tickMs, "tickMs", false)
  positive(options.averageEverySteps, "averageEverySteps", true)
  positive(options.coordinatorTimeoutMs, "coordinatorTimeoutMs", true)
  positive(options.rankConnectionsMax, "rankConnectionsMax", true)
  const interruptGraceMs = options.interruptGraceMs ?? defaults.interruptGraceMs
  check(interruptGraceMs >= 0 && Number.isFinite(interruptGraceMs), "interruptGraceMs", `must be a number >= 0, got ${interruptGraceMs}`)
  const rankNice = options.rankNice ?? defaults.rankNice
  check(Number.isSafeInteger(rankNice) && rankNice >= 0 && rankNice <= 19, "rankNice", `must be an integer from 0 to 19, got ${rankNice}`)
  const rankMemoryMb = options.rankMemoryMb ?? defaults.rankMemoryMb
  check(
    rankMemoryMb === 0 || (Number.isSafeInteger(rankMemoryMb) && rankMemoryMb >= 16),
    "rankMemoryMb",
    `must be 0 (no limit) or an integer >= 16, got ${rankMemoryMb}`
  )
  // Node and Deno enforce the limit on the heap in V8 (worker `resourceLimits`,
  // `--max-old-space-size` for a process); everywhere the rank also checks its heap and typed
  // arrays (which V8's limit leaves out, and Bun's engine has no limit) between batches.
  const heapLimitMb = rankMemoryMb === 0 ? undefined : rankMemoryMb
  check(backend === "cpu" || backend === "ring", "backend", `must be "cpu" or "ring", got ${String(backend)}`)
  for (const fault of collectiveFaults) {
    check(backend === "ring", "collectiveFaults", "need the ring backend")
    check(
      Number.isSafeInteger(fault.round) && fault.round >= 0 && Number.isSafeInteger(fault.step) && fault.step >= 0,
      "collectiveFaults",
      `round and step must be integers >= 0, got ${fault.round} and ${fault.step}`
    )
  }
  for (const fault of [...kills, ...hangs, ...floods, ...collectiveFaults]) {
    check(
      Number.isSafeInteger(fault.rank) && fault.rank >= 0 && fault.rank < worldSize,
      "kills/hangs",
      `rank ${fault.rank} is out of range [0, ${worldSize})`
    )
  }
  for (const flood of floods) {
    check(
      flood.framesPerSecond > 0 && Number.isFinite(flood.framesPerSecond),
      "floods",
      `framesPerSecond must be > 0, got ${flood.framesPerSecond}`
    )
  }
  const heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? defaults.heartbeatTimeoutMs
  // A live rank that waits (for its model, an Update) sends only its beats: a bound near their
  // interval would declare it.
  const beatMs = options.heartbeatIntervalMs ?? Math.min(defaults.heartbeatIntervalMs, heartbeatTimeoutMs / 4)
  const blockingSilenceMs = options.blockingSilenceMs ?? 0
  check(
    blockingSilenceMs === 0 || blockingSilenceMs >= 2 * beatMs,
    "blockingSilenceMs",
    `must be 0 (off) or at least twice the ranks' heartbeat interval (${beatMs} ms), got ${blockingSilenceMs}`
  )
  const compress = options.compress ?? "none"
  check(
    compress === "none" || compress === "fp16" || compress === "int8",
    "compress",
    `must be "none", "fp16" or "int8", got ${JSON.stringify(compress)}`
  )
  const outer = { lr: options.outerLr ?? 1, momentum: options.outerMomentum ?? 0 }
  check(outer.lr > 0 && Number.isFinite(outer.lr), "outerLr", `must be a number > 0, got ${outer.lr}`)
  check(outer.momentum >= 0 && outer.momentum < 1, "outerMomentum", `must be in [0, 1), got ${outer.momentum}`)
  check(backend === "cpu" || (outer.lr === 1 && outer.momentum === 0), "outerLr", "the outer optimizer needs the cpu backend")
  // Ring members contribute changes by themselves when they pack their steps (`RingCompressed`).
  // A round that may close without a rank (a deadline, a silence) folds that rank's contribution
  // into a later round, on an older model than the one it is averaged with: as a whole model it
  // takes away what the rounds it missed committed (a round of only late ones keeps none of it),
  // as a change it is added to the latest model (docs/edge-averaging.md "Deltas").
  const late = (options.roundDeadlineMs ?? 0) > 0 || (options.roundSilenceMs ?? 0) > 0
  const deltas = options.deltas ?? (backend === "cpu" && (compress !== "none" || outer.lr !== 1 || outer.momentum !== 0 || late))
  check(typeof deltas === "boolean", "deltas", `must be true or false, got ${JSON.stringify(deltas)}`)
  check(!deltas || backend === "cpu", "deltas", "contributions as changes need the cpu backend")
  return {
    worldSize,
    epochs,
    mode,
    transportKind,
    kills,
    hangs,
    floods,
    backend,
    collectiveFaults,
    ringSharedSlots,
    ringLinks,
    ringAreaMemoryMb,
    ringAreaFolder,
    batchSize,
    interruptGraceMs,
    rankNice,
    rankMemoryMb,
    heapLimitMb,
    heartbeatTimeoutMs,
    compress,
    outer,
    deltas
  }
}

/**
 * The run's aggregation options for the core's config (`Config.Options.aggregate` and the rest),
 * only those given: the core fills in the defaults and checks them (`LaunchError` with the option).
 *
 * @since 0.1.0
 * @category options
 */
export const aggregationOptions = (options: RunOptions) => ({
  ...(options.aggregate === undefined ? {} : { aggregate: options.aggregate }),
  ...(options.trimFraction === undefined ? {} : { trimFraction: options.trimFraction }),
  ...(options.clipNorm === undefined ? {} : { clipNorm: options.clipNorm }),
  ...(options.outlierFactor === undefined ? {} : { outlierFactor: options.outlierFactor }),
  ...(options.outlierRoundsMax === undefined ? {} : { outlierRoundsMax: options.outlierRoundsMax })
})
