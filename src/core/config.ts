/**
 * The coordinator's options, their defaults, and validation (docs/design.md §1, §3).
 *
 * Validation returns a reason instead of throwing: the core never throws for expected conditions.
 *
 * @since 0.1.0
 */
import type { Rank } from "./messages.ts"

/**
 * `{absolute: n}`: unrecoverable once `n` members died. `{fraction: f}`: once
 * `ceil(clamp(f, 0, 1) * members)` died, where `members` counts every rank that was ever a member
 * of the run (the ranks present at formation plus every welcomed joiner, dead and exited ones
 * included), so that a growing run's limit grows with it and a run that never grows keeps
 * `worldSize` (docs/design.md §3.6).
 *
 * A joiner becomes a member when the round open at its welcome closes (it enters the rounds). One
 * that dies before that is in the ledger and raises `RankLost` like any death, but is counted
 * apart (`Counters.joinersLost`): neither a failure of the limit nor in the fraction's base. So
 * joiners that die on arrival (a broken joining host, a token holder's junk joins) cannot stop a
 * run whose members are healthy, and a fraction stays a fraction of the ranks that trained.
 *
 * @since 0.1.0
 * @category model
 */
export type FailureLimit = { readonly absolute: number } | { readonly fraction: number }

/**
 * `{rank: n}` pins the callback roles to rank `min(n, worldSize - 1)`; `"fastest"` follows the
 * rank with the best smoothed throughput (docs/design.md §3.5).
 *
 * @since 0.1.0
 * @category model
 */
export type RolePolicy = "fastest" | { readonly rank: Rank }

/**
 * Options of a run, as given by the user. Every field but `worldSize`, `epochSamples` and `epochs`
 * has a default.
 *
 * @since 0.1.0
 * @category model
 */
export interface Options {
  /**
   * The initial world size: rank indices `[0, worldSize)` are the ranks of the formation, `>= 1`
   * (`>= 2` with the ring backend).
   */
  readonly worldSize: number
  /**
   * Capacity: rank indices are `[0, maxRanks)`; ranks `>= worldSize` may join while the
   * run trains (`Join` input), each index at most once (indices are never reused: a dead or exited
   * rank's index stays taken). Integer `>= worldSize`. Default `worldSize`: the run never grows.
   * The core's per-rank arrays are sized by it (about 55 bytes per index).
   */
  readonly maxRanks?: number
  /**
   * Formation starts once this many ranks joined: the shell starts the core with the
   * ranks it has (`start`'s `absent` names the formation indices still missing; they may join
   * later). Integer in `[1, worldSize]` (`>= 2` with the ring backend). Default `worldSize`.
   */
  readonly minRanks?: number
  /** Samples per epoch, `>= 1`. */
  readonly epochSamples: number
  /** Epochs to train, `>= 1`. */
  readonly epochs: number
  /** `static` (whole partitions, default) or `progressive` (chunks on demand). */
  readonly mode?: "static" | "progressive"
  /** `cpu` (coordinator-mediated mean, default) or `ring` (peer all-reduce, needs 2 ranks). */
  readonly backend?: "cpu" | "ring"
  /** A rank is stale after this many ms without a frame (strictly more). Default 10000. */
  readonly heartbeatTimeoutMs?: number
  /**
   * A rank asked for a checkpoint (`Checkpoint{version}` sent, no `CheckpointResult` yet) is not
   * stale before `heartbeatTimeoutMs + saveTimeoutMs` after the ask (after the end of the calls
   * it was asked before, when it holds several), once a frame of it arrived after the ask (a rank
   * sends one as it starts the save; one silent since before the ask is judged by its frames): a
   * synchronous trainer sends nothing while it saves. Past it, and its last frame's timeout, the rank is declared dead with a `SaveTimeout`
   * alert naming the bound, and the checkpoint fails over (docs/design.md §3.5). ms `> 0`. Default
   * 600000.
   */
  readonly saveTimeoutMs?: number
  /**
   * As `saveTimeoutMs`, for a rank asked for an eval (`Eval{epoch}` sent, no `EvalResult` yet);
   * past it, an `EvalTimeout` alert. ms `> 0`. Default 600000.
   */
  readonly evalTimeoutMs?: number
  /**
   * The ranks send frames while they run a call the coordinator asked for (a save, an eval),
   * from a thread that does not run the trainer, for up to the call's bound (`saveTimeoutMs`,
   * `evalTimeoutMs`): their holds then postpone no deadline, so a rank that stops beating is
   * declared after `heartbeatTimeoutMs` whatever call it was in, and one whose call runs past its
   * bound is declared once its beats stop, with the bound's alert (`liveness.ts`, `Hold.beaten`).
   * Rank processes do; worker threads and WebSocket ranks do not. Default false.
   */
  readonly beatsDuringCalls?: boolean
  /**
   * `fixed` (default): every rank's timeout is `heartbeatTimeoutMs`. `adaptive`: each rank's
   * timeout follows the gaps between its frames (smoothed mean plus `adaptiveDeviations` mean
   * deviations), between `adaptiveTimeoutMinMs` and `heartbeatTimeoutMs`: never later than
   * `fixed`, sooner for a steady link (`liveness.ts`; docs/liveness.md says when to turn it on).
   */
  readonly livenessDetector?: "fixed" | "adaptive"
  /** `adaptive`'s lower bound, ms in `(0, heartbeatTimeoutMs]`. Default `heartbeatTimeoutMs / 2`. */
  readonly adaptiveTimeoutMinMs?: number
  /** `adaptive`'s multiple of the mean deviation of a rank's gaps, `>= 0`. Default 8. */
  readonly adaptiveDeviations?: number
  /**
   * A gap longer than this many ms between two consecutive inputs is a stall of the coordinator
   * itself (its thread or process did not run): liveness pauses for the whole gap and a
   * `CoordinatorStall` warn alert records it, so that the coordinator's own stall never makes live
   * ranks look stale, whatever its length (docs/design.md §3.10). The shell must give the core an input
   * (a tick) at least twice per this period. Default 0: off, for callers that step the core with
   * their own irregular times; the coordinator actor turns it on (`heartbeatTimeoutMs / 4`).
   */
  readonly coordinatorStallMs?: number
  /** Default: none (only the backend limits apply). */
  readonly failureLimit?: FailureLimit | undefined
  /** How a dead rank's remainder is split: `equal` (default) or `throughput`. */
  readonly redistribution?: "equal" | "throughput"
  /**
   * Static partitions in proportion to these weights, one per rank index (`worldSize` or
   * `maxRanks` entries; with `worldSize` entries a joiner's weight is the mean of the given ones);
   * default equal split.
   */
  readonly partitionRatios?: ReadonlyArray<number>
  /** Default `"fastest"`. */
  readonly rolePolicy?: RolePolicy
  /** Samples per training batch. Default 32. */
  readonly batchSize?: number
  /** Progressive chunk length in samples. Default `4 * batchSize`. */
  readonly chunkSamples?: number
  /** Progressive chunks a rank may hold at once. Default 2. */
  readonly chunksInflightMax?: number
  /** Eval after every this many epochs; 0 never. Default 1. */
  readonly evalEveryEpochs?: number
  /** Checkpoint after every this many epochs; 0 never. Default 1. */
  readonly checkpointEveryEpochs?: number
  /** Alert repeats of one (class, path) within this many ms fold into one record. Default 10000. */
  readonly alertCollapseMs?: number
  /** Host name of each rank, for alert paths when ranks span more than one host. */
  readonly rankHosts?: ReadonlyArray<string>
  /** A ring rendezvous not complete after this many ms is retried. Default 5000. */
  readonly ringRendezvousTimeoutMs?: number
  /** Ring rendezvous attempts before the run saves and stops (`ReduceStall`). Default 3. */
  readonly ringRendezvousAttemptsMax?: number
  /** An averaging round open this long saves and stops the run (`ReduceStall`); 0 never. Default 600000. */
  readonly roundStallMs?: number
  /**
   * `cpu` backend: a round open this many ms (from its first contribution) closes with the
   * contributions in hand once `roundQuorum` of the survivors contributed, so that a slow rank
   * does not set everyone's pace; its contribution, when it comes, is folded into the round open
   * then, and its samples commit at that point (docs/design.md §3.3: a contribution commits when it is
   * folded). 0 (default): off, a round waits for every survivor holding uncommitted work. Refused
   * with the `ring` backend, whose round is one collective of every member.
   */
  readonly roundDeadlineMs?: number
  /**
   * With `roundDeadlineMs`: the fraction (0, 1] of the survivors whose contributions a round needs
   * before its deadline may close it; at least one. Default 0.5.
   */
  readonly roundQuorum?: number
  /**
   * `cpu` backend: the open round does not wait on a rank that owes it a contribution (it holds
   * uncommitted work) but sent nothing for more than this many ms (or twice the run's usual round,
   * when longer), counted from the latest of its last frame, the last chunks handed to it and, if
   * it contributed to the last round, that round's close. The round closes once every other such
   * rank contributed; the silent one is not declared, stays owed to the next round, and a
   * contribution it sends later is folded into the round open then, its samples committing at
   * that point (as with `roundDeadlineMs`). So a rank that left without a word (or whose process
   * stopped) holds no round still, and a live one is never lost for it: at worst it contributes a
   * round late. Progressive mode: once the epoch has nothing left to hand out, such a rank's
   * uncommitted chunks are taken back and handed to idle ranks (docs/design.md §3.7), its `Params`
   * dropped until it is clean. Set it above the gaps between a training rank's frames (a batch,
   * the `Progress` interval). ms `>= 0`; 0 (default): off. Refused with the `ring` backend.
   */
  readonly roundSilenceMs?: number
  /**
   * A live rank the open averaging round waits on (it holds uncommitted work and did not
   * contribute yet; with the `ring` backend, a member that did not say `RingReady` to the pending
   * rendezvous or `RoundDone` to the open round) and that sent nothing for more than this many ms is declared dead, as a silent
   * leave, without waiting out `heartbeatTimeoutMs`: under churn a round then does not stand still
   * for a rank that left without a word. Set it above the longest gap between a training rank's
   * frames (a chunk or a `Progress` interval, a save), or live ranks are declared. Ranks the round
   * does not wait on (idle, contributed, waiting for the `Update`), and ranks that did not report
   * trained work since they joined, keep `heartbeatTimeoutMs`.
   * ms `>= 0`; 0 (default): off.
   */
  readonly blockingSilenceMs?: number
  /**
   * With `blockingSilenceMs`: the largest share (0, 1] of the live ranks that may fall silent
   * together (their last frames within `blockingSilenceMs` of one another, all silent past it) for
   * it to declare them. More ranks silent together says that something they share went quiet (a
   * process running many ranks, their host, its network), not that each left: they are then not
   * declared before `heartbeatTimeoutMs`. Default 1: no such check.
   */
  readonly blockingSilenceQuietMax?: number
  /**
   * When a second rank crashes with the same error as an earlier one (same message and top stack
   * frame, compared by the crash fingerprint of the death report): `stop` (default) saves and
   * stops the run with `TrainerFault`, since the trainer has a bug that redistribution would only
   * hand to the survivors; `continue` treats it as any death.
   */
  readonly onRepeatedCrash?: "stop" | "continue"
  /**
   * `cpu` backend: how a round's contributions are combined (docs/edge-averaging.md): `mean`
   * (default, as always), `trimmed-mean` (coordinate-wise, `trimFraction` cut from each end) or
   * `median` (coordinate-wise). Refused with the `ring` backend, whose members average among
   * themselves.
   */
  readonly aggregate?: "mean" | "trimmed-mean" | "median"
  /** With `trimmed-mean`: the share of the contributions cut from each end, per coordinate, in [0, 0.5). Default 0.25. */
  readonly trimFraction?: number
  /**
   * `cpu` backend: each contribution's change from the last committed model is scaled down to
   * this L2 norm when longer, before it is combined. 0 (default): off.
   */
  readonly clipNorm?: number
  /**
   * `cpu` backend: a contribution whose distance from the round's coordinate-wise median is more
   * than this many times the median distance raises an `OutlierParams` alert naming its rank
   * (rounds of 3 contributions or more). 0: never. Default 10 with `trimmed-mean`, `median` or
   * `clipNorm`; 0 with the plain mean (the check costs a coordinate-wise median per round).
   */
  readonly outlierFactor?: number
  /** A rank whose contributions were outliers in this many rounds is declared dead (`OutlierParams`). 0 (default): never. */
  readonly outlierRoundsMax?: number
}

/**
 * How the `cpu` backend combines a round (`Options.aggregate`, `trimFraction`, `clipNorm`,
 * `outlierFactor`), every default filled in.
 *
 * @since 0.1.0
 * @category model
 */
export interface Aggregation {
  readonly aggregate: "mean" | "trimmed-mean" | "median"
  readonly trimFraction: number
  readonly clipNorm: number
  readonly outlierFactor: number
}

/**
 * Options with every default filled in.
 *
 * @since 0.1.0
 * @category model
 */
export interface Config {
  readonly worldSize: number
  readonly maxRanks: number
  readonly minRanks: number
  readonly epochSamples: number
  readonly epochs: number
  readonly mode: "static" | "progressive"
  readonly backend: "cpu" | "ring"
  readonly heartbeatTimeoutMs: number
  readonly saveTimeoutMs: number
  readonly evalTimeoutMs: number
  readonly beatsDuringCalls: boolean
  readonly livenessDetector: "fixed" | "adaptive"
  readonly adaptiveTimeoutMinMs: number
  readonly adaptiveDeviations: number
  readonly coordinatorStallMs: number
  readonly failureLimit: FailureLimit | undefined
  readonly redistribution: "equal" | "throughput"
  readonly partitionRatios: ReadonlyArray<number> | undefined
  readonly rolePolicy: RolePolicy
  readonly batchSize: number
  readonly chunkSamples: number
  readonly chunksInflightMax: number
  readonly evalEveryEpochs: number
  readonly checkpointEveryEpochs: number
  readonly alertCollapseMs: number
  readonly rankHosts: ReadonlyArray<string> | undefined
  readonly ringRendezvousTimeoutMs: number
  readonly ringRendezvousAttemptsMax: number
  readonly roundStallMs: number
  readonly roundDeadlineMs: number
  readonly roundQuorum: number
  readonly roundSilenceMs: number
  readonly blockingSilenceMs: number
  readonly blockingSilenceQuietMax: number
  readonly onRepeatedCrash: "stop" | "continue"
  readonly aggregation: Aggregation
  readonly outlierRoundsMax: number
}

/**
 * Default values, in one place for docs and the CLI.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults = {
  mode: "static",
  backend: "cpu",
  heartbeatTimeoutMs: 10_000,
  saveTimeoutMs: 600_000,
  evalTimeoutMs: 600_000,
  livenessDetector: "fixed",
  adaptiveDeviations: 8,
  redistribution: "equal",
  rolePolicy: "fastest",
  batchSize: 32,
  chunkBatches: 4,
  chunksInflightMax: 2,
  evalEveryEpochs: 1,
  checkpointEveryEpochs: 1,
  alertCollapseMs: 10_000,
  ringRendezvousTimeoutMs: 5_000,
  ringRendezvousAttemptsMax: 3,
  roundStallMs: 600_000,
  roundDeadlineMs: 0,
  roundQuorum: 0.5,
  roundSilenceMs: 0,
  blockingSilenceMs: 0,
  blockingSilenceQuietMax: 1,
  onRepeatedCrash: "stop",
  aggregate: "mean",
  trimFraction: 0.25,
  clipNorm: 0,
  outlierFactor: 10,
  outlierRoundsMax: 0
} as const

/**
 * A validation failure: which option and why.
 *
 * @since 0.1.0
 * @category model
 */
export interface Invalid {
  readonly _tag: "Invalid"
  readonly option: string
  readonly reason: string
}

const isCount = (n: unknown, min: number): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= min

/**
 * Fills defaults and validates. Returns the config, or `Invalid{option, reason}` for the first bad
 * option (e.g. a ring backend with `worldSize < 2`, docs/design.md §3.6).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Config | Invalid => {
  // Long because it checks every option in turn, each check a line or two; splitting them would scatter one table.
  const invalid = (option: string, reason: string): Invalid => ({ _tag: "Invalid", option, reason })
  const o = options
  if (!isCount(o.worldSize, 1)) return invalid("worldSize", `must be an integer >= 1, got ${String(o.worldSize)}`)
  if (!isCount(o.epochSamples, 1)) return invalid("epochSamples", `must be an integer >= 1, got ${String(o.epochSamples)}`)
  if (!isCount(o.epochs, 1)) return invalid("epochs", `must be an integer >= 1, got ${String(o.epochs)}`)
  const maxRanks = o.maxRanks ?? o.worldSize
  if (!isCount(maxRanks, o.worldSize))
    return invalid("maxRanks", `must be an integer >= worldSize (${o.worldSize}), got ${String(maxRanks)}`)
  const backend = o.backend ?? defaults.backend
  if (backend !== "cpu" && backend !== "ring") return invalid("backend", `must be cpu or ring, got ${String(backend)}`)
  if (backend === "ring" && o.worldSize < 2) {
    return invalid("backend", `the ring backend needs worldSize >= 2, got ${o.worldSize}`)
  }
  const minRanks = o.minRanks ?? o.worldSize
  if (!isCount(minRanks, backend === "ring" ? 2 : 1) || minRanks > o.worldSize) {
    return invalid("minRanks", `must be an integer in [${backend === "ring" ? 2 : 1}, worldSize (${o.worldSize})], got ${String(minRanks)}`)
  }
  const mode = o.mode ?? defaults.mode
  if (mode !== "static" && mode !== "progressive") return invalid("mode", `must be static or progressive, got ${String(mode)}`)
  const heartbeatTimeoutMs = o.heartbeatTimeoutMs ?? defaults.heartbeatTimeoutMs
  if (!(typeof heartbeatTimeoutMs === "number" && heartbeatTimeoutMs > 0 && Number.isFinite(heartbeatTimeoutMs))) {
    return invalid("heartbeatTimeoutMs", `must be a positive number of ms, got ${String(heartbeatTimeoutMs)}`)
  }
  const isMs = (ms: unknown): ms is number => typeof ms === "number" && ms > 0 && Number.isFinite(ms)
  const saveTimeoutMs = o.saveTimeoutMs ?? defaults.saveTimeoutMs
  if (!isMs(saveTimeoutMs)) return invalid("saveTimeoutMs", `must be a positive number of ms, got ${String(saveTimeoutMs)}`)
  const evalTimeoutMs = o.evalTimeoutMs ?? defaults.evalTimeoutMs
  if (!isMs(evalTimeoutMs)) return invalid("evalTimeoutMs", `must be a positive number of ms, got ${String(evalTimeoutMs)}`)
  const beatsDuringCalls = o.beatsDuringCalls ?? false
  if (typeof beatsDuringCalls !== "boolean") return invalid("beatsDuringCalls", `must be true or false, got ${String(beatsDuringCalls)}`)
  const livenessDetector = o.livenessDetector ?? defaults.livenessDetector
  if (livenessDetector !== "fixed" && livenessDetector !== "adaptive") {
    return invalid("livenessDetector", `must be fixed or adaptive, got ${String(livenessDetector)}`)
  }
  const adaptiveTimeoutMinMs = o.adaptiveTimeoutMinMs ?? heartbeatTimeoutMs / 2
  if (!(isMs(adaptiveTimeoutMinMs) && adaptiveTimeoutMinMs <= heartbeatTimeoutMs)) {
    return invalid(
      "adaptiveTimeoutMinMs",
      `must be a number of ms in (0, heartbeatTimeoutMs (${heartbeatTimeoutMs})], got ${String(adaptiveTimeoutMinMs)}`
    )
  }
  const adaptiveDeviations = o.adaptiveDeviations ?? defaults.adaptiveDeviations
  if (!(typeof adaptiveDeviations === "number" && adaptiveDeviations >= 0 && Number.isFinite(adaptiveDeviations))) {
    return invalid("adaptiveDeviations", `must be a finite number >= 0, got ${String(adaptiveDeviations)}`)
  }
  const coordinatorStallMs = o.coordinatorStallMs ?? 0
  if (!(typeof coordinatorStallMs === "number" && coordinatorStallMs >= 0 && Number.isFinite(coordinatorStallMs))) {
    return invalid("coordinatorStallMs", `must be a number of ms >= 0 (0: off), got ${String(coordinatorStallMs)}`)
  }
  const limit = o.failureLimit
  if (limit !== undefined) {
    if ("absolute" in limit) {
      if (!isCount(limit.absolute, 0)) return invalid("failureLimit", `absolute must be an integer >= 0, got ${String(limit.absolute)}`)
    } else if (!(typeof limit.fraction === "number" && Number.isFinite(limit.fraction))) {
      return invalid("failureLimit", `fraction must be a finite number, got ${String(limit.fraction)}`)
    }
  }
  const redistribution = o.redistribution ?? defaults.redistribution
  if (redistribution !== "equal" && redistribution !== "throughput") {
    return invalid("redistribution", `must be equal or throughput, got ${String(redistribution)}`)
  }
  const ratios = o.partitionRatios
  if (ratios !== undefined) {
    if (ratios.length !== o.worldSize && ratios.length !== maxRanks) {
      return invalid(
        "partitionRatios",
        `needs ${o.worldSize}${maxRanks === o.worldSize ? "" : ` or ${maxRanks}`} entries, got ${ratios.length}`
      )
    }
    const sum = ratios.reduce((a, b) => a + b, 0)
    if (!ratios.every((w) => Number.isFinite(w) && w >= 0) || !(sum > 0 && Number.isFinite(sum))) {
      return invalid("partitionRatios", "must be finite, non-negative, not all zero, with a finite sum")
    }
  }
  const rolePolicy = o.rolePolicy ?? defaults.rolePolicy
  if (rolePolicy !== "fastest" && !(typeof rolePolicy === "object" && isCount(rolePolicy.rank, 0))) {
    return invalid("rolePolicy", `must be "fastest" or {rank: n} with n >= 0`)
  }
  const batchSize = o.batchSize ?? defaults.batchSize
  if (!isCount(batchSize, 1)) return invalid("batchSize", `must be an integer >= 1, got ${String(batchSize)}`)
  const chunkSamples = o.chunkSamples ?? defaults.chunkBatches * batchSize
  if (!isCount(chunkSamples, 1)) return invalid("chunkSamples", `must be an integer >= 1, got ${String(chunkSamples)}`)
  const chunksInflightMax = o.chunksInflightMax ?? defaults.chunksInflightMax
  if (!isCount(chunksInflightMax, 1)) return invalid("chunksInflightMax", `must be an integer >= 1, got ${String(chunksInflightMax)}`)
  const evalEveryEpochs = o.evalEveryEpochs ?? defaults.evalEveryEpochs
  if (!isCount(evalEveryEpochs, 0)) return invalid("evalEveryEpochs", `must be an integer >= 0`)
  const checkpointEveryEpochs = o.checkpointEveryEpochs ?? defaults.checkpointEveryEpochs
  if (!isCount(checkpointEveryEpochs, 0)) return invalid("checkpointEveryEpochs", `must be an integer >= 0`)
  const alertCollapseMs = o.alertCollapseMs ?? defaults.alertCollapseMs
  if (!(alertCollapseMs >= 0 && Number.isFinite(alertCollapseMs))) return invalid("alertCollapseMs", "must be >= 0")
  if (o.rankHosts !== undefined && o.rankHosts.length !== o.worldSize) {
    return invalid("rankHosts", `needs ${o.worldSize} entries, got ${o.rankHosts.length}`)
  }
  const ringRendezvousTimeoutMs = o.ringRendezvousTimeoutMs ?? defaults.ringRendezvousTimeoutMs
  if (!(ringRendezvousTimeoutMs > 0)) return invalid("ringRendezvousTimeoutMs", "must be > 0")
  const ringRendezvousAttemptsMax = o.ringRendezvousAttemptsMax ?? defaults.ringRendezvousAttemptsMax
  if (!isCount(ringRendezvousAttemptsMax, 1)) return invalid("ringRendezvousAttemptsMax", "must be an integer >= 1")
  const roundStallMs = o.roundStallMs ?? defaults.roundStallMs
  if (!(roundStallMs >= 0 && Number.isFinite(roundStallMs))) return invalid("roundStallMs", "must be >= 0")
  const roundDeadlineMs = o.roundDeadlineMs ?? defaults.roundDeadlineMs
  if (!(roundDeadlineMs >= 0 && Number.isFinite(roundDeadlineMs)))
    return invalid("roundDeadlineMs", `must be >= 0, got ${String(roundDeadlineMs)}`)
  if (roundDeadlineMs > 0 && backend === "ring") {
    return invalid("roundDeadlineMs", "needs the cpu backend: a ring round is one collective of every member")
  }
  const roundQuorum = o.roundQuorum ?? defaults.roundQuorum
  if (!(roundQuorum > 0 && roundQuorum <= 1)) return invalid("roundQuorum", `must be in (0, 1], got ${String(roundQuorum)}`)
  const roundSilenceMs = o.roundSilenceMs ?? defaults.roundSilenceMs
  if (!(roundSilenceMs >= 0 && Number.isFinite(roundSilenceMs)))
    return invalid("roundSilenceMs", `must be a number of ms >= 0 (0: off), got ${String(roundSilenceMs)}`)
  if (roundSilenceMs > 0 && backend === "ring")
    return invalid("roundSilenceMs", "needs the cpu backend: a ring round is one collective of every member")
  const blockingSilenceMs = o.blockingSilenceMs ?? defaults.blockingSilenceMs
  if (!(blockingSilenceMs >= 0 && Number.isFinite(blockingSilenceMs)))
    return invalid("blockingSilenceMs", `must be a number of ms >= 0 (0: off), got ${String(blockingSilenceMs)}`)
  const blockingSilenceQuietMax = o.blockingSilenceQuietMax ?? defaults.blockingSilenceQuietMax
  if (!(blockingSilenceQuietMax > 0 && blockingSilenceQuietMax <= 1))
    return invalid("blockingSilenceQuietMax", `must be a fraction in (0, 1] of the live ranks, got ${String(blockingSilenceQuietMax)}`)
  const onRepeatedCrash = o.onRepeatedCrash ?? defaults.onRepeatedCrash
  if (onRepeatedCrash !== "stop" && onRepeatedCrash !== "continue") {
    return invalid("onRepeatedCrash", `must be stop or continue, got ${String(onRepeatedCrash)}`)
  }
  const aggregation = aggregationOf(o, backend)
  if (aggregation._tag === "Invalid") return aggregation
  const outlierRoundsMax = o.outlierRoundsMax ?? defaults.outlierRoundsMax
  if (!isCount(outlierRoundsMax, 0)) return invalid("outlierRoundsMax", `must be an integer >= 0, got ${String(outlierRoundsMax)}`)
  return {
    worldSize: o.worldSize,
    maxRanks,
    minRanks,
    epochSamples: o.epochSamples,
    epochs: o.epochs,
    mode,
    backend,
    heartbeatTimeoutMs,
    saveTimeoutMs,
    evalTimeoutMs,
    beatsDuringCalls,
    livenessDetector,
    adaptiveTimeoutMinMs,
    adaptiveDeviations,
    coordinatorStallMs,
    failureLimit: limit,
    redistribution,
    partitionRatios:
      ratios === undefined || ratios.length === maxRanks
        ? ratios
        : [...ratios, ...new Array<number>(maxRanks - ratios.length).fill(ratios.reduce((a, b) => a + b, 0) / ratios.length)],
    rolePolicy,
    batchSize,
    chunkSamples,
    chunksInflightMax,
    evalEveryEpochs,
    checkpointEveryEpochs,
    alertCollapseMs,
    rankHosts: o.rankHosts,
    ringRendezvousTimeoutMs,
    ringRendezvousAttemptsMax,
    roundStallMs,
    roundDeadlineMs,
    roundQuorum,
    roundSilenceMs,
    blockingSilenceMs,
    blockingSilenceQuietMax,
    onRepeatedCrash,
    aggregation: aggregation.value,
    outlierRoundsMax
  }
}

/** The aggregation options checked, defaults filled in (`Options.aggregate` and the rest). */
const aggregationOf = (o: Options, backend: "cpu" | "ring"): Invalid | { readonly _tag: "Ok"; readonly value: Aggregation } => {
  const invalid = (option: string, reason: string): Invalid => ({ _tag: "Invalid", option, reason })
  const aggregate = o.aggregate ?? defaults.aggregate
  if (aggregate !== "mean" && aggregate !== "trimmed-mean" && aggregate !== "median") {
    return invalid("aggregate", `must be mean, trimmed-mean or median, got ${String(aggregate)}`)
  }
  const trimFraction = o.trimFraction ?? defaults.trimFraction
  if (!(trimFraction >= 0 && trimFraction < 0.5)) return invalid("trimFraction", `must be in [0, 0.5), got ${String(trimFraction)}`)
  const clipNorm = o.clipNorm ?? defaults.clipNorm
  if (!(clipNorm >= 0 && Number.isFinite(clipNorm))) return invalid("clipNorm", `must be a finite number >= 0, got ${String(clipNorm)}`)
  const robust = aggregate !== "mean" || clipNorm > 0
  const outlierFactor = o.outlierFactor ?? (robust ? defaults.outlierFactor : 0)
  if (!(outlierFactor >= 0 && Number.isFinite(outlierFactor)))
    return invalid("outlierFactor", `must be a finite number >= 0, got ${String(outlierFactor)}`)
  if (backend === "ring" && robust) return invalid("aggregate", "needs the cpu backend: ring members average among themselves")
  return { _tag: "Ok", value: { aggregate, trimFraction, clipNorm, outlierFactor } }
}

/**
 * The number of failures at which the run is unrecoverable: `absolute n` gives `n`;
 * `fraction f` gives `ceil(clamp(f, 0, 1) * worldSize)` (the core passes the count of ranks that
 * were ever members as `worldSize`: `Membership.joined` less `Counters.joinersLost`), the product rounded to 9 decimal places
 * before the ceiling so that 0.07 of 100 is 7 (docs/design.md §3.6; fixes floating-point noise in
 * floDl's `Percent`). `undefined` when there is no limit.
 *
 * @since 0.1.0
 * @category failure-limit
 */
export const failureLimitCount = (limit: FailureLimit | undefined, worldSize: number): number | undefined => {
  if (limit === undefined) return undefined
  if ("absolute" in limit) return limit.absolute
  const fraction = Math.min(1, Math.max(0, limit.fraction))
  const product = Math.round(fraction * worldSize * 1e9) / 1e9
  return Math.ceil(product)
}
