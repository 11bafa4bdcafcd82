/**
 * A rank's side of the ring backend (`RankData.backend` `ring`; `rank.ts` module doc):
 * its view of the ring (the latest `FormRing`), its links to its ring neighbours (relayed through
 * the coordinator as `RingData`, or direct `MessageChannel` links between worker threads handed
 * over per generation, with the generation's shared all-reduce area when the host made one:
 * `SharedAllReduce`, used instead of the links' steps; the links are `rank-ring-links.ts`), and
 * the one collective it runs at a time.
 *
 * A contribution point keeps the rank's pre-round parameters and samples done (`contribute`);
 * `Ring.allReduce` then runs for (generation, round) in a fiber of its own, or, in a shared area,
 * `SharedAllReduce.run` on callbacks (no fiber forked and scheduled a round; it may finish before
 * `contribute` returns, when this rank arrives last), and when it completes the rank sends
 * `RoundDone{epoch, round, generation, samplesDone}` and keeps the mean until
 * `RoundCommitted{round, generation}` (`committed`), or, in a generation with a shared all-reduce
 * area, until the coordinator writes the commit into the area (`areaCommitted`; the rank is woken
 * for it). `DeclareDead` interrupts a running collective
 * and discards a finished but unconfirmed one; no collective of that generation starts again. A
 * newer `FormRing` supersedes the older generation (its ports are closed) and the rank redoes the
 * round from its pre-round parameters. Faults for tests fire between two steps
 * (`RankData.collectiveFault`).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FileAllReduce from "../../src/averaging/file-all-reduce.ts"
import * as Finite from "../../src/averaging/finite.ts"
import * as Ring from "../../src/averaging/ring.ts"
import * as RingCompressed from "../../src/averaging/ring-compressed.ts"
import * as SharedAllReduce from "../../src/averaging/shared-all-reduce.ts"
import type { FormRing, RingData, RoundCommitted, ToCoordinator } from "../../src/core/messages.ts"
import * as PeerRing from "../../src/transport/peer-ring.ts"
import type { Link, RankData } from "./rank-data.ts"
import * as RankRingLinks from "./rank-ring-links.ts"
import type { RingChannel } from "./rank-ring-links.ts"

/**
 * What `make` needs of the rank: its `RankData` (`ringLinks`, `collectiveFault`), its link
 * (`onRingPorts`), how it sends to the coordinator (`send`; `sendNow` without an effect, from a
 * collective's callback), how it leaves with an exit code (an injected
 * `exit` fault), how it stops responding (an injected `hang` fault), and how its loop is woken
 * (`wake`: see `RankRing`).
 *
 * @since 0.1.0
 * @category model
 */
export interface RankRingOptions {
  readonly data: RankData
  readonly link: Link
  readonly send: (message: ToCoordinator) => Effect.Effect<void>
  readonly sendNow: (message: ToCoordinator) => void
  readonly leave: (code: number) => void
  readonly hang: () => void
  readonly wake: () => void
}

/**
 * One round's contribution: the rank's epoch and samples done at its contribution point, its
 * pre-round parameters (what every collective of the round, and its redo, averages), and whether
 * they count in the mean (`contributes`: false for a member that trained nothing since its last
 * round, which only keeps the ring whole; `Ring.allReduce`).
 *
 * @since 0.1.0
 * @category model
 */
export interface Contribution {
  readonly epoch: number
  readonly samplesDone: number
  readonly params: Float32Array
  readonly contributes: boolean
  /**
   * The committed model of the round before, when this rank holds one (`--compress`: steps then
   * carry changes from it; `RingCompressed`). Read while the collective runs, never written.
   */
  readonly base?: { readonly round: number; readonly values: Float32Array } | undefined
}

/**
 * The collective a rank runs: its generation and round, and how to abort it: the fiber of a
 * collective over links, or the stop of one in a shared area (`SharedAllReduce.run`).
 */
interface Running {
  readonly generation: number
  readonly round: number
  fiber: Fiber.Fiber<void> | undefined
  stop: (() => void) | undefined
}

/**
 * A rank's ring state (`make`). `round` arguments are the rank's current averaging round.
 *
 * - `view()`: the latest `FormRing`, if any.
 * - `formRing`, `declareDead`, `relayed`: apply those frames from the coordinator.
 * - `committed`: applies a `RoundCommitted`; gives the round's mean when it confirms the finished
 *   collective (the rank then applies it), `undefined` otherwise. With a shared all-reduce area the
 *   mean is the area's result row: read it before the rank's next contribution, never write it;
 *   over links the vector is the rank's own from then on (nothing here keeps it).
 * - `recycleMean`: gives back a vector the rank no longer reads (its last average before the one
 *   just committed): a later collective over links writes its mean there instead of into a new one.
 * - `areaCommitted()`: the same for a commit the coordinator wrote into the generation's shared
 *   all-reduce area (`SharedAllReduce.commit`): the finished round and its mean, once. The rank
 *   asks before it handles anything from the coordinator (the commit was written before any
 *   later frame was sent) and whenever it is woken.
 * - `contribute`: keeps the round's pre-round contribution and starts its collective.
 * - `startCollective`: starts the pending contribution's collective when it can (module doc).
 * - `neighboursWaiting`: whether a ring step of `round` in the current generation waits in the inbox
 *   (with a shared all-reduce area: whether another member entered `round`'s collective; an idle
 *   rank that asks watches the area and is `woken` when a member arrives).
 * - `failure()`: the ring link error that ended a collective, if any (the rank then dies).
 *
 * It wakes the rank's loop (`RankRingOptions.wake`) when a direct link delivered to an idle rank
 * (no collective running or waiting for its commit), a generation's direct links arrived, a
 * collective failed, or the coordinator committed a finished round in the area.
 *
 * @since 0.1.0
 * @category model
 */
export interface RankRing {
  readonly view: () => FormRing | undefined
  readonly formRing: (message: FormRing, round: number) => Effect.Effect<void>
  readonly declareDead: Effect.Effect<void>
  readonly committed: (message: RoundCommitted) => Float32Array | undefined
  readonly recycleMean: (buffer: Float32Array) => void
  readonly areaCommitted: () => { readonly round: number; readonly mean: Float32Array } | undefined
  readonly relayed: (message: RingData) => void
  readonly contribute: (contribution: Contribution, round: number) => Effect.Effect<void>
  readonly startCollective: (round: number) => Effect.Effect<void>
  /**
   * Whether a contribution waits for its collective (none runs or finished for it): what
   * `startCollective` may start. Asked before it, to build no effect a round when nothing waits.
   */
  readonly contributionWaiting: () => boolean
  readonly neighboursWaiting: (round: number) => boolean
  /**
   * Where this rank's ring listener is reached (`ws://host:port/`), once it is bound, when it
   * advertises one (`PeerRing.PeerAddresses.advertise`): its `Hello` carries it.
   */
  readonly ringAddress: () => Promise<string | undefined>
  /**
   * How the current generation's collectives travel: `direct link`, `shared all-reduce`, `shared
   * file` (processes' file area, `FileAllReduce`; `direct socket link` for a round that fell back)
   * or `relayed link`.
   */
  readonly linkName: () => string
  readonly failure: () => Ring.RingLinkError | undefined
  /**
   * A new coordinator took the run over (docs/recovery.md): the running collective is aborted and
   * the pending contribution dropped (the new coordinator re-plans the epoch); gives the finished
   * round not yet confirmed, if any (its round, generation and mean), which the new coordinator
   * may confirm (its log holds it committed) or not. The ring view stays: the new coordinator's
   * generations are newer.
   */
  readonly reset: Effect.Effect<{ readonly round: number; readonly generation: number; readonly mean: Float32Array } | undefined>
  /**
   * A buffer for the next contribution's pre-round parameters: the last committed contribution's
   * (nothing reads it once its round committed), taken once, when it has `length` values; else a
   * new one. Saves allocating the whole vector every round.
   */
  readonly contributionBuffer: (length: number) => Float32Array
}

/** What a collective through a file area gives the rank (`make`'s `fileCollective`). */
interface FileCollectiveResult {
  readonly mean: Float32Array | undefined
  readonly residual: undefined
  readonly file?: FileAllReduce.FileArea | undefined
}

/**
 * Makes a rank's ring state (`RankRing`, module doc); with `RankData.ringLinks` `port`, registers
 * for the link's direct ring ports of each generation.
 *
 * @since 0.1.0
 * @category rank
 */
export const make = (options: RankRingOptions): RankRing => {
  // Long because it is a factory: the closures it returns share its state, and each is short.
  // The ring links' state is its own (`RankRingLinks`): a generation's channel, its bytes, faults.
  const { data, link, send } = options
  // Wakes the main loop (an idle rank may have to join a collective, or leave on a failure).
  const notify = options.wake
  const links = RankRingLinks.make({
    data,
    link,
    send,
    leave: options.leave,
    hang: options.hang,
    wake: notify,
    idle: () => collective === undefined && finished === undefined,
    view: () => ringView,
    noticed: (step, forward) => noticed(step, forward)
  })
  const { usePorts, peers, linkBytes, channelFor, areaFaults } = links

  /**
   * Processes of one machine (`RankData.ringAreaFolder`): the newest generation's file area
   * (`FileAllReduce`), opened at its first collective (which removes this rank's older file). Every
   * member decides alike whether to use one (same folder, ring size, length and bound); compressed
   * steps stay on the links. How each generation's last collective went: `file` or `ring`.
   */
  const areaFolder = peers !== undefined && data.compress === undefined ? data.ringAreaFolder : undefined
  let fileArea: FileAllReduce.FileArea | undefined
  const fileUsed = new Map<number, "file" | "ring">()
  const fileAreaFor = (view: FormRing, length: number): FileAllReduce.FileArea | undefined => {
    if (areaFolder === undefined || view.ringSize < 2) return undefined
    if (FileAllReduce.areaBytes(view.ringSize, length) > (data.ringAreaBytesMax ?? Number.POSITIVE_INFINITY)) return undefined
    if (fileArea?.generation === view.generation && fileArea.length === length) return fileArea
    const shape = { generation: view.generation, ringRank: view.ringRank, ringSize: view.ringSize, length }
    fileArea = FileAllReduce.open(areaFolder, shape, fileArea)
    if (fileArea.problem !== undefined)
      console.error(
        `cohort rank ${link.rank}: no ring area file (${fileArea.problem}): rounds of generation ${view.generation} go over the links`
      )
    return fileArea
  }

  /**
   * A notice that ring rank `data[0]`'s row was not finite (`FileAllReduce` module doc): this rank
   * fails when it is that rank, else passes it on to its next neighbour (on the direct link only:
   * the relay takes ring steps alone).
   */
  const noticed = (step: Ring.RingMessage, forward: (step: Ring.RingMessage) => void): void => {
    if (ringView === undefined || step.generation !== ringView.generation) return
    if (step.data[0] !== ringView.ringRank) return forward(step)
    finished = undefined
    ringFailure = notFinite()
    notify() // the rank's loop leaves on it
  }

  // Made when needed: an error's stack costs each joining rank a capture it almost never uses.
  const notFinite = () => new Ring.RingLinkError("this rank's contribution carried a value that is not finite")

  // The latest FormRing; a generation a DeclareDead aborted (no collective of it starts again);
  // the round's pre-round contribution; the running collective; its mean, finished but not yet
  // confirmed by RoundCommitted.
  let ringView: FormRing | undefined
  let blockedGeneration = -1
  let pending: Contribution | undefined
  let collective: Running | undefined
  let finished:
    | {
        readonly generation: number
        readonly round: number
        readonly mean: Float32Array
        readonly area: SharedAllReduce.Area | undefined
        /** Processes: the file area whose result segments hold the mean once committed (`mean` is then empty). */
        readonly file: FileAllReduce.FileArea | undefined
        readonly ringRank: number
        /** `--compress`: what packing dropped this round, kept once the round is committed. */
        readonly residual: Float32Array | undefined
      }
    | undefined
  // `--compress`: what packing dropped in the last committed round, added to the next contribution.
  let residual: Float32Array | undefined
  let ringFailure: Ring.RingLinkError | undefined
  // The pre-round parameters of the last committed round: free for the next contribution.
  let spare: Float32Array | undefined
  // The last area row handed out as a contribution buffer (`areaRow`): never kept as `spare`.
  let lentRow: Float32Array | undefined
  // A vector the rank gave back (`recycleMean`), its average before the last committed one: the
  // next collective's result goes there instead of a new vector a round.
  let spareMean: Float32Array | undefined

  /**
   * Wakes the rank's loop when the coordinator commits `done`'s round in its area, or fails the
   * rank's collective when a reducer marked this rank's row not finite (`SharedAllReduce` module
   * doc); stops watching once `done` is no longer the finished round.
   */
  const watchCommit = (done: NonNullable<typeof finished>): void => {
    const area = done.area!
    const look = (): void => {
      if (finished !== done) return
      if (area.committed(done.round)) return notify()
      if (area.badRank() === done.ringRank) {
        finished = undefined
        ringFailure = notFinite()
        return notify() // the rank's loop leaves on it
      }
      void area.commits().then(look)
    }
    look()
  }

  /**
   * The finished round's mean, now committed: the rank applies it (over links it keeps the vector as
   * its own); its pre-round copy is free again, unless it is an area's row. An area's result row is
   * the area's.
   */
  const takeFinished = (done: NonNullable<typeof finished>): Float32Array => {
    finished = undefined
    if (done.residual !== undefined) residual = done.residual
    if (pending !== undefined && pending.params !== lentRow) spare = pending.params
    pending = undefined
    return done.mean
  }

  /**
   * This rank's row of the current generation's shared area as the next contribution's buffer
   * (`SharedAllReduce.Area.contributionRow`: written and checked there, never copied again), when
   * the area has one of `length` values and no contribution of this rank is pending, running or
   * finished: the row is then free (every member finished reading it for the last committed round).
   * A redo in a newer generation's area copies from it; nobody writes the row of a superseded area.
   */
  const areaRow = (length: number): Float32Array | undefined => {
    if (ringView === undefined || pending !== undefined || collective !== undefined || finished !== undefined) return undefined
    const row = channelFor(ringView.generation)?.area?.contributionRow
    if (row === undefined || row.length !== length) return undefined
    lentRow = row
    return row
  }

  const takeSpareMean = (): Float32Array | undefined => {
    const mean = spareMean
    spareMean = undefined
    return mean
  }

  /**
   * The pending contribution's collective through the generation's file area (`FileAllReduce`):
   * its mean is read once the round commits (`readFileMean`); a round that fell back to the links
   * gives its mean now; a row that was not finite fails this rank when it is its own, else is
   * noticed to its owner along the ring and gives no mean (no `RoundDone`).
   */
  const fileCollective = (
    file: FileAllReduce.FileArea,
    channel: RingChannel,
    shape: Ring.Collective,
    contribution: Contribution
  ): Effect.Effect<FileCollectiveResult, Ring.RingLinkError> => {
    const length = contribution.params.length
    // The mean's vector: this rank's segment is reduced into it and the others' are read into it
    // and checked there, with SIMD in a `Finite.alloc` vector (the first rounds' spare may be a
    // plain one: it is dropped).
    const spare = takeSpareMean()
    const into = spare !== undefined && spare.length === length && Finite.isFast(spare) ? spare : Finite.alloc(length)
    // The same injected fault as in a shared area, as the file area's hooks (effects).
    const hooks = areaFaults(shape.round, shape.ringSize)
    const before = hooks.before
    const faults: FileAllReduce.Faults = {
      ...(hooks.corrupt === true ? { corrupt: true } : {}),
      ...(before === undefined ? {} : { before: (at: 0 | 1) => Effect.suspend(() => (before(at) ? Effect.never : Effect.void)) })
    }
    return Effect.flatMap(
      FileAllReduce.allReduce(file, channel.inbox, shape, contribution.params, contribution.contributes, faults, into),
      (outcome): Effect.Effect<FileCollectiveResult, Ring.RingLinkError> => {
        fileUsed.set(shape.generation, outcome._tag === "ring" ? "ring" : "file")
        if (outcome._tag === "ring") return Effect.succeed({ mean: outcome.mean, residual: undefined })
        if (outcome._tag === "file") return Effect.succeed({ mean: into, residual: undefined, file })
        if (outcome.rank === shape.ringRank) return Effect.fail(notFinite())
        const notice = Float64Array.of(outcome.rank)
        channel.directOnly?.({ generation: shape.generation, round: shape.round, step: FileAllReduce.noticeStep, data: notice })
        return Effect.succeed({ mean: undefined, residual: undefined })
      }
    )
  }

  /**
   * Reads a committed file round's mean into `done.mean` (`FileAllReduce.readResult`); `false`
   * when a file cannot be read (then the rank fails: it cannot apply the committed round).
   */
  const readFileMean = (done: NonNullable<typeof finished>): boolean => {
    if (done.file === undefined) return true
    try {
      FileAllReduce.readResult(done.file, done.mean)
      return true
    } catch (error) {
      ringFailure = new Ring.RingLinkError(`the file area could not be read: ${error instanceof Error ? error.message : String(error)}`)
      notify() // the rank's loop leaves on it
      return false
    }
  }

  /** Interrupts the running collective, if any: it changes nothing the rank holds. */
  const abortCollective = Effect.suspend(() => {
    const running = collective
    collective = undefined
    running?.stop?.()
    return running?.fiber === undefined ? Effect.void : Fiber.interrupt(running.fiber)
  })

  /**
   * The running collective `entry` finished with `mean` (`undefined`: its segment met another
   * member's row that is not finite): it becomes the finished round, and the `RoundDone` to send is
   * returned; or, without a mean, no `RoundDone` (the round is never committed; that member fails
   * itself, `watchCommit`, and this one waits for its DeclareDead, starting nothing more in this
   * generation). Call it only while `entry` is the running collective.
   */
  const finish = (
    entry: Running,
    contribution: Contribution,
    ringRank: number,
    where: { readonly area: SharedAllReduce.Area | undefined; readonly file: FileAllReduce.FileArea | undefined },
    mean: Float32Array | undefined,
    dropped: Float32Array | undefined
  ): ToCoordinator | undefined => {
    collective = undefined
    if (mean === undefined) {
      blockedGeneration = Math.max(blockedGeneration, entry.generation)
      return undefined
    }
    const { area, file } = where
    const done = { generation: entry.generation, round: entry.round, mean, area, file, ringRank, residual: dropped }
    finished = done
    if (area !== undefined) watchCommit(done)
    const moved = linkBytes.take(entry.round)
    return {
      _tag: "RoundDone",
      epoch: Math.max(contribution.epoch, 0),
      round: entry.round,
      generation: entry.generation,
      samplesDone: contribution.samplesDone,
      // Only a rank with direct links says so (zeros when its steps went through the relay);
      // a shared all-reduce area moves no steps.
      ...((usePorts || peers !== undefined) && area === undefined ? { linkSentBytes: moved.sent, linkReceivedBytes: moved.received } : {})
    }
  }

  /** The running collective `entry` failed: the rank's loop leaves on it. */
  const failed = (entry: Running, error: Ring.RingLinkError): void => {
    if (collective !== entry) return
    ringFailure = error
    notify()
  }

  /**
   * Runs `entry`'s collective in the generation's shared area (`SharedAllReduce.run`: callbacks,
   * no fiber) and reports `RoundDone` from its callback, which may come before this returns.
   */
  const runInArea = (entry: Running, contribution: Contribution, view: FormRing, area: SharedAllReduce.Area): void => {
    const shape = { ringRank: view.ringRank, ringSize: view.ringSize, generation: view.generation, round: entry.round }
    entry.stop = SharedAllReduce.run(
      area,
      shape,
      contribution.params,
      contribution.contributes,
      areaFaults(entry.round, view.ringSize),
      (outcome) => {
        if (collective !== entry) return
        if (outcome instanceof Ring.RingLinkError) return failed(entry, outcome)
        if (area.badRank() === shape.ringRank) return failed(entry, notFinite())
        const report = finish(entry, contribution, shape.ringRank, { area, file: undefined }, outcome, undefined)
        if (report !== undefined) options.sendNow(report)
      }
    )
  }

  /**
   * Starts the all-reduce of the pending contribution in the current generation, unless one
   * runs or finished already, no ring is formed yet, or a `DeclareDead` aborted this generation.
   * When it completes the rank reports `RoundDone` and keeps the mean until `RoundCommitted`.
   */
  const startCollective = (round: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      const view = ringView
      const contribution = pending
      if (contribution === undefined || view === undefined || collective !== undefined || finished !== undefined) return Effect.void
      if (view.generation <= blockedGeneration) return Effect.void
      const channel = channelFor(view.generation)
      if (channel === undefined) return Effect.void // its direct links have not arrived yet
      const entry: Running = { generation: view.generation, round, fiber: undefined, stop: undefined }
      collective = entry
      // With an area every member runs there (an area made for another shape fails the collective,
      // never splits the ring between the area and the links).
      const area = channel.area
      if (area !== undefined) {
        runInArea(entry, contribution, view, area)
        return Effect.void
      }
      const shape = { ringRank: view.ringRank, ringSize: view.ringSize, generation: view.generation, round }
      const file = !usePorts ? fileAreaFor(view, contribution.params.length) : undefined
      const compression = data.compress === "fp16" || data.compress === "int8" ? data.compress : undefined
      // Steps between processes are packed with `--compress`; worker threads' links stay float32.
      const collectiveOf: Effect.Effect<
        {
          readonly mean: Float32Array | undefined
          readonly residual: Float32Array | undefined
          readonly file?: FileAllReduce.FileArea | undefined
        },
        Ring.RingLinkError
      > =
        file !== undefined
          ? fileCollective(file, channel, shape, contribution)
          : compression !== undefined && !usePorts
            ? RingCompressed.allReduce(channel.inbox, shape, contribution.params, contribution.contributes, {
                compression,
                base: contribution.base,
                residual
              })
            : Effect.map(Ring.allReduce(channel.inbox, shape, contribution.params, contribution.contributes, takeSpareMean()), (mean) => ({
                mean,
                residual: undefined
              }))
      const body = collectiveOf.pipe(
        Effect.flatMap(({ mean, residual: dropped, file: fileDone }) =>
          Effect.suspend(() => {
            if (collective !== entry) return Effect.void
            const report = finish(entry, contribution, shape.ringRank, { area: undefined, file: fileDone }, mean, dropped)
            return report === undefined ? Effect.void : send(report)
          })
        ),
        Effect.catch((error) => Effect.sync(() => failed(entry, error)))
      )
      return Effect.map(Effect.forkChild(body), (fiber) => {
        entry.fiber = fiber
      })
    })

  return {
    view: () => ringView,
    formRing: (message, round) =>
      Effect.gen(function* () {
        // A newer generation supersedes the collective of an older one; an older FormRing is ignored.
        if (ringView !== undefined && message.generation <= ringView.generation) return
        ringView = message
        links.formed(message)
        if (collective !== undefined && collective.generation < message.generation) yield* abortCollective
        if (finished !== undefined && finished.generation < message.generation) finished = undefined
        yield* send({ _tag: "RingReady", generation: message.generation })
        yield* startCollective(round) // redo an unconfirmed round from the pre-round parameters
      }),
    // Abort at once: no rank waits on a dead neighbour. A newer FormRing follows (or a shutdown).
    declareDead: Effect.gen(function* () {
      if (ringView !== undefined) blockedGeneration = Math.max(blockedGeneration, ringView.generation)
      yield* abortCollective
      finished = undefined
    }),
    committed: (message) => {
      const done = finished
      if (done === undefined || done.generation !== message.generation || done.round !== message.round) return undefined
      if (!readFileMean(done)) {
        finished = undefined
        return undefined
      }
      return takeFinished(done)
    },
    recycleMean: (buffer) => {
      spareMean = buffer
    },
    areaCommitted: () => {
      const done = finished
      if (done?.area === undefined || !done.area.committed(done.round)) return undefined
      return { round: done.round, mean: takeFinished(done) }
    },
    relayed: links.relayed,
    contribute: (contribution, round) => {
      pending = contribution
      return startCollective(round)
    },
    startCollective,
    contributionWaiting: () => pending !== undefined && collective === undefined && finished === undefined,
    neighboursWaiting: (round) => {
      if (ringView === undefined) return false
      const generation = ringView.generation
      const channel = channelFor(generation)
      if (channel === undefined) return false
      if (channel.area === undefined) return channel.inbox.holds(generation, round, channel.link.pending)
      if (channel.area.neighboursAt(round)) return true
      // Idle: wake the loop when a member arrives at a barrier (a collective this rank is not in).
      if (channel.watching !== true) {
        channel.watching = true
        void channel.area.arrivals().then(() => {
          channel.watching = false
          if (collective === undefined && finished === undefined && links.channel(generation) === channel) notify()
        })
      }
      return false
    },
    ringAddress: async () => {
      const advertise = data.peerLinks?.advertise
      const port = advertise === undefined ? undefined : await peers?.bound
      return advertise === undefined || port === undefined ? undefined : PeerRing.advertisedUrl(advertise, port)
    },
    linkName: () => {
      if (ringView !== undefined && peers !== undefined) {
        if (fileUsed.get(ringView.generation) === "file") return "shared file"
        return links.way(ringView.generation) === "relay" ? "relayed link" : "direct socket link"
      }
      if (ringView === undefined || !usePorts) return "relayed link"
      return links.channel(ringView.generation)?.area !== undefined ? "shared all-reduce" : "direct link"
    },
    failure: () => ringFailure,
    contributionBuffer: (length) => {
      const row = areaRow(length)
      if (row !== undefined) return row
      const buffer = spare
      spare = undefined
      // In memory the SIMD finite check reads (`Finite.alloc`): every contribution is checked.
      return buffer !== undefined && buffer.length === length ? buffer : Finite.alloc(length)
    },
    reset: Effect.gen(function* () {
      yield* abortCollective
      const done = finished
      finished = undefined
      pending = undefined
      // An area's result row is the area's: the held mean is a copy of it.
      if (done === undefined || !readFileMean(done)) return undefined
      return { round: done.round, generation: done.generation, mean: done.area === undefined ? done.mean : done.mean.slice() }
    })
  }
}
