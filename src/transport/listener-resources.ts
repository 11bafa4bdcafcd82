/**
 * A listener's resource events (`ResourceEvent`: connections refused at its cap, connections it
 * could not accept) told as lines for the coordinator's `CoordinatorResource` alerts: counted as
 * they come (a flood is thousands a second), told at most once per `intervalMs`, each line with
 * what came since the last one and the total. The coordinator's problem, never a rank's.
 *
 * @since 0.1.0
 */
import type * as RuntimeTypes from "../platform/types.ts"

/**
 * `onResource` for the listener's options, and `drain(nowMs)`: the lines to tell now (none
 * within `intervalMs` of the last lines told, none when nothing new came).
 *
 * @since 0.1.0
 * @category model
 */
export interface Tally {
  readonly onResource: (event: RuntimeTypes.ResourceEvent) => void
  readonly drain: (nowMs: number) => Array<string>
}

/** Default `intervalMs` of `make`: 1000 ms. @since 0.1.0 @category options */
export const intervalMsDefault = 1000

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? "" : "s"}`

/**
 * A tally for the listener called `listener` in its lines (`"the rank listener"`), whose cap is
 * `connectionsMax`, set by the option `option` (named in the line, so that the user knows what to
 * raise). `intervalMs` as in the module doc.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (listener: string, connectionsMax: number, option: string, intervalMs: number = intervalMsDefault): Tally => {
  let refused = 0
  let refusedTold = 0
  const failures = new Map<string, { count: number; told: number; message: string }>()
  let lastToldMs = Number.NEGATIVE_INFINITY
  return {
    onResource: (event) => {
      if (event._tag === "ConnectionRefused") {
        refused += 1
        return
      }
      const known = failures.get(event.code) ?? { count: 0, told: 0, message: event.message }
      known.count += 1
      failures.set(event.code, known)
    },
    drain: (nowMs) => {
      const lines: Array<string> = []
      if (nowMs - lastToldMs < intervalMs) return lines
      if (refused > refusedTold) {
        lines.push(
          `${listener} refused ${plural(refused - refusedTold, "connection")} at its cap, ${option} ${connectionsMax} (${refused} in all); the ranks that joined keep their links and the run goes on`
        )
        refusedTold = refused
      }
      for (const [code, failure] of failures) {
        if (failure.count === failure.told) continue
        const why = code === "EMFILE" || code === "ENFILE" ? "the coordinator's process is out of file descriptors" : "the listener's error"
        lines.push(
          `${listener} could not accept ${plural(failure.count - failure.told, "connection")}: ${failure.message} (${why}; ${failure.count} in all); the run goes on`
        )
        failure.told = failure.count
      }
      if (lines.length > 0) lastToldMs = nowMs
      return lines
    }
  }
}
