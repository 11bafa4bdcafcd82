/**
 * The actor kit: a scoped fiber that owns its state and reads a bounded mailbox in order
 * (docs/design.md §5).
 *
 * `spawn` forks the actor into a child of the caller's scope. Closing that scope stops the actor
 * and everything it spawned, because `receive` runs with the actor's own scope as its `Scope`.
 * A defect or failure in `receive` ends the actor; `ActorRef.await` gives the exit and
 * `DeathReport.fromExit` reads it as a death cause for the supervisor.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"

/**
 * What `tell` does when the mailbox holds `capacity` messages:
 *
 * - `"suspend"` (default): `tell` waits until there is room (back-pressure).
 * - `"fail"`: `tell` fails at once with `MailboxFull`; the message is not queued.
 * - `"dropping"`: the new message is dropped and counted in `stats.dropped`; `tell` succeeds.
 * - `"sliding"`: the oldest queued message is dropped and counted; the new one is queued.
 *
 * @since 0.1.0
 * @category options
 */
export type FullPolicy = "suspend" | "fail" | "dropping" | "sliding"

/**
 * Mailbox bounds.
 *
 * - `capacity`: messages the mailbox holds, an integer >= 1; default `mailboxCapacityDefault` (1024).
 * - `whenFull`: see `FullPolicy`; default `"suspend"`.
 *
 * @since 0.1.0
 * @category options
 */
export interface MailboxOptions {
  readonly capacity?: number
  readonly whenFull?: FullPolicy
}

/** Default mailbox capacity: 1024 messages. @since 0.1.0 @category options */
export const mailboxCapacityDefault = 1024

/**
 * `tell` on a full mailbox under the `"fail"` policy; `capacity` in messages.
 *
 * @since 0.1.0
 * @category errors
 */
export class MailboxFull extends Data.TaggedError("MailboxFull")<{
  readonly actor: string
  readonly capacity: number
}> {}

/**
 * `tell` to an actor that has stopped (its scope closed, or it ended).
 *
 * @since 0.1.0
 * @category errors
 */
export class ActorStopped extends Data.TaggedError("ActorStopped")<{
  readonly actor: string
}> {}

/**
 * Counters of one mailbox, all integers >= 0: `received` messages handled by `receive`, `dropped`
 * by the `"dropping"`/`"sliding"` policies, `queued` waiting now.
 *
 * @since 0.1.0
 * @category model
 */
export interface MailboxStats {
  readonly received: number
  readonly dropped: number
  readonly queued: number
}

/**
 * A handle on a running actor.
 *
 * - `tell(m)`: queue `m`, applying the full policy; fails with `MailboxFull` or `ActorStopped`.
 * - `await`: the actor's exit once it ended (`E` is `receive`'s error type).
 * - `stop`: interrupts the actor and closes its scope (its children stop first); idempotent.
 *
 * @since 0.1.0
 * @category model
 */
export interface ActorRef<in M, out E = never> {
  readonly name: string
  readonly tell: (message: M) => Effect.Effect<void, MailboxFull | ActorStopped>
  /** Queues `message` now if the mailbox has room and the actor runs; `false` otherwise (nothing queued). */
  readonly tryTell: (message: M) => boolean
  readonly await: Effect.Effect<Exit.Exit<void, E>>
  readonly stop: Effect.Effect<void>
  readonly stats: Effect.Effect<MailboxStats>
}

/**
 * How to build an actor.
 *
 * - `initial`: the state before the first message.
 * - `receive(state, message)`: returns the next state; runs with the actor's scope as `Scope`,
 *   so actors spawned inside it are children that stop with it.
 * - `mailbox`: see `MailboxOptions`.
 *
 * @since 0.1.0
 * @category options
 */
export interface Behavior<S, M, E, R> {
  readonly initial: S
  readonly receive: (state: S, message: M) => Effect.Effect<S, E, R | Scope.Scope>
  readonly mailbox?: MailboxOptions
}

/**
 * Spawns an actor named `name` in a child of the current scope.
 *
 * The actor reads its mailbox in order, one message at a time. It ends when `receive` fails or
 * dies (its exit carries the cause), or when its scope closes (an interrupt).
 *
 * @since 0.1.0
 * @category constructors
 */
export const spawn = <S, M, E = never, R = never>(
  name: string,
  behavior: Behavior<S, M, E, R>
): Effect.Effect<ActorRef<M, E>, never, R | Scope.Scope> =>
  Effect.gen(function* () {
    const capacity = Math.max(1, Math.floor(behavior.mailbox?.capacity ?? mailboxCapacityDefault))
    const whenFull = behavior.mailbox?.whenFull ?? "suspend"
    const parent = yield* Effect.scope
    const scope = yield* Scope.fork(parent)
    // Children live in their own scope, closed when the loop ends for any reason (a defect too).
    const children = yield* Scope.fork(scope)
    const mailbox = yield* whenFull === "sliding" ? Queue.sliding<M>(capacity) : Queue.bounded<M>(capacity)
    const done = yield* Deferred.make<Exit.Exit<void, E>>()
    let received = 0
    let dropped = 0

    const loop = Effect.gen(function* () {
      let state = behavior.initial
      while (true) {
        const message = yield* Queue.take(mailbox)
        state = yield* behavior.receive(state, message).pipe(Effect.provideService(Scope.Scope, children))
        received += 1
      }
    }).pipe(Effect.onExit((exit) => Scope.close(children, exit)))
    const fiber = yield* Effect.forkIn(loop as Effect.Effect<never, E, R>, scope, { startImmediately: true })
    fiber.addObserver((exit) => {
      const ended: Exit.Exit<void, E> = Exit.isSuccess(exit) ? Exit.void : Exit.failCause(exit.cause)
      Deferred.doneUnsafe(done, Exit.succeed(ended))
      Queue.shutdownUnsafe(mailbox)
      // An actor that ended on its own releases its scope from the parent at once.
      Effect.runFork(Scope.close(scope, Exit.void))
    })
    yield* Scope.addFinalizer(scope, Queue.shutdown(mailbox))

    const stopped = new ActorStopped({ actor: name })
    const tell = (message: M): Effect.Effect<void, MailboxFull | ActorStopped> =>
      Effect.suspend((): Effect.Effect<void, MailboxFull | ActorStopped> => {
        if (fiber.pollUnsafe() !== undefined) return Effect.fail(stopped)
        if (whenFull === "suspend") {
          return Effect.flatMap(Queue.offer(mailbox, message), (ok) => (ok ? Effect.void : Effect.fail(stopped)))
        }
        const full = Queue.sizeUnsafe(mailbox) >= capacity
        if (!Queue.offerUnsafe(mailbox, message)) {
          if (!full) return Effect.fail(stopped)
          if (whenFull === "fail") return Effect.fail(new MailboxFull({ actor: name, capacity }))
          dropped += 1
          return Effect.void
        }
        if (full) dropped += 1 // sliding: the oldest message made room
        return Effect.void
      })

    return {
      name,
      tell,
      tryTell: (message) => fiber.pollUnsafe() === undefined && Queue.sizeUnsafe(mailbox) < capacity && Queue.offerUnsafe(mailbox, message),
      await: Deferred.await(done),
      stop: Scope.close(scope, Exit.void),
      stats: Effect.sync(() => ({ received, dropped, queued: Queue.sizeUnsafe(mailbox) }))
    }
  })

/** Whether an actor's exit is an interruption only (its scope closed or `stop`). @since 0.1.0 @category utils */
export const isStopped = <E>(exit: Exit.Exit<void, E>): boolean => Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)
