/**
 * A run's journal (`<runDir>/events.ndjson`, `launcher.ts` module doc): every logged event,
 * appended as it happens (a line is never rewritten), synced to disk at every death, epoch end and
 * the run's end; and what its `started` event records of the run's options.
 *
 * Events go out in the order they happened, with times that never run back. A step that declares
 * deaths has its commands (alerts, decisions, the run's end) carried out before the deaths are
 * reported (`onDeclared` needs the time the remainders went out), so its events are held until
 * the deaths are emitted: a death reads before what it caused. A frame that waited in the mailbox
 * carries its arrival time, which may be earlier than an event already emitted; it takes that
 * event's time instead.
 *
 * An event can also wait on work (`hold`): an epoch's audit is final only once the model after
 * that epoch is written on the coordinator's host, so its `epoch` line, and every event after it,
 * waits for that write; the events the work yields (the `model` line) go out first. An epoch whose
 * `model` line carries an `error` (its model could not be written) has its `epoch` line withheld
 * from the file (the observers still see it): a journal's audit line always has the model a resume
 * starts the next epoch from, so the epoch is audited once across the run's chain, by the resume
 * that trains it again (docs/design.md §3.8).
 *
 * @since 0.1.0
 */
import * as Files from "../../src/platform/files.ts"
import type { RunEvent } from "../record/run-types.ts"

/**
 * - `path`: the journal file (`<runDir>/events.ndjson`), opened for appending.
 * - `onEvent`: the run's observer (`RunOptions.onEvent`): sees every event, logged or not, in
 *   order; one that throws is ignored.
 * - `deathsDeclared`: how many deaths the core has declared (`state.deaths.length`): events other
 *   than deaths wait while some declared death is not emitted yet (`releaseHeld`).
 * - `onWriteError`: called once, at once, with the runtime's `Error` (`ENOSPC`, `EIO`, `EROFS`,
 *   ...) when an append or a sync fails; later events still reach `onEvent` but not the file.
 *
 * @since 0.1.0
 * @category options
 */
export interface RunJournalOptions {
  readonly path: string
  readonly onEvent: (event: RunEvent) => void
  readonly deathsDeclared: () => number
  readonly onWriteError?: ((error: unknown) => void) | undefined
}

/**
 * An open journal (`open`).
 *
 * - `emit(event, log = true)`: the event to the observer and, when `log`, to the journal; held
 *   (module doc) while a declared death is not emitted yet, unless it is a `death` event.
 * - `releaseHeld()`: every declared death is now emitted: the held events go out, in order.
 * - `close()`: waits for the pending syncs, then closes the file.
 *
 * @since 0.1.0
 * @category model
 */
export interface RunJournal {
  readonly emit: (event: RunEvent, log?: boolean) => void
  readonly releaseHeld: () => void
  /**
   * Every event emitted after this call waits until `until` settles; the events it resolves to go
   * out first (logged), in order. A rejected `until` releases the events with nothing before them.
   */
  readonly hold: (until: Promise<ReadonlyArray<RunEvent>>) => void
  readonly close: () => Promise<void>
  /** The epochs whose audit line was withheld (their model could not be written); whole once `close` resolved. */
  readonly withheld: () => ReadonlySet<number>
}

/**
 * Opens a run's journal (`Files.openJournal`); rejects when the file cannot be opened.
 *
 * @since 0.1.0
 * @category constructors
 */
export const open = async (options: RunJournalOptions): Promise<RunJournal> => {
  const journal = await Files.openJournal(options.path, options.onWriteError)
  const syncs: Array<Promise<void>> = []
  let lastEventMs = 0
  let deathsEmitted = 0
  const held: Array<readonly [RunEvent, boolean]> = []
  // Epochs whose model could not be written: their audit line is not journaled (module doc).
  const modelMissing = new Set<number>()
  const emitNow = (event: RunEvent, log: boolean): void => {
    const ordered = event.ms < lastEventMs ? { ...event, ms: lastEventMs } : event
    lastEventMs = ordered.ms
    if (ordered.type === "model" && ordered.error !== undefined) modelMissing.add(ordered.epoch)
    if (log && !(ordered.type === "epoch" && modelMissing.has(ordered.summary.epoch))) {
      journal.append(`${JSON.stringify(ordered)}\n`)
      // Durable at every death, epoch end and the run's end.
      if (ordered.type === "death" || ordered.type === "epoch" || ordered.type === "ended" || ordered.type === "failed")
        syncs.push(journal.sync())
    }
    try {
      options.onEvent(ordered)
    } catch {
      // An observer that throws must not stop the coordinator; the event is still logged.
    }
  }
  // Events behind a hold, and the holds, in order; `draining` while some hold is unsettled.
  const waiting: Array<{ readonly event: RunEvent; readonly log: boolean } | { readonly until: Promise<ReadonlyArray<RunEvent>> }> = []
  let draining: Promise<void> | undefined
  const drain = async (): Promise<void> => {
    while (waiting.length > 0) {
      const next = waiting.shift()!
      if ("event" in next) {
        emitNow(next.event, next.log)
        continue
      }
      const first = await next.until.catch((): ReadonlyArray<RunEvent> => [])
      for (const event of first) emitNow(event, true)
    }
    draining = undefined
  }
  const pass = (event: RunEvent, log: boolean): void => {
    if (draining === undefined) emitNow(event, log)
    else waiting.push({ event, log })
  }
  const hold = (until: Promise<ReadonlyArray<RunEvent>>): void => {
    waiting.push({ until })
    draining ??= drain()
  }
  const emit = (event: RunEvent, log = true): void => {
    if (event.type !== "death" && options.deathsDeclared() > deathsEmitted) held.push([event, log])
    else pass(event, log)
  }
  const releaseHeld = (): void => {
    deathsEmitted = options.deathsDeclared()
    for (const [event, log] of held.splice(0)) pass(event, log)
  }
  const close = async (): Promise<void> => {
    while (draining !== undefined) await draining
    await Promise.all(syncs.splice(0))
    await journal.close()
  }
  return { emit, releaseHeld, hold, close, withheld: () => modelMissing }
}

/**
 * The run's options as the journal's `started` event records them: every plain option as given,
 * the defaults used for the rest (`resolved`, which wins), and no functions, signals or handles;
 * `tls` (a private key) only as `true`.
 *
 * @since 0.1.0
 * @category journal
 */
export const loggedOptions = (options: object, resolved: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const logged: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(options)) {
    // A TLS identity holds a private key: the journal says only that there was one.
    if (key === "tls") {
      if (value !== undefined) logged[key] = true
      continue
    }
    // Signals, and handles such as `killRequests` (an object of functions), are not options to log.
    const handle =
      typeof value === "object" &&
      value !== null &&
      !Array.isArray(value) &&
      ("aborted" in value || Object.values(value).some((field) => typeof field === "function"))
    if (typeof value !== "function" && !handle) logged[key] = value
  }
  return { ...logged, ...resolved }
}
