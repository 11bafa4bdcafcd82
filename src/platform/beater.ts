/**
 * A thread of a child process's own that writes one small record to the frame channel at a steady
 * pace while the process's thread runs a long call (a trainer's synchronous `save` or `evaluate`):
 * the coordinator then hears the process is alive while it cannot speak, and a stopped process
 * (SIGSTOP stops every thread) falls silent as it should. The thread runs Node's `worker_threads`
 * API from a `data:` URL, which Node, Bun and Deno all load; it holds nothing open (`unref`).
 * Under Node and Bun it writes with `fs.writeSync`; a Deno worker has descriptors of its own (the
 * channel's number is unknown there), so it calls the C library's `write(2)` through `Deno.dlopen`
 * (rank processes run with `-A`). Where that library cannot be opened, `supported()` is false and
 * nothing beats.
 *
 * The channel is shared: the process's own writes (`ParentLink.post`) and the beater's take one
 * lock (`lock`, `unlock`, over a `SharedArrayBuffer`), so that a record is never cut into by the
 * other's. The beater holds it for one small write at a time.
 *
 * @since 0.1.0
 */
import { Worker } from "node:worker_threads"

/** Layout of the control cells: the state, the write lock, the beats' generation, their interval, their bound, the record's length. */
const STATE = 0
const LOCK = 1
const GENERATION = 2
const INTERVAL = 3
const BOUND = 4
const LENGTH = 5
const BROKEN = 6
const CELLS = 7
const IDLE = 0
const BEATING = 1

/**
 * Records the beater takes, in bytes: a `Heartbeat` in its batch and record is a few tens of bytes.
 *
 * @since 0.1.0
 * @category processes
 */
export const beatBytesMax = 1024

/** Names of the C library `Deno.dlopen` tries, in order. */
const libcNames = ["libc.so.6", "libc.so", "libSystem.dylib"]

// The thread's code: beat while BEATING within the generation's bound, wait otherwise. A write
// that fails, or finds the channel full for longer than the process's own writes wait, marks the
// channel BROKEN (a record may be cut): the process's next write sees it and ends the link.
const source = `
import { workerData } from "node:worker_threads"
import { writeSync } from "node:fs"
const c = new Int32Array(workerData.control)
const bytes = new Uint8Array(workerData.bytes)
const sleep = new Int32Array(new SharedArrayBuffer(4))
let writeSome = (at, n) => writeSync(workerData.fd, bytes, at, n)
if (typeof Deno !== "undefined") {
  let libc
  for (const name of ${JSON.stringify(libcNames)}) {
    try {
      libc = Deno.dlopen(name, { write: { parameters: ["i32", "buffer", "usize"], result: "isize" } })
      break
    } catch {}
  }
  writeSome = (at, n) => {
    const written = Number(libc.symbols.write(workerData.fd, bytes.slice(at, at + n), BigInt(n)))
    if (written < 0) throw Object.assign(new Error("write failed"), { code: "EAGAIN" })
    return written
  }
}
const writeAll = (n) => {
  let blockedSinceMs
  for (let at = 0; at < n; ) {
    try {
      at += writeSome(at, n - at)
      blockedSinceMs = undefined
    } catch (error) {
      blockedSinceMs ??= Date.now()
      if (error?.code !== "EAGAIN" || Date.now() - blockedSinceMs > workerData.blockedMsMax) {
        Atomics.store(c, ${BROKEN}, 1)
        return false
      }
      Atomics.wait(sleep, 0, 0, 1)
    }
  }
  return true
}
for (;;) {
  while (Atomics.load(c, ${STATE}) !== ${BEATING}) Atomics.wait(c, ${STATE}, Atomics.load(c, ${STATE}))
  const generation = Atomics.load(c, ${GENERATION})
  const startMs = Date.now()
  const current = () => Atomics.load(c, ${STATE}) === ${BEATING} && Atomics.load(c, ${GENERATION}) === generation
  let beating = true
  while (current()) {
    Atomics.wait(c, ${STATE}, ${BEATING}, Atomics.load(c, ${INTERVAL}))
    if (!current()) break
    if (!beating || Atomics.load(c, ${BROKEN}) === 1 || Date.now() - startMs > Atomics.load(c, ${BOUND})) {
      beating = false
      continue
    }
    while (Atomics.compareExchange(c, ${LOCK}, 0, 1) !== 0) Atomics.wait(c, ${LOCK}, 1, 1)
    try {
      beating = writeAll(Atomics.load(c, ${LENGTH}))
    } finally {
      Atomics.store(c, ${LOCK}, 0)
      Atomics.notify(c, ${LOCK})
    }
  }
}
`

let deno: boolean | undefined

/**
 * Whether a beater can write on this runtime and system: always under Node and Bun; under Deno
 * when the C library opens (`Deno.dlopen`, which needs `--allow-ffi` or `-A`). Probed once.
 *
 * @since 0.1.0
 * @category processes
 */
export const supported = (): boolean => {
  const Deno = (globalThis as { readonly Deno?: { readonly dlopen?: (name: string, symbols: object) => { close: () => void } } }).Deno
  if (Deno === undefined) return true
  if (deno !== undefined) return deno
  deno = false
  for (const name of libcNames) {
    try {
      Deno.dlopen?.(name, { write: { parameters: ["i32", "buffer", "usize"], result: "isize" } }).close()
      deno = true
      break
    } catch {
      // not this name, or no permission to load it
    }
  }
  return deno
}

/**
 * The beater of the channel `fd`: `lock`/`unlock` around every other write to it, `broken()`
 * once a beat's write failed or waited on a full channel for more than `blockedMsMax` ms (the
 * channel may hold a cut record: it is done for), and `beatWhile(record, intervalMs, forMs)`,
 * which writes `record` (at most `beatBytesMax` bytes, as it goes on the channel) every
 * `intervalMs` for up to `forMs` ms, until the returned function is called. The thread starts at
 * the first `beatWhile`; when it cannot (`supported()` false, or it fails), or the record is too
 * long, nothing beats (the returned function does nothing).
 *
 * @since 0.1.0
 * @category processes
 */
export interface Beater {
  readonly lock: () => void
  readonly unlock: () => void
  readonly broken: () => boolean
  readonly beatWhile: (record: Uint8Array, intervalMs: number, forMs: number) => () => void
}

/** Makes the beater of `fd` (module doc). @since 0.1.0 @category processes */
export const make = (fd: number, blockedMsMax: number): Beater => {
  const control = new Int32Array(new SharedArrayBuffer(CELLS * 4))
  const bytes = new Uint8Array(new SharedArrayBuffer(beatBytesMax))
  let started: boolean | undefined
  const start = (): boolean => {
    if (started !== undefined) return started
    if (!supported()) return (started = false)
    try {
      const url = new URL(`data:text/javascript,${encodeURIComponent(source)}`)
      // No loader of the parent's (tsx) in a thread that runs plain JavaScript.
      const worker = new Worker(url, {
        workerData: { fd, blockedMsMax, control: control.buffer, bytes: bytes.buffer },
        execArgv: []
      })
      worker.unref()
      worker.on("error", () => {
        started = false
      })
      started = true
    } catch {
      started = false
    }
    return started
  }
  // Only a running thread can hold the lock: a thread that failed never blocks the process's writes.
  const lock = (): void => {
    while (started === true && Atomics.compareExchange(control, LOCK, 0, 1) !== 0) Atomics.wait(control, LOCK, 1, 1)
  }
  const unlock = (): void => {
    Atomics.store(control, LOCK, 0)
    Atomics.notify(control, LOCK)
  }
  const beatWhile = (record: Uint8Array, intervalMs: number, forMs: number): (() => void) => {
    if (record.byteLength > beatBytesMax || !(intervalMs > 0) || !(forMs > 0) || !start()) return () => {}
    lock()
    bytes.set(record)
    Atomics.store(control, LENGTH, record.byteLength)
    unlock()
    Atomics.store(control, INTERVAL, Math.max(1, Math.round(intervalMs)))
    Atomics.store(control, BOUND, Math.min(2 ** 31 - 1, Math.round(forMs)))
    Atomics.add(control, GENERATION, 1)
    Atomics.store(control, STATE, BEATING)
    Atomics.notify(control, STATE)
    const generation = Atomics.load(control, GENERATION)
    return () => {
      // A later beatWhile's beats are not this one's to stop.
      if (Atomics.load(control, GENERATION) !== generation) return
      Atomics.store(control, STATE, IDLE)
      Atomics.notify(control, STATE)
    }
  }
  return { lock, unlock, broken: () => Atomics.load(control, BROKEN) === 1, beatWhile }
}
