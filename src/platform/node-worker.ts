/**
 * Node APIs for worker threads (which Bun and Deno also provide, so all three runtimes use this
 * file for them): starting a rank's worker with its message and output ports, the ring links
 * between workers, and the worker's side of its link to the parent. `node.ts` re-exports it.
 *
 * @since 0.1.0
 */
import { MessageChannel, MessagePort, receiveMessageOnPort, Worker, workerData } from "node:worker_threads"
import * as SharedRingLink from "./shared-ring-link.ts"
import { bytesOf, lowerPriority, needsTsx, processExitHooks, redirectOutput } from "./node-shared.ts"
import type * as Types from "./types.ts"

/**
 * Posts one frame message on a worker port as its `ArrayBuffer`, transferred (the receiver's
 * `bytesOf` views it whole again). Deno 2.9.6's `node:worker_threads` ports take about 300 ms to
 * deliver a 1.6 MB `Uint8Array` posted as such, transferred or not, against a few ms at most for
 * its buffer (measured worker to parent; Node and Bun are as fast either way), which made every
 * `cpu` round on Deno 20 times slower than on Node. A view on part of a buffer is copied first:
 * its buffer is not the caller's to give away.
 */
const postBytes = (port: MessagePort, message: Uint8Array): void => {
  const whole = message.byteOffset === 0 && message.byteLength === message.buffer.byteLength
  const buffer = (whole ? message.buffer : message.slice().buffer) as ArrayBuffer
  port.postMessage(buffer, [buffer])
}

/**
 * Starts a worker thread running the module `entry` (a `file:` URL; TypeScript, or JavaScript
 * such as an esbuild bundle) with a dedicated message port. Under Node 20 a TypeScript entry
 * loads through `worker-bootstrap.mjs` (tsx); Bun and Deno load it directly, as every runtime
 * does a JavaScript entry. `handlers.closed` fires when the port closes (the worker's side is
 * gone and every message it posted was delivered). If `exit` comes first, messages still queued
 * on the port are drained synchronously before `handlers.exit`, so no frame posted before the
 * end is lost (but see `ChildHandlers` for Deno's `terminate()`).
 *
 * What the worker prints (`console.*`, `process.stdout.write`, `process.stderr.write`) travels on
 * a second port of its own to `handlers.output`, never to this process's stdout: the worker
 * redirects it when it connects (`workerParent`), or earlier through `redirectWorkerOutput`.
 * Node and Bun would forward a worker's stdio with `new Worker(url, {stdout: true})`, but Deno
 * 2.9.6 sends `console.log` of a worker straight to the real stdout, so one redirect serves all
 * three runtimes. Output still queued when the worker exits is drained before `handlers.exit`.
 *
 * `nice` (0–19, default 0): the worker thread lowers its own scheduling priority to this nice
 * value when it connects (`workerParent`), so that the coordinator's thread wins a busy CPU.
 * Linux only, where a nice value is per thread (elsewhere it would lower the whole process,
 * coordinator included).
 *
 * @since 0.1.0
 * @category workers
 */
export const spawnWorker = (
  options: {
    readonly entry: string
    readonly rank: number
    readonly data: unknown
    readonly resourceLimits?: Types.ResourceLimits
    readonly nice?: number
  },
  handlers: Types.ChildHandlers
): Types.RawChild => {
  const { port1, port2 } = new MessageChannel()
  const output = new MessageChannel()
  const url = needsTsx(options.entry) ? new URL("./worker-bootstrap.mjs", import.meta.url) : new URL(options.entry)
  const worker = new Worker(url, {
    workerData: {
      cohortEntry: options.entry,
      cohortRank: options.rank,
      cohortData: options.data,
      cohortPort: port2,
      cohortOutput: output.port2,
      cohortNice: options.nice ?? 0
    },
    transferList: [port2, output.port2],
    ...(options.resourceLimits === undefined ? {} : { resourceLimits: { ...options.resourceLimits } })
  })
  // The runtime closes our port once the worker's port is gone; every message the worker posted
  // is queued ahead of that close, so 'close' comes after the last 'message' (checked under the
  // three runtimes with workers killed, crashing and exiting mid-burst). The port must not be
  // read from inside its own 'close' handler: `receiveMessageOnPort` there crashed Node 20.
  let closed = false
  let exited = false
  port1.on("message", (data: unknown) => handlers.message(bytesOf(data)))
  const printed = (data: unknown): void => {
    const [stream, bytes] = data as [number, Uint8Array]
    handlers.output?.(stream === 2 ? "stderr" : "stdout", bytesOf(bytes))
  }
  output.port1.on("message", printed)
  port1.on("close", () => {
    // After `exit` the port closes because we closed it: nothing to tell.
    if (exited) return
    closed = true
    handlers.closed?.()
  })
  worker.on("error", (error) => handlers.error(error))
  worker.on("exit", (code) => {
    exited = true
    if (!closed) {
      for (let next = receiveMessageOnPort(port1); next !== undefined; next = receiveMessageOnPort(port1)) {
        handlers.message(bytesOf(next.message))
      }
      port1.close()
    }
    for (let next = receiveMessageOnPort(output.port1); next !== undefined; next = receiveMessageOnPort(output.port1)) {
      printed(next.message)
    }
    output.port1.close()
    handlers.exit(code, null)
  })
  return {
    post: (message) => postBytes(port1, message),
    kill: () => void worker.terminate(),
    postRing: (generation, next, prev, sharedSlots, area) => {
      const ports = [next as unknown as MessagePort, prev as unknown as MessagePort]
      // A SharedArrayBuffer is shared, not transferred: every member gets the same memory.
      port1.postMessage({ cohortRing: { generation, next: ports[0], prev: ports[1], sharedSlots, area } }, ports)
    }
  }
}

/**
 * A direct ring link between two workers: a `MessageChannel` whose `sender` end goes
 * to one worker (its `next`) and `receiver` end to its neighbour (its `prev`), through
 * `RawChild.postRing`. Node, Bun and Deno all transfer ports between workers. With `sharedSlots`
 * above 0 the steps then travel through a shared-memory segment the sending worker makes and
 * announces on the port (`SharedRingLink`); the port carries what does not fit.
 *
 * @since 0.1.0
 * @category workers
 */
export const ringChannel = (): { readonly sender: Types.RingEnd; readonly receiver: Types.RingEnd } => {
  const { port1, port2 } = new MessageChannel()
  return { sender: port1 as unknown as Types.RingEnd, receiver: port2 as unknown as Types.RingEnd }
}

interface RingHandover {
  readonly cohortRing: {
    readonly generation: number
    readonly next: MessagePort
    readonly prev: MessagePort
    readonly sharedSlots: number
    readonly area?: Types.RingArea | undefined
  }
}

const isRingHandover = (data: unknown): data is RingHandover =>
  typeof data === "object" && data !== null && !ArrayBuffer.isView(data) && "cohortRing" in data

const ringPortsOf = ({ cohortRing: { generation, next, prev, sharedSlots, area } }: RingHandover): Types.RingPorts => {
  // The data is a fresh copy made for this step: a step on the port transfers its buffer.
  const sender = new SharedRingLink.Sender((message, transfer) => next.postMessage(message, transfer as Array<ArrayBuffer>), sharedSlots)
  let receiver: SharedRingLink.Receiver | undefined
  return {
    generation,
    area,
    // Worker threads never pack their steps (`RingWire`): a packed one is a caller's bug.
    send: (message) => sender.send(message as SharedRingLink.Step),
    onMessage: (callback) => {
      const taking = new SharedRingLink.Receiver(callback)
      receiver = taking
      prev.on("message", (m: unknown) => {
        if (SharedRingLink.isPortMessage(m)) taking.portMessage(m)
      })
    },
    close: () => {
      sender.close()
      receiver?.close()
      next.close()
      prev.close()
    }
  }
}

/**
 * Whether worker ring links with `sharedSlots` above 0 use shared memory here
 * (`SharedRingLink.sharedMemoryAvailable`); without it they keep to their ports.
 *
 * @since 0.1.0
 * @category workers
 */
export const sharedRingLinks = (): boolean => SharedRingLink.sharedMemoryAvailable()

interface CohortWorkerData {
  readonly cohortRank: number
  readonly cohortData: unknown
  readonly cohortPort: MessagePort
  readonly cohortOutput: MessagePort
  readonly cohortNice: number
}

let outputRedirected = false

/**
 * Inside a worker started by `spawnWorker`: sends everything the worker prints through
 * `console` or `process.stdout` / `process.stderr` to the parent's `handlers.output` instead of
 * the process's stdout and stderr. Idempotent; does nothing outside such a worker. Rank entries
 * call it before the trainer module loads so that its top-level prints are caught too;
 * `workerParent` calls it as well.
 *
 * @since 0.1.0
 * @category workers
 */
export const redirectWorkerOutput = (): void => {
  const port = (workerData as Partial<CohortWorkerData> | null)?.cohortOutput
  if (outputRedirected || port === undefined) return
  outputRedirected = true
  redirectOutput((stream, bytes) => port.postMessage([stream, bytes], [bytes.buffer as ArrayBuffer]))
}

/**
 * Inside a worker started by `spawnWorker`: the link to the parent, or `undefined` elsewhere.
 *
 * @since 0.1.0
 * @category workers
 */
export const workerParent = (): Types.ParentLink | undefined => {
  // Ring links that arrive before the rank asked for them wait here.
  let ringCallback: ((ports: Types.RingPorts) => void) | undefined
  const ringWaiting: Array<Types.RingPorts> = []
  const ringHandover = (ports: Types.RingPorts): void => {
    if (ringCallback === undefined) ringWaiting.push(ports)
    else ringCallback(ports)
  }
  const data = workerData as Partial<CohortWorkerData> | null
  const port = data?.cohortPort
  if (data === null || port === undefined) return undefined
  redirectWorkerOutput()
  if (process.platform === "linux") lowerPriority(0, data.cohortNice ?? 0)
  return {
    rank: data.cohortRank ?? -1,
    data: data.cohortData,
    post: (message) => postBytes(port, message),
    onMessage: (callback) =>
      void port.on("message", (m: unknown) => {
        if (isRingHandover(m)) ringHandover(ringPortsOf(m))
        else callback(bytesOf(m))
      }),
    onRingPorts: (callback) => {
      ringCallback = callback
      for (const ports of ringWaiting.splice(0)) callback(ports)
    },
    onClose: (callback) => void port.on("close", callback),
    onExit: processExitHooks(),
    close: () => port.close()
  }
}
