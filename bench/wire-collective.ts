/**
 * The bare collective over direct links between processes: what a process ring round of the
 * averaging bench (`bench/averaging.ts --process`) would cost with nothing around the collective.
 * `worldSize` child processes (this file, run again with `COHORT_WIRE_MEMBER` set), each with a
 * ring listener of its own (`PeerRing`), open one generation's links and run `warmupRounds +
 * rounds` collectives (`Ring.allReduce`) back to back over a vector of `params` float32 values.
 * No coordinator, no commit, no trainer: the floor a direct ring round is measured against, timed
 * like the reference points of `bench/reference.ts` run their all-reduce back to back.
 *
 * A round's time is the gap between the ends of consecutive rounds, each taken as the slowest
 * member's; median and p90 over the timed rounds. "cpu ms": the members' CPU time (user and
 * system, every process) over the timed rounds, per round; the load moves it less than wall time.
 *
 * The links are those the launcher gives child-process ranks: Unix sockets (`--tcp`: loopback TCP).
 *
 * Run alone: `node --import tsx bench/wire-collective.ts [--ranks 8] [--params 407050] [--rounds 40] [--warmup 5] [--tcp]`
 * (`bun bench/wire-collective.ts`, `deno run -A bench/wire-collective.ts`).
 */
import { spawn } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import * as Ring from "../src/averaging/ring.ts"
import * as RingSimd from "../src/averaging/ring-simd.ts"
import * as Runtime from "../src/platform/detect.ts"
import * as PeerRing from "../src/transport/peer-ring.ts"
import { fmt, isMain, quantile, table } from "./lib.ts"

/** What the bare collective over direct links measured (`measureWire`). */
export interface WireMeasured {
  readonly worldSize: number
  readonly params: number
  readonly rounds: number
  readonly medianMs: number
  readonly p90Ms: number
  readonly cpuMsPerRound: number
  readonly systemMsPerRound: number
}

const memberEnv = "COHORT_WIRE_MEMBER"
const self = fileURLToPath(import.meta.url)

/** A free TCP port on 127.0.0.1 (bound, read, released). */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

const runtimeArgs = (): ReadonlyArray<string> => {
  const runtime = Runtime.detect()
  if (runtime === "deno") return ["run", "-A", self]
  if (runtime === "bun") return [self]
  return ["--import", "tsx", self]
}

interface MemberData {
  readonly rank: number
  readonly worldSize: number
  readonly params: number
  readonly total: number
  readonly warmup: number
  readonly urls: ReadonlyArray<string>
  readonly port: number
}

/** One member: links up, runs the collectives, prints each round's end time and its CPU time. */
const member = async (data: MemberData): Promise<void> => {
  const peers = PeerRing.start({
    token: "wire-bench",
    urls: data.urls,
    host: "127.0.0.1",
    port: data.port,
    rank: data.rank,
    allocateStep: RingSimd.stepBuffer
  })
  await peers.bound
  // Every member listens before any connects: the parent says go once all said bound.
  process.stdout.write("bound\n")
  await new Promise((resolve) => process.stdin.once("data", resolve))
  const end = peers.open(
    1,
    PeerRing.neighboursOf(
      Array.from({ length: data.worldSize }, (_, r) => r),
      data.rank
    )
  )
  if (!(await end.connected)) throw new Error(`member ${data.rank}: no link to its next neighbour`)
  const link = new Ring.BufferedLink((message) =>
    end.send(message) ? Effect.void : Effect.fail(new Ring.RingLinkError("the link is not open"))
  )
  end.onMessage((message) => link.push(message))
  const inbox = new Ring.RingInbox(link)
  const params = new Float32Array(data.params)
  for (let i = 0; i < params.length; i++) params[i] = (i % 97) / 97 + data.rank
  const ends: Array<number> = []
  let mean: Float32Array = new Float32Array(data.params)
  let cpuAt = 0
  let sysAt = 0
  for (let round = 0; round < data.total; round++) {
    mean = await Effect.runPromise(
      Ring.allReduce(inbox, { ringRank: data.rank, ringSize: data.worldSize, generation: 1, round }, params, true, mean)
    )
    ends.push(performance.timeOrigin + performance.now())
    params[0] = mean[0]! + 1
    if (ends.length === data.warmup) {
      const usage = process.cpuUsage()
      cpuAt = (usage.user + usage.system) / 1000
      sysAt = usage.system / 1000
    }
  }
  const usage = process.cpuUsage()
  process.stdout.write(
    `${JSON.stringify({ ends, cpuMs: (usage.user + usage.system) / 1000 - cpuAt, systemMs: usage.system / 1000 - sysAt })}\n`
  )
  // Let the last steps leave before the links close.
  await new Promise((resolve) => setTimeout(resolve, 200))
  end.close()
  peers.close()
}

/** Runs the members once (module doc); throws when one fails or ends without its times. */
export const measureWire = async (
  worldSize: number,
  params: number,
  rounds: number,
  warmupRounds: number,
  links: "unix" | "tcp" = "unix"
): Promise<WireMeasured> => {
  const ports = await Promise.all(Array.from({ length: worldSize }, freePort))
  // As the launcher links child-process ranks: Unix sockets in a private temporary folder, else TCP.
  const dir = links === "unix" ? await mkdtemp(join(tmpdir(), "cohort-wire-")) : undefined
  const socketPaths = ports.map((_, rank) => (dir === undefined ? undefined : join(dir, `ring-${rank}.sock`)))
  const urls = ports.map((port, rank) => {
    const path = socketPaths[rank]
    return path === undefined ? PeerRing.advertisedUrl("127.0.0.1", port) : `unix:${path}`
  })
  const total = warmupRounds + rounds
  const children: Array<ReturnType<typeof spawn>> = []
  let bound = 0
  const outputs = await Promise.all(
    ports.map(
      (port, rank) =>
        new Promise<{ readonly ends: ReadonlyArray<number>; readonly cpuMs: number; readonly systemMs: number }>((resolve, reject) => {
          const data: MemberData = { rank, worldSize, params, total, warmup: warmupRounds, urls, port }
          const child = spawn(process.execPath, runtimeArgs(), {
            stdio: ["pipe", "pipe", "inherit"],
            env: { ...process.env, [memberEnv]: JSON.stringify(data) }
          })
          children.push(child)
          let out = ""
          let said = false
          child.stdout.on("data", (chunk: Uint8Array) => {
            out += new TextDecoder().decode(chunk)
            if (!said && out.includes("bound\n")) {
              said = true
              if (++bound === worldSize) for (const c of children) c.stdin?.write("go\n")
            }
          })
          child.on("exit", (code) => {
            const line = out.split("\n").find((l) => l.startsWith("{"))
            if (code !== 0 || line === undefined) reject(new Error(`wire member ${rank} ended (exit ${code}) without its times`))
            else resolve(JSON.parse(line))
          })
        })
    )
  )
  if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  const slowest = Array.from({ length: total }, (_, round) => Math.max(...outputs.map((o) => o.ends[round]!)))
  const gaps = slowest.slice(warmupRounds).map((endMs, i) => endMs - slowest[warmupRounds + i - 1]!)
  if (gaps.length !== rounds) throw new Error(`wire collective: ${gaps.length} rounds timed, ${rounds} asked for`)
  return {
    worldSize,
    params,
    rounds,
    medianMs: quantile(gaps, 0.5),
    p90Ms: quantile(gaps, 0.9),
    cpuMsPerRound: outputs.reduce((sum, o) => sum + o.cpuMs, 0) / rounds,
    systemMsPerRound: outputs.reduce((sum, o) => sum + o.systemMs, 0) / rounds
  }
}

const flag = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(name)
  return at >= 0 ? process.argv[at + 1]! : fallback
}

if (process.env[memberEnv] !== undefined) {
  await member(JSON.parse(process.env[memberEnv]) as MemberData)
  process.exit(0)
} else if (isMain("wire-collective")) {
  const rows: Array<ReadonlyArray<string | number>> = []
  for (const ranks of flag("--ranks", "8").split(",").map(Number)) {
    for (const params of flag("--params", "407050").split(",").map(Number)) {
      const links = process.argv.includes("--tcp") ? "tcp" : "unix"
      const m = await measureWire(ranks, params, Number(flag("--rounds", "40")), Number(flag("--warmup", "5")), links)
      rows.push([ranks, params, `${fmt(m.medianMs)} / ${fmt(m.p90Ms)}`, fmt(m.cpuMsPerRound), fmt(m.systemMsPerRound)])
    }
  }
  console.log(`bare collective over direct links between processes on ${Runtime.detect()} (ms a round, median / p90)`)
  console.log(table(["ranks", "params", "collective ms", "cpu ms a round (all members)", "of which system ms"], rows))
}
