/**
 * The ring members' round reports in a generation's shared all-reduce area, handed to the
 * coordinator as their `RoundDone` frames (`SharedAllReduce` module doc, step 3): a member writes
 * its report into the area instead of posting it, and the last one of a round wakes this thread
 * once, where eight frames used to come one by one. Each report is handed in through the worker
 * host (`WorkerHost.receiveAfter`) in order with the member's own frames: after the messages it
 * had posted before it, before any later one and before its end. The coordinator decodes and
 * steps them as any frame, so its core still decides every commit.
 *
 * @since 0.1.0
 */
import * as SharedAllReduce from "../../src/averaging/shared-all-reduce.ts"
import type { Rank } from "../../src/core/messages.ts"
import type * as Worker from "../../src/transport/worker.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"

/**
 * `watch(generation, peers, buffer)`: hands in the reports of generation `generation`'s area
 * (`buffer`; `peers` in ring order) from now on, and stops watching the generation before (its
 * reports written by then are handed in first); `buffer` `undefined`: a generation without an
 * area. `stop()`: stops watching.
 *
 * @since 0.1.0
 * @category model
 */
export interface AreaReports {
  readonly watch: (generation: number, peers: ReadonlyArray<Rank>, buffer: SharedArrayBuffer | undefined) => void
  readonly stop: () => void
}

interface Watched {
  readonly generation: number
  readonly peers: ReadonlyArray<Rank>
  readonly ringRanks: ReadonlyMap<Rank, number>
  readonly reports: SharedAllReduce.Reports
  stopped: boolean
}

/**
 * Watches the areas of a worker host's ring generations (`AreaReports`); registers with the host
 * to be asked before each rank's message and end (`WorkerHost.beforeArrival`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (host: Pick<Worker.WorkerHost, "receiveAfter" | "beforeArrival">): AreaReports => {
  let current: Watched | undefined
  const handIn = (watched: Watched, ringRank: number): void => {
    const report = watched.reports.take(ringRank)
    if (report === undefined) return
    const rank = watched.peers[ringRank]!
    const { round, epoch, samplesDone, loss } = report
    const message = {
      _tag: "RoundDone",
      epoch,
      round,
      generation: watched.generation,
      samplesDone,
      ...(loss === undefined ? {} : { loss })
    } as const
    host.receiveAfter(rank, Codec.encode(Frame.fromRank(rank, message)), report.messagesBefore)
  }
  const handInAll = (watched: Watched): void => {
    for (let i = 0; i < watched.peers.length; i++) handIn(watched, i)
  }
  const loop = (watched: Watched): void => {
    if (watched.stopped) return
    handInAll(watched)
    void watched.reports.changes().then(() => loop(watched))
  }
  const stopCurrent = (): void => {
    const watched = current
    current = undefined
    if (watched === undefined) return
    handInAll(watched)
    watched.stopped = true
    watched.reports.wake()
  }
  host.beforeArrival((rank) => {
    const watched = current
    const ringRank = watched?.ringRanks.get(rank)
    if (ringRank !== undefined) handIn(watched!, ringRank)
  })
  return {
    watch: (generation, peers, buffer) => {
      stopCurrent()
      if (buffer === undefined) return
      const watched: Watched = {
        generation,
        peers,
        ringRanks: new Map(peers.map((rank, i) => [rank, i])),
        reports: new SharedAllReduce.Reports(buffer, peers.length),
        stopped: false
      }
      current = watched
      loop(watched)
    },
    stop: () => {
      stopCurrent()
      host.beforeArrival(undefined)
    }
  }
}
