// cohort run --json as a real child process under the runtime running the tests (split from test/cli.test.ts).
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, it } from "vitest"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Files from "../../src/platform/files.ts"
import { useScratch } from "./fixtures.ts"

const scratch = useScratch()

/** Runs `bin/cohort.mjs` with `args` on this runtime in the repository folder; stdout and stderr piped. */
const runCli = (args: ReadonlyArray<string>) =>
  new Promise<{ readonly code: number | null; readonly out: string; readonly err: string }>((resolve, reject) => {
    const root = fileURLToPath(new URL("../..", import.meta.url))
    const bin = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))
    const child = spawn(process.execPath, [...(Runtime.detect() === "deno" ? ["run", "-A"] : []), bin, ...args], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (chunk: Uint8Array) => (out += new TextDecoder().decode(chunk)))
    child.stderr.on("data", (chunk: Uint8Array) => (err += new TextDecoder().decode(chunk)))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, out, err }))
  })

// The three runs mostly wait on their child processes: they run side by side.
describe.concurrent(`cohort run --json as a real process (${Runtime.detect()}): stdout is exactly one JSON document`, () => {
  for (const transport of ["worker", "process"] as const) {
    it(`with the docs' line trainer, which prints in save(), on ${transport === "worker" ? "worker threads" : "child processes"}`, async ({
      expect
    }) => {
      const { code, out, err } = await runCli([
        "run",
        "--trainer",
        "examples/line-trainer.ts",
        "--json",
        "--world-size",
        "2",
        "--epochs",
        "1",
        "--transport",
        transport,
        "--out",
        `${scratch()}/real-${transport}`
      ])
      const result = JSON.parse(out) as RunTypes.RunResult
      expect([code, result.exitCode, result.outcome.status, result.deaths]).toEqual([0, 0, "completed", []])
      // The trainer's line went to stderr, prefixed with its rank.
      expect(err).toMatch(/^\[rank [01]\] save to \/.*\/checkpoints\/v0: slope [-0-9.e]+, intercept [-0-9.e]+$/m)
    }, 120_000)
  }

  it("with a trainer module that prints while it loads, in the command's process and in every worker", async ({ expect }) => {
    const example = fileURLToPath(new URL("../../examples/line-trainer.ts", import.meta.url))
    // `.mts`: outside the repository no package.json says "type": "module", and tsx would load a `.ts` as CommonJS.
    const trainer = `${scratch()}/loud-trainer.mts`
    await Files.writeFile(trainer, `export * from ${JSON.stringify(example)}\nconsole.log("loading the line trainer")\n`)
    const { code, out, err } = await runCli([
      "run",
      "--trainer",
      trainer,
      "--json",
      "--world-size",
      "2",
      "--epochs",
      "1",
      "--out",
      `${scratch()}/real-loud`
    ])
    expect([code, (JSON.parse(out) as RunTypes.RunResult).exitCode]).toEqual([0, 0])
    const lines = err.split("\n")
    for (const rank of [0, 1]) expect(lines).toContain(`[rank ${rank}] loading the line trainer`)
    // The command itself imports the trainer to check it: its print goes to stderr unprefixed.
    expect(lines).toContain("loading the line trainer")
  }, 120_000)
})
