/**
 * What a served `cpu` run's recovery log costs its coordinator per round (docs/recovery.md): every
 * closed round writes the round's model (407,050 parameters, 1.63 MB, the bundled MLP's by
 * default; `COHORT_BENCH_PARAMS`) and its `commit` line synchronously on the coordinator's thread,
 * before the round's `Update` goes out (`RecoveryLog.beforeRound`). Against it, in the same run, the
 * work the coordinator does on that thread for the round anyway: the mean of `worldSize` (4)
 * contributions (`Cpu.mean`) and the CBOR encoding of the `Update` it sends (`Codec.encode`).
 * Per step, median and p99 of wall time, and the CPU time of the whole loop per round (the machine
 * is shared: CPU time is what load distorts least); the log write's ratio to the round's own work.
 *
 * The write goes to the page cache (no `fsync`: docs/recovery.md); a disk's write-back comes later,
 * off the coordinator's thread. Run: `node --import tsx bench/recovery-log.ts [--quick]`.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as RecoveryLog from "../actors/launcher/recovery-log.ts"
import * as Cpu from "../src/averaging/cpu.ts"
import * as Codec from "../src/wire/codec.ts"
import * as Frame from "../src/wire/frame.ts"
import * as Lib from "./lib.ts"

export interface RecoveryLogResult {
  readonly params: number
  readonly rounds: number
  readonly logWriteMs: { readonly median: number; readonly p99: number }
  readonly meanMs: { readonly median: number; readonly p99: number }
  readonly encodeMs: { readonly median: number; readonly p99: number }
  readonly logCpuMsPerRound: number
  readonly roundCpuMsPerRound: number
  /** The log's CPU time per round over the mean's and the encoding's. */
  readonly ratio: number
}

const cpuMs = (): number => {
  const { user, system } = process.cpuUsage()
  return (user + system) / 1000
}

export const run = (quick: boolean): { readonly result: RecoveryLogResult; readonly markdown: string } => {
  const params = Number(process.env["COHORT_BENCH_PARAMS"] ?? 407_050)
  const rounds = quick ? 40 : 300
  const worldSize = 4
  const dir = mkdtempSync(join(tmpdir(), "cohort-bench-recovery-log-"))
  try {
    const log = RecoveryLog.open(dir, (path, error) => {
      throw new Error(`recovery log bench: cannot write ${path}: ${String(error)}`)
    })
    log.base({ epoch: 0, firstRound: 0, committed: [] }, undefined)
    const contributions = Array.from({ length: worldSize }, (_, r) => Float32Array.from({ length: params }, (_, i) => (i % 97) * 0.01 + r))
    const write: Array<number> = []
    const mean: Array<number> = []
    const encode: Array<number> = []
    let logCpu = 0
    let roundCpu = 0
    for (let round = 0; round < rounds; round++) {
      const cpu0 = cpuMs()
      const t0 = Lib.nowMs()
      const averaged = Cpu.mean(contributions)
      if (Cpu.isError(averaged)) throw new Error("recovery log bench: the mean failed")
      const t1 = Lib.nowMs()
      Codec.encode(Frame.fromCoordinator({ _tag: "Update", round, params: averaged }))
      const t2 = Lib.nowMs()
      const cpu1 = cpuMs()
      log.beforeRound(
        {
          _tag: "AverageRound",
          epoch: 0,
          round,
          openedAtMs: 0,
          contributors: [0, 1, 2, 3],
          committed: [[round * 128, 128]],
          params: [],
          paramRanks: [],
          reason: "bench"
        },
        averaged
      )
      const t3 = Lib.nowMs()
      const cpu2 = cpuMs()
      mean.push(t1 - t0)
      encode.push(t2 - t1)
      write.push(t3 - t2)
      roundCpu += cpu1 - cpu0
      logCpu += cpu2 - cpu1
    }
    const result: RecoveryLogResult = {
      params,
      rounds,
      logWriteMs: Lib.percentiles(write),
      meanMs: Lib.percentiles(mean),
      encodeMs: Lib.percentiles(encode),
      logCpuMsPerRound: logCpu / rounds,
      roundCpuMsPerRound: roundCpu / rounds,
      ratio: logCpu / roundCpu
    }
    const markdown = [
      Lib.table(
        ["per round, on the coordinator's thread", "median ms", "p99 ms"],
        [
          [`mean of ${worldSize} contributions (${params} parameters)`, result.meanMs.median, result.meanMs.p99],
          ["CBOR encoding of the Update", result.encodeMs.median, result.encodeMs.p99],
          [
            `recovery log: the model (${Lib.fmt((params * 4) / 1e6)} MB) and the commit line`,
            result.logWriteMs.median,
            result.logWriteMs.p99
          ]
        ]
      ),
      `\nCPU time per round: the recovery log ${Lib.fmt(result.logCpuMsPerRound)} ms, the mean and the encoding ${Lib.fmt(result.roundCpuMsPerRound)} ms: ${Lib.fmt(result.ratio)}x (${rounds} rounds)`
    ].join("\n")
    return { result, markdown }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

if (Lib.isMain("recovery-log")) {
  const { result, markdown } = run(Lib.isQuick())
  console.log(`## the recovery log's cost per round\n\n${markdown}\n`)
  console.log(`results: ${Lib.writeResults({ recoveryLog: result }, Lib.isQuick())}`)
}
