// NEEDS ROOT ON LINUX (full tier): child-process ranks whose area files do not fit (a full
// tmpfs, ENOSPC) average over their direct links instead, every round, every rank alike, and say
// so. The run goes in a mount namespace of its own whose /dev/shm is a 16 KiB tmpfs: the launcher's
// private folder and the ranks' sockets fit there, their area files (about 44 KB each) do not.
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/record/run-types.ts"
import * as Runtime from "../../src/platform/detect.ts"
import { paramsLength } from "../fixtures/trainers/wide.ts"
import { requireRootLinux } from "../mounts.ts"
import { clean } from "./fast-runs.ts"

const driver = fileURLToPath(new URL("../fixtures/ring-files-run.ts", import.meta.url))
const wide = fileURLToPath(new URL("../fixtures/trainers/wide.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-ring-files-root-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

/** How this runtime runs a TypeScript file. */
const runtimeArgs = (): Array<string> => {
  const runtime = Runtime.detect()
  return runtime === "node" ? ["--import", "tsx"] : runtime === "deno" ? ["run", "-A"] : []
}

describe("child-process ranks whose area files do not fit their tmpfs", () => {
  it("fall back to the socket ring in every round (each rank says why once a generation), with full all-reduces over their links and clean audits", () => {
    requireRootLinux("mount a tiny tmpfs on /dev/shm in a mount namespace of the test's own")
    const script = 'mount -t tmpfs -o size=16k,mode=1777 cohort-full /dev/shm && exec "$@"'
    const ran = spawnSync(
      "unshare",
      ["--mount", "--propagation", "private", "sh", "-c", script, "sh", process.execPath, ...runtimeArgs(), driver, outDir, wide],
      {
        encoding: "utf8",
        timeout: 120_000
      }
    )
    expect(ran.status, ran.stderr).toBe(0)
    const line = ran.stdout.split("\n").find((l) => l.startsWith("{"))
    expect(line, ran.stderr).toBeDefined()
    const { result, lines } = JSON.parse(line!) as { readonly result: RunResult; readonly lines: ReadonlyArray<string> }
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 1600, 0, 0]])
    expect(result.deaths).toEqual([])
    expect(lines.filter((l) => l.includes("no ring area file")).sort()).toEqual(
      [0, 1, 2].map((rank) => `[rank ${rank}] cohort rank ${rank}: no ring area file (ENOSPC): rounds of generation 0 go over the links`)
    )
    // Every round moved its tokens and then a whole float32 ring all-reduce over the links.
    const ranks = 3
    const headerBytes = 20
    const tokens = ranks * (ranks - 1) * (headerBytes + 8)
    const allReduce = (ranks - 1) * (8 * (paramsLength + ranks) + 4 * paramsLength) + 2 * (ranks - 1) * ranks * headerBytes
    const rounds = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { readonly type: string; readonly linkSentBytes?: number })
      .filter((e) => e.type === "round")
    expect(rounds.length).toBeGreaterThanOrEqual(2)
    for (const round of rounds) expect(round.linkSentBytes).toBe(tokens + allReduce)
  })
})
