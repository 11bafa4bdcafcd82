// `cohort revoke` against hand-written journals: what it reads of the run (the ranks it may hold,
// whether it has ended) comes from the run-record reader, cut last line included.
import { describe, expect, it } from "vitest"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as Files from "../../src/platform/files.ts"
import { completed, eventsOf, runMain, useScratch } from "./fixtures.ts"

const scratch = useScratch()

/** A run folder whose journal holds `events`, then `tail` (a line still being written). */
const runFolder = async (name: string, events: ReadonlyArray<RunTypes.RunEvent>, tail = ""): Promise<string> => {
  const dir = `${scratch()}/${name}`
  await Files.mkdir(dir)
  await Files.writeFile(`${dir}/events.ndjson`, `${events.map((event) => JSON.stringify(event)).join("\n")}\n${tail}`)
  return dir
}

const running = (maxRanks?: number): ReadonlyArray<RunTypes.RunEvent> =>
  eventsOf(completed).flatMap((event): ReadonlyArray<RunTypes.RunEvent> => {
    if (event.type === "ended") return []
    return event.type === "started" && maxRanks !== undefined ? [{ ...event, options: { maxRanks } }] : [event]
  })

describe("cohort revoke reads the run from its journal", () => {
  it("revokes a rank of a running run, up to its maxRanks, with the journal's last line cut short", async () => {
    const dir = await runFolder("growing", running(6), '{"type":"progress","ms":')
    const last = await runMain(["revoke", dir, "5"])
    expect([last.code, last.err]).toEqual([0, ""])
    expect(last.out).toBe(`cohort revoke: rank 5 revoked in ${dir} (the coordinator applies it within a second)\n`)
    const beyond = await runMain(["revoke", dir, "6"])
    expect([beyond.code, beyond.err]).toEqual([2, "cohort: revoke: rank 6 is not a rank of this run (it holds ranks 0 to 5)\n"])
  })

  it("holds a run without maxRanks to its world size", async () => {
    const dir = await runFolder("static", running())
    const beyond = await runMain(["revoke", dir, "4"])
    expect([beyond.code, beyond.err]).toEqual([2, "cohort: revoke: rank 4 is not a rank of this run (it holds ranks 0 to 3)\n"])
  })

  it("refuses a run that ended or failed, and a journal without its started event", async () => {
    const ended = await runFolder("ended", eventsOf(completed))
    const failed = await runFolder("failed", [
      ...running(),
      { type: "failed", ms: 5, stage: "formation", reason: "rank 3 did not join", formed: false }
    ])
    for (const dir of [ended, failed]) {
      const refused = await runMain(["revoke", dir, "1"])
      expect([refused.code, refused.err]).toEqual([2, `cohort: revoke: the run in ${dir} has ended: there is nothing to revoke\n`])
    }
    const headless = await runFolder("headless", running().slice(1))
    const refused = await runMain(["revoke", headless, "1"])
    expect([refused.code, refused.err]).toEqual([2, `cohort: revoke: ${headless}/events.ndjson has no started event\n`])
  })
})
