// A port already in use is one line and exit 3, for `serve --listen` and for `--dashboard`, on
// every runtime (each words the bind's error its own way).
import { createServer, type Server } from "node:net"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Cli from "../../src/cli/index.ts"
import * as ListenError from "../../src/platform/listen-error.ts"
import { capture, runMain, useScratch } from "./fixtures.ts"

const steady = fileURLToPath(new URL("../fixtures/trainers/steady.ts", import.meta.url))
const scratch = useScratch()
let taken: Server
let port = 0
beforeAll(async () => {
  taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", () => resolve()))
  port = (taken.address() as { readonly port: number }).port
})
afterAll(() => new Promise<void>((resolve) => taken.close(() => resolve())))

describe("a port already in use", () => {
  it("is told in the same words whatever the runtime's", () => {
    for (const message of [
      "listen EADDRINUSE: address already in use 127.0.0.1:8123",
      "Failed to start server. Is port 8123 in use?",
      "Address already in use (os error 98)"
    ])
      expect(ListenError.addressInUse(message)).toBe(true)
    expect(ListenError.addressInUse("listen EACCES: permission denied 0.0.0.0:80")).toBe(false)
  })

  it("serve --listen on it: one line on stderr, nothing on stdout, exit 3", async () => {
    const captured = capture()
    const code = await Cli.Serve.main(["--trainer", steady, "--listen", `127.0.0.1:${port}`, "--out", scratch()], captured.io)
    expect([code, captured.out()]).toEqual([Cli.ExitCode.unavailable, ""])
    expect(captured.err()).toBe(
      `cohort: the run could not start: cannot listen on 127.0.0.1:${port}: the address is already in use (another process listens on it); choose another port with --listen HOST:PORT (port 0: any free one)\n`
    )
  })

  it("--dashboard on it: one line, exit 3, and no run started", async () => {
    const { code, out, err } = await runMain(["demo", "--dashboard", String(port), "--out", scratch()])
    expect([code, out]).toEqual([Cli.ExitCode.unavailable, ""])
    expect(err).toBe(
      `cohort: the dashboard could not start on 127.0.0.1:${port}: the address is already in use (another process listens on it); choose another port with --dashboard PORT, or leave PORT out for a free one\n`
    )
  })
})
