// `cohort serve` and `cohort join` as a user runs them: real processes of the command line, real
// sockets over 127.0.0.1, under the runtime running the tests (Node, Bun, Deno) (docs/serve-and-join.md).
import { type ChildProcess, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as SavedModel from "../../src/train/saved-model.ts"
import { cliCommand, type CliProcess, freePort, servedUrl, startCli, waitFor } from "../cli-process.ts"

const runtime = Runtime.detect()
const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const slow = fileURLToPath(new URL("../fixtures/trainers/steady-slow.ts", import.meta.url))
const held = fileURLToPath(new URL("../fixtures/trainers/steady-held.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-serve-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const token = "serve-join-test-token-0123456789"
const tokenFile = join(dir, "token")
writeFileSync(tokenFile, `${token}\n`)
const wrongTokenFile = join(dir, "wrong-token")
writeFileSync(wrongTokenFile, "not-the-run-token-at-all\n")

type Proc = CliProcess

const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
})

const cohort = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Proc => startCli(args, { cwd: dir, env, started: children })

// The header is on stdout, or on stderr under --json.
const joinLine = (serve: Proc): string => /cohort serve: join with: (.* join .*)\n/.exec(serve.out() + serve.err())?.[1] ?? ""
const urlOf = (serve: Proc): string => /listening on (ws:\/\/\S+) for/.exec(serve.out() + serve.err())?.[1] ?? ""

interface Summary {
  readonly exitCode: number
  readonly epochs: ReadonlyArray<{ readonly samplesCommitted: number; readonly lost: number; readonly duplicated: number }>
  readonly deaths: ReadonlyArray<{
    readonly rank: number
    readonly detector: string
    readonly cause: string
    readonly redistributed: boolean
  }>
  readonly refusals?: Readonly<Record<string, number>>
  readonly runDir: string
}

const audits = (summary: Summary) => summary.epochs.map((e) => [e.samplesCommitted, e.lost, e.duplicated])

describe(`cohort serve and cohort join over 127.0.0.1 (${runtime})`, () => {
  // The first three tests mostly wait on their processes, each on its own port and folders: they
  // run side by side. The refusals test, whose run has a 3 s heartbeat timeout, runs alone after them.
  it.concurrent("serve prints the join command; 4 joins (one started before serve, one by --rank-from-env, two auto) complete with clean audits; the made token is mode 0600", async () => {
    const port = await freePort()
    const url = `ws://127.0.0.1:${port}/`
    // Started first: the coordinator is not up yet, which is not an error.
    const early = cohort(
      ["join", url, "--trainer", steady, "--token-file", tokenFile, "--rank-from-env", "INDEX", "--save-dir", "save-early"],
      { INDEX: "3" }
    )
    await new Promise((resolve) => setTimeout(resolve, 1500))
    const serve = cohort([
      "serve",
      "--trainer",
      steady,
      "--world-size",
      "4",
      "--epochs",
      "2",
      "--listen",
      `127.0.0.1:${port}`,
      "--token-file",
      tokenFile,
      "--out",
      "runs",
      "--json"
    ])
    await waitFor(() => joinLine(serve) !== "", 60_000, "serve's join line")
    expect(serve.err()).toContain(
      `cohort serve: join with: ${cliCommand(dir)} join ${url} --trainer ${steady} --token-file ${tokenFile} --rank auto\n`
    )
    const autos = [0, 1, 2].map((i) => cohort(["join", url, "--trainer", steady, "--token-file", tokenFile, "--save-dir", `save-${i}`]))
    const codes = await Promise.all([early, ...autos].map((p) => p.exit))
    expect(await serve.exit).toBe(0)
    expect(codes).toEqual([0, 0, 0, 0])
    expect(early.err()).toContain(`cohort join: joined ${url} as rank 3 of 4\n`)
    expect(autos.map((p) => Number(/as rank (\d) of 4/.exec(p.err())?.[1])).sort()).toEqual([0, 1, 2])
    const summary = JSON.parse(serve.out()) as Summary
    expect(audits(summary)).toEqual([
      [4800, 0, 0],
      [4800, 0, 0]
    ])
    expect(summary.deaths).toEqual([])
    expect(summary.refusals).toEqual({})
    // No token was made: the given one was used.
    expect(() => statSync(join(dir, summary.runDir, "token"))).toThrow()

    // Without a token file or COHORT_TOKEN, serve makes one: 22 characters, mode 0600.
    const made = cohort(["serve", "--trainer", steady, "--world-size", "1", "--epochs", "1", "--out", "runs"])
    await waitFor(() => joinLine(made) !== "", 60_000, "serve's join line")
    const madeFile = /--token-file (\S+) --rank auto/.exec(joinLine(made))?.[1] ?? ""
    expect(made.out()).toContain(`cohort serve: token in ${madeFile} (mode 0600)\n`)
    expect(statSync(madeFile).mode & 0o777).toBe(0o600)
    expect(readFileSync(madeFile, "utf8")).toMatch(/^[A-Za-z0-9_-]{22}\n$/)
    const one = cohort(["join", urlOf(made), "--trainer", steady, "--token-file", madeFile, "--rank", "0", "--save-dir", "save-made"])
    expect([await one.exit, await made.exit]).toEqual([0, 0])
    // Serve's own header comes first, then the run's timestamped lines, its `started` line first.
    const madeLines = made.out().split("\n")
    const header = madeLines.findIndex((line) => line.startsWith("cohort serve: join with: "))
    const started = madeLines.findIndex((line) => /^\[\s*\d+\.\ds\] run \w+: 1 rank as joining ranks over WebSocket/.test(line))
    expect([header >= 0, started > header, madeLines.findIndex((line) => line.startsWith("["))]).toEqual([true, true, started])
    // The join rank held the checkpoint role: its --save-dir has the trainer's save and Cohort's model.
    const checkpoint = join(dir, "save-made", "checkpoints", "v0")
    expect(JSON.parse(readFileSync(join(checkpoint, "steady.json"), "utf8"))).toMatchObject({ rank: 0 })
    const model = await SavedModel.read(checkpoint)
    expect(model._tag === "Model" && [model.meta.epoch, model.meta.rank]).toEqual([0, 0])
  }, 240_000)

  it.concurrent("SIGTERM on a join (a pod being stopped): the rank leaves gracefully after its batch and exits 0; the run goes on without a death, audits clean", async () => {
    // 40 ms a batch (steady-held.ts) until rank 1 has left, then 4 ms: rank 0 trains the rest of
    // the run alone, and it need not be slow for that.
    const holdFile = join(dir, "hold-term")
    writeFileSync(holdFile, "")
    const hold = { COHORT_TEST_HOLD: holdFile }
    const serve = cohort(
      ["serve", "--trainer", held, "--world-size", "2", "--epochs", "2", "--token-file", tokenFile, "--out", "runs", "--json"],
      hold
    )
    const url = await servedUrl(serve)
    const ranks = [0, 1].map((rank) =>
      cohort(["join", url, "--trainer", held, "--token-file", tokenFile, "--rank", String(rank), "--save-dir", `term-save-${rank}`], hold)
    )
    await waitFor(() => / rank 1 epoch 0: \d+ samples done/.test(serve.err()), 90_000, "rank 1's progress")
    // kill(1), not ChildProcess.kill: under Deno that reports the child as killed by the signal
    // even when it handled it and exited.
    spawnSync("kill", ["-TERM", String(ranks[1]!.child.pid)])
    const leftCode = await ranks[1]!.exit
    unlinkSync(holdFile)
    expect([leftCode, await ranks[0]!.exit, await serve.exit]).toEqual([0, 0, 0])
    expect(ranks[1]!.err()).toContain("cohort join: SIGTERM: leaving the run after the current batch")
    const summary = JSON.parse(serve.out()) as Summary & {
      readonly leaves: ReadonlyArray<{ readonly rank: number; readonly kind: string }>
    }
    expect(summary.deaths).toEqual([])
    expect(summary.leaves.map((leave) => [leave.rank, leave.kind])).toEqual([[1, "graceful"]])
    expect(summary.epochs.every((e) => e.lost === 0 && e.duplicated === 0)).toBe(true)
  }, 180_000)

  it.concurrent("at the failure limit a join rank saves into its save folder (without --save-dir: ./cohort-save/<runId>) on ShutdownWithSave, says where, and exits 0; serve exits 1", async () => {
    const serve = cohort([
      "serve",
      "--trainer",
      slow,
      "--world-size",
      "2",
      "--epochs",
      "15",
      "--failure-limit",
      "1",
      "--token-file",
      tokenFile,
      "--out",
      "runs",
      "--json"
    ])
    const url = await servedUrl(serve)
    const ranks = [0, 1].map((rank) =>
      cohort([
        "join",
        url,
        "--trainer",
        slow,
        "--token-file",
        tokenFile,
        "--rank",
        String(rank),
        ...(rank === 0 ? [] : ["--save-dir", `limit-save-${rank}`])
      ])
    )
    await waitFor(() => / rank 1 epoch 0: \d+ samples done/.test(serve.err()), 90_000, "rank 1's progress")
    ranks[1]!.child.kill("SIGKILL")
    expect([await ranks[0]!.exit, await serve.exit]).toEqual([0, 1])
    const summary = JSON.parse(serve.out()) as Summary & {
      readonly saves: { readonly saved: ReadonlyArray<number>; readonly notSaved: ReadonlyArray<number> }
    }
    // The default folder is the run's own, named by the run id the welcome carried.
    const saveDir = join(dir, "cohort-save", basename(summary.runDir), "rank0")
    const saved = JSON.parse(readFileSync(join(saveDir, "cohort-saved.json"), "utf8")) as { rank: number; reason: string }
    expect([saved.rank, saved.reason]).toEqual([0, "FailureLimitReached"])
    expect(JSON.parse(readFileSync(join(saveDir, "steady.json"), "utf8"))).toMatchObject({ rank: 0 })
    expect(ranks[0]!.out() + ranks[0]!.err()).toMatch(
      new RegExp(
        `cohort join: rank 0 saved its state under /\\S*/cohort-save/${basename(summary.runDir)}/rank0 \\(FailureLimitReached\\)\n`
      )
    )
    expect(summary.saves).toEqual({ saved: [0], notSaved: [] })
  }, 180_000)

  it.concurrent("bad input: a short token, a listen without a port, an empty token, a bad URL or rank; each one line and exit 2; a run nobody joins ends at the formation timeout with exit 3", async () => {
    const shortFile = join(dir, "short")
    writeFileSync(shortFile, "abc\n")
    const cases: ReadonlyArray<[ReadonlyArray<string>, Record<string, string>, string]> = [
      [["serve", "--token-file", shortFile], {}, `cohort: the token in ${shortFile} is 3 characters; a run token needs at least 16\n`],
      [["serve"], { COHORT_TOKEN: "" }, "cohort: the token in COHORT_TOKEN is 0 characters; a run token needs at least 16\n"],
      [["serve", "--listen", "0.0.0.0"], {}, "cohort: --listen expects HOST:PORT (e.g. 127.0.0.1:0 or [::1]:9000), got '0.0.0.0'\n"],
      [
        ["join", "ws://127.0.0.1:9/"],
        { COHORT_TOKEN: "" },
        "cohort: the token in COHORT_TOKEN is 0 characters; a run token needs at least 16\n"
      ],
      [
        ["join", "http://example.org/x"],
        {},
        "cohort: the URL must be ws://HOST:PORT/ or wss://HOST:PORT/ as cohort serve prints it, got 'http://example.org/x'; try ws://example.org/\n"
      ],
      [
        ["join", "https://127.0.0.1:9443/"],
        {},
        "cohort: the URL must be ws://HOST:PORT/ or wss://HOST:PORT/ as cohort serve prints it, got 'https://127.0.0.1:9443/'; try wss://127.0.0.1:9443/\n"
      ],
      [
        ["join", "ws://127.0.0.1:9/", "--token-file", tokenFile, "--rank", "-1"],
        {},
        "cohort: --rank must be an integer >= 0 or auto, got '-1'\n"
      ],
      [
        ["join", "ws://127.0.0.1:9/", "--token-file", tokenFile, "--coordinator-reconnect-ms", "0"],
        {},
        "cohort: --coordinator-reconnect-ms must be an integer >= 1, got '0'\n"
      ]
    ]
    // Side by side: each is a process start and nothing more.
    const ran = cases.map(([args, env]) => cohort(args, env))
    for (const [i, p] of ran.entries()) expect([await p.exit, p.err()]).toEqual([2, cases[i]![2]])
    // Nobody joins within the formation timeout: the run ends without training, exit 3.
    const lonely = cohort([
      "serve",
      "--trainer",
      steady,
      "--world-size",
      "2",
      "--formation-timeout-ms",
      "1000",
      "--token-file",
      tokenFile,
      "--out",
      "runs"
    ])
    expect([await lonely.exit, lonely.err()]).toEqual([3, "cohort: the run failed: formation: ranks 0, 1 did not join within 1000 ms\n"])
    // Its journal ends with the failure; report (text and page) and resume say so, with no resume hint.
    const runDir = join("runs", /run (\w+) listening/.exec(lonely.out())?.[1] ?? "")
    const journal = readFileSync(join(dir, runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string })
    expect(journal.map((e) => e.type)).toEqual(["started", "listening", "failed"])
    expect(journal[2]).toMatchObject({
      type: "failed",
      stage: "formation",
      reason: "ranks 0, 1 did not join within 1000 ms",
      formed: false
    })
    const failedLine =
      "cohort: the run failed at formation: ranks 0, 1 did not join within 1000 ms; nothing was trained: there is nothing to resume\n"
    // report, its page and resume only read the run: side by side.
    const report = cohort(["report", runDir])
    const page = cohort(["report", "--html", runDir])
    const resumed = cohort(["resume", runDir])
    expect([await report.exit, report.err()]).toEqual([3, failedLine])
    expect(report.out()).toMatch(/\noutcome: failed at formation \(\d+\.\d s into the run\): nothing was trained\n/)
    expect([await page.exit, page.err()]).toEqual([3, failedLine])
    expect([await resumed.exit, resumed.err()]).toEqual([
      2,
      `cohort: resume: nothing to resume: the run failed at formation: ranks 0, 1 did not join within 1000 ms; run ${runDir.slice(5)} trained nothing\n`
    ])
  }, 150_000)

  it("refusals: a wrong token, a rank over the world size, a second connection for a live rank, a join after formation and a dead rank's join each get one line, their exit code and close code, and are counted; the run is unharmed", async () => {
    // 15 epochs of about 2-3 s while the hold file exists (steady-held.ts): the run outlasts the
    // joins started after it formed (each command takes seconds to start on a loaded machine);
    // once the last join was refused the file goes and the remaining epochs take 4 ms a batch.
    const holdFile = join(dir, "hold-refusals")
    writeFileSync(holdFile, "")
    const hold = { COHORT_TEST_HOLD: holdFile }
    const serve = cohort(
      [
        "serve",
        "--trainer",
        held,
        "--world-size",
        "3",
        "--epochs",
        "15",
        "--heartbeat-timeout-ms",
        "3000",
        "--token-file",
        tokenFile,
        "--out",
        "runs",
        "--json"
      ],
      hold
    )
    const url = await servedUrl(serve)
    const base = (rank: string, file = tokenFile, save = `save-r${rank}`) => [
      "join",
      url,
      "--trainer",
      held,
      "--token-file",
      file,
      "--rank",
      rank,
      "--save-dir",
      save,
      "--connect-timeout-ms",
      "30000"
    ]
    const refused = async (args: ReadonlyArray<string>): Promise<[number | null, string]> => {
      const p = cohort(args, hold)
      return [await p.exit, p.err()]
    }
    expect(await refused(base("0", wrongTokenFile))).toEqual([10, `cohort join: refused by ${url}: wrong token (close code 4001)\n`])
    expect(await refused(base("3"))).toEqual([14, `cohort join: refused by ${url}: rank out of range (close code 4002)\n`])
    const zero = cohort(base("0"), hold)
    await waitFor(() => zero.err().includes("as rank 0"), 60_000, "rank 0's join")
    expect(await refused(base("0"))).toEqual([11, `cohort join: refused by ${url}: rank taken (close code 4003)\n`])
    const one = cohort(base("1"), hold)
    const two = cohort(base("2"), hold)
    await waitFor(() => serve.err().includes("formed: every one of the 3 ranks joined"), 60_000, "formation")
    const late = refused([
      "join",
      url,
      "--trainer",
      held,
      "--token-file",
      tokenFile,
      "--save-dir",
      "save-late",
      "--connect-timeout-ms",
      "30000"
    ])
    // Rank 2 is killed mid-epoch: declared dead, its work moves, and it cannot come back.
    await waitFor(() => / rank 2 epoch 0: \d+ samples done/.test(serve.err()), 60_000, "rank 2's progress")
    two.child.kill("SIGKILL")
    expect(await late).toEqual([12, `cohort join: refused by ${url}: the run already formed (close code 4010)\n`])
    await waitFor(() => serve.err().includes("rank 2 lost"), 30_000, "rank 2's death")
    expect(await refused(base("2"))).toEqual([13, `cohort join: refused by ${url}: the rank was declared dead (close code 4011)\n`])
    // Every join was refused while the run trained: the rest of the run need not be slow.
    unlinkSync(holdFile)
    expect([await zero.exit, await one.exit, await serve.exit]).toEqual([0, 0, 0])
    const summary = JSON.parse(serve.out()) as Summary
    expect(audits(summary)).toEqual(Array.from({ length: 15 }, () => [4800, 0, 0]))
    expect(summary.deaths.map((d) => [d.rank, d.detector, d.cause, d.redistributed])).toEqual([
      [2, "supervisor", "disconnected (close code 1006)", true]
    ])
    expect(summary.refusals).toEqual({ 4001: 1, 4002: 1, 4003: 1, 4010: 1, 4011: 1 })
    const journal = readFileSync(join(dir, summary.runDir, "events.ndjson"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; closeCode?: number; address?: string })
    expect(journal.filter((e) => e.type === "refused").map((e) => [e.closeCode, e.address])).toEqual([
      [4001, "127.0.0.1"],
      [4002, "127.0.0.1"],
      [4003, "127.0.0.1"],
      [4010, "127.0.0.1"],
      [4011, "127.0.0.1"]
    ])
    expect(serve.err()).toMatch(/\] join refused with 4001 \(wrong token\) from 127\.0\.0\.1\n/)
  }, 360_000)
})
