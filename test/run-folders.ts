// A run's folder as the end-to-end tests watch it while the run goes on: the one run under an
// `--out` folder, its journal's whole lines, and the moment epoch 0 is safe and epoch 1 trains.
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import type { RunEvent } from "../actors/record/run-types.ts"
import { waitFor } from "./cli-process.ts"

/** The one run folder under `out`; `""` while there is none (or more than one). */
export const onlyRunDir = (out: string): string => {
  const dirs = existsSync(out) ? readdirSync(out) : []
  return dirs.length === 1 ? join(out, dirs[0]!) : ""
}

/** The journal's whole lines, parsed (a line still being written is left out); none before it exists. */
export const journalOf = (runDir: string): Array<RunEvent> => {
  const path = join(runDir, "events.ndjson")
  if (!existsSync(path)) return []
  const text = readFileSync(path, "utf8")
  return text
    .slice(0, text.lastIndexOf("\n") + 1)
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as RunEvent)
}

/**
 * Waits (up to 120 s) until the one run under `out` has journaled epoch 0, checkpointed it
 * (`checkpoints/v0` holds its metadata) and trains epoch 1; returns its folder. `what` names the
 * run in the timeout's error (e.g. its stderr so far).
 */
export const epochOneUnderway = async (out: string, what: () => string): Promise<string> => {
  let runDir = ""
  await waitFor(
    () => {
      runDir = onlyRunDir(out)
      const journal = runDir === "" ? [] : journalOf(runDir)
      const v0 = join(runDir, "checkpoints", "v0")
      return (
        journal.some((e) => e.type === "epoch" && e.summary.epoch === 0) &&
        journal.some((e) => e.type === "progress" && e.epoch === 1) &&
        existsSync(v0) &&
        readdirSync(v0).some((name) => name.endsWith(".json"))
      )
    },
    120_000,
    `epoch 1 under way (${what()})`
  )
  return runDir
}
