// The served ring over direct links between hosts made of network namespaces (harness: ./netns.ts):
// `cohort serve --backend ring` in A, one `cohort join` in each of B, C and D. Each joiner listens
// for its ring neighbour and advertises its address in its Hello; the coordinator hands each rank
// its next neighbour's address and the generation's secret with FormRing. nftables counters on
// A's link and on each joiner's traffic from the other joiners show where the bytes went.
//
// - Defaults (no ring flag): the run completes with exact audits, the coordinator relays no ring
//   step, and every joiner received its neighbour's steps directly; A's link carried only control
//   frames (a small fraction of the ring's bytes).
// - D's ring port firewalled (nftables rejects it): the one link into D falls back to the relay
//   (the coordinator relays exactly C's steps to D), the other two stay direct, audits exact.
//
// Node only (vitest.config.ts): the direct links' runtime-specific parts run under every runtime in
// test/transport/peer-ring.test.ts; here what is tested is where links go. Two small runs side by
// side (3 ranks of `wide.ts`, 8,192 parameters, 2 epochs, a round every 2 batches): about 10-20 s.
import { rmSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Cluster from "./cluster.ts"
import * as Netns from "./netns.ts"

const trainer = fileURLToPath(new URL("../fixtures/trainers/wide-ring.ts", import.meta.url))
const paramsLength = 8192
const scratch = Cluster.scratch("cohort-net-ring-")
afterAll(() => rmSync(scratch.dir, { recursive: true, force: true }))

const lifetimeMs = 90_000
const testTimeoutMs = lifetimeMs + 10_000
const ringPort = 7300
const joiners = ["b", "c", "d"]

/** nftables counters: bytes on A's link both ways, and bytes each joiner receives from other joiners. */
const countBytes = (network: Netns.Network): void => {
  const a = network.address("a")
  Netns.run(
    "ip",
    ["netns", "exec", network.namespace("a"), "nft", "-f", "-"],
    [
      "table inet cohort_count {",
      '  chain input { type filter hook input priority 0; policy accept; iifname "eth0" counter; }',
      '  chain output { type filter hook output priority 0; policy accept; oifname "eth0" counter; }',
      "}"
    ].join("\n")
  )
  for (const host of joiners) {
    Netns.run(
      "ip",
      ["netns", "exec", network.namespace(host), "nft", "-f", "-"],
      [
        "table inet cohort_count {",
        `  chain input { type filter hook input priority 0; policy accept; iifname "eth0" ip saddr != ${a} counter; }`,
        "}"
      ].join("\n")
    )
  }
}

/** The bytes the counters of table `cohort_count` in `host` counted, summed. */
const counted = (network: Netns.Network, host: string): number => {
  const listing = Netns.run("ip", ["netns", "exec", network.namespace(host), "nft", "list", "table", "inet", "cohort_count"])
  return [...listing.matchAll(/counter packets \d+ bytes (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0)
}

const served = async (
  name: string,
  options: { readonly joinArgs?: ReadonlyArray<string>; readonly prepare?: (network: Netns.Network) => void },
  body: (network: Netns.Network, run: ReturnType<typeof Cluster.readRun>) => void
): Promise<void> => {
  if (!Netns.hasNft()) throw new Error("NETWORK TESTS NEED nftables: `nft` is missing; apt-get install -y nftables (.ci/run does)")
  const network = Netns.create(["a", ...joiners])
  try {
    countBytes(network)
    options.prepare?.(network)
    const { serve, ranks, out } = await Cluster.start(network, {
      scratch,
      name,
      trainer,
      worldSize: 3,
      epochs: 1,
      port: 7200,
      hostOf: (rank) => joiners[rank]!,
      lifetimeMs,
      serveArgs: ["--backend", "ring", "--heartbeat-timeout-ms", "10000"],
      ...(options.joinArgs === undefined ? {} : { joinArgs: options.joinArgs })
    })
    const codes = [await serve.exited, ...(await Promise.all(ranks.map((r) => r.exited)))]
    expect(codes, `${serve.stdout()}\n${serve.stderr()}\n${ranks.map((r) => r.stderr()).join("\n")}`).toEqual([0, 0, 0, 0])
    body(network, Cluster.readRun(out))
  } finally {
    network.destroy()
  }
}

/** Bytes of one round's ring steps if they all went through the coordinator: 3 ranks × 4 steps of a third of the vector, float32 at least, in and out. */
const relayedRoundBytes = 2 * 3 * 4 * (paramsLength / 3) * 4

describe("the served ring links joined hosts directly (node)", () => {
  it.concurrent(
    "defaults: each joiner listens on the interface that reaches the coordinator; no ring step crosses the coordinator's host; audits exact",
    async () => {
      await served("direct", {}, (network, { summary, events }) => {
        const rounds = events.filter((e) => e.type === "round").length
        expect(Cluster.audits(summary)).toEqual([[6144, 0, 0]])
        expect(summary.deaths).toEqual([])
        expect(summary.ring).toMatchObject({ links: "direct", relayed: 0 })
        const atCoordinator = counted(network, "a")
        const direct = joiners.map((host) => counted(network, host))
        console.log(
          `[net] served ring, direct: ${rounds} rounds; bytes on A's link ${atCoordinator}, received from other joiners ${JSON.stringify(direct)}`
        )
        expect(rounds).toBe(2)
        // Every joiner took its neighbour's steps directly: at least a third of the vector a round.
        for (const bytes of direct) expect(bytes).toBeGreaterThan(rounds * (paramsLength / 3) * 4)
        // A's link carried the control frames and the epoch's model, not the rounds: had the relay
        // carried them, it would hold at least the bytes the joiners received from each other twice.
        expect(atCoordinator).toBeLessThan((rounds * relayedRoundBytes) / 2)
        expect(atCoordinator).toBeLessThan(direct.reduce((sum, bytes) => sum + bytes, 0) / 2)
      })
    },
    testTimeoutMs
  )

  it.concurrent(
    "D's ring port firewalled: C's link to D falls back to the relay, the other two stay direct; audits exact",
    async () => {
      await served(
        "firewalled",
        {
          joinArgs: ["--ring-listen", `0.0.0.0:${ringPort}`],
          prepare: (network) =>
            Netns.run(
              "ip",
              ["netns", "exec", network.namespace("d"), "nft", "-f", "-"],
              [
                "table inet cohort_firewall {",
                `  chain input { type filter hook input priority -10; policy accept; tcp dport ${ringPort} reject with tcp reset; }`,
                "}"
              ].join("\n")
            )
        },
        (network, { summary, events }) => {
          const rounds = events.filter((e) => e.type === "round").length
          expect(Cluster.audits(summary)).toEqual([[6144, 0, 0]])
          expect(summary.deaths).toEqual([])
          // Rank 1 (C) sends its 2 (n - 1) = 4 steps a round to rank 2 (D) through the relay; nobody else does.
          expect(summary.ring).toMatchObject({ links: "direct", relayed: 4 * rounds })
          const [b, c, d] = joiners.map((host) => counted(network, host))
          console.log(`[net] served ring, D firewalled: ${rounds} rounds; received from other joiners B ${b}, C ${c}, D ${d}`)
          expect(b).toBeGreaterThan(rounds * (paramsLength / 3) * 4)
          expect(c).toBeGreaterThan(rounds * (paramsLength / 3) * 4)
          expect(d).toBeLessThan(rounds * (paramsLength / 3) * 4)
        }
      )
    },
    testTimeoutMs
  )
})
