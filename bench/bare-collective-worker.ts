/**
 * One member of the bare shared-memory collective (`bench/bare-collective.ts`): a worker thread
 * that runs `rounds` collectives through the shared all-reduce area it was given, with nothing
 * around them but what any all-reduce of private vectors does: its own vector nudged (as the
 * bench trainer's batch does), the collective (`SharedAllReduce.run`, as a rank runs it), a wait until every
 * member finished its part, and the mean copied back into its vector. It posts the time each
 * round ended (`performance.timeOrigin + performance.now()`, ms) as one `Float64Array` buffer.
 */
import { workerData } from "node:worker_threads"
import type { MessagePort } from "node:worker_threads"
import * as SharedAllReduce from "../src/averaging/shared-all-reduce.ts"
import { atLeast } from "./lib.ts"

/** What the bench hands each member (`cohortData`). */
export interface BareJob {
  readonly buffer: SharedArrayBuffer
  /** Two `Int32` words: rounds every member ended (member 0 counts), and a start signal (1). */
  readonly progress: SharedArrayBuffer
  readonly ringRank: number
  readonly ringSize: number
  readonly length: number
  readonly rounds: number
}

const { cohortData: job, cohortPort: port } = workerData as { readonly cohortData: BareJob; readonly cohortPort: MessagePort }
const area = new SharedAllReduce.Area({ buffer: job.buffer, ringRank: job.ringRank, ringSize: job.ringSize, length: job.length })
const progress = new Int32Array(job.progress)
const params = new Float32Array(job.length).fill(job.ringRank)
const endedMs = new Float64Array(job.rounds)

// A pending `Atomics.waitAsync` does not keep a worker's event loop alive: this timer does.
const alive = setInterval(() => {}, 2 ** 30)
// Every member starts together: the bench says go once all are loaded.
await atLeast(progress, 1, 1)
for (let round = 0; round < job.rounds; round++) {
  params[round % params.length] = job.ringRank + round
  const shape = { ringRank: job.ringRank, ringSize: job.ringSize, generation: 0, round }
  // The rank's way in (`SharedAllReduce.run`: callbacks, no fiber), as a promise.
  const mean = await new Promise<SharedAllReduce.Outcome>((resolve) => SharedAllReduce.run(area, shape, params, true, {}, resolve))
  if (mean instanceof Error) throw mean
  if (mean === undefined) throw new Error("a bare collective met a value that is not finite")
  // The collective's second barrier: every member did its part (the area's `released` word).
  await atLeast(area.header, 1, area.passed)
  params.set(mean)
  endedMs[round] = performance.timeOrigin + performance.now()
  if (job.ringRank === 0) {
    Atomics.store(progress, 0, round + 1)
    Atomics.notify(progress, 0)
  }
}
port.postMessage(endedMs.buffer, [endedMs.buffer])
clearInterval(alive)
