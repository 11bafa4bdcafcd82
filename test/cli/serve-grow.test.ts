// `cohort serve --max-ranks` and `--min-ranks` as a user mistypes them: one line each, exit 2.
// The grown runs themselves are in serve-grow.full.test.ts.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { ChildProcess } from "node:child_process"
import { afterAll, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import { type CliProcess, startCli } from "../cli-process.ts"

const runtime = Runtime.detect()
const dir = mkdtempSync(join(tmpdir(), "cohort-grow-flags-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
})

const cohort = (args: ReadonlyArray<string>): CliProcess => startCli(args, { cwd: dir, env: {}, started: children })

describe(`growing a served run: cohort serve's growth flags (${runtime})`, () => {
  it("bad flags: --max-ranks under the world size, --min-ranks over it or under 1 (under 2 with the ring backend), --churn outside (0, 1) are one line each and exit 2", async () => {
    const cases: ReadonlyArray<[ReadonlyArray<string>, string]> = [
      [["--world-size", "3", "--max-ranks", "2"], "cohort: --max-ranks must be at least the world size (3), got 2\n"],
      [["--world-size", "2", "--min-ranks", "3"], "cohort: --min-ranks must be at most the world size (2), got 3\n"],
      [["--min-ranks", "0"], "cohort: --min-ranks must be an integer >= 1, got '0'\n"],
      [
        ["--world-size", "3", "--min-ranks", "1", "--backend", "ring"],
        "cohort: --min-ranks must be at least 2 with --backend ring (a ring of one rank cannot all-reduce), got 1\n"
      ],
      [["--churn", "1"], "cohort: --churn must be a fraction of the live ranks between 0 and 1 (exclusive), got 1\n"]
    ]
    // Side by side: each is a process start and nothing more.
    const ran = cases.map(([args]) => cohort(["serve", ...args]))
    for (const [i, p] of ran.entries()) expect([await p.exit, p.err()]).toEqual([2, cases[i]![1]])
  }, 120_000)
})
