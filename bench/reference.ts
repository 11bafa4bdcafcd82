/**
 * Reference points for the averaging bench: what a user would pick instead of Cohort for an
 * all-reduce among processes on this machine, timed the same way (`bench/reference/all_reduce.py`:
 * a barrier, then one all-reduce of a float32 vector; a round's time is the slowest rank's; median
 * and p90 of the timed rounds after the warm-up ones):
 *
 * - `gloo`: PyTorch's gloo backend over TCP on 127.0.0.1 (Debian's `python3-torch`);
 * - `mpi`: Open MPI with mpi4py (Debian's `openmpi-bin`, `python3-mpi4py`), its default transports
 *   (shared memory between processes of one host);
 * - `mpi tcp`: the same over TCP on loopback only (`--mca btl self,tcp`), the wire Cohort's direct
 *   links between processes use.
 *
 * A library that is not installed is left out (`undefined`), never a failure of the bench.
 *
 * Run alone: `node --import tsx bench/reference.ts [--ranks 8] [--params 407050,4000000]
 * [--rounds 40] [--warmup 5]`.
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { fmt, isMain, note, table } from "./lib.ts"

/** One library's figures for one configuration. */
export interface Reference {
  readonly library: "gloo" | "mpi" | "mpi tcp"
  readonly ranks: number
  readonly params: number
  readonly rounds: number
  readonly warmup: number
  readonly medianMs: number
  readonly p90Ms: number
}

const script = fileURLToPath(new URL("./reference/all_reduce.py", import.meta.url))
// Debian's packages are for the system's Python, whatever else is first on the PATH.
const python = "/usr/bin/python3"

const runJson = (command: string, args: ReadonlyArray<string>, library: Reference["library"]): Reference | undefined => {
  const ran = spawnSync(command, args, { encoding: "utf8", timeout: 600_000, env: { ...process.env, OMP_NUM_THREADS: "1" } })
  const line = ran.stdout?.split("\n").find((l) => l.startsWith("{"))
  if (ran.status !== 0 || line === undefined) {
    note(
      `reference ${library}: not measured (${ran.error?.message ?? `exit ${ran.status}`}: ${(ran.stderr ?? "").trim().split("\n").slice(-1)[0] ?? ""})`
    )
    return undefined
  }
  return { ...(JSON.parse(line) as Omit<Reference, "library">), library }
}

/** Whether `python3 -c "import <module>"` works with the system's Python. */
const hasModule = (module: string): boolean => spawnSync(python, ["-c", `import ${module}`]).status === 0

/**
 * Measures gloo, Open MPI and Open MPI over TCP for `ranks` processes and `params` float32 values,
 * each where installed.
 */
export const measureReferences = (ranks: number, params: number, rounds: number, warmup: number): ReadonlyArray<Reference> => {
  const sizes = [String(ranks), String(params), String(rounds), String(warmup)]
  const out: Array<Reference> = []
  if (hasModule("torch")) {
    const gloo = runJson(python, [script, "gloo", ...sizes], "gloo")
    if (gloo !== undefined) out.push(gloo)
  }
  if (hasModule("mpi4py") && spawnSync("mpirun", ["--version"]).status === 0) {
    const mpirun = ["--allow-run-as-root", "--oversubscribe", "-np", String(ranks)]
    const mpi = runJson("mpirun", [...mpirun, python, script, "mpi", ...sizes], "mpi")
    if (mpi !== undefined) out.push(mpi)
    const tcp = runJson("mpirun", [...mpirun, "--mca", "btl", "self,tcp", python, script, "mpi", ...sizes], "mpi tcp")
    if (tcp !== undefined) out.push(tcp)
  }
  return out
}

const flag = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : undefined
}

if (isMain("reference")) {
  const ranks = Number(flag("ranks") ?? 8)
  const sizes = (flag("params") ?? "407050,4000000").split(",").map(Number)
  const rounds = Number(flag("rounds") ?? 40)
  const warmup = Number(flag("warmup") ?? 5)
  const rows: Array<Array<string | number>> = []
  for (const params of sizes) {
    for (const r of measureReferences(ranks, params, rounds, warmup))
      rows.push([r.library, r.ranks, r.params, fmt(r.medianMs), fmt(r.p90Ms)])
  }
  console.log(`all-reduce reference points (ms a round, median / p90 of ${rounds} rounds after ${warmup} warm-up rounds; slowest rank)`)
  console.log(table(["library", "ranks", "params", "median ms", "p90 ms"], rows))
}
