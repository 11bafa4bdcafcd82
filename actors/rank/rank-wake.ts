/**
 * The rank loop's wait when it has nothing to train (`RankTraining.turn`): one wake-up for every
 * source, instead of a race between the transport's inbox and the ring's wake-up with a heartbeat
 * timeout around it (two fibers forked, a timeout's own race and timer, and their interruption,
 * every ring round).
 *
 * The wait ends when the inbox holds an event (or ended), when `notify` is called (the ring: a
 * direct link delivered to an idle rank, a generation's links arrived, a collective failed, a commit
 * was written into the shared area), or after `timeoutMs` (the heartbeat's interval); at once when
 * one of them happened since the last wait ended. The loop then takes whatever is there itself.
 *
 * The inbox is watched by one fiber that only peeks (`watch`, forked once): it wakes the loop when
 * an event arrives, then peeks again only once the loop waits next (the loop looks at the inbox
 * before it waits), so a rank whose frames stay in the inbox until the loop takes them does not
 * wake it again for each. A round in a shared area brings no frame: the watcher stays parked.
 *
 * @since 0.1.0
 */
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import type * as Transport from "../../src/transport/transport.ts"

/**
 * - `notify()`: ends the current wait, or the next one when the loop is not waiting.
 * - `wait(timeoutMs)`: the loop's wait (module doc); never fails.
 * - `watch`: the inbox's watcher (module doc), to fork once beside the loop; ends when the inbox ends.
 *
 * @since 0.1.0
 * @category model
 */
export interface Wake {
  readonly notify: () => void
  readonly wait: (timeoutMs: number) => Effect.Effect<void>
  readonly watch: Effect.Effect<void>
}

/**
 * Makes the wake-up of a rank's loop that takes its events from `inbox` (module doc).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (inbox: Queue.Dequeue<Transport.Event, Cause.Done>): Wake => {
  // A wake-up that came while the loop was not waiting: the next wait ends at once.
  let woke = false
  let waiter: (() => void) | undefined
  // The watcher: peeking (parked in the inbox until an event arrives) or fired (parked until the
  // loop waits again, which it does only after it took what was there); ended once the inbox ended.
  let watcher: "peeking" | "fired" | "ended" = "peeking"
  let peekAgain: (() => void) | undefined

  const notify = (): void => {
    const resume = waiter
    waiter = undefined
    if (resume === undefined) woke = true
    else resume()
  }

  const wait = (timeoutMs: number): Effect.Effect<void> =>
    Effect.callback<void>((resume) => {
      if (woke || watcher === "ended" || Queue.sizeUnsafe(inbox) > 0) {
        woke = false
        return resume(Effect.void)
      }
      if (watcher === "fired") {
        watcher = "peeking"
        const again = peekAgain
        peekAgain = undefined
        again?.()
      }
      const timer = setTimeout(() => {
        waiter = undefined
        resume(Effect.void)
      }, timeoutMs)
      waiter = () => {
        clearTimeout(timer)
        resume(Effect.void)
      }
      return Effect.sync(() => {
        clearTimeout(timer)
        waiter = undefined
      })
    })

  const parked = Effect.callback<void>((resume) => {
    if (watcher === "peeking") return resume(Effect.void)
    peekAgain = () => resume(Effect.void)
    return Effect.sync(() => {
      peekAgain = undefined
    })
  })

  const watch = Effect.gen(function* () {
    while (true) {
      const exit = yield* Effect.exit(Queue.peek(inbox))
      watcher = Exit.isFailure(exit) ? "ended" : "fired"
      notify()
      if (watcher === "ended") return
      yield* parked
    }
  })

  return { notify, wait, watch }
}
