// The run journal's file: appends in order, readable before it is closed, durable after sync.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Files from "../../src/platform/files.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort-journal-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("Files.openJournal and writeFileAtomic", () => {
  it("1,000 appended lines are on disk in order after sync, before close, and appends go after what the file held", async () => {
    const path = join(dir, "events.ndjson")
    writeFileSync(path, "first\n")
    const journal = await Files.openJournal(path)
    for (let i = 0; i < 1000; i++) journal.append(`{"i":${i}}\n`)
    await journal.sync()
    const lines = readFileSync(path, "utf8").split("\n")
    expect(lines.length).toBe(1002)
    expect(lines[0]).toBe("first")
    expect(lines.slice(1, 1001).map((line) => (JSON.parse(line) as { i: number }).i)).toEqual(Array.from({ length: 1000 }, (_, i) => i))
    journal.append("last\n")
    await journal.close()
    expect(readFileSync(path, "utf8").endsWith('{"i":999}\nlast\n')).toBe(true)
    expect(journal.error()).toBeUndefined()
    // After close, appends are dropped and close is idempotent.
    journal.append("dropped\n")
    await journal.close()
    expect(readFileSync(path, "utf8").endsWith("last\n")).toBe(true)
  })

  it("writeFileAtomic replaces a file whole and leaves no temporary file", async () => {
    const path = join(dir, "summary.json")
    writeFileSync(path, "old")
    await Files.writeFileAtomic(path, '{"new":true}\n')
    expect(readFileSync(path, "utf8")).toBe('{"new":true}\n')
    expect(await Files.exists(`${path}.tmp`)).toBe(false)
  })

  it.runIf(process.platform === "linux")(
    "a write the device refuses (/dev/full: ENOSPC) is told to onError once, at once, and kept in error(); sync and close still resolve",
    async () => {
      const errors: Array<unknown> = []
      const journal = await Files.openJournal("/dev/full", (error) => errors.push(error))
      journal.append("a line\n")
      await journal.sync()
      expect(errors.map((e) => (e as { code?: string }).code)).toEqual(["ENOSPC"])
      expect(String((errors[0] as Error).message)).toMatch(/no space left on device/i)
      journal.append("another\n")
      await journal.sync()
      await journal.close()
      expect(errors.length).toBe(1)
      expect(journal.error()).toBe(errors[0])
    }
  )
})
