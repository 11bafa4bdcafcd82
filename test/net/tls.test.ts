// A served run over `wss://` across hosts made of network namespaces (harness: ./netns.ts): the
// coordinator in A with a certificate from a private CA made here with openssl, ranks in B. One
// rank trusts the CA and reaches A through a relay in B that records every byte of its link;
// the other pins the fingerprint `serve` printed. A rank given another CA, and one given another
// fingerprint, each refuse the server in one line with exit 18. The capture holds neither the
// token nor any frame in clear. Off loopback without TLS, `serve` prints its warning line; on
// loopback it does not.
//
// Every process is the CLI under the runtime running this file (the server is `ws` on
// `node:https`, `Bun.serve` or `Deno.serve`; the clients differ per runtime too), so it runs on
// all three. One small run: 2 ranks, 1 epoch, about 3 s of training. Linux and root only.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { RunResult } from "../../actors/record/run-types.ts"
import * as Runtime from "../../src/platform/detect.ts"
import { clearTextWarning } from "../../src/cli/serve.ts"
import { makeTestCerts } from "../tls-certs.ts"
import * as Netns from "./netns.ts"

const runtime = Runtime.detect()
const cli = fileURLToPath(new URL("../../bin/cohort.mjs", import.meta.url))
const trainer = fileURLToPath(new URL("../fixtures/trainers/steady-slow.ts", import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), "cohort-net-tls-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))
const token = "net-tls-token-5e81c0d2b7a94f"
const tokenFile = join(scratch, "token")
writeFileSync(tokenFile, token, { mode: 0o600 })

const port = 7100
const relayPort = 7101
const lifetimeMs = 90_000

describe(`cohort serve over wss:// across namespaces (${runtime})`, () => {
  it(
    "ranks that trust the CA or pin the fingerprint train; a wrong CA or pin is refused (exit 18); the link's bytes hold no token and no frame in clear",
    async () => {
      const network = Netns.create(["a", "b"])
      const certs = makeTestCerts([network.address("a")])
      try {
        const out = join(scratch, "runs")
        const capture = join(scratch, "link.bin")
        const serve = network.script(
          "a",
          cli,
          [
            "serve",
            "--trainer",
            trainer,
            "--world-size",
            "2",
            "--epochs",
            "1",
            "--heartbeat-timeout-ms",
            "5000",
            "--listen",
            `${network.address("a")}:${port}`,
            "--token-file",
            tokenFile,
            "--out",
            out,
            "--tls-cert",
            certs.certFile,
            "--tls-key",
            certs.keyFile
          ],
          { lifetimeMs }
        )
        const printed = await serve.waitFor(/TLS certificate SHA-256 fingerprint (\S+)/, 20_000)
        expect(printed[1]).toBe(certs.fingerprint256)
        await serve.waitFor(/join with: .* --fingerprint \S+ --rank auto/, 5_000)
        const url = `wss://${network.address("a")}:${port}/`
        await network.relay("b", {
          listen: `127.0.0.1:${relayPort}`,
          target: `${network.address("a")}:${port}`,
          delayMs: 0,
          jitterMs: 0,
          lifetimeMs,
          recordFile: capture
        })
        const join_ = (name: string, target: string, rank: string, trust: ReadonlyArray<string>) =>
          network.script(
            "b",
            cli,
            ["join", target, "--trainer", trainer, "--token-file", tokenFile, "--rank", rank, "--save-dir", join(scratch, name), ...trust],
            { lifetimeMs }
          )
        const wrongCa = join_("wrong-ca", url, "0", ["--ca", certs.otherCaFile])
        const wrongPin = join_("wrong-pin", url, "1", ["--fingerprint", "AB".repeat(32)])
        expect(await wrongCa.exited).toBe(18)
        expect(await wrongPin.exited).toBe(18)
        const said = (proc: Netns.Proc) => `${proc.stdout()}${proc.stderr()}`.trim().split("\n")
        expect(said(wrongCa)).toHaveLength(1)
        expect(said(wrongCa)[0]).toMatch(
          new RegExp(`^cohort join: refused by ${url}: the server's certificate failed the check: not trusted: .* \\(close code 1015\\)$`)
        )
        expect(said(wrongPin)).toEqual([
          `cohort join: refused by ${url}: the server's certificate failed the check: it has fingerprint ${certs.fingerprint256}, not the pinned ${"AB:".repeat(31)}AB (close code 1015)`
        ])
        // Through the recording relay, trusting the CA (the certificate names 127.0.0.1 too).
        const viaRelay = join_("ca", `wss://127.0.0.1:${relayPort}/`, "0", ["--ca", certs.caFile])
        const pinned = join_("pin", url, "1", ["--fingerprint", certs.fingerprint256])
        expect(await serve.exited, `${serve.stdout()}${serve.stderr()}`).toBe(0)
        expect([await viaRelay.exited, await pinned.exited]).toEqual([0, 0])
        expect(`${serve.stdout()}${serve.stderr()}`).not.toContain(clearTextWarning)
        // The refused ranks never reached the coordinator: no join of theirs was refused or taken.
        const [runId] = readdirSync(out)
        const summary = JSON.parse(readFileSync(join(out, runId!, "summary.json"), "utf8")) as RunResult
        expect(summary.deaths).toEqual([])
        expect(summary.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated])).toEqual([[0, 4800, 0, 0]])
        const events = readFileSync(join(out, runId!, "events.ndjson"), "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as { type: string })
        expect(events.filter((e) => e.type === "refused")).toEqual([])
        // The capture: a whole run's traffic (a small model: about 6 KB), all of it TLS records (a
        // handshake record first).
        expect(existsSync(capture)).toBe(true)
        const bytes = readFileSync(capture)
        expect(bytes.length).toBeGreaterThan(4_000)
        expect([bytes[0], bytes[1]]).toEqual([0x16, 0x03])
        const text = bytes.toString("latin1")
        for (const clear of [token, "welcome", "runId", "epochSamples", '"token"', runId!]) expect(text).not.toContain(clear)
        console.log(
          `[net ${runtime}] tls: ${bytes.length} bytes captured on the relayed link, none in clear; refusals: ${JSON.stringify([said(wrongCa)[0], said(wrongPin)[0]])}`
        )
      } finally {
        network.destroy()
        certs.remove()
      }
    },
    lifetimeMs + 10_000
  )

  it("over ws:// on a non-loopback address serve prints the warning line once; on loopback it does not", async () => {
    const network = Netns.create(["a"])
    try {
      const serveOn = (listen: string) =>
        network.script(
          "a",
          cli,
          [
            "serve",
            "--trainer",
            trainer,
            "--world-size",
            "1",
            "--listen",
            listen,
            "--token-file",
            tokenFile,
            "--out",
            join(scratch, `warn-${listen.replace(/[^0-9]/g, "")}`),
            "--formation-timeout-ms",
            "1000"
          ],
          { lifetimeMs: 30_000 }
        )
      const exposed = serveOn(`${network.address("a")}:${port}`)
      const loopback = serveOn(`127.0.0.1:${port}`)
      // Nobody joins: each fails to form (exit 3) after a second.
      expect([await exposed.exited, await loopback.exited]).toEqual([3, 3])
      const count = (proc: Netns.Proc) => `${proc.stdout()}${proc.stderr()}`.split(clearTextWarning).length - 1
      expect(count(exposed)).toBe(1)
      expect(count(loopback)).toBe(0)
      expect(exposed.stdout()).toContain(`cohort serve: ${clearTextWarning}\n`)
    } finally {
      network.destroy()
    }
  }, 40_000)
})
