// Served runs with ranks joined from the test's own process (`SocketRanks.joinRanks` over
// loopback), and the params-only trainer module they train (bench/trainers/params-only.ts), its
// batches paced by a timer: shared by the tests that serve such runs.
import { writeFileSync } from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as SocketRanks from "../actors/rank/socket-ranks.ts"

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
