/**
 * A rank's watch on its coordinator, and what the rank does when the coordinator is gone
 * (`rank.ts` module doc): the link to the coordinator ended (its process
 * died, its socket dropped), or the coordinator sent nothing for `coordinatorTimeoutMs`. Then the
 * rank saves through the trainer under `<saveDir>/rank<r>` with an `emergency.json` beside the
 * model (`EmergencySave`), the save bounded by `coordinatorTimeoutMs` too, prints one line (on the
 * coordinator's stderr for a child process, `Link.detach`, or its own) and leaves with
 * `coordinatorGoneExitCode`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as DeathReport from "../../src/actor/death-report.ts"
import type { Rank } from "../../src/core/messages.ts"
import * as Files from "../../src/platform/files.ts"
import * as Transport from "../../src/transport/transport.ts"
import { coordinatorGoneExitCode, coordinatorTimeoutMsDefault } from "./rank-data.ts"
import type { EmergencySave, Link } from "./rank-data.ts"

const toCoordinator = Transport.coordinatorPeer

/**
 * Why the rank counts its coordinator gone: its link ended (`closeCode` as the transport gave it,
 * `undefined` when it had none) or it was silent for `silentMs` (ms) over `coordinatorTimeoutMs`.
 *
 * @since 0.1.0
 * @category model
 */
export type Gone =
  | { readonly reason: "ChannelClosed"; readonly closeCode: number | undefined }
  | { readonly reason: "CoordinatorSilent"; readonly silentMs: number }

/**
 * What `watch` needs of the rank: its link, index and save folder (`<saveDir>/rank<r>`), the
 * `RankData.coordinatorTimeoutMs` it was given (`undefined`: `coordinatorTimeoutMsDefault`; `0`: no
 * silence check), when it started (ms, the rank's clock), how to save the model into a folder
 * (the trainer's `save`, then Cohort's `SavedModel`), the epoch it trains (-1 before any) and how
 * to leave with an exit code.
 *
 * @since 0.1.0
 * @category model
 */
export interface WatchOptions {
  readonly link: Link
  readonly rank: Rank
  readonly saveDir: string
  readonly coordinatorTimeoutMs: number | undefined
  readonly startedMs: number
  readonly save: (dir: string) => Promise<void>
  readonly epoch: () => number
  readonly leave: (code: number) => void
}

/**
 * A rank's coordinator watch (`watch`): `ended` records how the coordinator's link ended,
 * `silence(nowMs)` says whether the coordinator has been silent too long (not counting the time
 * spent in calls the coordinator asked for, which `asked(fromMs, toMs)` records: frames that came
 * meanwhile may not be delivered yet), `channelClosed()` is the
 * `Gone` of an ended link, and `gone(why, save)` saves (unless `save` is false: a hung rank) and
 * leaves; it never fails.
 *
 * @since 0.1.0
 * @category model
 */
export interface Watch {
  readonly ended: (cause: DeathReport.DeathCause) => void
  readonly silence: (nowMs: number) => Gone | undefined
  readonly asked: (fromMs: number, toMs: number) => void
  readonly channelClosed: () => Gone
  readonly gone: (why: Gone, save?: boolean) => Effect.Effect<void>
}

/**
 * Makes the watch of one rank on its coordinator (`Watch`, module doc).
 *
 * @since 0.1.0
 * @category rank
 */
export const watch = (options: WatchOptions): Watch => {
  const { link, rank, leave } = options
  const { transport } = link
  // The coordinator's liveness, as the rank sees it: its link's end, or its silence.
  const coordinatorTimeoutMs = options.coordinatorTimeoutMs ?? coordinatorTimeoutMsDefault
  const saveTimeoutMs = coordinatorTimeoutMs > 0 ? coordinatorTimeoutMs : coordinatorTimeoutMsDefault
  const startedMs = options.startedMs
  let linkEnded: DeathReport.DeathCause | undefined
  // Time spent since the last arrival in calls the coordinator asked for (a save, an eval): a
  // synchronous trainer does not let frames in meanwhile, so that silence is not the coordinator's.
  let busyMs = 0
  let busySinceArrivalMs: number | undefined
  const lastHeardMs = (): number => Math.max(startedMs, transport.lastArrivalMs(toCoordinator) ?? startedMs)
  /** The coordinator's silence at `nowMs` past `coordinatorTimeoutMs`, if it is. */
  const silence = (nowMs: number): Gone | undefined => {
    if (coordinatorTimeoutMs <= 0) return undefined
    const heardMs = lastHeardMs()
    const silentMs = nowMs - heardMs - (busySinceArrivalMs === heardMs ? busyMs : 0)
    return silentMs > coordinatorTimeoutMs ? { reason: "CoordinatorSilent", silentMs } : undefined
  }
  const asked = (fromMs: number, toMs: number): void => {
    const heardMs = lastHeardMs()
    if (busySinceArrivalMs !== heardMs) [busyMs, busySinceArrivalMs] = [0, heardMs]
    busyMs += Math.max(0, toMs - Math.max(fromMs, heardMs))
  }
  const channelClosed = (): Gone => ({
    reason: "ChannelClosed",
    closeCode: linkEnded?._tag === "Disconnected" ? linkEnded.closeCode : undefined
  })
  const describe = (why: Gone): string =>
    why.reason === "CoordinatorSilent"
      ? `no frame for ${Math.round(why.silentMs)} ms, over coordinatorTimeoutMs ${coordinatorTimeoutMs}`
      : why.closeCode === undefined || why.closeCode === Transport.CloseCode.Abnormal
        ? "channel closed"
        : `channel closed with code ${why.closeCode}`
  /** The rank's last line's head: declared dead (the coordinator is still there), or the coordinator is gone. */
  const headOf = (why: Gone): string =>
    why.reason === "ChannelClosed" && why.closeCode === Transport.CloseCode.RankDead
      ? `the coordinator declared this rank dead (close code ${why.closeCode})`
      : why.reason === "ChannelClosed" && why.closeCode === Transport.CloseCode.CredentialRevoked
        ? `the coordinator revoked this rank (close code ${why.closeCode}: cohort revoke)`
        : `the coordinator is gone (${describe(why)})`
  /** A link that dropped without a code: what the link learns of why (`Link.whyEnded`), if it can. */
  const learnWhy = (why: Gone): Effect.Effect<Gone> =>
    why.reason === "ChannelClosed" &&
    link.whyEnded !== undefined &&
    (why.closeCode === undefined || why.closeCode === Transport.CloseCode.Abnormal)
      ? Effect.map(link.whyEnded, (closeCode): Gone => (closeCode === undefined ? why : { reason: "ChannelClosed", closeCode }))
      : Effect.succeed(why)
  /**
   * The coordinator is gone: save where we can (bounded), say so in one line, leave. Never
   * throws: a save that fails or takes too long is reported in the line and in emergency.json.
   */
  const gone = (first: Gone, save = true) =>
    Effect.gen(function* () {
      const why = yield* learnWhy(first)
      const say = link.detach?.() ?? ((line: string) => console.error(line))
      const detail = describe(why)
      const head = headOf(why)
      if (!save) {
        say(`cohort rank ${rank}: ${head}; no save (the rank was hung)`)
        return leave(coordinatorGoneExitCode)
      }
      // A joiner the run let in but closed at its end (4020, or 4019 while saving and stopping)
      // before it trained: the coordinator is not gone, and the rank holds nothing of the run's.
      const closedAtEnd =
        why.reason === "ChannelClosed" &&
        (why.closeCode === Transport.CloseCode.JoinRunOver || why.closeCode === Transport.CloseCode.JoinShuttingDown)
      if (closedAtEnd && options.epoch() < 0) {
        say(`cohort rank ${rank}: the run ended before this rank trained (close code ${why.closeCode}); nothing to save`)
        return leave(coordinatorGoneExitCode)
      }
      const dir = `${options.saveDir}/rank${rank}`
      const saved = yield* Effect.tryPromise(async () => {
        await Files.mkdir(dir)
        await options.save(dir)
      }).pipe(Effect.result, Effect.timeoutOption(saveTimeoutMs))
      const error =
        saved._tag === "None"
          ? `the save did not finish within ${saveTimeoutMs} ms`
          : Result.isFailure(saved.value)
            ? DeathReport.errorMessage(saved.value.failure.cause ?? saved.value.failure)
            : undefined
      const record: EmergencySave = {
        emergency: true,
        rank,
        reason: why.reason,
        ...(why.reason === "ChannelClosed"
          ? why.closeCode === undefined
            ? {}
            : { closeCode: why.closeCode }
          : { silentMs: Math.round(why.silentMs) }),
        detail,
        at: new Date().toISOString(),
        epoch: options.epoch(),
        saved: error === undefined,
        ...(error === undefined ? {} : { error })
      }
      yield* Effect.tryPromise(async () => {
        await Files.mkdir(dir)
        await Files.writeFile(`${dir}/emergency.json`, `${JSON.stringify(record, null, 2)}\n`)
      }).pipe(Effect.ignore, Effect.timeoutOption(saveTimeoutMs))
      say(
        error === undefined
          ? `cohort rank ${rank}: ${head}; saved to ${dir} (emergency)`
          : `cohort rank ${rank}: ${head}; the emergency save to ${dir} failed: ${error}`
      )
      leave(coordinatorGoneExitCode)
    })
  return {
    ended: (cause) => {
      linkEnded = cause
    },
    silence,
    asked,
    channelClosed,
    gone
  }
}
