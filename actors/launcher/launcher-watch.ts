/**
 * What the launcher watches while the run trains (`launcher.ts`): its signals and a record that
 * can no longer be written (the core is asked to end the run), the coordinator process's own
 * shortages, joiners whose `Hello` never came, and revocations (`cohort revoke`).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Core from "../../src/core/coordinator.ts"
import * as Files from "../../src/platform/files.ts"
import * as Transport from "../../src/transport/transport.ts"
import type * as Coordinator from "../coordinator/coordinator.ts"
import type { Context } from "./launcher-context.ts"
import type { Host } from "./launcher-hosts.ts"
import { defaults } from "./launch-options.ts"
import * as Revocations from "./revocations.ts"
import * as StorageFault from "./storage-fault.ts"

/** Completes once `signal` is aborted (at once if it already is). */
const aborted = (signal: AbortSignal): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (signal.aborted) return resume(Effect.void)
    const onAbort = () => resume(Effect.void)
    signal.addEventListener("abort", onAbort, { once: true })
    return Effect.sync(() => signal.removeEventListener("abort", onAbort))
  })

/** Revocations while the run goes on (`cohort revoke`): the holder is closed with its own code. */
export const watchRevocations = (ctx: Context, host: Host): Effect.Effect<void, never, Scope.Scope> =>
  Effect.promise(() => Revocations.read(ctx.runDir)).pipe(
    Effect.flatMap((all) =>
      Effect.sync(() => {
        for (const revocation of ctx.credentials.fresh(all)) {
          const { rank, credential } = ctx.credentials.revoke(revocation)
          ctx.emit({
            type: "revoked",
            ms: ctx.sinceStart(ctx.nowMs()),
            ...(rank === undefined ? {} : { rank }),
            ...(credential === undefined ? {} : { credential })
          })
          if (rank !== undefined) host.transport.disconnect(rank, Transport.CloseCode.CredentialRevoked)
        }
      })
    ),
    Effect.repeat(Schedule.spaced(Revocations.revocationPollMs)),
    Effect.forkScoped,
    Effect.asVoid
  )

/** An interrupt (or an immediate stop, or a record that can no longer be written) asks the core to end the run; it decides. */
export const watchSignals = (ctx: Context, coordinator: Coordinator.Handle): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { options, storageStop, vars } = ctx
    const detailOf = (signal: AbortSignal): string =>
      typeof signal.reason === "string" && /^SIG[A-Z]+$/.test(signal.reason) ? signal.reason : "aborted"
    for (const signal of [options.signal, options.stopSignal, storageStop.signal]) {
      if (signal === undefined) continue
      yield* aborted(signal).pipe(
        Effect.flatMap(() => {
          if (signal === storageStop.signal && vars.storageFault !== undefined)
            return coordinator.interrupt(StorageFault.text(vars.storageFault))
          if (vars.interruptedBy === undefined) vars.interruptedBy = detailOf(signal)
          return coordinator.interrupt(`interrupted by ${vars.interruptedBy}`)
        }),
        Effect.forkScoped
      )
    }
  })

/**
 * The coordinator process's own shortages, never a rank's fault: what others saw (the
 * dashboard's listener at its cap), and its file descriptors, probed once a second (worker
 * ranks share them: out of them, their saves fail for a reason that is not theirs).
 */
export const watchResources = (ctx: Context, coordinator: Coordinator.Handle): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const coordinatorAlerts = ctx.options.coordinatorAlerts
    if (coordinatorAlerts !== undefined) {
      yield* Effect.suspend(() => Effect.forEach(coordinatorAlerts.drain(), coordinator.resource, { discard: true })).pipe(
        Effect.repeat(Schedule.spaced(250)),
        Effect.forkScoped
      )
    }
    if (ctx.resolved.transportKind === "websocket") {
      yield* Clock.currentTimeMillis.pipe(
        Effect.flatMap((nowMs) => Effect.forEach(ctx.rankListener.drain(nowMs), coordinator.resource, { discard: true })),
        Effect.repeat(Schedule.spaced(250)),
        Effect.forkScoped
      )
    }
    yield* Effect.promise(() => Files.descriptorShortage(ctx.runDirAbsolute)).pipe(
      Effect.flatMap((shortage) =>
        shortage === undefined
          ? Effect.void
          : coordinator.resource(
              `the coordinator's process is out of file descriptors (${shortage.message}): files it and its worker ranks open fail (checkpoints, logs) until some close; raise its limit (ulimit -n) or lower what holds them (--dashboard-connections-max)`
            )
      ),
      Effect.repeat(Schedule.spaced(1000)),
      Effect.forkScoped
    )
  })

/** Closes, with `JoinTimeout`, a joiner let into the running run whose `Hello` did not come within the formation timeout. */
export const closeSilentJoiners = (ctx: Context, host: Host): Effect.Effect<void, never, Scope.Scope> => {
  const { state, awaitingHello, vars } = ctx
  const helloTimeoutMs = ctx.served?.formationTimeoutMs ?? defaults.formationTimeoutMs
  const silentJoiners = Effect.map(Clock.currentTimeMillis, (now) => {
    for (const [rank, atMs] of awaitingHello) {
      if (Core.isVacant(state, rank) && now - atMs <= helloTimeoutMs) continue
      awaitingHello.delete(rank)
      // A rank now, or a link that already ended (turned away, or left): nothing to close.
      if (!Core.isVacant(state, rank) || vars.server?.connected(rank) !== true) continue
      host.transport.disconnect(rank, Transport.CloseCode.JoinTimeout)
      ctx.refusedLate(rank, Transport.CloseCode.JoinTimeout, `rank ${rank} sent no Hello within ${helloTimeoutMs} ms of its join`)
    }
  })
  return silentJoiners.pipe(Effect.repeat(Schedule.spaced(Math.min(1000, helloTimeoutMs))), Effect.forkScoped, Effect.asVoid)
}
