// Served runs with ranks joined from the test's own process (`SocketRanks.joinRanks` over
// loopback), and the params-only trainer module they train (bench/trainers/params-only.ts), its
// batches paced by a timer: shared by the tests that serve such runs.
import type { ChildProcess } from "node:child_process"
import { writeFileSync } from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Launcher from "../actors/launcher/launcher.ts"
import * as SocketRanks from "../actors/rank/socket-ranks.ts"
import type { RunResult } from "../actors/record/run-types.ts"
import { type CliProcess, startCli, waitFor } from "./cli-process.ts"

const paramsOnly = fileURLToPath(new URL("../bench/trainers/params-only.ts", import.meta.url))

/**
 * Writes at `path` a params-only trainer module of `samples` samples and `params` parameters whose
 * batches take `batchMs` (a timer, no CPU). With `hook`, each batch first calls
 * `globalThis[hook]?.(rank, batches)` (the rank's batches so far, this one included).
 */
export const writePacedTrainer = (
  path: string,
  options: { readonly samples: number; readonly params: number; readonly batchMs?: number; readonly hook?: string }
): string => {
  const { samples, params, batchMs = 5, hook } = options
  writeFileSync(
    path,
    `import { paramsOnly } from ${JSON.stringify(paramsOnly)}\n` +
      `const t = paramsOnly({ samples: ${samples}, params: ${params} })\n` +
      `export const trainSamples = t.trainSamples\n` +
      `export const createTrainer = (context: { readonly rank: number }) => {\n` +
      `  const inner = t.createTrainer(context)\n` +
      `  let batches = 0\n` +
      `  return { ...inner, trainBatch: async (indices: Uint32Array) => {\n` +
      `    batches += 1\n` +
      (hook === undefined ? "" : `    ;(globalThis as any).${hook}?.(context.rank, batches)\n`) +
      `    await new Promise((r) => setTimeout(r, ${batchMs}))\n` +
      `    return inner.trainBatch(indices)\n` +
      `  } }\n` +
      `}\n`
  )
  return path
}

/** `ranks` ranks of the run at `url` joined from this process (protocol 1, quiet), training `trainer`. */
export const joinHere = (
  url: string,
  runToken: string,
  ranks: number,
  trainer: string,
  saveDir: string
): ReadonlyArray<SocketRanks.JoinedRank> =>
  SocketRanks.joinRanks({
    url,
    runToken,
    ranks,
    rank: "auto",
    trainer: pathToFileURL(trainer).href,
    saveDir,
    resumable: false,
    say: () => {}
  })

/**
 * Serves a growing run of one rank (`trainer`, held while the file `hold` exists) that takes up to
 * `maxRanks` joiners, joins its rank 0 with `cohort join` from `dir`, and resolves once the run
 * formed: with the run's result to come, the URL it listens on and rank 0's process.
 */
export const serveHeldRun = async (options: {
  readonly dir: string
  readonly trainer: string
  readonly runToken: string
  readonly tokenFile: string
  readonly hold: string
  readonly maxRanks: number
  readonly started: Array<ChildProcess>
}): Promise<{ readonly served: Promise<RunResult>; readonly at: string; readonly rank0: CliProcess }> => {
  const { dir, trainer, runToken, tokenFile, hold, maxRanks, started } = options
  let listening: (url: string) => void = () => {}
  let formed = false
  const url = new Promise<string>((resolve) => (listening = resolve))
  const served = Launcher.serve({
    trainer,
    worldSize: 1,
    maxRanks,
    mode: "progressive",
    epochs: 1,
    runToken,
    outDir: dir,
    heartbeatTimeoutMs: 5000,
    tickMs: 50,
    batchSize: 8,
    onListening: (l) => listening(l.url),
    onEvent: (event) => {
      if (event.type === "formed") formed = true
    },
    onRankOutput: () => {}
  })
  const at = await url
  const rank0 = startCli(["join", at, "--trainer", trainer, "--token-file", tokenFile, "--rank", "0", "--save-dir", "save"], {
    cwd: dir,
    env: { COHORT_TEST_HOLD: hold },
    started
  })
  // Joins that come before the run formed take the pre-formation path: wait for the run to form.
  await waitFor(() => formed, 60_000, "the formation")
  return { served, at, rank0 }
}
