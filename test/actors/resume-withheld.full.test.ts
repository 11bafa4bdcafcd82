// Full tier: where a resume starts when the parent's journal withheld an epoch's audit line (its
// model could not be written, `launcher-journal.ts`). Real runs, then their journals edited as a
// failed model write leaves them: a `model` line with `error`, no `epoch` line, no checkpoint. The
// withheld epoch is trained again, whatever else the parent left: survivors' saves of a later epoch
// are not loaded, and a completed run whose last epoch was withheld is resumed, not refused.
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { pickState, readParent } from "../../actors/launcher/resume-state.ts"
import { fastRuns } from "./fast-runs.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const { fast, outDir } = fastRuns("resume-withheld", { batchSize: 64 })

/** A copy of `runDir` whose journal lost epoch `epoch`'s line and whose model of it failed, as after ENOSPC. */
const withheld = (runDir: string, epoch: number, name: string, cutEnd = false): string => {
  const copy = join(outDir, name)
  cpSync(runDir, copy, { recursive: true })
  rmSync(join(copy, "checkpoints", `v${epoch}`), { recursive: true, force: true })
  const path = join(copy, "events.ndjson")
  const lines = readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .flatMap((line) => {
      const event = JSON.parse(line) as { type: string; ms?: number; epoch?: number; summary?: { epoch: number } }
      if (event.type === "epoch" && event.summary?.epoch === epoch) return []
      if (event.type === "model" && event.epoch === epoch) {
        const alert = {
          ts: 0,
          severity: "critical",
          path: "root",
          class: "StorageFault",
          detail: `cannot write ${copy}/checkpoints/v${epoch}: ENOSPC: no space left on device, write`,
          count: 1
        }
        return [
          JSON.stringify({ ...event, bytes: 0, error: "ENOSPC: no space left on device, write" }),
          JSON.stringify({ type: "alert", ms: event.ms, alert })
        ]
      }
      // The journal's end could not be written either.
      if (cutEnd && event.type === "ended") return []
      return [line]
    })
  writeFileSync(path, `${lines.join("\n")}\n`)
  return copy
}

describe("resume after an epoch whose audit line was withheld", () => {
  it("a completed run whose last epoch's model failed: resumed from the model before it, that epoch trained again", async () => {
    const run = await Launcher.run({ ...fast, trainer: steady, worldSize: 2, epochs: 2 })
    expect(run.exitCode).toBe(0)
    const dir = withheld(run.runDir, 1, "completed")
    const parent = await readParent(dir)
    const picked = await pickState(parent, 4800, 2)
    expect([picked.epoch, picked.state, picked.committed]).toEqual([1, "checkpoint", []])
    expect(picked.loadedFrom).toMatch(/checkpoints\/v0$/)
    expect(picked.notes.join("\n")).toContain(
      "epoch 1's audit is not in the parent's journal: its model could not be written (ENOSPC: no space left on device, write)"
    )
    // The run itself is not refused as completed (its journal's end and its summary say
    // completed): the resume trains epoch 1, which the chain then audits once.
    const resumed = await Launcher.run({ ...fast, resume: dir })
    expect(resumed.exitCode).toBe(0)
    expect(resumed.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([[1, 4800, 0, 0]])
  })

  it("a stopped run with survivors' saves past the withheld epoch: the saves are not loaded, the epoch is trained again; a journal without its end names the storage fault", async () => {
    const run = await Launcher.run({
      ...fast,
      trainer: steady,
      worldSize: 3,
      epochs: 3,
      failureLimit: { absolute: 1 },
      kills: [{ rank: 1, atEpoch: 1, atFraction: 0.3 }]
    })
    expect(run.exitCode).toBe(1)
    expect(run.outcome.uncommitted?.epoch).toBe(1)
    const parent = await readParent(withheld(run.runDir, 0, "stopped"))
    const picked = await pickState(parent, 4800, 3)
    // Epoch 0 audited nowhere else: the run's seed model, epoch 0 from its start.
    expect([picked.epoch, picked.state, picked.committed]).toEqual([0, "start", []])
    expect(picked.notes.join("\n")).toContain("none is loaded: epoch 0's audit is not in the parent's journal")
    // Its journal's end unwritten too: the resume names the storage fault, not a dead process.
    const cut = await pickState(await readParent(withheld(run.runDir, 0, "cut", true)), 4800, 3)
    expect([cut.epoch, cut.state]).toEqual([0, "start"])
    const notes = cut.notes.join("\n")
    expect(notes).toContain("its coordinator stopped on a storage fault (cannot write ")
    expect(notes).toContain("epoch 0's audit is not in the parent's journal")
    expect(notes).not.toContain("process died")
  })
})
