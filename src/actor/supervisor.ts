/**
 * The actor supervisor: watches rank-hosting actors and turns each end into one `DeathReport`
 * (docs/design.md §5). It never restarts anything; the coordinator decides.
 *
 * @since 0.1.0
 */
import type { Rank } from "../core/messages.ts"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import type * as Actor from "./actor.ts"
import * as DeathReport from "./death-report.ts"

/**
 * A supervisor of rank actors.
 *
 * - `reports`: one `DeathReport` per watched rank that ended without `exiting`, in the order the
 *   ends were seen.
 * - `watch(rank, ref)`: watches `ref` for as long as the current scope is open.
 * - `exiting(rank)`: the rank announced `Exiting`; its later end is not a death.
 *
 * @since 0.1.0
 * @category model
 */
export interface Supervisor {
  readonly reports: Queue.Dequeue<DeathReport.DeathReport>
  readonly watch: <M, E>(rank: Rank, ref: Actor.ActorRef<M, E>) => Effect.Effect<void, never, Scope.Scope>
  readonly exiting: (rank: Rank) => Effect.Effect<void>
}

/**
 * Makes a supervisor whose report queue is unbounded: reports are at most one per rank, so the
 * queue is bounded by the number of ranks watched.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Supervisor> = Effect.gen(function*() {
  const reports = yield* Queue.unbounded<DeathReport.DeathReport>()
  const exited = new Set<Rank>()
  return {
    reports,
    exiting: (rank) => Effect.sync(() => void exited.add(rank)),
    watch: (rank, ref) =>
      Effect.asVoid(Effect.forkScoped(
        Effect.flatMap(ref.await, (exit) =>
          exited.has(rank) ? Effect.void : Queue.offer(reports, DeathReport.make(rank, DeathReport.fromExit(exit))))
      ))
  }
})
