// The coordinator's process killed without a word (SIGKILL): every rank process notices its closed
// channel, saves (emergency) and exits with one line on the coordinator's stderr, no stack trace
// (docs/faults.md). Real processes: the CLI as a child of this test, its ranks as its
// children, under the runtime that runs this file.
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type * as Rank from "../../actors/rank/rank.ts"
import * as Runtime from "../../src/platform/detect.ts"
import { startCli } from "../cli-process.ts"

const runtime = Runtime.detect()
const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-killed-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

const coordinatorTimeoutMs = 5000

/** `/proc/<pid>/stat` fields after the command name: [state, ppid, ...]; `undefined` once gone. */
const statOf = (pid: number): ReadonlyArray<string> | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined
  }
}
const isRunning = (pid: number): boolean => {
  const stat = statOf(pid)
  return stat !== undefined && stat[0] !== "Z" && stat[0] !== "X"
}
/** The rank processes `parent` started: its children with a Cohort rank in their environment. */
const ranksOf = (parent: number): Array<number> =>
  readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        return statOf(pid)?.[1] === String(parent) && readFileSync(`/proc/${pid}/environ`, "utf8").includes("COHORT_CHILD_RANK=")
      } catch {
        return false
      }
    })

describe(`the coordinator's process killed with SIGKILL (${runtime})`, () => {
  it("every rank process saves (emergency) and exits within coordinatorTimeoutMs + 5 s, with one line each and no stack trace", async () => {
    const run = startCli(
      [
        ...["run", "--trainer", steady, "--transport", "process", "--world-size", "3", "--epochs", "500", "--no-kill"],
        ...["--coordinator-timeout-ms", String(coordinatorTimeoutMs), "--out", outDir]
      ],
      { cwd: process.cwd() }
    )
    const child = run.child
    let stderrAtKill = 0
    // The CLI's stderr, kept open by the ranks after the CLI died: it ends once every writer is gone.
    const stderrEnded = new Promise<void>((resolve) => child.stderr!.on("close", () => resolve()))
    const killed = new Promise<{ readonly pids: Array<number>; readonly atMs: number }>((resolve, reject) => {
      child.stdout!.on("data", () => {
        // Kill it once training is under way: the first progress line.
        if (stderrAtKill === 0 && /samples done/.test(run.out())) {
          const pids = ranksOf(child.pid!)
          // A terminal's Ctrl-C reaches the ranks too (one process group): they ignore it, so each
          // must still be there to make its emergency save below.
          spawnSync("kill", ["-INT", ...pids.map(String)])
          stderrAtKill = run.err().length || -1
          spawnSync("kill", ["-KILL", String(child.pid)]) // kill(1): Deno's ChildProcess.kill cannot send every signal
          resolve({ pids, atMs: Date.now() })
        }
      })
      child.on("exit", (code) => reject(new Error(`the CLI exited (${code}) before training started: ${run.err()}`)))
    })
    const { pids, atMs } = await killed
    expect(pids.length).toBe(3)
    // Every rank process is gone within the bound.
    while (pids.some(isRunning) && Date.now() - atMs < coordinatorTimeoutMs + 5000) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect(pids.filter(isRunning)).toEqual([])
    await stderrEnded
    const runDir = /writing (\S+)/.exec(run.out())?.[1]
    expect(runDir).toBeDefined()
    // One line per rank after the kill, and nothing else: no stack trace, no EPIPE.
    const after = run
      .err()
      .slice(Math.max(stderrAtKill, 0))
      .split("\n")
      .filter((line) => line !== "")
      .sort()
    expect(after).toEqual(
      [0, 1, 2].map((r) => `cohort rank ${r}: the coordinator is gone (channel closed); saved to ${runDir}/save/rank${r} (emergency)`)
    )
    expect(run.err()).not.toMatch(/EPIPE|^\s+at /m)
    for (const r of [0, 1, 2]) {
      const record = JSON.parse(readFileSync(`${runDir}/save/rank${r}/emergency.json`, "utf8")) as Rank.EmergencySave
      expect([record.emergency, record.rank, record.reason, record.closeCode, record.detail, record.saved]).toEqual([
        true,
        r,
        "ChannelClosed",
        1006,
        "channel closed",
        true
      ])
      expect(JSON.parse(readFileSync(`${runDir}/save/rank${r}/steady.json`, "utf8")).rank).toBe(r)
    }
    // What the coordinator wrote before it died is readable: every whole line of the journal.
    const journal = `${runDir}/events.ndjson`
    if (existsSync(journal)) {
      const text = readFileSync(journal, "utf8")
      for (const line of text
        .slice(0, text.lastIndexOf("\n") + 1)
        .split("\n")
        .filter((l) => l !== ""))
        JSON.parse(line)
    }
    expect(existsSync(`${runDir}/ranks`)).toBe(true)
  }, 120_000)
})
