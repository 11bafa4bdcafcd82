/**
 * The live views of a run on the command line: timestamped event lines, or one progress bar per
 * rank with the other events printed above the bars.
 *
 * @since 0.1.0
 */
import * as CliProgress from "cli-progress"
import type { RunTypes } from "../../actors/cli-entry.ts"
import { eventText, stamp } from "./event-text.ts"

/**
 * `eventText` for a live view, which reads events in order: a joiner's `welcomed` line names what
 * it was given only when that differs from what the joiner before it was given (the core's words
 * once, not once per joiner), and never repeats the rank, epoch and round the line starts with.
 */
const liveText = (): ((event: RunTypes.RunEvent) => string) => {
  let lastGiven: string | undefined
  return (event) => {
    if (event.type !== "welcomed") return eventText(event)
    // The core's reason starts with what the line already says: "rank R joins at epoch E, round F onwards (path): ".
    const given = event.given.replace(/^rank \d+ joins at epoch \d+, round \d+ onwards \([^)]*\): /, "")
    const same = given === lastGiven
    lastGiven = given
    return eventText({ ...event, given: same ? "" : given })
  }
}

/**
 * A live view of a run: `onEvent` for each event as it happens, `stop` once the run is over.
 *
 * @since 0.1.0
 * @category rendering
 */
export interface LiveView {
  readonly onEvent: (event: RunTypes.RunEvent) => void
  readonly stop: () => void
}

/**
 * Timestamped lines (`[  12.3s] rank 2 lost (supervisor): ...`), one per event, except progress:
 * at most one line per rank per `progressEveryMs` (default 1000) of run time.
 *
 * @since 0.1.0
 * @category rendering
 */
export const lineView = (write: (text: string) => void, progressEveryMs = 1000): LiveView => {
  const lastProgressMs = new Map<number, number>()
  const text = liveText()
  return {
    onEvent: (event) => {
      // Averaging rounds go to the journal only: one a line would drown the rest.
      if (event.type === "round") return
      if (event.type === "progress") {
        const last = lastProgressMs.get(event.rank)
        if (last !== undefined && event.ms - last < progressEveryMs) return
        lastProgressMs.set(event.rank, event.ms)
      }
      write(`${stamp(event.ms)} ${text(event)}\n`)
    },
    stop: () => {}
  }
}

interface RankBar {
  readonly bar: CliProgress.SingleBar
  epoch: number
  total: number
  value: number
}

/**
 * One `cli-progress` bar per rank (rank, epoch, samples done of its expected share, samples/s,
 * state) on `stream`; every other event is printed above the bars as a timestamped line. A bar's
 * total starts as the rank's equal share of the epoch among the live ranks and grows when the
 * rank is handed more (extensions, chunks); when the epoch ends, a live rank's bar shows what it
 * trained of it (the launcher's last progress event of the epoch), full: redistributed samples
 * make a rank's part differ from its share.
 *
 * @since 0.1.0
 * @category rendering
 */
export const barsView = (stream: NodeJS.WritableStream): LiveView => {
  const multibar = new CliProgress.MultiBar(
    {
      stream,
      format: "rank {rank} [{bar}] {value}/{total} samples | epoch {epoch} | {speed} samples/s | {state}",
      hideCursor: false,
      clearOnComplete: false,
      stopOnComplete: false,
      // Log lines are written over the bars' rows: a bar that did not change since (a dead rank's)
      // must be drawn again, or its row keeps the log line's text.
      forceRedraw: true,
      autopadding: true,
      barsize: 24
    },
    CliProgress.Presets.shades_classic
  )
  const bars = new Map<number, RankBar>()
  const dead = new Set<number>()
  let epochSamples = 0
  let live = 0
  const rankWidth = { value: 1 }
  const share = (): number => Math.max(1, Math.ceil(epochSamples / Math.max(1, live)))
  // cli-progress clears only the first row it writes its buffered log lines on; each line clears
  // its own row (ESC [2K) so that no longer bar row shows through past its end.
  const text = liveText()
  const log = (event: RunTypes.RunEvent): void => multibar.log(`\x1b[2K${stamp(event.ms)} ${text(event)}\n`)
  return {
    onEvent: (event) => {
      switch (event.type) {
        case "started": {
          epochSamples = event.epochSamples
          live = event.worldSize
          rankWidth.value = String(event.worldSize - 1).length
          for (let rank = 0; rank < event.worldSize; rank++) {
            const payload = { rank: String(rank).padStart(rankWidth.value), epoch: 0, speed: 0, state: "starting" }
            bars.set(rank, { bar: multibar.create(share(), 0, payload), epoch: 0, total: share(), value: 0 })
          }
          log(event)
          return
        }
        case "progress": {
          const entry = bars.get(event.rank)
          if (entry === undefined) return
          if (event.epoch !== entry.epoch) {
            entry.epoch = event.epoch
            entry.total = share()
            entry.bar.setTotal(entry.total)
          }
          if (event.samplesDone > entry.total) {
            entry.total = event.samplesDone
            entry.bar.setTotal(entry.total)
          }
          entry.value = event.samplesDone
          entry.bar.update(event.samplesDone, {
            epoch: event.epoch,
            speed: Math.round(event.samplesPerSecond),
            state: event.state
          })
          return
        }
        case "welcomed": {
          // A rank that joined the running run gets its bar now.
          live += 1
          if (!bars.has(event.rank)) {
            const payload = { rank: String(event.rank).padStart(rankWidth.value), epoch: event.epoch, speed: 0, state: "joined" }
            bars.set(event.rank, { bar: multibar.create(share(), 0, payload), epoch: event.epoch, total: share(), value: 0 })
          }
          log(event)
          return
        }
        case "death": {
          live = Math.max(0, live - 1)
          dead.add(event.death.rank)
          bars.get(event.death.rank)?.bar.update({ state: "dead", speed: 0 })
          log(event)
          return
        }
        case "round":
          return
        case "epoch": {
          for (const [rank, entry] of bars) {
            if (dead.has(rank) || entry.epoch !== event.summary.epoch || entry.value === 0 || entry.total === entry.value) continue
            entry.total = entry.value
            entry.bar.setTotal(entry.total)
          }
          log(event)
          return
        }
        case "ended": {
          const state = event.outcome.status === "completed" ? "done" : "stopped"
          for (const [rank, entry] of bars) if (!dead.has(rank)) entry.bar.update({ state, speed: 0 })
          log(event)
          return
        }
        default:
          log(event)
      }
    },
    stop: () => {
      // stop() draws the bars a last time but drops log lines not yet drawn: draw them first.
      if (bars.size > 0) multibar.update()
      multibar.stop()
    }
  }
}
