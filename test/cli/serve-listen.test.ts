// `cohort serve --listen 0.0.0.0:PORT`: the printed join command names an address of this host,
// not the wildcard it listens on (a real process of the command line, under the test's runtime).
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { networkInterfaces, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import { freePort, startCli } from "../cli-process.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "cohort-serve-listen-"))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 })
})

// What the test expects, from the same system call: the first IPv4 address that is not loopback.
const firstExternalIPv4 = (): string | undefined =>
  Object.values(networkInterfaces()).flatMap((entries) => entries ?? []).find((e) => !e.internal && e.family === "IPv4")?.address

describe(`cohort serve --listen 0.0.0.0 (${Runtime.detect()})`, () => {
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
    const joinLine = /cohort serve: join with: cohort join (\S+) /.exec(out)?.[1]
    if (address === undefined) {
      expect(out).toContain("0.0.0.0 listens on every address of this host")
    } else {
      expect(out).toContain(`cohort serve: 0.0.0.0 listens on every address of this host: ${address}`)
      expect(joinLine).toBe(`ws://${address}:${port}/`)
    }
    expect(out).not.toContain("cohort join ws://0.0.0.0")
  })
})
