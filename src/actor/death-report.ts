/**
 * Death reports: how a supervisor tells the coordinator that a rank ended (docs/design.md §1, §5).
 *
 * A supervisor never restarts anything; it turns each way a rank's worker, process or socket can
 * end into one `DeathReport{rank, cause}` and the coordinator decides. Any end of a rank that did
 * not first announce `Exiting` is a death, whatever its exit code (TOOLCHAIN.md §7: Bun can exit 0
 * after an unhandled rejection).
 *
 * @since 0.1.0
 */
import type { Rank } from "../core/messages.ts"
import * as Cause from "effect/Cause"
import * as Exit from "effect/Exit"

/** The rank's host ended with exit `code` (an integer; 0 included) and no crash was seen. @since 0.1.0 @category model */
export interface Exited {
  readonly _tag: "Exited"
  readonly code: number
}

/**
 * The rank's host crashed: an uncaught error or a defect. `error` is its message; `stack` its stack
 * trace when the supervisor learnt one (the rank's `Crashing` frame, or a worker's `error` event
 * under Node and Bun; Deno's carries none); `fingerprint` is `fingerprintOf(error, stack)`, which
 * the coordinator compares to find a trainer that fails the same way on two ranks.
 *
 * @since 0.1.0
 * @category model
 */
export interface Crashed {
  readonly _tag: "Crashed"
  readonly error: string
  readonly stack?: string
  readonly fingerprint?: string
}

/**
 * The rank's host was killed: an OS signal name (`"SIGKILL"`, `"SIGTERM"`) for a process,
 * `"terminate"` for a worker thread the supervisor terminated, `"interrupt"` for an actor fiber.
 *
 * @since 0.1.0
 * @category model
 */
export interface Killed {
  readonly _tag: "Killed"
  readonly signal: string
}

/** The rank's connection closed with WebSocket close `closeCode` (1000..4999; 1006 when abnormal). @since 0.1.0 @category model */
export interface Disconnected {
  readonly _tag: "Disconnected"
  readonly closeCode: number
}

/**
 * The coordinator refused the rank at formation (`reason` says why, e.g. a parameter count other
 * than the run's) and closed its link. @since 0.1.0 @category model
 */
export interface Refused {
  readonly _tag: "Refused"
  readonly reason: string
}

/**
 * Every way a rank can end, as seen by its supervisor (docs/design.md §5), or its refusal by the
 * coordinator.
 *
 * @since 0.1.0
 * @category model
 */
export type DeathCause = Exited | Crashed | Killed | Disconnected | Refused

/**
 * A supervisor's report that `rank`'s worker, process or socket ended without `Exiting`.
 *
 * @since 0.1.0
 * @category model
 */
export interface DeathReport {
  readonly _tag: "DeathReport"
  readonly rank: Rank
  readonly cause: DeathCause
}

/** `Exited{code}`. @since 0.1.0 @category constructors */
export const exited = (code: number): DeathCause => ({ _tag: "Exited", code })

/**
 * The top frame of a stack trace: its first line that starts with `at ` once trimmed (V8 under
 * Node and Deno, and JavaScriptCore under Bun, print frames that way), e.g.
 * `at Object.trainBatch (file:///trainer.ts:9:13)`; `""` when there is none.
 *
 * @since 0.1.0
 * @category utils
 */
export const topFrame = (stack: string): string => {
  for (const line of stack.split("\n")) {
    const trimmed = line.trim()
    if (trimmed.startsWith("at ")) return trimmed
  }
  return ""
}

/**
 * What makes two crashes "the same error": the message and the top stack frame, as one string
 * (`message`, a newline, the frame; the frame is `""` without a stack).
 *
 * @since 0.1.0
 * @category utils
 */
export const fingerprintOf = (error: string, stack: string | undefined): string => `${error}\n${stack === undefined ? "" : topFrame(stack)}`

/**
 * `Crashed{error, stack, fingerprint}`; `stack` is left out when `undefined` or empty.
 *
 * @since 0.1.0
 * @category constructors
 */
export const crashed = (error: string, stack?: string): DeathCause =>
  stack === undefined || stack === ""
    ? { _tag: "Crashed", error, fingerprint: fingerprintOf(error, undefined) }
    : { _tag: "Crashed", error, stack, fingerprint: fingerprintOf(error, stack) }

/** The stack of an unknown thrown value: `Error.stack` when it is a string, else `undefined`. @since 0.1.0 @category utils */
export const errorStack = (error: unknown): string | undefined =>
  error instanceof Error && typeof error.stack === "string" ? error.stack : undefined

/** `Crashed` for an unknown thrown value: its message and, for an `Error`, its stack. @since 0.1.0 @category constructors */
export const crashedBy = (error: unknown): DeathCause => crashed(errorMessage(error), errorStack(error))

/** `Killed{signal}`. @since 0.1.0 @category constructors */
export const killed = (signal: string): DeathCause => ({ _tag: "Killed", signal })

/** `Disconnected{closeCode}`. @since 0.1.0 @category constructors */
export const disconnected = (closeCode: number): DeathCause => ({ _tag: "Disconnected", closeCode })

/** `Refused{reason}`. @since 0.1.0 @category constructors */
export const refused = (reason: string): DeathCause => ({ _tag: "Refused", reason })

/** `DeathReport{rank, cause}`. @since 0.1.0 @category constructors */
export const make = (rank: Rank, cause: DeathCause): DeathReport => ({ _tag: "DeathReport", rank, cause })

/** The message of an unknown thrown value: `Error.message`, else `String(value)`. @since 0.1.0 @category utils */
export const errorMessage = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : String(error)

/**
 * How an actor fiber's end reads as a death cause: success is `Exited{0}`, interruption only is
 * `Killed{"interrupt"}`, a failure or defect is `Crashed` of the squashed cause (`crashedBy`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromExit = (exit: Exit.Exit<unknown, unknown>): DeathCause => {
  if (Exit.isSuccess(exit)) return exited(0)
  if (Cause.hasInterruptsOnly(exit.cause)) return killed("interrupt")
  return crashedBy(Cause.squash(exit.cause))
}
