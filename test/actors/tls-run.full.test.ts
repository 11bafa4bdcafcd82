// `run({ transport: "websocket", tls })`: the coordinator serves its local rank processes over
// `wss://` and they pin its certificate's fingerprint (the rank's client differs per runtime, so
// this runs on all three). The certificate is made here with openssl; the key never reaches the
// journal.
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { makeTestCerts } from "../tls-certs.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const outDir = mkdtempSync(join(tmpdir(), "cohort-tls-run-"))
const certs = makeTestCerts()
afterAll(() => {
  rmSync(outDir, { recursive: true, force: true })
  certs.remove()
})

describe("a local WebSocket run over TLS", () => {
  it("its rank processes join over wss://, pinning the certificate; the audits are exact and the journal holds no key", async () => {
    const result = await Launcher.run({
      trainer: steady,
      worldSize: 2,
      epochs: 1,
      transport: "websocket",
      outDir,
      heartbeatTimeoutMs: 3000,
      heartbeatIntervalMs: 200,
      tickMs: 50,
      batchSize: 8,
      averageEverySteps: 4,
      tls: { cert: certs.cert, key: certs.key }
    })
    expect(result.exitCode).toBe(0)
    expect(result.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([[0, 4800, 0, 0]])
    const journal = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
    const events = journal
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(events[1]).toMatchObject({ type: "listening", url: expect.stringMatching(/^wss:\/\/127\.0\.0\.1:\d+\/$/) })
    expect(events[0]).toMatchObject({ type: "started", options: { tls: true } })
    expect(journal).not.toContain("PRIVATE KEY")
    expect(journal).not.toContain(certs.key.split("\n")[1]!)
  }, 60_000)
})
