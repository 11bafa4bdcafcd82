// The `cohort` command line as a child process of the test, under the runtime running the tests
// (Node, Bun, or Deno: `deno run -A`), with its output collected; and a free loopback port.
import { type ChildProcess, spawn } from "node:child_process"
import { rmSync } from "node:fs"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"
import { commandOf } from "../src/cli/event-text.ts"
import * as Runtime from "../src/platform/detect.ts"

const cli = fileURLToPath(new URL("../bin/cohort.mjs", import.meta.url))

/** How the CLI's hints name the command when started as `startCli` starts it from `cwd`: `node <path>/bin/cohort.mjs`, ... */
export const cliCommand = (cwd: string = process.cwd()): string =>
  commandOf({ script: cli, cwd, runtime: Runtime.detect(), viaNpx: process.env.npm_command === "exec" })

export interface CliProcess {
  readonly child: ChildProcess
  readonly out: () => string
  readonly err: () => string
  readonly exit: Promise<number | null>
}

/** Starts `cohort ...args` in `cwd` with `env` added to this process's; its children go into `started`. */
export const startCli = (
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: Record<string, string>; readonly started?: Array<ChildProcess> }
): CliProcess => {
  const child = spawn(process.execPath, [...(Runtime.detect() === "deno" ? ["run", "-A", cli] : [cli]), ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...options.env },
    cwd: options.cwd
  })
  options.started?.push(child)
  let out = ""
  let err = ""
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()))
  child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()))
  const exit = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  return { child, out: () => out, err: () => err, exit }
}

/** A TCP port free on 127.0.0.1 when asked (another process may take it before the test binds it). */
export const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port
      server.close(() => resolve(port))
    })
  })

/** Polls `what` every 50 ms until it holds; throws `timed out waiting for <label>` after `timeoutMs`. */
export const waitFor = async (what: () => boolean, timeoutMs: number, label: string): Promise<void> => {
  const until = Date.now() + timeoutMs
  while (!what()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${label}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * The URL `cohort serve` prints once it listens (`listening on ws://…/ for N ranks`, on stdout, or
 * on stderr under `--json`); waits up to 60 s for it.
 */
export const servedUrl = async (serve: CliProcess): Promise<string> => {
  const urlOf = (): string => /listening on (wss?:\/\/\S+) for/.exec(serve.out() + serve.err())?.[1] ?? ""
  await waitFor(() => urlOf() !== "", 60_000, "serve's URL")
  return urlOf()
}

/**
 * Removes a test's scratch folder, trying again every 200 ms for up to 5 s while a process that
 * just ended (a killed CLI's rank finishing its save) may still be writing into it: Deno's
 * `rmSync` does not take `maxRetries`. The last failure is thrown.
 */
export const removeDir = async (dir: string): Promise<void> => {
  for (let attempt = 0; ; attempt++) {
    try {
      rmSync(dir, { recursive: true, force: true })
      return
    } catch (error) {
      if (attempt >= 25) throw error
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }
}
