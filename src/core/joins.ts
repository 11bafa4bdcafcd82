/**
 * Growing cohorts: ranks that join a running run. This module is the whole join path of
 * the core: the `Join` input's decision (a `Welcome` or a `JoinRefused` with its reason), and the
 * round boundary where joiners enter the rounds (and, with the ring backend, the ring).
 *
 * Its rules are docs/design.md §3.11 "Joins" (and §3.6: the failure limit counts the ranks that
 * were ever members, `Config.FailureLimit`):
 *
 * - **Capacity.** Rank indices are `[0, maxRanks)`; `[0, worldSize)` form the run (`minRanks` of
 *   them at least; `start`'s `absent` ones are vacant), the rest are vacant. A join takes a vacant
 *   index: the one asked for, or the lowest vacant one (`rank: undefined`, `--rank auto`). An index
 *   is taken at most once: a dead or exited rank's index is refused, never reused.
 * - **Refusals**, checked in this order: `RunOver` (completed), `ShuttingDown` (a
 *   `ShutdownWithSave` was sent, or an interrupted run), `NotStarted`, `BadIndex`, `Full` (no
 *   vacant index, or one `>= maxRanks`), `DeadIndex`, `ExitedIndex`, `LiveIndex`. Each is counted
 *   (`counters.joinsRefused`) and becomes one `JoinRefused` command; nothing else changes.
 * - **Welcome.** The joiner is alive and watched from the join's `nowMs`, counts in `activeCount`
 *   and in the failure limit's base (unless it dies before it enters the rounds: then it is counted
 *   in `Counters.joinersLost` instead, neither a failure of the limit nor in its base), and gets
 *   `Welcome{epoch, firstRound: round + 1, roles, model}` first. `model` is `coordinator` with the `cpu` backend (the shell sends the last `Update`'s
 *   mean) and `peer` with `ring` (a `SendModel` from a ring member follows when it enters the ring).
 * - **Rounds.** No round waits on a rank that joined after it opened: until the open round closes
 *   the joiner is `joining`. With `cpu` it counts as having contributed to the open round (a
 *   contribution it sends anyway is committed and averaged as usual); with `ring` it is not a
 *   member of the current generation (its `RoundDone`/`RingReady` are stale, re-forms after deaths
 *   leave it out; the `SingleSurvivor` limit counts members). When the open round closes, every
 *   joiner enters the next round; with `ring` the ring re-forms right there over every survivor
 *   (a new generation at a round boundary, so no collective is redone) after a `SendModel` of the
 *   round just closed from the lowest member.
 * - **Samples.** Progressive: the joiner's span grows from empty to the tail half of the largest
 *   remaining span (`ChunkPool.admit`) and it is filled at once (`cpu`), or when it enters the ring
 *   (`ring`: a rank that cannot contribute yet must hold nothing, or a round could wait on it).
 *   Static: the joiner gets an empty partition of the current epoch at once (`StartEpoch` with size
 *   0, so that it knows the epoch) and its first real partition at the next epoch start, planned
 *   over every survivor including it. In the current epoch it is never handed part of a live
 *   rank's assignment; from the round after its welcome it may receive a dead rank's remainder like
 *   any survivor (redistribution leaves `joining` ranks out unless no other survivor is left).
 *   So no sample ever has two holders: a span half is given up by its owner before it is taken, and
 *   a remainder belongs to a rank that left.
 * - **Model hand-over** (ring). `SendModel{to, from, round, generation}` asks member `from` for its
 *   parameters of `round` (the mean it applied when that round committed: the round that closed as
 *   `to` entered). The shell carries it out as `RequestParams{round}` to `from`, which answers
 *   with a `Params{round, params}` (the message the `cpu` backend contributes with, which had no
 *   meaning with `ring`: so no wire structure changes, and `params` is bounded by the codec like
 *   every contribution). The core checks it (`onModel`): only from the member it asked, for the
 *   round it asked, of the run's parameter count (`paramsLength`; any non-empty length when no
 *   count was agreed), every value finite; then it sends the joiner the ordinary
 *   `Update{round, params}` and the hand-over is done. It keeps no copy: the model is relayed.
 *   A `Params` nobody asked for is ignored and counted as before (`staleRoundDone`); a refused
 *   one is counted (`modelsRefused`), raises `BadParams`, and the joiner is asked for from the
 *   next member. Until its model arrives the joiner takes part in no round: its `RoundDone` and
 *   `RingReady` are stale, and the shell holds back every frame for it (its `FormRing`, chunks,
 *   partitions) until the `Update` is out, so it never enters a collective without the model.
 *   While a joiner is owed its model no round can close (it is a member of the generation), so
 *   every member still holds the model of `round`.
 * - **The asked member does not answer** before the ring rendezvous times out: at the retry the
 *   next member holding the model is asked (`reaskModels`); its late answer is nobody's then.
 * - **The asked member leaves first** (dies or exits before its `Params` arrived): in the same
 *   batch, before the ring re-forms, `SendModel` is re-issued for the new generation from the
 *   lowest member that holds the model (not a joiner still owed its own) and was not asked yet for
 *   this joiner. With no such member left (every member that held the model is gone), the run
 *   stops at once with `ReduceStall` (nobody can hand the model over, so the ring could never
 *   complete a round), instead of waiting for the rendezvous to time out.
 * - **Roles.** `fastest`: roles resolve once every survivor, joiners included, is calibrated, and a
 *   role leaving a rank goes to the fastest calibrated survivor; while some survivor is
 *   uncalibrated it goes to the lowest survivor that is not an uncalibrated joiner (the lowest
 *   survivor when only uncalibrated joiners are left, never a dead rank). `{rank: n}`:
 *   a pinned role, and the checkpoint role's failover, never move to a joiner.
 *
 * @since 0.1.0
 */
import * as ChunkPool from "./chunk-pool.ts"
import { alert, formRing, path } from "./emit.ts"
import { fill, sendRanges } from "./epochs.ts"
import type { Command, JoinRefusal } from "./inputs.ts"
import * as Liveness from "./liveness.ts"
import { modelHolder } from "./epoch-model.ts"
import * as Membership from "./membership.ts"
import type { Rank } from "./messages.ts"
import * as Split from "./split.ts"
import type { State } from "./state.ts"

const refuse = (state: State, cmds: Array<Command>, asked: Rank | undefined, reason: JoinRefusal, detail: string): void => {
  state.counters.joinsRefused += 1
  cmds.push({ _tag: "JoinRefused", rank: asked, reason, detail })
}

/** The reason a join for `asked` cannot take an index now, if any; else the index it takes. */
const placeJoin = (state: State, asked: Rank | undefined): Rank | readonly [JoinRefusal, string] => {
  if (state.phase === "running" && !state.shutdownSent && state.started) advanceVacantFrom(state)
  return joinVerdict(state, asked)
}

/**
 * Moves the auto-join cursor past taken indices (they stay taken: indices are never reused). Run
 * before and after every join, whatever index it asked for: a served join always names the index
 * the server gave it, and a cursor moved only by `rank: undefined` joins would leave every auto
 * join to scan all the ranks that joined before it (quadratic over a growing run). Amortized O(1).
 */
const advanceVacantFrom = (state: State): void => {
  const m = state.membership
  while (state.vacantFrom < m.worldSize && !Membership.isVacant(m, state.vacantFrom)) state.vacantFrom += 1
}

/**
 * What a `Join` for `asked` would decide now, without deciding it: the index it would
 * take, or `[reason, detail]` (the refusal's `JoinRefusal` and one line). Reads `state` only, so
 * a shell may check a join before it opens the joiner's link. `taken(r)`: indices the shell has
 * already handed to a link that the core has not yet seen join (default none); an auto join skips
 * them and an explicit one is refused `LiveIndex`. O(log maxRanks), plus the indices an auto join
 * skips.
 *
 * @since 0.1.0
 * @category joins
 */
export const joinVerdict = (
  state: State,
  asked: Rank | undefined,
  taken: (rank: Rank) => boolean = () => false
): Rank | readonly [JoinRefusal, string] => {
  const m = state.membership
  const capacity = m.worldSize
  if (state.phase === "completed") return ["RunOver", "the run completed"]
  if (state.phase !== "running" || state.shutdownSent) return ["ShuttingDown", "the run is saving and stopping"]
  if (!state.started) return ["NotStarted", "the run has not formed yet: join through the formation"]
  if (asked === undefined) {
    let free = state.vacantFrom
    while (free < capacity && (!Membership.isVacant(m, free) || taken(free))) free += 1
    if (free >= capacity) return ["Full", `all ${capacity} rank indices (maxRanks) are taken`]
    return free
  }
  if (!Number.isSafeInteger(asked) || asked < 0) return ["BadIndex", `rank index ${asked} is not an integer >= 0`]
  if (asked >= capacity) return ["Full", `rank index ${asked} is beyond maxRanks ${capacity}`]
  if (Membership.isDead(m, asked)) return ["DeadIndex", `rank ${asked} died: a dead rank's index is never reused`]
  if (Membership.isExited(m, asked)) return ["ExitedIndex", `rank ${asked} exited: its index is never reused`]
  if (Membership.isLive(m, asked)) return ["LiveIndex", `rank ${asked} is live`]
  if (taken(asked)) return ["LiveIndex", `rank ${asked} is joining`]
  return asked
}

/**
 * Decides a `Join`: refuses it with a reason, or welcomes the rank and, in progressive
 * mode with the `cpu` backend, hands it its first chunks. See the module docstring for the rules.
 * O(log maxRanks + chunksInflightMax), plus the vacant indices skipped by an auto join.
 */
export const onJoin = (state: State, asked: Rank | undefined, cmds: Array<Command>): void => {
  const placed = placeJoin(state, asked)
  if (typeof placed !== "number") return refuse(state, cmds, asked, placed[0], placed[1])
  const rank = placed
  Membership.admit(state.membership, rank)
  advanceVacantFrom(state)
  Liveness.watch(state.liveness, rank, state.clockMs)
  state.lateJoiner[rank] = 1
  state.joining.add(rank)
  state.counters.joins += 1
  const ring = state.ring !== undefined
  // cpu: the open round does not wait on it (it counts as having contributed until the round closes).
  if (!ring) state.contributed[rank] = 1
  const firstRound = state.round + 1
  const given =
    state.pool !== undefined && !ring
      ? `its span and first chunks of epoch ${state.epoch} now`
      : state.pool !== undefined
        ? `its span and first chunks when it enters the ring at round ${firstRound}`
        : `an empty partition of epoch ${state.epoch}; its first partition at epoch ${state.epoch + 1}`
  cmds.push({
    _tag: "Welcome",
    rank,
    epoch: state.epoch,
    firstRound,
    roles: { ...state.roles },
    model: ring ? "peer" : "coordinator",
    reason: `rank ${rank} joins at epoch ${state.epoch}, round ${firstRound} onwards (${path(state, rank)}): ${given}`
  })
  let samples = 0
  if (state.pool !== undefined) {
    if (!ring) samples = admitToPool(state, cmds, [rank], `rank ${rank} joined: its first chunks`)
  } else if (state.assignments !== undefined) {
    cmds.push({
      _tag: "SendRanges",
      kind: "StartEpoch",
      epoch: state.epoch,
      ranks: Int32Array.of(rank),
      offsets: Float64Array.of(0),
      sizes: Float64Array.of(0),
      reason: `rank ${rank} joined mid-epoch: an empty partition of epoch ${state.epoch}`
    })
  }
  state.joins.push({ rank, atMs: state.clockMs, epoch: state.epoch, firstRound, samples })
}

/** Grows each rank's span into the pool and fills it; returns the samples handed out. */
const admitToPool = (state: State, cmds: Array<Command>, ranks: ReadonlyArray<Rank>, reason: string): number => {
  const pool = state.pool!
  const out = new Split.SliceBuilder()
  const before = ChunkPool.remaining(pool)
  for (const rank of ranks) {
    ChunkPool.admit(pool, rank)
    fill(state, out, rank)
  }
  sendRanges(state, cmds, "AssignChunk", out, reason)
  return before - ChunkPool.remaining(pool)
}

/**
 * The open round just closed (`state.round` is already the next one): every joiner enters the
 * rounds. With `cpu` its stand-in contribution is cleared (the caller then recounts
 * `pendingRequired`); with `ring` it gets the closed round's model from the lowest member
 * (`SendModel`), the ring re-forms over every survivor, and in progressive mode the joiner's span
 * grows and it is filled. O(joiners), plus O(survivors) for a re-form.
 */
export const enterRounds = (state: State, cmds: Array<Command>): void => {
  if (state.joining.size === 0) return
  const joiners = [...state.joining].sort((a, b) => a - b)
  if (state.ring === undefined) {
    for (const rank of joiners) state.contributed[rank] = 0
    state.joining.clear()
    return
  }
  const from = modelHolder(state, undefined)
  const generation = state.ring.generation + 1
  if (from !== undefined) {
    for (const rank of joiners) {
      state.modelOwed.set(rank, { from, round: state.round - 1, tried: new Set([from]) })
      cmds.push({
        _tag: "SendModel",
        to: rank,
        from,
        round: state.round - 1,
        generation,
        reason: `rank ${rank} enters ring generation ${generation}: the model of round ${state.round - 1} from rank ${from}`
      })
    }
  }
  formRing(state, cmds, `ranks ${joiners.join(", ")} enter the ring at round ${state.round}`, true)
  state.joining.clear()
  if (state.pool !== undefined) admitToPool(state, cmds, joiners, `ranks ${joiners.join(", ")} entered the ring: their first chunks`)
}

/**
 * Formation started without the `absent` ranks (`start`'s option, `minRanks < worldSize`): their
 * indices become vacant and unwatched, and the roles start on a present rank (the pinned one if
 * present, else the lowest). A list that would leave fewer than `minRanks` is ignored with a
 * `BadStart` alert. O(absent + worldSize).
 */
export const vacateAbsent = (state: State, cmds: Array<Command>, absent: ReadonlyArray<Rank>): void => {
  const { config, membership } = state
  const unique = [...new Set(absent.filter((r) => Number.isSafeInteger(r) && r >= 0 && r < config.worldSize))]
  if (membership.activeCount - unique.length < config.minRanks) {
    alert(
      state,
      cmds,
      "BadStart",
      "root",
      `${unique.length} absent ranks would leave fewer than minRanks ${config.minRanks}: every rank counts as present`
    )
    return
  }
  for (const rank of unique) {
    Membership.vacate(membership, rank)
    Liveness.unwatch(state.liveness, rank)
  }
  state.vacantFrom = Math.min(state.vacantFrom, ...unique)
  // Roles start on a present rank: the lowest one for `fastest`, else the pinned one if present.
  const first = Membership.lowestLive(membership)!
  const pinned = config.rolePolicy === "fastest" ? first : Math.min(config.rolePolicy.rank, config.worldSize - 1)
  const holder = Membership.isLive(membership, pinned) ? pinned : first
  state.roles.checkpoint = holder
  state.roles.eval = holder
  state.roles.epochFn = holder
}
