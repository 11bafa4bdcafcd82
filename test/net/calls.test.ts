// Long trainer calls on served ranks across namespaces (harness: ./netns.ts, ./cluster.ts;
// docs/liveness.md, docs/liveness-links.md): a `save` that blocks its rank's only thread for 3x
// the heartbeat timeout is no death and its checkpoint is written, although the rank's resumable
// link hears nothing meanwhile and resumes after it; a `trainBatch` that never returns is declared
// within the stated bound (the heartbeat timeout after its last sign of life, whose pings stop
// `pingAfterSendMsDefault` after its last message, plus a tick).
//
// The coordinator is in host A, the rank that blocks in host B, the others in C. The ranks'
// threads sleep (Atomics.wait) rather than spin, so the two runs share the cores side by side.
// Node only (vitest.config.ts): the same calls run on every runtime's worker and process ranks in
// test/actors/liveness-calls.test.ts; this file adds the served path (the rank's link and its
// own watch of the coordinator) at about 30 s.
import { existsSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as WebSocket from "../../src/transport/web-socket.ts"
import * as Cluster from "./cluster.ts"
import * as Netns from "./netns.ts"

const runtime = Runtime.detect()
const slowSave = fileURLToPath(new URL("../fixtures/trainers/slow-save.ts", import.meta.url))
const endlessBatch = fileURLToPath(new URL("../fixtures/trainers/endless-batch.ts", import.meta.url))
const scratch = Cluster.scratch("cohort-calls-")
afterAll(() => rmSync(scratch.dir, { recursive: true, force: true }))
const heartbeatTimeoutMs = 3000
const tickMs = 100
const lifetimeMs = 100_000

describe(`long trainer calls on served ranks (${runtime})`, () => {
  it.concurrent(
    "every checkpoint's save blocks its rank 3x heartbeatTimeoutMs: no death, every checkpoint written, audits clean",
    async () => {
      const network = Netns.create(["a", "b", "c"])
      try {
        const saveMs = 3 * heartbeatTimeoutMs
        const { serve, ranks, out } = await Cluster.start(network, {
          scratch,
          name: "save",
          trainer: slowSave,
          worldSize: 3,
          epochs: 2,
          port: 7200,
          lifetimeMs,
          hostOf: (rank) => (rank === 0 ? "b" : "c"),
          // Every rank saves as slowly: whichever holds the checkpoint role blocks.
          serveArgs: ["--heartbeat-timeout-ms", String(heartbeatTimeoutMs), "--role-policy", "0"],
          env: { COHORT_TEST_SAVE_MS: String(saveMs) }
        })
        expect(await serve.exited, serve.stderr()).toBe(0)
        expect(await Promise.all(ranks.map((r) => r.exited))).toEqual([0, 0, 0])
        const { summary, events } = Cluster.readRun(out)
        expect(summary.deaths).toEqual([])
        expect(Cluster.audits(summary)).toEqual([
          [4800, 0, 0],
          [4800, 0, 0]
        ])
        expect(summary.alerts.filter((a) => a.class === "SaveTimeout" || a.class === "RankLost")).toEqual([])
        for (const version of [0, 1]) {
          expect(existsSync(join(scratch.dir, "save", "save-0", "checkpoints", `v${version}`, "steady.json"))).toBe(true)
        }
        const resumes = events.filter((e) => e.type === "resumed").map((e) => [e.rank, e.silentMs])
        console.log(
          `[calls ${runtime}] saves of ${saveMs} ms against heartbeatTimeoutMs ${heartbeatTimeoutMs}: no death; links resumed ${JSON.stringify(resumes)}`
        )
      } finally {
        network.destroy()
      }
    },
    lifetimeMs + 10_000
  )

  it.concurrent(
    "rank 1's trainBatch never returns: declared by heartbeat within heartbeatTimeoutMs + pingAfterSendMs + a tick of its block (2 s of margin); the others complete the epoch, audits clean",
    async () => {
      const network = Netns.create(["a", "b", "c"])
      const blockedFile = join(scratch.dir, "blocked-at")
      try {
        const { serve, ranks, out } = await Cluster.start(network, {
          scratch,
          name: "endless",
          trainer: endlessBatch,
          worldSize: 3,
          epochs: 1,
          port: 7201,
          lifetimeMs,
          hostOf: (rank) => (rank === 1 ? "b" : "c"),
          serveArgs: ["--heartbeat-timeout-ms", String(heartbeatTimeoutMs)],
          env: { COHORT_TEST_BLOCKED_FILE: blockedFile }
        })
        await serve.waitFor(/rank 1 lost/, 60_000)
        const declaredAtMs = Date.now()
        const blockedAtMs = Number(readFileSync(blockedFile, "utf8"))
        expect(await serve.exited, serve.stderr()).toBe(0)
        expect(await Promise.all([ranks[0]!.exited, ranks[2]!.exited])).toEqual([0, 0])
        ranks[1]!.kill("SIGKILL")
        const { summary } = Cluster.readRun(out)
        expect(summary.deaths.map((d) => [d.rank, d.detector])).toEqual([[1, "heartbeat"]])
        expect(Cluster.audits(summary)).toEqual([[4800, 0, 0]])
        const afterMs = declaredAtMs - blockedAtMs
        const boundMs = heartbeatTimeoutMs + WebSocket.pingAfterSendMsDefault + tickMs
        console.log(
          `[calls ${runtime}] endless trainBatch declared ${afterMs} ms after it blocked (bound ${boundMs} ms): ${summary.deaths[0]!.cause}`
        )
        expect(afterMs).toBeGreaterThan(heartbeatTimeoutMs - 1000)
        expect(afterMs).toBeLessThan(boundMs + 2000)
      } finally {
        network.destroy()
      }
    },
    lifetimeMs + 10_000
  )
})
