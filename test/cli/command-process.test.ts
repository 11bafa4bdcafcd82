// The `cohort` command as a process, under the test's runtime: `serve --listen 0.0.0.0:PORT` prints
// a join command with an address of this host, not the wildcard it listens on; a trainer module
// that leaves a timer running does not keep the command alive after the run.
import type { ChildProcess } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { networkInterfaces, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import { freePort, removeDir, startCli } from "../cli-process.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const lingering = fileURLToPath(new URL("../fixtures/trainers/lingering-timer.ts", import.meta.url))
const exitsWhileLoading = fileURLToPath(new URL("../fixtures/trainers/exits-while-loading.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-serve-listen-"))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  return removeDir(dir)
})

// What the test expects, from the same system call: the first IPv4 address that is not loopback.
const firstExternalIPv4 = (): string | undefined =>
  Object.values(networkInterfaces())
    .flatMap((entries) => entries ?? [])
    .find((e) => !e.internal && e.family === "IPv4")?.address

// Side by side: the processes share nothing but the scratch folder (each run its own folder in
// it), and the join that finds no coordinator spends its 8 s retrying, not computing.
describe.concurrent(`the cohort command as a process (${Runtime.detect()})`, () => {
  it("lists this host's addresses and prints the join command with the first of them, never ws://0.0.0.0", async () => {
    const port = await freePort()
    const serve = startCli(["serve", "--trainer", steady, "--world-size", "2", "--listen", `0.0.0.0:${port}`, "--out", join(dir, "runs")], {
      cwd: dir,
      started: children
    })
    const until = Date.now() + 60_000
    while (!/join with: .*\n/.test(serve.out()) && serve.child.exitCode === null && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    serve.child.kill("SIGKILL")
    await serve.exit
    const out = serve.out()
    const address = firstExternalIPv4()
    const joinLine = /cohort serve: join with: .* join (ws:\/\/\S+) /.exec(out)?.[1]
    if (address === undefined) {
      expect(out).toContain("0.0.0.0 listens on every address of this host")
    } else {
      expect(out).toContain(`cohort serve: 0.0.0.0 listens on every address of this host: ${address}`)
      expect(joinLine).toBe(`ws://${address}:${port}/`)
    }
    expect(out).not.toContain("cohort join ws://0.0.0.0")
  }, 90_000)

  it("a trainer module that leaves a timer running: the command exits with the run's code soon after its summary", async () => {
    const run = startCli(["run", "--trainer", lingering, "--world-size", "2", "--epochs", "1", "--out", join(dir, "runs"), "--json"], {
      cwd: dir,
      started: children
    })
    const until = Date.now() + 120_000
    while (!run.out().trimEnd().endsWith("}") && run.child.exitCode === null && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const summaryAt = Date.now()
    const code = await Promise.race([
      run.exit,
      new Promise((resolve) => setTimeout(() => resolve("still running 20 s after its summary"), 20_000))
    ])
    expect({ code, summary: JSON.parse(run.out()).outcome.status }).toEqual({ code: 0, summary: "completed" })
    expect(Date.now() - summaryAt).toBeLessThan(20_000)
  }, 180_000)

  it("cohort join to a coordinator that is not there says once that it keeps trying, then gives up with exit 15 at --connect-timeout-ms", async () => {
    const port = await freePort()
    const url = `ws://127.0.0.1:${port}/`
    const joining = startCli(["join", url, "--trainer", steady, "--connect-timeout-ms", "8000"], {
      cwd: dir,
      env: { COHORT_TOKEN: "a-token-of-at-least-16-characters" },
      started: children
    })
    const code = await joining.exit
    const lines = joining
      .err()
      .split("\n")
      .filter((line) => line !== "")
    expect(code).toBe(15)
    expect(lines.map((line) => line.replace(/\([^)]*\)/, "(...)"))).toEqual([
      `cohort join: ${url} cannot be reached yet (...); trying again for up to 8 s (--connect-timeout-ms)`,
      `cohort join: cannot reach ${url} within 8000 ms: ${lines[1]?.split(" ms: ")[1]}`
    ])
  }, 90_000)

  it("a trainer module that calls process.exit while it is imported: the command says so on stderr and exits with that code", async () => {
    const run = startCli(["run", "--trainer", exitsWhileLoading, "--out", join(dir, "runs")], { cwd: dir, started: children })
    expect([await run.exit, run.err()]).toEqual([
      7,
      "cohort: the process exited with code 7 before the command finished (did the trainer module call process.exit?)\n"
    ])
  }, 90_000)
})
