// Cohort as a user gets it: the packed tarball (`npm pack`, which builds dist/ at `prepack`)
// installed into fresh projects in the system's temporary folder, outside this repository and
// without its node_modules, and run there: on Node (`npx cohort`; a `run()` script through tsx,
// as `.mts` because `npm init` types a project CommonJS), on Bun (`bun add`, `bun --bun x cohort`)
// and on Deno (`deno run -A npm:cohort` in the npm project, whose node_modules Deno uses). A `.ts`
// trainer in a folder with no package.json and a space in its path trains with worker and process
// ranks and bundles for a browser.
//
// Full tier only (test/package/): it installs from the npm registry and drives Bun and Deno itself,
// so it runs in the Node pass alone (vitest.config.ts leaves this folder out under Bun and Deno).
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort } from "../cli-process.ts"

const repoRoot = fileURLToPath(new URL("../../", import.meta.url))
const version = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }).version
// The runtimes' binaries come from this repository's dev dependencies; what they run resolves
// its packages from the consumer's own node_modules.
const bunBin = join(repoRoot, "node_modules/.bin/bun")
const denoBin = join(repoRoot, "node_modules/.bin/deno")

const work = mkdtempSync(join(tmpdir(), "cohort-consumer-"))
afterAll(() => rmSync(work, { recursive: true, force: true }))

// npm's own variables (a `npm run` above this test) and this repository's .bin folders must not
// reach the consumer's commands: they would point npm and npx back at the repository.
const env: Record<string, string> = Object.fromEntries(
  Object.entries(process.env).filter(
    (entry): entry is [string, string] =>
      entry[1] !== undefined && !/^npm_/i.test(entry[0]) && entry[0] !== "INIT_CWD" && entry[0] !== "NODE_PATH"
  )
)
env.PATH = (process.env.PATH ?? "")
  .split(":")
  .filter((dir) => !dir.includes("node_modules"))
  .join(":")

interface Ran {
  readonly code: number | null
  readonly out: string
  readonly err: string
}

/** Runs `command args` in `cwd`; resolves with its exit code and output (killed after `timeoutMs`). */
const sh = (command: string, args: ReadonlyArray<string>, cwd: string, timeoutMs = 180_000): Promise<Ran> =>
  new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, out, err })
    })
  })

/** `ran` exited 0; otherwise fails with its command's output. */
const ok = (ran: Ran, what: string): Ran => {
  if (ran.code !== 0) throw new Error(`${what} exited ${ran.code}:\n${ran.out}\n${ran.err}`)
  return ran
}

const lineTrainer = (typed: boolean): string =>
  readFileSync(join(repoRoot, "examples/line-trainer.ts"), "utf8")
    .replace(/^import type .*\n/m, typed ? `import type { Trainer, TrainerContext } from "cohort"\n` : "")
    .replace("(_context: TrainerContext): Trainer", typed ? "(_context: TrainerContext): Trainer" : "(_context: unknown)")
    .replace("trainBatch(indices)", typed ? "trainBatch(indices)" : "trainBatch(indices: Uint32Array)")
    .replace("setParams: (next)", typed ? "setParams: (next)" : "setParams: (next: Float32Array)")
    .replace("save: async (dir)", typed ? "save: async (dir)" : "save: async (dir: string)")

const runScript = [
  `import { run } from "cohort"`,
  ``,
  `const result = await run({ trainer: "./my-trainer.ts", worldSize: 2, epochs: 1, outDir: "runs" })`,
  `console.log(JSON.stringify({ exitCode: result.exitCode, audits: result.epochs.map((e) => [e.lost, e.duplicated]) }))`,
  ``
].join("\n")

const loose = join(work, "trainers with no package")
const looseTrainer = join(loose, "line.ts")
const npmProject = join(work, "npm-project")
const bunProject = join(work, "bun-project")

beforeAll(async () => {
  const packed = ok(await sh("npm", ["pack", "--pack-destination", work], repoRoot), "npm pack")
  const tarball = join(work, packed.out.trim().split("\n").at(-1)!)
  mkdirSync(loose)
  writeFileSync(looseTrainer, lineTrainer(false))
  for (const project of [npmProject, bunProject]) {
    mkdirSync(project)
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", version: "1.0.0", private: true }))
    writeFileSync(join(project, "my-trainer.ts"), lineTrainer(true))
    writeFileSync(join(project, "train.mts"), runScript)
  }
  ok(await sh("npm", ["install", "--no-audit", "--no-fund", tarball], npmProject), "npm install")
  ok(await sh(bunBin, ["add", tarball], bunProject), "bun add")
}, 600_000)

type Runtime = "node" | "bun" | "deno"

/** How a user starts the installed command under each runtime, and a `run()` script in TypeScript. */
const cohortCommand: Record<
  Runtime,
  { readonly project: string; readonly cli: ReadonlyArray<string>; readonly script: ReadonlyArray<string> }
> = {
  node: { project: npmProject, cli: ["npx", "cohort"], script: ["npx", "tsx", "train.mts"] },
  bun: { project: bunProject, cli: [bunBin, "--bun", "x", "cohort"], script: [bunBin, "train.mts"] },
  deno: { project: npmProject, cli: [denoBin, "run", "-A", "npm:cohort"], script: [denoBin, "run", "-A", "train.mts"] }
}

const audits = (stdout: string): unknown =>
  (JSON.parse(stdout) as { epochs: ReadonlyArray<{ lost: number; duplicated: number }> }).epochs.map((e) => [e.lost, e.duplicated])

// The runtimes and their cases run side by side (vitest's default of 5 at a time): each writes
// its own run folders, token file and bundle folder, and none waits on another.
describe.concurrent.each(["node", "bun", "deno"] as const)("the packed package installed outside the repository, on %s", (runtime) => {
  const { project, cli, script } = cohortCommand[runtime]
  const cohort = (args: ReadonlyArray<string>, cwd = project) => sh(cli[0]!, [...cli.slice(1), ...args], cwd)

  it("cohort --version names Cohort's version and the runtime", async () => {
    const ran = ok(await cohort(["--version"]), "cohort --version")
    expect(ran.out).toMatch(new RegExp(`^cohort ${version.replaceAll(".", "\\.")} \\(runtime: ${runtime} [^)]+\\)\n$`))
  }, 120_000)

  it("cohort demo --epochs 1 trains the bundled digits with a clean audit", async () => {
    const ran = ok(await cohort(["demo", "--epochs", "1", "--json", "--out", "runs"]), "cohort demo")
    expect(audits(ran.out)).toEqual([[0, 0]])
  }, 240_000)

  it("cohort run trains the project's .ts trainer on worker ranks, and a .ts trainer in a folder with no package.json (a space in its path) on process ranks", async () => {
    const mine = ok(
      await cohort(["run", "--trainer", "./my-trainer.ts", "--world-size", "2", "--epochs", "1", "--json", "--out", "runs"]),
      "cohort run (worker)"
    )
    expect(audits(mine.out)).toEqual([[0, 0]])
    const elsewhere = ok(
      await cohort([
        "run",
        "--trainer",
        looseTrainer,
        "--world-size",
        "2",
        "--epochs",
        "1",
        "--transport",
        "process",
        "--json",
        "--out",
        "runs"
      ]),
      "cohort run (process)"
    )
    expect(audits(elsewhere.out)).toEqual([[0, 0]])
  }, 240_000)

  it("a run() script in TypeScript imports the package and trains", async () => {
    const ran = ok(await sh(script[0]!, script.slice(1), project), "the run() script")
    expect(JSON.parse(ran.out.trim().split("\n").at(-1)!)).toEqual({ exitCode: 0, audits: [[0, 0]] })
  }, 240_000)

  it("cohort serve with two cohort joins completes with a clean audit", async () => {
    const port = await freePort()
    const tokenFile = join(project, `token-${runtime}`)
    writeFileSync(tokenFile, "consumer-test-token-0123456789ab\n")
    const serve = cohort([
      "serve",
      "--trainer",
      "./my-trainer.ts",
      "--world-size",
      "2",
      "--epochs",
      "1",
      "--listen",
      `127.0.0.1:${port}`,
      "--token-file",
      tokenFile,
      "--json",
      "--out",
      "runs"
    ])
    const joins = [0, 1].map(() =>
      cohort(["join", `ws://127.0.0.1:${port}/`, "--trainer", "./my-trainer.ts", "--token-file", tokenFile, "--save-dir", "saves"])
    )
    const [served, ...joined] = await Promise.all([serve, ...joins])
    expect(
      joined.map((j) => j.code),
      joined.map((j) => j.err).join("\n")
    ).toEqual([0, 0])
    expect(audits(ok(served!, "cohort serve").out)).toEqual([[0, 0]])
  }, 240_000)

  it("cohort bundle builds a browser rank from the .ts trainer in a folder with no package.json", async () => {
    const out = join(work, `browser-${runtime}`)
    ok(await cohort(["bundle", "--trainer", looseTrainer, "--out", out]), "cohort bundle")
    expect(readdirSync(out).sort()).toEqual(["cohort-rank.js", "index.html"])
  }, 120_000)
})

describe.concurrent("deno.json for JSR", () => {
  it("deno publish --dry-run passes: the exports and the fast type check of the public API", async () => {
    const ran = await sh(denoBin, ["publish", "--dry-run", "--allow-dirty"], repoRoot)
    expect(ran.code, ran.err).toBe(0)
    expect(ran.err + ran.out).toContain("Dry run complete")
  }, 180_000)
})
