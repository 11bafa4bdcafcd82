// Per-rank credentials end to end through the CLI, on loopback: `cohort serve --issue-tokens 3`
// writes one credential per rank; the ranks join with them (the journal names each); a
// credential for rank 2 cannot join as rank 1 (exit 19); `cohort revoke RUN_DIR ID` mid-run closes
// rank 2 with 4022 (exit 19, one line), its samples go to the survivors (audits exact), and it is
// refused on return (4022, exit 19). Node only (vitest.config.ts): nothing here is
// runtime-specific beyond what test/transport/credentials.test.ts runs on all three.
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/record/run-types.ts"
import { freePort, startCli, waitFor } from "../cli-process.ts"

const trainer = fileURLToPath(new URL("../fixtures/trainers/steady-held.ts", import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), "cohort-cred-"))
// The run trains slowly while this file exists, so that it cannot end before the revocation
// however slowly a loaded machine starts the `revoke` commands.
const hold = join(scratch, "hold")
const env = { COHORT_TEST_HOLD: hold, COHORT_TEST_HOLD_BATCH_MS: "400" }
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe("cohort serve --issue-tokens and cohort revoke", () => {
  it("ranks join with their own credentials; another rank's is refused; a revoked rank is closed mid-run, its samples go to the survivors, and it is refused on return", async () => {
    const port = await freePort()
    const url = `ws://127.0.0.1:${port}/`
    writeFileSync(join(scratch, "token"), "cred-test-run-token-61f0a9c3", { mode: 0o600 })
    writeFileSync(hold, "")
    const serve = startCli(
      [
        "serve",
        "--trainer",
        trainer,
        "--world-size",
        "3",
        "--epochs",
        "3",
        "--heartbeat-timeout-ms",
        "5000",
        "--listen",
        `127.0.0.1:${port}`,
        "--token-file",
        join(scratch, "token"),
        "--out",
        join(scratch, "runs"),
        "--issue-tokens",
        "3"
      ],
      { cwd: scratch, env }
    )
    try {
      await waitFor(() => /credentials in (\S+)\/rank<r>/.test(serve.out()), 30_000, "the credentials line")
      const dir = /credentials in (\S+)\/rank<r>/.exec(serve.out())![1]!
      // The join command hands out rank 0's credential, never the run token every credential derives from.
      await waitFor(() => /join with: .*\n/.test(serve.out()), 10_000, "the join line")
      expect(/join with: (.*)\n/.exec(serve.out())![1]).toContain(`--token-file ${join(dir, "rank0")} --rank auto`)
      expect(serve.out()).toContain("(on rank r's host, its own credential rank<r> in place of rank0)")
      const runDir = join(dir, "..")
      const credentialOf = (rank: number) => join(dir, `rank${rank}`)
      const idOf = (rank: number) => readFileSync(credentialOf(rank), "utf8").split(".")[1]!
      const joinAs = (rank: number, credential: number, save: string) =>
        startCli(
          [
            "join",
            url,
            "--trainer",
            trainer,
            "--token-file",
            credentialOf(credential),
            "--rank",
            String(rank),
            "--save-dir",
            join(scratch, save),
            "--connect-timeout-ms",
            "30000"
          ],
          { cwd: scratch, env }
        )
      const wrongIndex = joinAs(1, 2, "wrong")
      expect(await wrongIndex.exit).toBe(19)
      expect(wrongIndex.err().trim().split("\n")).toEqual([
        `cohort join: refused by ${url}: the credential admits another rank index (close code 4021)`
      ])
      const ranks = [0, 1, 2].map((rank) => joinAs(rank, rank, `save-${rank}`))
      await waitFor(() => /formed/.test(serve.out()), 30_000, "the run to form")
      await new Promise((resolve) => setTimeout(resolve, 600))
      // A revocation that could not apply is refused, never reported as done.
      for (const [target, said] of [
        ["9", /rank 9 is not a rank of this run/],
        [`${idOf(2)}x`, /this run issued no credential/]
      ] as const) {
        const wrong = startCli(["revoke", runDir, target], { cwd: scratch })
        expect(await wrong.exit).toBe(2)
        expect(wrong.err()).toMatch(said)
      }
      const revoke = startCli(["revoke", runDir, idOf(2)], { cwd: scratch })
      expect(await revoke.exit, `${revoke.err()}${serve.out()}${serve.err()}`).toBe(0)
      expect(revoke.out()).toBe(`cohort revoke: credential ${idOf(2)} revoked in ${runDir} (the coordinator applies it within a second)\n`)
      // Back as soon as the coordinator applied it, while the run still trains (under load the
      // revoked rank's own exit may come late).
      await waitFor(() => /revoked credential/.test(serve.out()), 30_000, "the revocation to be applied")
      const back = joinAs(2, 2, "back")
      expect(await back.exit, `${back.err()}${serve.out()}${serve.err()}`).toBe(19)
      expect(await ranks[2]!.exit).toBe(19)
      unlinkSync(hold)
      const said = ranks[2]!.err().trim().split("\n")
      expect(said[said.length - 1]).toMatch(/^cohort rank 2: the coordinator revoked this rank \(close code 4022: cohort revoke\)/)
      expect(back.err().trim().split("\n")).toEqual([`cohort join: refused by ${url}: the credential was revoked (close code 4022)`])
      expect(await serve.exit, `${serve.out()}${serve.err()}`).toBe(0)
      expect([await ranks[0]!.exit, await ranks[1]!.exit]).toEqual([0, 0])
      const summary = JSON.parse(readFileSync(join(runDir, "summary.json"), "utf8")) as RunResult
      expect(summary.deaths.map((d) => [d.rank, d.cause, d.redistributed])).toEqual([[2, "disconnected (close code 4022)", true]])
      expect(summary.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([
        [0, 4800, 0, 0],
        [1, 4800, 0, 0],
        [2, 4800, 0, 0]
      ])
      const events = readFileSync(join(runDir, "events.ndjson"), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>)
      expect(
        events
          .filter((e) => e.type === "joined")
          .map((e) => [e.rank, e.credential])
          .sort()
      ).toEqual([
        [0, idOf(0)],
        [1, idOf(1)],
        [2, idOf(2)]
      ])
      expect(events.filter((e) => e.type === "revoked").map((e) => [e.rank, e.credential])).toEqual([[2, idOf(2)]])
      expect(
        events
          .filter((e) => e.type === "refused")
          .map((e) => e.closeCode)
          .sort()
      ).toEqual([4021, 4022])
      // The journal never holds a credential's secret part, nor the run token.
      const journal = readFileSync(join(runDir, "events.ndjson"), "utf8")
      for (const rank of [0, 1, 2]) expect(journal).not.toContain(readFileSync(credentialOf(rank), "utf8").trim().split(".")[4]!)
      expect(journal).not.toContain("cred-test-run-token-61f0a9c3")
    } finally {
      serve.child.kill("SIGKILL")
    }
  }, 90_000)
})
