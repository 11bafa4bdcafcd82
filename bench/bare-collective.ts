/**
 * The bare shared-memory collective: what a worker-thread ring round of the averaging bench
 * (`bench/averaging.ts`) would cost with nothing around the collective. `worldSize` worker threads
 * (`bench/bare-collective-worker.ts`) share one all-reduce area (`SharedAllReduce`) and each runs
 * `warmupRounds + rounds` collectives back to back over a private vector of `params` float32
 * values: nudge its vector, `SharedAllReduce.run` (as a rank runs it), wait until every member did its part,
 * copy the mean back. No coordinator, no frames, no trainer, no commit: the floor a round of the
 * ring backend is measured against (the averaging bench's `ring/bare`).
 *
 * A round's time is the gap between the ends of consecutive rounds, each taken as the slowest
 * member's; median and p90 over the timed rounds. "process cpu ms": the process's CPU time over
 * the timed rounds (every member's thread), per round.
 *
 * Run alone: `node --import tsx bench/bare-collective.ts [--ranks 8] [--params 407050] [--rounds 40] [--warmup 5]`.
 */
import * as SharedAllReduce from "../src/averaging/shared-all-reduce.ts"
import { spawnWorker } from "../src/platform/node-worker.ts"
import { atLeast, fmt, isMain, quantile } from "./lib.ts"

/** What the bare collective measured (`measureBare`). */
export interface BareMeasured {
  readonly worldSize: number
  readonly params: number
  readonly rounds: number
  readonly medianMs: number
  readonly p90Ms: number
  readonly processCpuMsPerRound: number
}

const workerEntry = new URL("./bare-collective-worker.ts", import.meta.url).href

/**
 * Runs the bare collective once (module doc). Throws when a member fails or ends without its
 * times, or when fewer rounds ended than asked for.
 */
export const measureBare = async (worldSize: number, params: number, rounds: number, warmupRounds: number): Promise<BareMeasured> => {
  if (!(Number.isSafeInteger(rounds) && rounds >= 1 && Number.isSafeInteger(warmupRounds) && warmupRounds >= 1))
    throw new Error(
      `bare collective: rounds and warm-up rounds must be integers >= 1 (the first timed round needs one before it), got ${rounds} and ${warmupRounds}`
    )
  const total = warmupRounds + rounds
  const buffer = SharedAllReduce.make(worldSize, params)
  const progress = new SharedArrayBuffer(8)
  const words = new Int32Array(progress)
  const ended: Array<Float64Array> = []
  const done = Array.from({ length: worldSize }, (_, ringRank) => {
    let settle: { resolve: () => void; reject: (error: unknown) => void } | undefined
    const finished = new Promise<void>((resolve, reject) => {
      settle = { resolve, reject }
    })
    spawnWorker(
      { entry: workerEntry, rank: ringRank, data: { buffer, progress, ringRank, ringSize: worldSize, length: params, rounds: total } },
      {
        message: (bytes) => {
          ended[ringRank] = new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8)
        },
        error: (error) => settle!.reject(error),
        exit: (code) =>
          ended[ringRank] === undefined
            ? settle!.reject(new Error(`bare collective member ${ringRank} ended (exit ${code}) without its times`))
            : settle!.resolve()
      }
    )
    return finished
  })
  // Loading a worker takes long on a busy machine: start once every member is up (member 0's
  // first round cannot end before every member arrived at its first barrier anyway).
  Atomics.store(words, 1, 1)
  Atomics.notify(words, 1)
  await atLeast(words, 0, warmupRounds)
  const cpuAt = process.cpuUsage()
  await atLeast(words, 0, total)
  const used = process.cpuUsage(cpuAt)
  await Promise.all(done)
  const slowest = Array.from({ length: total }, (_, round) => Math.max(...ended.map((times) => times[round]!)))
  const roundMs = slowest.slice(warmupRounds).map((at, i) => at - slowest[warmupRounds + i - 1]!)
  if (roundMs.length !== rounds) throw new Error(`bare collective: ${rounds} rounds asked for, ${roundMs.length} timed`)
  return {
    worldSize,
    params,
    rounds,
    medianMs: quantile(roundMs, 0.5),
    p90Ms: quantile(roundMs, 0.9),
    processCpuMsPerRound: (used.user + used.system) / 1000 / rounds
  }
}

if (isMain("bare-collective")) {
  const flag = (name: string, fallback: number): number => {
    const at = process.argv.indexOf(`--${name}`)
    return at >= 0 ? Number(process.argv[at + 1]) : fallback
  }
  const m = await measureBare(flag("ranks", 8), flag("params", 407_050), flag("rounds", 40), flag("warmup", 5))
  console.log(
    `bare collective ${m.worldSize} x ${m.params}: ${fmt(m.medianMs)} / ${fmt(m.p90Ms)} ms a round (median / p90 of ${m.rounds}), process cpu ${fmt(m.processCpuMsPerRound)} ms a round`
  )
}
