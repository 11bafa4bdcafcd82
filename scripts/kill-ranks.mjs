#!/usr/bin/env node
// Real faults for the child-process ring (`--transport process --backend ring`): each try starts
// `cohort run` under a runtime, waits until the run formed and a rank holds its area file open
// (file rounds underway), SIGKILLs one rank (or the launcher itself, `--victim launcher`) at a random
// instant, and checks what is left: the run ends (exit 0 when a rank was killed), every epoch's
// audit is exact (lost 0, duplicated 0), and no folder of the run stays in memory (`cohort-*` under
// /dev/shm) once the next launch swept. Prints one line a try and a summary; exits 1 on any failure.
//
//   node scripts/kill-ranks.mjs [--runtime node|bun|deno] [--tries N] [--victim rank|launcher]
//     [--world-size N] [--epochs N, default 5] [--seed N]
//     [--area-mb N: through the API with ringAreaMemoryMb N; 0 keeps every round on the sockets]
import { spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const arg = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`)
  return at === -1 ? fallback : process.argv[at + 1]
}
const runtime = arg("runtime", "node")
const tries = Number(arg("tries", "20"))
const victim = arg("victim", "rank")
const worldSize = Number(arg("world-size", "3"))
const epochs = arg("epochs", "5")
const areaMb = arg("area-mb", undefined)
let seed = Number(arg("seed", String(Date.now() % 100000)))
const random = () => {
  // A printed seed makes a failing try repeatable in its instants.
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
}
const cli = fileURLToPath(new URL("../bin/cohort.mjs", import.meta.url))
const trainer = fileURLToPath(new URL("../test/fixtures/trainers/drifting.ts", import.meta.url))
const shm = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const childrenOf = (parent) =>
  readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
        return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1] === String(parent)
      } catch {
        return false
      }
    })
const safeList = (path) => {
  try {
    return readdirSync(path)
  } catch {
    return []
  }
}

/** The CLI's run. */
const cliArgs = (out) => [
  ...(runtime === "deno" ? ["run", "-A"] : runtime === "bun" ? ["--bun"] : []),
  cli,
  "run",
  "--trainer",
  trainer,
  ...["--transport", "process", "--backend", "ring", "--world-size", String(worldSize), "--epochs", epochs, "--out", out, "--json"]
]
/** The same run through the API with `ringAreaMemoryMb` (scripts/kill-ranks-run.ts). */
const apiArgs = (out) => [
  ...(runtime === "deno" ? ["run", "-A"] : runtime === "bun" ? [] : ["--import", "tsx"]),
  fileURLToPath(new URL("./kill-ranks-run.ts", import.meta.url)),
  ...[out, trainer, String(worldSize), areaMb, epochs]
]

const oneTry = async (index) => {
  const out = mkdtempSync(join(tmpdir(), "kill-ranks-"))
  const command = runtime === "node" ? process.execPath : runtime
  const args = areaMb !== undefined ? apiArgs(out) : cliArgs(out)
  const launcher = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  launcher.stdout.on("data", (chunk) => (stdout += chunk))
  launcher.stderr.on("data", (chunk) => (stderr += chunk))
  const exited = new Promise((resolve) => launcher.once("exit", (code, signal) => resolve({ code, signal })))
  const started = Date.now()
  // This run's own ranks (other runs may share the machine): all started, and unless the run keeps
  // to the sockets, one of them holding an area file open.
  const ready = () => {
    const ranks = childrenOf(launcher.pid).filter(isRank)
    const formed = listRecursive(out).some(
      (file) => file.endsWith("events.ndjson") && readSafe(join(out, file)).includes('"type":"formed"')
    )
    return formed && ranks.length === worldSize && (areaMb === "0" || ranks.some((pid) => folderOf(pid) !== undefined))
  }
  while (!ready() && Date.now() - started < 60_000 && launcher.exitCode === null) await sleep(20)
  await sleep(20)
  // Within the run's first epochs: a drifting run of 3 ranks trains an epoch in 0.3 to 1 s.
  const delayMs = Math.round(random() * 800)
  await sleep(delayMs)
  // Only the ranks: under Node the launcher has other children too (esbuild's service); the ranks run a
  // bundle (`rank-entry.*.mjs`) under Node, `rank-process.ts` itself under Bun and Deno.
  const ranks = childrenOf(launcher.pid).filter(isRank)
  const folder = ranks.map(folderOf).find((found) => found !== undefined)
  const target = victim === "launcher" ? launcher.pid : ranks[Math.floor(random() * ranks.length)]
  if (target !== undefined) spawnSync("kill", ["-KILL", String(target)])
  if (victim === "launcher") for (const pid of ranks) await waitGone(pid, 30_000)
  const end = await Promise.race([exited, sleep(120_000).then(() => ({ code: "timeout" }))])
  const problems = []
  if (end.code === "timeout") {
    problems.push("did not end within 120 s")
    spawnSync("kill", ["-KILL", String(launcher.pid)])
  }
  if (victim === "rank" && target === undefined) problems.push("no rank to kill (the run ended first?)")
  if (victim === "rank") problems.push(...auditProblems(end, stdout, stderr))
  // A launch sweeps what a dead one left: a SIGKILLed launcher's folder goes at the next.
  // Other runs on this machine may have folders there too: only this run's (its ranks' open files) counts.
  const left = folder !== undefined && existsSync(folder) ? [folder] : []
  const leftInRun = listRecursive(out).filter((file) => /(\.sock|area-\d+-\d+\.f32)$/.test(file))
  if (victim === "rank" && left.length > 0) problems.push(`left in ${shm}: ${left.join(", ")}`)
  if (leftInRun.length > 0) problems.push(`left in the run folder: ${leftInRun.join(", ")}`)
  console.log(
    `${runtime} try ${index}: killed ${victim} ${target} (folder ${folder ?? "unknown"}) ${delayMs} ms after its ranks were ready; end ${end.code ?? end.signal}; ${problems.length === 0 ? "ok" : problems.join("; ")}${victim === "launcher" ? `; left in ${shm}: ${left.join(", ") || "nothing"}` : ""}`
  )
  rmSync(out, { recursive: true, force: true })
  return { problems, left }
}

const auditProblems = (end, stdout, stderr) => {
  let result
  try {
    // The CLI prints the whole result as JSON; the API run (kill-ranks-run.ts) one line of it last.
    result = stdout.trimStart().startsWith("{\n") ? JSON.parse(stdout) : JSON.parse(stdout.trim().split("\n").at(-1))
  } catch {
    return [`no JSON result (exit ${end.code}): ${stderr.slice(-400)}`]
  }
  const problems = []
  if (result.exitCode !== 0) problems.push(`exitCode ${result.exitCode} (${result.outcome?.type ?? JSON.stringify(result.outcome)})`)
  for (const epoch of result.epochs ?? [])
    if (epoch.lost !== 0 || epoch.duplicated !== 0 || epoch.samplesCommitted !== epoch.epochSamples)
      problems.push(
        `epoch ${epoch.epoch}: committed ${epoch.samplesCommitted}/${epoch.epochSamples} lost ${epoch.lost} duplicated ${epoch.duplicated}`
      )
  if (!(result.deaths ?? []).some((death) => death.cause === "killed by SIGKILL"))
    problems.push(`no death by SIGKILL recorded (deaths: ${JSON.stringify((result.deaths ?? []).map((d) => d.cause))})`)
  if ((result.epochs ?? []).length !== Number(epochs)) problems.push(`${(result.epochs ?? []).length} epochs audited`)
  return problems
}
const listRecursive = (path) => {
  try {
    return readdirSync(path, { recursive: true, encoding: "utf8" })
  } catch {
    return []
  }
}
const readSafe = (path) => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return ""
  }
}
const isRank = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").match(/rank-entry|rank-process/) !== null
  } catch {
    return false
  }
}
/** The memory folder whose files process `pid` holds open, if any. */
const folderOf = (pid) => {
  for (const fd of safeList(`/proc/${pid}/fd`)) {
    try {
      const match = /^(.*\/cohort-[^/]+)\//.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (match !== null && match[1].startsWith(shm)) return match[1]
    } catch {}
  }
  return undefined
}
const waitGone = async (pid, ms) => {
  const until = Date.now() + ms
  while (Date.now() < until && existsSync(`/proc/${pid}`)) await sleep(50)
}

console.log(`kill-ranks: ${runtime}, ${tries} tries, victim ${victim}, seed ${seed}`)
let failed = 0
for (let i = 0; i < tries; i++) if ((await oneTry(i)).problems.length > 0) failed += 1
console.log(`kill-ranks: ${runtime}: ${tries - failed}/${tries} tries clean`)
process.exit(failed === 0 ? 0 : 1)
