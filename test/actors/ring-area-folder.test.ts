/**
 * `RunOptions.ringAreaFolder`: child-process ranks on a ring keep their sockets and area files in a
 * folder the run makes inside the one asked for (a tmpfs with huge pages, say), and a folder in
 * which none can be made is a `LaunchError` rather than a silent fall back to ports.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative as relativePath } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { clean, fastRuns } from "./fast-runs.ts"

const wide = fileURLToPath(new URL("../fixtures/trainers/wide.ts", import.meta.url))
const { fast } = fastRuns("ring-area-folder", { averageEverySteps: 20 })
const root = mkdtempSync(join(tmpdir(), "cohort-area-root-"))
const processRing = { ...fast, trainer: wide, backend: "ring", transport: "process", worldSize: 2, epochs: 1 } as const
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe("ringAreaFolder", () => {
  it("puts the run's folder of sockets and area files there, and removes it at the end", async () => {
    const seen: Array<ReadonlyArray<string>> = []
    const result = await Launcher.run({
      ...processRing,
      ringAreaFolder: root,
      onEvent: (event) => {
        if (event.type === "round" && seen.length === 0) seen.push(readdirSync(root).flatMap((d) => readdirSync(join(root, d))))
      }
    })
    expect(clean(result)).toEqual([[0, 1600, 0, 0]])
    expect(result.ring?.links).toBe("file")
    expect(seen[0]).toEqual(expect.arrayContaining(["area-0-0.f32", "area-0-1.f32"]))
    expect(readdirSync(root)).toEqual([])
  }, 90_000)

  it("a folder in which the run cannot make its own is a LaunchError", async () => {
    const run = Launcher.run({
      ...processRing,
      ringAreaFolder: join(root, "missing", "deeper")
    })
    await expect(run).rejects.toThrow(/ringAreaFolder.*cannot make the run's folder in/)
  }, 60_000)

  it("a relative path is taken from the current folder; a path too long for the ranks' sockets is a LaunchError, not a quiet fall back to ports", async () => {
    const relative = relativePath(process.cwd(), root)
    const result = await Launcher.run({ ...processRing, ringAreaFolder: relative })
    expect([clean(result), result.ring?.links]).toEqual([[[0, 1600, 0, 0]], "file"])
    const long = join(root, "y".repeat(71 - root.length))
    await expect(Launcher.run({ ...processRing, ringAreaFolder: long })).rejects.toThrow(
      `${long} is 72 bytes long; the ranks' Unix sockets in the run's folder there need it at most 71`
    )
  }, 90_000)
})
