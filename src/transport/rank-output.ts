/**
 * What a rank prints: the lines a rank's worker or process writes to its stdout and stderr
 * (`console.log`, `process.stdout.write`, ...), forwarded to the coordinator, never mixed with
 * its frames. A rank's frames travel on a channel of their own (a worker's message port, a
 * process's fd 3), so trainer code may print freely.
 *
 * Every line is forwarded to `onOutput(rank, line)`, by default the coordinator's stderr as
 * `[rank N] line`. Two bounds keep a rank that prints without end from flooding the coordinator:
 *
 * - `outputLineBytesMax` (default 4096 bytes): a longer line keeps its first `outputLineBytesMax`
 *   bytes and ends with `… (K bytes cut)`; the rest is never buffered.
 * - `outputLinesPerSecondMax` (default 100, per rank, stdout and stderr together): lines past it
 *   within one second (a window that opens with the first line after the last one closed) are
 *   dropped, and the first line forwarded after them is preceded by
 *   `(K lines dropped: over 100 lines per second)`; a count still pending when the rank ends is
 *   forwarded then. The bytes of dropped lines are still read (and counted), never decoded.
 *
 * @since 0.1.0
 */
import * as Terminal from "../platform/terminal.ts"
import type { Peer } from "./transport.ts"

/**
 * Options of the worker and process hosts about rank output, with defaults:
 *
 * - `onOutput(rank, line)` (default `writeToStderr`): receives each line without its line end
 *   (`\n`, or `\r\n`). Must not throw.
 * - `outputLineBytesMax` (default `outputLineBytesMaxDefault`, 4096 bytes): see the module.
 * - `outputLinesPerSecondMax` (default `outputLinesPerSecondMaxDefault`, 100): see the module.
 *
 * @since 0.1.0
 * @category options
 */
export interface Options {
  readonly onOutput?: (rank: Peer, line: string) => void
  readonly outputLineBytesMax?: number
  readonly outputLinesPerSecondMax?: number
}

/** Default `outputLineBytesMax`: 4096 bytes. @since 0.1.0 @category options */
export const outputLineBytesMaxDefault = 4096

/** Default `outputLinesPerSecondMax`: 100 lines per rank per second. @since 0.1.0 @category options */
export const outputLinesPerSecondMaxDefault = 100

/**
 * `line` as the coordinator prints it: `[rank N] line`.
 *
 * @since 0.1.0
 * @category output
 */
export const prefixed = (rank: Peer, line: string): string => `[rank ${rank}] ${line}`

/**
 * The default `onOutput`: writes `[rank N] line` and a line end to the coordinator's stderr.
 *
 * @since 0.1.0
 * @category output
 */
export const writeToStderr = (rank: Peer, line: string): void => Terminal.writeStderr(`${prefixed(rank, line)}\n`)

/** Which of a rank's streams a chunk comes from. @since 0.1.0 @category model */
export type Stream = "stdout" | "stderr"

/**
 * One rank's output splitter: `push` raw bytes of a stream as they arrive; `end` once the rank is
 * gone (forwards partial last lines and a pending drop count). `nowMs` is read once per line (the
 * transport's clock; tests pass their own).
 *
 * @since 0.1.0
 * @category model
 */
export interface Lines {
  readonly push: (stream: Stream, chunk: Uint8Array) => void
  readonly end: () => void
}

const newline = 0x0a
const carriageReturn = 0x0d

/**
 * Makes `rank`'s splitter with `options` (see `Options`); `nowMs` defaults to `Date.now`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (rank: Peer, options: Options = {}, nowMs: () => number = Date.now): Lines => {
  const onOutput = options.onOutput ?? writeToStderr
  const lineBytesMax = options.outputLineBytesMax ?? outputLineBytesMaxDefault
  const linesPerSecondMax = options.outputLinesPerSecondMax ?? outputLinesPerSecondMaxDefault
  const decoder = new TextDecoder()
  let windowStartMs = Number.NEGATIVE_INFINITY
  let linesInWindow = 0
  let dropped = 0
  const droppedNote = () => {
    if (dropped === 0) return
    onOutput(rank, `(${dropped} line${dropped === 1 ? "" : "s"} dropped: over ${linesPerSecondMax} lines per second)`)
    dropped = 0
  }
  /** Whether the next line may be forwarded; counts it as dropped if not. */
  const admit = (): boolean => {
    const now = nowMs()
    if (now - windowStartMs >= 1000) {
      windowStartMs = now
      linesInWindow = 0
    }
    if (linesInWindow >= linesPerSecondMax) {
      dropped += 1
      return false
    }
    linesInWindow += 1
    droppedNote()
    return true
  }

  // Per stream: the kept bytes of the line being read (at most lineBytesMax) and the bytes cut.
  const partial = { stdout: new Uint8Array(lineBytesMax), stderr: new Uint8Array(lineBytesMax) }
  const kept = { stdout: 0, stderr: 0 }
  const cut = { stdout: 0, stderr: 0 }
  const finish = (stream: Stream): void => {
    if (admit()) {
      let length = kept[stream]
      if (cut[stream] === 0 && length > 0 && partial[stream][length - 1] === carriageReturn) length -= 1
      const text = decoder.decode(partial[stream].subarray(0, length))
      onOutput(rank, cut[stream] === 0 ? text : `${text}… (${cut[stream]} bytes cut)`)
    }
    kept[stream] = 0
    cut[stream] = 0
  }
  const append = (stream: Stream, bytes: Uint8Array): void => {
    const room = lineBytesMax - kept[stream]
    const taken = Math.min(room, bytes.byteLength)
    partial[stream].set(bytes.subarray(0, taken), kept[stream])
    kept[stream] += taken
    cut[stream] += bytes.byteLength - taken
  }
  return {
    push: (stream, chunk) => {
      let at = 0
      while (at < chunk.byteLength) {
        const end = chunk.indexOf(newline, at)
        if (end === -1) {
          append(stream, chunk.subarray(at))
          return
        }
        append(stream, chunk.subarray(at, end))
        finish(stream)
        at = end + 1
      }
    },
    end: () => {
      for (const stream of ["stdout", "stderr"] as const) if (kept[stream] > 0 || cut[stream] > 0) finish(stream)
      droppedNote()
    }
  }
}
