// The bytes ring steps move over direct links between processes reach the journal: each rank
// counts what it sent and received rank to rank and reports it with its RoundDone, and each
// round's line carries the sums (linkSentBytes, linkReceivedBytes) beside the coordinator's own
// traffic. Runs on Node, Bun and Deno: the links are each runtime's Unix sockets, in a folder of the
// run's own outside its run folder (which users copy; a socket file cannot be copied).
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as Launcher from "../../actors/launcher/launcher.ts"
import { readRun, resultFromEvents } from "../../actors/record/read-run.ts"
import { renderResult } from "../../src/cli/result-table.ts"
import { paramsLength } from "../fixtures/trainers/wide.ts"
import { clean, fastRuns } from "./fast-runs.ts"

const wide = fileURLToPath(new URL("../fixtures/trainers/wide.ts", import.meta.url))
// A round every 20 batches: a few rounds an epoch, each a whole ring all-reduce.
const { fast } = fastRuns("ring-link-bytes", { backend: "ring", transport: "process", ringLinks: "direct", averageEverySteps: 20 })

interface Round {
  readonly type: string
  readonly round: number
  readonly receivedBytes?: number
  readonly sentBytes?: number
  readonly linkSentBytes?: number
  readonly linkReceivedBytes?: number
}

const ranks = 3
const headerBytes = 20

/**
 * A float32 ring all-reduce of `paramsLength` values among `ranks`, summed over the ranks: each
 * segment goes round the ring twice, N − 1 steps as float64 partial sums with their contribution
 * count (reduce-scatter), N − 1 as float32 values (all-gather); every step a 20-byte header.
 */
const float32RoundBytes = (ranks - 1) * (8 * (paramsLength + ranks) + 4 * paramsLength) + 2 * (ranks - 1) * ranks * headerBytes

const run = async (compress: "none" | "int8", ringLinks: "direct" | "relay" = "direct", ringAreaMemoryMb = 0) => {
  const result = await Launcher.run({ ...fast, trainer: wide, worldSize: ranks, epochs: 1, compress, ringLinks, ringAreaMemoryMb })
  const rounds = readFileSync(join(result.runDir, "events.ndjson"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Round)
    .filter((e) => e.type === "round")
  return { result, rounds }
}

describe("direct ring links' bytes in the journal", () => {
  it("every round line of a float32 ring over direct links (no area files: ringAreaMemoryMb 0) carries the ranks' link bytes: a whole all-reduce's worth, sent as received, none of it through the coordinator", async () => {
    const { result, rounds } = await run("none")
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 1600, 0, 0]])
    expect(result.ring?.links).toBe("direct")
    expect(result.ring?.relayed).toBe(0)
    expect(readdirSync(result.runDir, { recursive: true }).filter((name) => String(name).endsWith(".sock"))).toEqual([])
    expect(rounds.length).toBeGreaterThanOrEqual(2)
    // Per rank about 2·(N−1)/N·P·4 bytes of float32 values (the reduce-scatter's are float64 sums).
    expect(float32RoundBytes / ranks).toBeGreaterThan(((2 * (ranks - 1)) / ranks) * paramsLength * 4)
    for (const round of rounds) {
      expect([round.round, round.linkSentBytes, round.linkReceivedBytes]).toEqual([round.round, float32RoundBytes, float32RoundBytes])
      // The coordinator's own traffic of a direct ring round is its small frames, not the steps.
      expect(round.receivedBytes! + round.sentBytes!).toBeLessThan(float32RoundBytes / 100)
    }
    // summary.json and `cohort report` (the summary, or the journal alone) count them too.
    expect(result.traffic).toMatchObject({
      rounds: rounds.length,
      linkSentBytes: rounds.length * float32RoundBytes,
      linkReceivedBytes: rounds.length * float32RoundBytes
    })
    const reported = await readRun(result.runDir)
    expect(typeof reported === "string" ? reported : reported.traffic).toEqual(result.traffic)
    const fromJournal = resultFromEvents(readFileSync(join(result.runDir, "events.ndjson"), "utf8"))
    expect(typeof fromJournal === "string" ? fromJournal : fromJournal.traffic).toEqual(result.traffic)
    const text = typeof reported === "string" ? reported : renderResult(reported).out
    expect(text).toContain(
      `over direct links ${float32RoundBytes.toLocaleString("en-US")} sent and ${float32RoundBytes.toLocaleString("en-US")} received by the ranks a round`
    )
  })

  it("through the ranks' area files in memory (the default), a round's link bytes are its tokens only: each rank sends N − 1 steps of one float64 value", async () => {
    const { result, rounds } = await run("none", "direct", 256)
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 1600, 0, 0]])
    expect(result.ring?.links).toBe("file")
    expect(result.ring?.relayed).toBe(0)
    expect(rounds.length).toBeGreaterThanOrEqual(2)
    const tokenRoundBytes = ranks * (ranks - 1) * (headerBytes + 8)
    for (const round of rounds) expect([round.linkSentBytes, round.linkReceivedBytes]).toEqual([tokenRoundBytes, tokenRoundBytes])
  })

  it("int8 packed steps over direct links: every round carries its link bytes, about 5.6 times fewer than float32's", async () => {
    const { result, rounds } = await run("int8")
    expect(result.exitCode).toBe(0)
    expect(clean(result)).toEqual([[0, 1600, 0, 0]])
    expect(result.ring?.links).toBe("direct")
    expect(rounds.length).toBeGreaterThanOrEqual(2)
    for (const round of rounds) {
      expect(round.linkSentBytes).toBe(round.linkReceivedBytes)
      expect(float32RoundBytes / round.linkSentBytes!).toBeGreaterThan(4)
      expect(float32RoundBytes / round.linkSentBytes!).toBeLessThan(7)
    }
  })

  it("over the relay the lines carry no link bytes: the coordinator counts the steps, in from their senders and out to their receivers", async () => {
    const { result, rounds } = await run("none", "relay")
    expect(result.exitCode).toBe(0)
    expect(result.ring?.links).toBe("relay")
    expect(rounds.length).toBeGreaterThanOrEqual(2)
    for (const round of rounds) {
      expect([round.linkSentBytes, round.linkReceivedBytes]).toEqual([undefined, undefined])
      // The same steps as CBOR frames (a few bytes of header each instead of 20), once each way.
      expect(round.receivedBytes! / float32RoundBytes).toBeGreaterThan(0.99)
      expect(round.sentBytes! / float32RoundBytes).toBeGreaterThan(0.99)
    }
    expect(result.traffic?.linkSentBytes).toBeUndefined()
  })
})
