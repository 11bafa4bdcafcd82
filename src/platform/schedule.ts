/**
 * Macrotask scheduling for code outside `src/platform/` that must let the event loop breathe
 * (timers, I/O, other links) between bounded slices of work.
 *
 * @since 0.1.0
 */
import { setImmediate, setTimeout } from "node:timers"

/**
 * Runs `f` after the event loop's current turn: after pending I/O callbacks and due timers, not
 * before them as a microtask would (`setImmediate` from `node:timers`, the same on Node, Bun and
 * Deno).
 *
 * @since 0.1.0
 * @category scheduling
 */
export const afterIo = (f: () => void): void => {
  setImmediate(f)
}

/**
 * Runs `f` after `ms` milliseconds (integer >= 0), as a timer.
 *
 * @since 0.1.0
 * @category scheduling
 */
export const after = (ms: number, f: () => void): void => {
  setTimeout(f, ms)
}
