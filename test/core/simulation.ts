/**
 * A seeded simulation of a whole cluster around the coordinator core: simulated ranks that train
 * their lists batch by batch, contribute to averaging rounds, complete chunks and heartbeat, on a
 * simulated clock and network, with faults (kills reported by a supervisor, hangs caught by
 * staleness, clean exits, late frames from dead ranks).
 *
 * With the ring backend (docs/ring.md) the ranks follow the rank actor's protocol in the abstract: at a
 * contribution point a rank keeps its samples pending and joins the collective of its ring
 * generation and round; a collective finishes once every member of that generation joined it
 * (a dead or hung member never does, so the others wait until `DeclareDead`/`FormRing`); then the
 * rank sends `RoundDone` and waits for `RoundCommitted`. A newer `FormRing` makes it redo the round
 * in the new generation. A rank with no work joins a collective of its round as soon as a member
 * of its ring has (the neighbour's first message reaching it).
 *
 * Growing cohorts (docs/growing.md): with `joins` the safety phase also asks ranks to join mid-run (most
 * with `--rank auto`, some with an explicit index: vacant, dead, live or beyond `maxRanks`), and
 * `absent` formation ranks start vacant. A welcomed joiner starts like the rank actor would: it
 * knows its epoch and first round from `Welcome`; with the ring backend the member `SendModel`
 * names answers with its model (`Params`, as the rank actor answers `RequestParams`) unless it hung
 * or left, and the joiner gets nothing else (the shell holds its frames back) until the core
 * forwards that model as its `Update`. Checked: no message reaches a rank before its welcome, no sample is
 * sent to a rank while another live rank holds it (two owners), each refusal's reason is true,
 * ring rounds close with exactly the members of their generation, and a join after the end is
 * refused.
 *
 * Invariant checks live here, apart from the code they check: each step's commands are checked
 * as they come out, and the whole run is checked at the end. A failure throws with the seed first
 * and then the event log.
 */
import { uniformInt } from "pure-rand/distribution/uniformInt"
import { xoroshiro128plus } from "pure-rand/generator/xoroshiro128plus"
import * as Assignments from "../../src/core/assignments.ts"
import * as Audit from "../../src/core/audit.ts"
import * as ChunkPool from "../../src/core/chunk-pool.ts"
import type * as Config from "../../src/core/config.ts"
import * as Coordinator from "../../src/core/coordinator.ts"
import type { Rank, ToCoordinator, ToRank } from "../../src/core/messages.ts"

export interface Scenario {
  readonly seed: number
  readonly options: Config.Options
  /** Faults to inject during the safety phase. */
  readonly kills: number
  readonly hangs: number
  readonly exits: number
  readonly lateFrames: number
  /** Batches between averaging contributions. */
  readonly averageEvery: number
  /** Steps of the safety phase (faults happen here); the liveness phase follows without faults. */
  readonly safetySteps: number
  /** Where a resumed run begins (docs/resume.md); default: a fresh run from epoch 0. */
  readonly resume?: Coordinator.Resume
  /** Join attempts during the safety phase (docs/growing.md); default 0. */
  readonly joins?: number
  /** Formation ranks absent at the start (the highest indices, at most `worldSize - minRanks`). */
  readonly absent?: number
  /**
   * Ring, progressive: a rank that reported `RoundDone` keeps training its chunks (half its turns)
   * while it waits for `RoundCommitted`, so `ChunkDone`s arrive after its contribution; default
   * false (today's rank actor trains nothing in that wait).
   */
  readonly trainWhileWaiting?: boolean
  /** Sees every command the core returns, in order (a recorder of the run's journal). */
  readonly onCommand?: (command: Coordinator.Command) => void
}

interface SimRank {
  readonly rank: Rank
  state: "running" | "killed" | "hung" | "exited" | "vacant"
  /** Ring joiners: the model arrived (`SendModel`), so it may take part in a ring. */
  hasModel: boolean
  epoch: number
  /** Static: the list's entries; progressive: chunks held in order. */
  entries: Array<[number, number]>
  trained: number
  batchesSinceContribution: number
  contributedUpTo: number
  waitingUpdate: boolean
  /** Progressive: chunks done since the last contribution. */
  doneSinceContribution: number
  chunkProgress: number
  outbox: Array<ToCoordinator>
  /** Model hand-overs asked of it (`SendModel`), sent at its next unit of work. */
  answers: Array<ToCoordinator>
  shutdown: boolean
  /** Ring: the latest generation and its members; the next round; the pending contribution. */
  generation: number
  members: ReadonlyArray<Rank>
  round: number
  pendingSamples: number
  joined: boolean
  reported: boolean
}

export interface SimResult {
  readonly state: Coordinator.State
  readonly log: ReadonlyArray<string>
  readonly shutdownWithSaveCount: number
  readonly commandCount: number
  /** Ring backend: rounds closed, and those closed in a generation after the first (redone or later rounds). */
  readonly ringRoundsClosed: number
  readonly ringRoundsClosedAfterReform: number
  /** Issue 17: joins welcomed, refusals by reason, ring generations a joiner entered. */
  readonly joined: number
  readonly refused: Readonly<Record<string, number>>
  readonly ringEntries: number
  /** Ring joiners asked for their model again because the member asked first left before it sent it. */
  readonly modelsReissued: number
  /** Progressive joiners that got samples of the epoch they joined in. */
  readonly joinersTrainedAtOnce: number
  /** Ring, progressive: chunks done after their rank's report that a ring round left for a later one. */
  readonly chunksCarriedOver: number
}

const HEARTBEAT_TIMEOUT_MS = 300

/** Runs a scenario; throws with the seed and the event log when an invariant breaks. */
export const run = (scenario: Scenario): SimResult => {
  const rng = xoroshiro128plus(scenario.seed)
  const rand = (lo: number, hi: number) => uniformInt(rng, lo, hi)
  const log: Array<string> = []
  const fail = (why: string): never => {
    throw new Error(
      `simulation failed (seed ${scenario.seed}): ${why}\noptions ${JSON.stringify(scenario.options)}\n${log.slice(-80).join("\n")}`
    )
  }
  const options = { heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS, alertCollapseMs: 0, ...scenario.options }
  const made = Coordinator.make(options, 0)
  if ("_tag" in made) return fail(`invalid options ${made.option}: ${made.reason}`)
  const state = made
  const { worldSize, batchSize = 32 } = options
  const maxRanks = options.maxRanks ?? worldSize
  let joinsLeft = scenario.joins ?? 0
  let joined = 0
  let ringEntries = 0
  let modelsReissued = 0
  let joinersTrainedAtOnce = 0
  const refused: Record<string, number> = {}
  const welcomed = new Set<Rank>()
  /** Ring: the members of each generation, from its `FormRing`s. */
  const peersOf = new Map<number, ReadonlyArray<Rank>>()
  /** The live holder of each sample of the current epoch (-1: none), from the ranges sent. */
  let ownerEpoch = -1
  let owner = new Int32Array(0)
  const progressive = options.mode === "progressive"
  let nowMs = 0
  let shutdownWithSaveCount = 0
  let commandCount = 0
  let ringRoundsClosed = 0
  let ringRoundsClosedAfterReform = 0
  const declaredDead = new Set<Rank>()
  /** Every emitted epoch summary with its text when emitted: a summary never changes afterwards. */
  const emitted: Array<readonly [Coordinator.EpochSummary, string]> = []
  const absent = Math.min(scenario.absent ?? 0, worldSize - (options.minRanks ?? worldSize))
  const ranks: Array<SimRank> = Array.from({ length: maxRanks }, (_, rank) => ({
    rank,
    state: rank < worldSize - absent ? "running" : "vacant",
    hasModel: true,
    epoch: 0,
    entries: [],
    trained: 0,
    batchesSinceContribution: 0,
    contributedUpTo: 0,
    waitingUpdate: false,
    doneSinceContribution: 0,
    chunkProgress: 0,
    outbox: [],
    answers: [],
    shutdown: false,
    generation: -1,
    members: [],
    round: scenario.resume?.firstRound ?? 0,
    pendingSamples: 0,
    joined: false,
    reported: false
  }))
  const ring = options.backend === "ring"
  /** Ring: who joined each collective, by `generation:round`. */
  const joinedBy = new Map<string, Set<Rank>>()
  const collective = (generation: number, round: number): Set<Rank> => {
    const key = `${generation}:${round}`
    let set = joinedBy.get(key)
    if (set === undefined) joinedBy.set(key, (set = new Set()))
    return set
  }
  const pendingReports: Array<Rank> = []

  /**
   * Ring, progressive: per rank, the chunks (`epoch:offset:size`) whose `ChunkDone` the core
   * credited after the rank's last accepted `RoundDone` (`doneAfter`) and those its accepted
   * reports covered (`covered`), so that each round's close is checked: it commits exactly the
   * covered chunks of each contributor and leaves the others done and uncommitted (docs/design.md §3.3).
   */
  const doneAfter = new Map<Rank, Set<string>>()
  const covered = new Map<Rank, Set<string>>()
  const chunksOf = (table: Map<Rank, Set<string>>, rank: Rank): Set<string> => {
    let set = table.get(rank)
    if (set === undefined) table.set(rank, (set = new Set()))
    return set
  }
  /** The `RoundDone` being applied, and its rank: its report covers the rank's chunks done so far. */
  let reporting: Rank | undefined
  let chunksCarriedOver = 0
  const heldDone = (rank: Rank, key: string): boolean =>
    state.pool !== undefined && ChunkPool.held(state.pool, rank).some((c) => c.done && `${state.pool!.epoch}:${c.offset}:${c.size}` === key)
  /** Checks a ring round's close for one contributor, then forgets what it committed. */
  const checkRingCommit = (rank: Rank, what: string): void => {
    if (!progressive) return
    const inReport = chunksOf(covered, rank)
    if (reporting === rank) for (const key of chunksOf(doneAfter, rank)) inReport.add(key)
    for (const key of inReport)
      if (heldDone(rank, key)) fail(`${what}: rank ${rank}'s chunk ${key}, done before its RoundDone, was not committed by the round`)
    for (const key of reporting === rank ? [] : chunksOf(doneAfter, rank)) {
      if (!heldDone(rank, key)) fail(`${what}: rank ${rank}'s chunk ${key}, done after its RoundDone, was committed by that round`)
      chunksCarriedOver += 1
    }
    inReport.clear()
    if (reporting === rank) chunksOf(doneAfter, rank).clear()
  }

  /**
   * Ring joiners owed their model: the frames the shell holds back for them until their model's
   * `Update` (`actors/coordinator/coordinator.ts`), in order.
   */
  const held = new Map<Rank, Array<ToRank>>()

  const deliver = (to: Rank, message: ToRank): void => {
    const r = ranks[to]!
    if (r.state !== "running") return
    const holding = held.get(to)
    if (holding !== undefined) {
      if (message._tag === "ShutdownWithSave" || message._tag === "Shutdown") held.delete(to)
      else if (message._tag !== "Update") return void holding.push(message)
      else {
        held.delete(to)
        if (message.params.length === 0) return fail(`rank ${to} got an empty model`)
        r.hasModel = true
        r.round = message.round + 1
        for (const later of holding) deliver(to, later)
        return
      }
    }
    switch (message._tag) {
      case "StartEpoch":
        r.epoch = message.epoch
        r.entries = message.size > 0 ? [[message.offset, message.size]] : []
        r.trained = 0
        r.contributedUpTo = 0
        r.batchesSinceContribution = 0
        return
      case "ExtendPartition":
        if (message.epoch === r.epoch) r.entries.push([message.offset, message.size])
        return
      case "AssignChunk":
        if (message.epoch !== r.epoch) {
          r.epoch = message.epoch
          r.doneSinceContribution = 0
          r.batchesSinceContribution = 0
        }
        r.entries.push([message.offset, message.size])
        return
      case "Update":
        r.waitingUpdate = false
        if (!ring) r.round = message.round + 1
        return
      case "RoundCommitted":
        if (!ring) return fail(`RoundCommitted sent with the cpu backend`)
        // A joiner not yet in the ring is sent the broadcast too; it ignores a generation it never had.
        if (r.generation < message.generation && !(peersOf.get(message.generation) ?? []).includes(r.rank)) return
        if (message.generation !== r.generation || !r.reported || message.round !== r.round) {
          return fail(
            `rank ${r.rank} got RoundCommitted ${JSON.stringify(message)} while at generation ${r.generation}, round ${r.round}, reported ${r.reported}`
          )
        }
        r.round = message.round + 1
        r.waitingUpdate = false
        r.joined = false
        r.reported = false
        return
      case "DeclareDead":
        // Abort: the collective of the old generation will never complete for this rank.
        r.joined = false
        r.reported = false
        return
      case "ShutdownWithSave":
      case "Shutdown":
        r.shutdown = true
        r.outbox.push({ _tag: "Exiting" })
        return
      case "Checkpoint":
        r.outbox.push({ _tag: "CheckpointResult", version: message.version, ok: true, detail: "" })
        return
      case "Eval":
        r.outbox.push({ _tag: "EvalResult", epoch: message.epoch, accuracy: 0.5, loss: 1 })
        return
      case "RequestParams":
        // The ended epoch's model for the coordinator: no ring round closes while it is owed, so
        // the asked member still holds the mean of that round (epoch-model.ts).
        if (!r.hasModel || r.round - 1 !== message.round)
          return fail(`rank ${r.rank} asked for the model of round ${message.round} while it holds round ${r.round - 1}`)
        r.answers.push({ _tag: "Params", epoch: Math.max(0, r.epoch), round: message.round, samplesDone: 0, params: Float32Array.of(0.5) })
        return
      case "FormRing":
        if (!r.hasModel) return fail(`rank ${r.rank} got FormRing ${message.generation} before its model`)
        if (message.generation <= r.generation) return
        r.generation = message.generation
        r.members = message.peers
        r.joined = false // redo any unconfirmed round in the new generation
        r.reported = false
        r.outbox.push({ _tag: "RingReady", generation: message.generation })
        return
      default:
        return
    }
  }

  /** Records `to` as the holder of `[offset, offset + size)`; fails if a live rank holds any of it. */
  const own = (to: Rank, epoch: number, offset: number, size: number, what: string): void => {
    if (epoch !== ownerEpoch) {
      ownerEpoch = epoch
      owner = new Int32Array(options.epochSamples).fill(-1)
    }
    for (let x = offset; x < offset + size; x++) {
      const holder = owner[x]!
      if (holder !== -1 && Coordinator.isLive(state, holder))
        fail(`${what}: sample ${x} of epoch ${epoch} sent to rank ${to} while rank ${holder} holds it`)
      owner[x] = to
    }
  }

  const apply = (cmds: ReadonlyArray<Coordinator.Command>, what: string): void => {
    for (const cmd of cmds) {
      commandCount += 1
      scenario.onCommand?.(cmd)
      if (cmd._tag === "Send") {
        if (Coordinator.isDead(state, cmd.to)) fail(`${what}: ${cmd.message._tag} sent to dead rank ${cmd.to}`)
        if (!Coordinator.isLive(state, cmd.to)) fail(`${what}: ${cmd.message._tag} sent to exited rank ${cmd.to}`)
        if (!welcomed.has(cmd.to)) fail(`${what}: ${cmd.message._tag} sent to rank ${cmd.to} before its welcome`)
        if (cmd.message._tag === "FormRing") peersOf.set(cmd.message.generation, cmd.message.peers)
        log.push(`  -> ${cmd.to} ${JSON.stringify(cmd.message)}`)
        deliver(cmd.to, cmd.message)
      } else if (cmd._tag === "Broadcast") {
        if (cmd.message._tag === "ShutdownWithSave") shutdownWithSaveCount += 1
        log.push(`  -> * ${JSON.stringify(cmd.message)}`)
        for (const to of Coordinator.survivors(state)) deliver(to, cmd.message)
      } else if (cmd._tag === "SendRanges") {
        cmd.ranks.forEach((to, i) => {
          if (!Coordinator.isLive(state, to)) fail(`${what}: ${cmd.kind} sent to rank ${to}, which is not live`)
          if (!welcomed.has(to)) fail(`${what}: ${cmd.kind} sent to rank ${to} before its welcome`)
          own(to, cmd.epoch, cmd.offsets[i]!, cmd.sizes[i]!, what)
          const message: ToRank = { _tag: cmd.kind, epoch: cmd.epoch, offset: cmd.offsets[i]!, size: cmd.sizes[i]! }
          log.push(`  -> ${to} ${JSON.stringify(message)}`)
          deliver(to, message)
        })
      } else if (cmd._tag === "AverageRound") {
        log.push(
          `  round ${cmd.round} closed by [${cmd.contributors.join(",")}]${cmd.generation === undefined ? "" : ` in generation ${cmd.generation}`}`
        )
        if (ring !== (cmd.generation !== undefined))
          fail(`${what}: AverageRound with generation ${cmd.generation} on the ${options.backend} backend`)
        if (cmd.generation !== undefined) {
          ringRoundsClosed += 1
          if (cmd.generation > 0) ringRoundsClosedAfterReform += 1
          const members = peersOf.get(cmd.generation) ?? []
          if ([...cmd.contributors].sort((a, b) => a - b).join() !== members.join())
            fail(`${what}: ring round closed by [${cmd.contributors}] but generation ${cmd.generation} is [${members}]`)
          for (const rank of cmd.contributors) checkRingCommit(rank, what)
        }
        const message: ToRank =
          cmd.generation === undefined
            ? { _tag: "Update", round: cmd.round, params: new Float32Array(0) }
            : { _tag: "RoundCommitted", round: cmd.round, generation: cmd.generation }
        for (const to of Coordinator.survivors(state)) deliver(to, message)
      } else if (cmd._tag === "EpochEnded") {
        emitted.push([cmd.summary, JSON.stringify(cmd.summary)])
        log.push(`  EpochEnded`)
      } else if (cmd._tag === "Alert") {
        log.push(`  alert ${cmd.alert.class} ${cmd.alert.path} ${cmd.alert.detail}`)
      } else if (cmd._tag === "Welcome") {
        log.push(`  welcome ${cmd.rank}: epoch ${cmd.epoch}, first round ${cmd.firstRound}, model from ${cmd.model}`)
        const r = ranks[cmd.rank]
        if (r === undefined || r.state !== "vacant" || welcomed.has(cmd.rank) || cmd.rank >= maxRanks)
          fail(`${what}: rank ${cmd.rank} welcomed twice or beyond maxRanks ${maxRanks}`)
        if (!Coordinator.isLive(state, cmd.rank) || !Coordinator.isJoining(state, cmd.rank))
          fail(`${what}: welcomed rank ${cmd.rank} is not a live joiner`)
        if (cmd.firstRound !== state.round + 1 || cmd.epoch !== state.epoch)
          fail(`${what}: welcome into round ${cmd.firstRound} of epoch ${cmd.epoch} at round ${state.round} of epoch ${state.epoch}`)
        if (cmd.model !== (ring ? "peer" : "coordinator")) fail(`${what}: model from ${cmd.model} with the ${options.backend} backend`)
        welcomed.add(cmd.rank)
        joined += 1
        Object.assign(r!, { state: "running", epoch: cmd.epoch, round: cmd.firstRound, hasModel: !ring })
      } else if (cmd._tag === "SendModel") {
        log.push(`  model of round ${cmd.round} from ${cmd.from} to ${cmd.to} for generation ${cmd.generation}`)
        const member = (peersOf.get(cmd.generation - 1) ?? []).includes(cmd.from) || (peersOf.get(cmd.generation) ?? []).includes(cmd.from)
        if (
          !ring ||
          !welcomed.has(cmd.to) ||
          !member ||
          !Coordinator.isLive(state, cmd.from) ||
          ranks[cmd.from]!.hasModel !== true ||
          held.has(cmd.from)
        ) {
          fail(`${what}: SendModel from ${cmd.from} (not a live member holding the model of generation ${cmd.generation - 1}) to ${cmd.to}`)
        }
        if (cmd.round !== state.round - 1) fail(`${what}: SendModel of round ${cmd.round} while round ${state.round} opens`)
        if (!held.has(cmd.to)) {
          held.set(cmd.to, [])
          ringEntries += 1
        } else modelsReissued += 1
        // The shell's RequestParams: the member answers with its model, as the rank actor does.
        const from = ranks[cmd.from]!
        if (from.state === "running" && !from.shutdown) {
          // Answered at its next unit of work: a kill before that takes the answer with it.
          from.answers.push({
            _tag: "Params",
            epoch: Math.max(0, from.epoch),
            round: cmd.round,
            samplesDone: 0,
            params: Float32Array.of(0.5)
          })
        }
      } else if (cmd._tag === "JoinRefused") {
        log.push(`  join ${cmd.rank ?? "auto"} refused: ${cmd.reason} (${cmd.detail})`)
        refused[cmd.reason] = (refused[cmd.reason] ?? 0) + 1
        const asked = cmd.rank
        const running = state.phase === "running" && shutdownWithSaveCount === 0
        const truth =
          cmd.reason === "RunOver"
            ? state.phase === "completed"
            : cmd.reason === "ShuttingDown"
              ? !running && state.phase !== "completed"
              : !running
                ? false
                : cmd.reason === "Full"
                  ? asked === undefined
                    ? ranks.every((r) => r.state !== "vacant")
                    : asked >= maxRanks
                  : asked === undefined || asked >= maxRanks
                    ? false
                    : cmd.reason === "DeadIndex"
                      ? Coordinator.isDead(state, asked)
                      : cmd.reason === "ExitedIndex"
                        ? ranks[asked]!.state === "exited" && !Coordinator.isLive(state, asked) && !Coordinator.isDead(state, asked)
                        : cmd.reason === "LiveIndex"
                          ? Coordinator.isLive(state, asked)
                          : false
        if (!truth) fail(`${what}: join ${asked ?? "auto"} refused as ${cmd.reason}, which is not so`)
      } else {
        log.push(`  ${cmd._tag}`)
      }
    }
    if (shutdownWithSaveCount > 1) fail(`${what}: ShutdownWithSave sent ${shutdownWithSaveCount} times`)
    const live = Coordinator.survivors(state).length
    if (Coordinator.activeCount(state) !== live) fail(`${what}: activeCount ${Coordinator.activeCount(state)} but ${live} survivors`)
    if (live !== state.membership.joined - state.membership.failures - state.membership.exits) fail(`${what}: survivors do not add up`)
    if (state.membership.joined !== welcomed.size)
      fail(`${what}: ${state.membership.joined} ranks joined but ${welcomed.size} were welcomed`)
    for (const r of Coordinator.failures(state)) declaredDead.add(r)
    // No round waits on a rank that joined after it opened (docs/growing.md): with cpu the open round
    // requires exactly the survivors holding uncommitted work that neither contributed nor joined
    // since it opened; with ring no joiner is a member or a reporter.
    if (state.phase === "running" && state.started) {
      let required = 0
      for (const r of Coordinator.survivors(state)) {
        const joining = Coordinator.isJoining(state, r)
        if (ring && joining && state.ringReports.has(r)) fail(`${what}: joiner ${r} reported to the ring round it is not a member of`)
        if (!ring && joining && state.contributed[r] !== 1) fail(`${what}: the open round waits on joiner ${r}`)
        const holds =
          state.pool !== undefined
            ? ChunkPool.holdsUncommitted(state.pool, r)
            : state.assignments !== undefined && Assignments.hasUncommitted(state.assignments, r)
        if (holds && state.contributed[r] === 0) required += 1
      }
      if (!ring && required !== state.pendingRequired)
        fail(`${what}: the open round waits on ${state.pendingRequired} ranks, ${required} hold work and did not contribute`)
    }
  }

  const step = (input: Coordinator.Input, what: string): void => {
    log.push(`t=${nowMs} ${what}`)
    const takeBacks = state.counters.takeBacks
    const cmds = Coordinator.step(state, input)
    // Chunks taken back from a silent rank are no longer its own: it may still train them, but
    // nothing of them can commit through it (its Params are dropped until it is clean).
    if (state.counters.takeBacks !== takeBacks) {
      log.push(`  took back the chunks of ranks ${[...state.takenBack.keys()].join(", ")}`)
      for (let x = 0; x < owner.length; x++) if (state.takenBack.has(owner[x]!)) owner[x] = -1
    }
    apply(cmds, what)
  }

  const listLength = (r: SimRank) => r.entries.reduce((sum, [, size]) => sum + size, 0)

  /** Ring: a contribution point: keep the samples, join the collective of the current generation. */
  const contributeRing = (r: SimRank, samplesDone: number): void => {
    r.pendingSamples = samplesDone
    r.waitingUpdate = true
    r.joined = false
    r.reported = false
    r.batchesSinceContribution = 0
  }

  /** Ring: one step of a rank waiting on its round: join, finish, report. */
  const ringStep = (r: SimRank): void => {
    if (r.generation < 0 || r.reported) return
    const joined = collective(r.generation, r.round)
    if (!r.joined) {
      r.joined = true
      joined.add(r.rank)
    }
    if (r.members.every((m) => joined.has(m))) {
      r.reported = true
      r.outbox.push({ _tag: "RoundDone", epoch: r.epoch, round: r.round, generation: r.generation, samplesDone: r.pendingSamples })
    }
  }

  /** Progressive: one batch of the rank's first chunk; a `ChunkDone` when that finishes it. */
  const trainChunk = (r: SimRank): void => {
    const chunk = r.entries[0]
    if (chunk === undefined) return
    r.chunkProgress = Math.min(chunk[1], r.chunkProgress + batchSize)
    r.batchesSinceContribution += 1
    r.outbox.push({ _tag: "Progress", epoch: r.epoch, samplesDone: 0, msPerBatch: 1 + r.rank })
    if (r.chunkProgress === chunk[1]) {
      r.entries.shift()
      r.chunkProgress = 0
      r.doneSinceContribution += 1
      r.outbox.push({ _tag: "ChunkDone", epoch: r.epoch, offset: chunk[0], size: chunk[1] })
    }
  }

  /** One unit of work of a running rank: train a batch, or contribute. */
  const work = (r: SimRank): void => {
    if (r.state !== "running" || r.shutdown) return
    if (r.answers.length > 0) return void r.outbox.push(...r.answers.splice(0))
    if (ring && r.waitingUpdate && r.reported && progressive && scenario.trainWhileWaiting === true && rand(0, 1) === 0)
      return trainChunk(r)
    if (ring && r.waitingUpdate) return ringStep(r)
    if (r.waitingUpdate) return
    if (
      ring &&
      r.generation >= 0 &&
      (progressive ? r.entries.length === 0 : r.trained >= listLength(r)) &&
      collective(r.generation, r.round).size > 0
    ) {
      // No work left: join the neighbours' collective, contributing what is already committed.
      contributeRing(r, progressive ? 0 : r.trained)
      return ringStep(r)
    }
    if (progressive) {
      trainChunk(r)
      const idle = r.entries.length === 0
      if (r.doneSinceContribution > 0 && (idle || r.batchesSinceContribution >= scenario.averageEvery)) {
        if (ring) {
          r.doneSinceContribution = 0
          return contributeRing(r, 0)
        }
        r.outbox.push({ _tag: "Params", epoch: r.epoch, round: r.round, samplesDone: 0, params: new Float32Array(0) })
        r.doneSinceContribution = 0
        r.batchesSinceContribution = 0
        r.waitingUpdate = true
      }
      return
    }
    const length = listLength(r)
    if (r.trained < length) {
      r.trained = Math.min(length, r.trained + batchSize)
      r.batchesSinceContribution += 1
      r.outbox.push({ _tag: "Progress", epoch: r.epoch, samplesDone: r.trained, msPerBatch: 1 + r.rank })
    }
    const idle = r.trained >= length
    if (r.trained > r.contributedUpTo && (idle || r.batchesSinceContribution >= scenario.averageEvery)) {
      if (ring) {
        r.contributedUpTo = r.trained
        return contributeRing(r, r.trained)
      }
      r.outbox.push({ _tag: "Params", epoch: r.epoch, round: r.round, samplesDone: r.trained, params: new Float32Array(0) })
      r.contributedUpTo = r.trained
      r.batchesSinceContribution = 0
      r.waitingUpdate = true
    }
  }

  /** Delivers the oldest frame of one rank; a killed rank's report follows its last frame. */
  const flushOne = (r: SimRank): boolean => {
    const message = r.outbox.shift()
    if (message === undefined) return false
    const reportedBefore = state.ringReports.has(r.rank)
    const roundBefore = state.round
    reporting = message._tag === "RoundDone" ? r.rank : undefined
    step({ _tag: "Frame", rank: r.rank, nowMs, message }, `frame from ${r.rank}: ${message._tag}`)
    reporting = undefined
    if (ring && progressive && Coordinator.isLive(state, r.rank)) {
      if (message._tag === "ChunkDone") {
        const key = `${message.epoch}:${message.offset}:${message.size}`
        if (heldDone(r.rank, key)) chunksOf(doneAfter, r.rank).add(key)
      } else if (message._tag === "RoundDone" && !reportedBefore && state.ringReports.has(r.rank) && state.round === roundBefore) {
        // Accepted into the open round: its report covers every chunk done so far.
        for (const key of chunksOf(doneAfter, r.rank)) chunksOf(covered, r.rank).add(key)
        chunksOf(doneAfter, r.rank).clear()
      }
    }
    if (message._tag === "Exiting") {
      r.state = "exited"
      r.outbox = []
    }
    return true
  }

  const flushAll = (): void => {
    for (const r of ranks) while (flushOne(r));
    for (const rank of pendingReports.splice(0)) {
      step({ _tag: "DeathReport", rank, nowMs, cause: { _tag: "Killed", signal: "SIGKILL" } }, `death report for ${rank}`)
    }
  }

  const tick = (): void => {
    nowMs += rand(1, 60)
    for (const r of ranks) if (r.state === "running" && !r.shutdown) r.outbox.push({ _tag: "Heartbeat" })
    flushAll() // the shell applies every frame already in the mailbox before each tick
    step({ _tag: "Tick", nowMs }, "tick")
  }

  for (const r of ranks) if (r.state === "running") welcomed.add(r.rank)
  const absentRanks = ranks.filter((r) => r.rank < worldSize && r.state === "vacant").map((r) => r.rank)
  apply(
    Coordinator.start(state, undefined, {
      ...(scenario.resume === undefined ? {} : { resume: scenario.resume }),
      ...(absentRanks.length > 0 ? { absent: absentRanks } : {})
    }),
    "start"
  )
  let kills = scenario.kills
  let hangs = scenario.hangs
  let exits = scenario.exits
  let lateFrames = scenario.lateFrames

  const pickRunning = (): SimRank | undefined => {
    const running = ranks.filter((r) => r.state === "running" && !r.shutdown)
    return running.length === 0 ? undefined : running[rand(0, running.length - 1)]
  }

  /** A join mid-run: mostly `--rank auto`, else any index (vacant, live, dead, beyond maxRanks). */
  const attemptJoin = (): void => {
    joinsLeft -= 1
    const kind = rand(0, 9)
    const dead = [...declaredDead]
    const asked = kind < 6 ? undefined : kind < 8 || dead.length === 0 ? rand(0, maxRanks + 1) : dead[rand(0, dead.length - 1)]!
    step({ _tag: "Join", rank: asked, nowMs }, `join ${asked ?? "auto"}`)
  }

  // Safety phase: random work, deliveries, ticks and faults.
  for (let i = 0; i < scenario.safetySteps && state.phase === "running"; i++) {
    if (joinsLeft > 0 && rand(0, 99) < 6) {
      attemptJoin()
      continue
    }
    const action = rand(0, 99)
    if (action < 45) {
      const r = pickRunning()
      if (r !== undefined) work(r)
    } else if (action < 75) {
      const r = ranks[rand(0, ranks.length - 1)]!
      flushOne(r)
    } else if (action < 90) {
      tick()
    } else if (action < 93 && kills > 0) {
      // Half the time, a member asked for a joiner's model that has not answered yet (docs/growing.md).
      const asked = ranks.filter((x) => x.answers.length > 0 && x.state === "running" && !x.shutdown)
      const r = asked.length > 0 && rand(0, 1) === 0 ? asked[rand(0, asked.length - 1)] : pickRunning()
      if (r !== undefined) {
        kills -= 1
        log.push(`t=${nowMs} FAULT kill ${r.rank}`)
        while (flushOne(r));
        r.state = "killed"
        r.answers = []
        pendingReports.push(r.rank)
      }
    } else if (action < 95 && hangs > 0) {
      const r = pickRunning()
      if (r !== undefined) {
        hangs -= 1
        log.push(`t=${nowMs} FAULT hang ${r.rank}`)
        r.state = "hung"
        r.outbox = []
      }
    } else if (action < 97 && exits > 0) {
      const r = pickRunning()
      if (r !== undefined) {
        exits -= 1
        log.push(`t=${nowMs} FAULT clean exit of ${r.rank}`)
        r.outbox.push({ _tag: "Exiting" })
        r.shutdown = true
      }
    } else if (lateFrames > 0 && declaredDead.size > 0) {
      lateFrames -= 1
      const dead = [...declaredDead][rand(0, declaredDead.size - 1)]!
      const before = state.counters.framesFromDead
      const late: ToCoordinator =
        rand(0, 1) === 0
          ? ring
            ? { _tag: "RoundDone", epoch: state.epoch, round: state.round, generation: state.ring!.generation, samplesDone: 1e9 }
            : { _tag: "Params", epoch: state.epoch, round: state.round, samplesDone: 1e9, params: new Float32Array(0) }
          : { _tag: "ChunkDone", epoch: state.epoch, offset: 0, size: 1 }
      step({ _tag: "Frame", rank: dead, nowMs, message: late }, `late ${late._tag} from dead rank ${dead}`)
      if (state.counters.framesFromDead !== before + 1) fail("a late frame from a dead rank was not counted")
    }
  }

  // Liveness phase: no new faults; the run must end.
  for (let i = 0; state.phase === "running"; i++) {
    if (i > 200_000) fail("the run did not converge")
    for (const r of ranks) work(r)
    flushAll()
    if (i % 4 === 0) tick()
  }

  // After the end: a rank still live dies; it is recorded with afterEnd and changes no summary.
  const lateVictim = ranks.find((r) => Coordinator.isLive(state, r.rank))
  if (lateVictim !== undefined && rand(0, 1) === 0) {
    nowMs += 1
    step(
      { _tag: "DeathReport", rank: lateVictim.rank, nowMs, cause: { _tag: "Killed", signal: "SIGKILL" } },
      `death report for ${lateVictim.rank} after the end`
    )
    step({ _tag: "Tick", nowMs }, "tick")
    const recorded = state.deaths.at(-1)
    if (recorded?.rank !== lateVictim.rank || !recorded.afterEnd)
      fail(`the death of rank ${lateVictim.rank} after the end is not recorded with afterEnd`)
  }
  // A join after the end is refused: the run is over, or it saved and stopped.
  const late = Coordinator.step(state, { _tag: "Join", rank: undefined, nowMs })
  const lateReason = late[0]?._tag === "JoinRefused" ? late[0].reason : undefined
  if (late.length !== 1 || lateReason !== (state.phase === "completed" ? "RunOver" : "ShuttingDown"))
    fail(`a join after the end gave ${JSON.stringify(late)}`)
  refused[lateReason!] = (refused[lateReason!] ?? 0) + 1
  for (const [summary, text] of emitted) {
    if (JSON.stringify(summary) !== text)
      fail(`epoch ${summary.epoch}'s summary changed after it was emitted: ${text} -> ${JSON.stringify(summary)}`)
  }
  for (const death of state.deaths) {
    const inEpochs = state.summaries.some((e) => e.deaths.includes(death))
    // A death of the epoch an unrecoverable run stopped in belongs to no summary either.
    const inStoppedEpoch = !death.afterEnd && state.phase === "unrecoverable" && death.epoch === state.epoch
    if (death.afterEnd ? inEpochs : !inEpochs && !inStoppedEpoch)
      fail(`death of rank ${death.rank} (afterEnd ${death.afterEnd}) is ${inEpochs ? "" : "not "}in an epoch summary`)
  }

  // End-of-run checks.
  const outcome = state.outcome!
  for (const summary of outcome.epochs) {
    if (summary.lost !== 0 || summary.duplicated !== 0 || summary.samplesCommitted !== options.epochSamples) {
      fail(`epoch ${summary.epoch} audit: ${JSON.stringify(summary)}`)
    }
  }
  const firstEpoch = scenario.resume?.epoch ?? 0
  if (outcome.epochs[0] !== undefined && outcome.epochs[0].epoch !== firstEpoch)
    fail(`the first epoch audited is ${outcome.epochs[0].epoch}, not ${firstEpoch}`)
  if (outcome.epochsCompleted !== firstEpoch + outcome.epochs.length)
    fail(`epochsCompleted ${outcome.epochsCompleted} with ${outcome.epochs.length} epochs from ${firstEpoch}`)
  if (outcome.status === "completed") {
    if (outcome.epochs.length !== options.epochs - firstEpoch)
      fail(`completed after ${outcome.epochs.length} of ${options.epochs - firstEpoch} epochs`)
  } else {
    const uncommitted = outcome.uncommitted
    if (uncommitted === undefined) return fail("an unrecoverable outcome without uncommitted ranges")
    const tiled = Audit.make(state.log.epoch, options.epochSamples)
    for (let i = 0; i < state.log.offsets.length; i++) Audit.record(tiled, -1, state.log.offsets[i]!, state.log.sizes[i]!)
    for (const [offset, size] of uncommitted.ranges) Audit.record(tiled, -2, offset, size)
    const check = Audit.audit(tiled)
    if (check.lost !== 0 || check.duplicated !== 0) fail(`committed + uncommitted do not tile the epoch: ${JSON.stringify(check)}`)
  }
  joinersTrainedAtOnce = state.joins.filter((j) => j.samples > 0).length
  return {
    state,
    log,
    shutdownWithSaveCount,
    commandCount,
    ringRoundsClosed,
    ringRoundsClosedAfterReform,
    joined,
    refused,
    ringEntries,
    modelsReissued,
    joinersTrainedAtOnce,
    chunksCarriedOver
  }
}
