/**
 * Churn injected into a served run (`ServeOptions.churn`, `cohort serve --churn F`; docs/churn.md):
 * after every averaging round, a fraction of the live ranks is made to leave, a third each way a
 * participant leaves:
 *
 * - **graceful**: the rank is sent `Shutdown`; it says `Exiting` and closes its socket.
 * - **crash**: its socket is cut from this side (close code 4011, as `--kill` does).
 * - **silent**: its frames are dropped here from now on, its socket left open; only the heartbeat
 *   timeout takes it out (a sleeping laptop, a cut link).
 *
 * Ranks already made to leave are not picked again. The picks come from a generator seeded with
 * the run's seed, so that one churn is the same from run to run for the same cohort. The journal
 * gets one `decision` line per churn naming the ranks of each kind; each rank's fault time goes to
 * its death's timing. No ranks join from here: joins are the joiners' own (`cohort join`).
 *
 * @since 0.1.0
 */
import * as Core from "../../src/core/coordinator.ts"
import type { Rank } from "../../src/core/messages.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"
import type { Context } from "./launcher-context.ts"

/**
 * A run's churn: `afterRound()` makes the next ranks leave; `muted` holds the silent ones, whose
 * frames the coordinator drops (`Coordinator.Options.muted`).
 *
 * @since 0.1.0
 * @category launcher
 */
export interface Churn {
  readonly afterRound: (round: number) => void
  readonly muted: ReadonlySet<Rank>
}

/** A small seeded generator (the same picks from run to run). */
const generator = (seed: number): (() => number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * The churn of `ctx`'s served run: `fraction` in (0, 1) of the live ranks leave after each round
 * (rounded to the nearest count, never the last rank). The cohort shrinks unless ranks join.
 *
 * @since 0.1.0
 * @category launcher
 */
export const make = (ctx: Context, fraction: number, seed: number): Churn => {
  const random = generator(seed)
  const muted = new Set<Rank>()
  const told = new Set<Rank>()
  const shutdown = Codec.encode(Frame.fromCoordinator({ _tag: "Shutdown" }))
  const afterRound = (round: number): void => {
    const transport = ctx.vars.server?.transport
    if (transport === undefined || ctx.state.phase !== "running" || ctx.state.shutdownSent) return
    const pool = Core.survivors(ctx.state).filter((rank) => !told.has(rank))
    // Rounded down to none, and never the last rank: the run goes on with whoever stays.
    const count = Math.min(Core.survivors(ctx.state).length - 1, Math.round(fraction * pool.length))
    if (count <= 0) return
    const picked: Array<Rank> = []
    while (picked.length < count) picked.push(pool.splice(Math.floor(random() * pool.length), 1)[0]!)
    const graceful = picked.slice(0, Math.ceil(count / 3))
    const crash = picked.slice(graceful.length, graceful.length + Math.ceil((count - graceful.length) / 2))
    const silent = picked.slice(graceful.length + crash.length)
    const now = ctx.nowMs()
    for (const rank of picked) {
      told.add(rank)
      ctx.faultAt.set(rank, now)
    }
    for (const rank of silent) muted.add(rank)
    for (const rank of graceful) transport.sendUnsafe(rank, shutdown)
    for (const rank of crash) transport.disconnect(rank, Transport.CloseCode.RankDead)
    const named = (ranks: ReadonlyArray<Rank>) => (ranks.length === 0 ? "none" : ranks.join(", "))
    ctx.emit({
      type: "decision",
      ms: ctx.sinceStart(now),
      detail: `churn after round ${round}: ranks ${named(graceful)} leave gracefully (Shutdown), ${named(crash)} crash (socket cut), ${named(silent)} go silent (frames dropped)`
    })
  }
  return { afterRound, muted }
}
