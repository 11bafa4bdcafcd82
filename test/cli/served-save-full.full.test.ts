// NEEDS ROOT ON LINUX (full tier, tmpfs): a served rank whose --save-dir is on a full file system
// (a 64 KiB tmpfs, filled) fails its checkpoint with ENOSPC. The checkpoint fails over to another
// rank, the run completes with exact audits, and the StorageFault alert names that rank's own
// save folder on its host, not the coordinator's run folder, whose disk is fine. Real processes
// of the command line over 127.0.0.1; Node only (nothing here is runtime-specific).
import { type ChildProcess, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { type CliProcess, removeDir, startCli, waitFor } from "../cli-process.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-served-full-"))
const tiny = join(dir, "tiny")
const tokenFile = join(dir, "token")
writeFileSync(tokenFile, "served-save-full-test-token-0123456789\n")
const children: Array<ChildProcess> = []
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  spawnSync("umount", [tiny])
  await removeDir(dir)
})

const cohort = (args: ReadonlyArray<string>): CliProcess => startCli(args, { cwd: dir, started: children })
const urlOf = (serve: CliProcess): string => /listening on (ws:\/\/\S+) for/.exec(serve.out() + serve.err())?.[1] ?? ""

describe("a served rank whose save folder is full", () => {
  it("fails its checkpoint with ENOSPC: the checkpoint fails over, the run completes with exact audits, and the alert names the rank's own folder", async () => {
    if (process.platform !== "linux" || process.getuid?.() !== 0) {
      throw new Error(`THIS TEST NEEDS ROOT ON LINUX (mount): uid ${process.getuid?.()} on ${process.platform}`)
    }
    mkdirSync(tiny)
    const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", tiny], { encoding: "utf8" })
    if (mounted.status !== 0) throw new Error(`mount: ${mounted.stderr}`)
    spawnSync("dd", ["if=/dev/zero", `of=${join(tiny, "fill")}`, "bs=1k", "count=128"])
    const serve = cohort(
      ["serve", "--trainer", steady, "--world-size", "3", "--epochs", "2", "--role-policy", "0"].concat([
        "--token-file",
        tokenFile,
        "--out",
        "runs",
        "--json"
      ])
    )
    await waitFor(() => urlOf(serve) !== "", 60_000, "serve's URL")
    const joins = [0, 1, 2].map((rank) =>
      cohort([
        "join",
        urlOf(serve),
        "--trainer",
        steady,
        "--token-file",
        tokenFile,
        "--rank",
        String(rank),
        "--save-dir",
        rank === 0 ? join(tiny, "rank0") : `save-${rank}`
      ])
    )
    expect(await serve.exit).toBe(0)
    expect(await Promise.all(joins.map((j) => j.exit))).toEqual([0, 0, 0])
    const summary = JSON.parse(serve.out()) as {
      runDir: string
      deaths: ReadonlyArray<unknown>
      epochs: ReadonlyArray<{ samplesCommitted: number; lost: number; duplicated: number }>
    }
    expect(summary.deaths).toEqual([])
    expect(summary.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])).toEqual([
      [4800, 0, 0],
      [4800, 0, 0]
    ])
    const journal = readFileSync(join(dir, summary.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; detail?: string; alert?: { class: string; detail: string } })
    const faults = journal.filter((e) => e.type === "alert" && e.alert?.class === "StorageFault").map((e) => e.alert!.detail)
    expect(faults[0]).toMatch(/^cannot write checkpoints\/v0 under rank 0's --save-dir on its own host: .*ENOSPC/)
    expect(faults.some((f) => f.includes(summary.runDir))).toBe(false)
    expect(journal.some((e) => e.type === "decision" && /^Checkpoint to rank [12]: checkpoint 0 fails over/.test(e.detail ?? ""))).toBe(
      true
    )
  }, 120_000)
})
