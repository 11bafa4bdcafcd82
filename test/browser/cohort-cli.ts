/**
 * The browser tests' `cohort` processes: each starts `bin/cohort.mjs` under Node (`start`), is
 * waited on by polling (`until`), and is killed when its file's tests end (`killStarted`); and
 * their headless Chromium (`requireChromium`, `launchChromium`).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { type Browser, chromium } from "playwright-core"

/** The repository's root folder. */
export const root = new URL("../..", import.meta.url).pathname
const cohort = join(root, "bin/cohort.mjs")
const children: Array<ChildProcess> = []

/** Starts `cohort ARGS` under Node; `exited` resolves with its exit code and everything it printed. */
export const start = (args: ReadonlyArray<string>) => {
  const child = spawn(process.execPath, [cohort, ...args], { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
  children.push(child)
  let output = ""
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  let ended = false
  const exited = new Promise<{ readonly code: number | null; readonly output: string }>((resolve) =>
    child.on("close", (code) => {
      ended = true
      resolve({ code, output })
    })
  )
  return { child, exited, output: () => output, ended: () => ended }
}

/** A started `cohort` process. */
export type Started = ReturnType<typeof start>

/** SIGKILLs every started process still running (for `afterAll`). */
export const killStarted = (): void => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
}

/**
 * Polls `read` every 100 ms until it gives a value; fails after `timeoutMs`, or at once when `run`
 * has ended, saying what it waited for and what `run` printed.
 */
export const until = async <A>(what: string, timeoutMs: number, read: () => A | undefined, run: Started): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = read()
    if (value !== undefined) return value
    const over = Date.now() > deadline ? `timed out after ${timeoutMs} ms` : run.ended() ? "the cohort process ended" : undefined
    if (over !== undefined) throw new Error(`${over} waiting for ${what}; it printed:\n${run.output()}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const chromiumPath = "/usr/bin/chromium"
/** The flags the machine notes give for headless Chromium as root with no outside network. */
const chromiumArgs = [
  "--headless=new",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** Fails, saying how to install it, when Debian's Chromium is missing (the browser tests never skip). */
export const requireChromium = (): void => {
  if (!existsSync(chromiumPath)) {
    throw new Error(`${chromiumPath} is missing: install Debian's chromium (apt-get install -y chromium), as .ci/run does`)
  }
}

/** Starts Debian's Chromium, headless, with `chromiumArgs`. */
export const launchChromium = (): Promise<Browser> => chromium.launch({ executablePath: chromiumPath, args: chromiumArgs })
