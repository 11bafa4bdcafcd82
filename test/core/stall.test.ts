import { describe, expect, it } from "vitest"
import * as Coordinator from "../../src/core/coordinator.ts"
import { heartbeat, make, tags, tick } from "./harness.ts"

describe("a stall of the coordinator itself never makes live ranks look stale (docs/design.md §3.10)", () => {
  const threeRanks = () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 1000, coordinatorStallMs: 250 })
    Coordinator.start(s, 0)
    return s
  }

  it("a 3000 ms gap between ticks pauses liveness: no death, one CoordinatorStall alert with the gap", () => {
    const s = threeRanks()
    for (let t = 100; t <= 900; t += 100) expect(tick(s, t)).toEqual([])
    heartbeat(s, 900, [0, 1, 2])
    const cmds = tick(s, 3900)
    expect(tags(cmds)).toEqual(["Alert:CoordinatorStall"])
    const alert = cmds[0]!._tag === "Alert" ? cmds[0]!.alert : undefined
    expect(alert).toEqual({
      ts: 3900,
      severity: "warn",
      path: "root",
      class: "CoordinatorStall",
      detail:
        "the coordinator did not run for 3000 ms (stall threshold 250 ms, longest so far 3000 ms); ranks' silence during it is not counted",
      count: 1
    })
    expect(s.counters.coordinatorStalls).toBe(1)
    expect(Coordinator.failures(s)).toEqual([])
  })

  it("a long stall folded between short ones is still named: each alert carries the longest stall so far", () => {
    const s = threeRanks()
    const details: Array<string> = []
    const keep = (cmds: ReadonlyArray<Coordinator.Command>) => {
      for (const c of cmds) if (c._tag === "Alert" && c.alert.class === "CoordinatorStall") details.push(c.alert.detail)
    }
    // Within the 10 s collapse window: the first is emitted, the next two fold into it.
    for (const [from, to] of [
      [100, 400],
      [400, 3400],
      [3400, 3700]
    ] as const) {
      heartbeat(s, from, [0, 1, 2])
      keep(tick(s, to))
    }
    keep(Coordinator.step(s, { _tag: "ShutdownRequested", nowMs: 3800, detail: "SIGTERM" }))
    expect(s.counters.coordinatorStalls).toBe(3)
    expect(details).toEqual([
      "the coordinator did not run for 300 ms (stall threshold 250 ms, longest so far 300 ms); ranks' silence during it is not counted",
      "the coordinator did not run for 300 ms (stall threshold 250 ms, longest so far 3000 ms); ranks' silence during it is not counted"
    ])
  })

  it("after the stall, silence counts again from where it stopped: a rank still silent is stale 1000 ms later", () => {
    const s = threeRanks()
    heartbeat(s, 100, [0, 1, 2])
    tick(s, 200)
    tick(s, 3200) // stall of 3000 ms: every rank has been silent 100 ms of running time
    for (let t = 3300; t <= 4100; t += 100) {
      heartbeat(s, t, [0, 1])
      expect(tags(tick(s, t))).toEqual([])
    }
    heartbeat(s, 4200, [0, 1])
    // Rank 2 was last seen at 100: 100 ms before the stall and 1001 ms after it.
    const cmds = tick(s, 4201)
    expect(tags(cmds)).toEqual(["Alert:RankLost", "Send:ExtendPartition", "Send:ExtendPartition"])
    expect(s.deaths.map((d) => [d.rank, d.detector, d.cause])).toEqual([[2, "heartbeat", "no frame for 1101 ms (timeout 1000 ms)"]])
  })

  it("any stall length: an 11 s gap with the default 10 s timeout declares nobody", () => {
    const s = make({ worldSize: 2, epochSamples: 30, epochs: 1, coordinatorStallMs: 2500 })
    Coordinator.start(s, 0)
    tick(s, 100)
    expect(tags(tick(s, 11_100))).toEqual(["Alert:CoordinatorStall"])
    expect(Coordinator.failures(s)).toEqual([])
  })

  it("gaps at or under coordinatorStallMs are ordinary time: a silent rank is declared on schedule", () => {
    const s = threeRanks()
    for (let t = 250; t <= 1000; t += 250) {
      heartbeat(s, t, [0, 1])
      expect(tags(tick(s, t))).toEqual([])
    }
    heartbeat(s, 1001, [0, 1])
    expect(tags(tick(s, 1001))).toEqual(["Alert:RankLost", "Send:ExtendPartition", "Send:ExtendPartition"])
    expect(s.counters.coordinatorStalls).toBe(0)
  })

  it("is off by default in the core: a caller that steps time by hand sees plain staleness", () => {
    const s = make({ worldSize: 2, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 1000 })
    Coordinator.start(s, 0)
    expect(tags(tick(s, 5000))).toEqual(["Alert:RankLost", "Alert:RankLost", "RunEnded"])
  })

  it("rejects a negative coordinatorStallMs", () => {
    expect(Coordinator.make({ worldSize: 2, epochSamples: 30, epochs: 1, coordinatorStallMs: -1 }, 0)).toEqual({
      _tag: "Invalid",
      option: "coordinatorStallMs",
      reason: "must be a number of ms >= 0 (0: off), got -1"
    })
  })
})

describe("Seen: a frame the transport holds but the core has not applied yet refreshes liveness", () => {
  it("expiring names the ranks a tick would declare; Seen for one of them keeps it alive", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 1000 })
    Coordinator.start(s, 0)
    heartbeat(s, 500, [0])
    expect(Coordinator.expiring(s, 1001)).toEqual([1, 2])
    expect(Coordinator.step(s, { _tag: "Seen", rank: 2, nowMs: 990 })).toEqual([])
    const cmds = tick(s, 1001)
    expect(s.deaths.map((d) => d.rank)).toEqual([1])
    expect(tags(cmds)).toEqual(["Alert:RankLost", "Send:ExtendPartition", "Send:ExtendPartition"])
  })

  it("Seen for a dead rank changes nothing", () => {
    const s = make({ worldSize: 2, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 1000 })
    Coordinator.start(s, 0)
    tick(s, 1001)
    expect(Coordinator.failures(s)).toEqual([0, 1])
    expect(Coordinator.step(s, { _tag: "Seen", rank: 0, nowMs: 1002 })).toEqual([])
    expect(Coordinator.expiring(s, 5000)).toEqual([])
  })
})

describe("Seen counts from when the bytes arrived, not from when the shell asked", () => {
  // The shell's tick (actors/coordinator/coordinator.ts): for each rank `expiring` names, a `Seen` at the
  // transport's last arrival from it when that is within the timeout, then the `Tick`. A resumable
  // link's pings (every 250 ms) arrive between the rank's frames (every 750 ms), so a cut rank's
  // last arrival is later than its last frame: it must be declared its timeout after that arrival.
  const tickLikeTheShell = (s: Coordinator.State, nowMs: number, lastArrivalMs: ReadonlyMap<number, number>) => {
    for (const rank of Coordinator.expiring(s, nowMs)) {
      const arrivedMs = lastArrivalMs.get(rank)
      if (arrivedMs !== undefined && nowMs - arrivedMs <= 1000) Coordinator.step(s, { _tag: "Seen", rank, nowMs: arrivedMs })
    }
    return tick(s, nowMs)
  }

  it("a rank whose last frame came at 200 ms and last ping at 400 ms is declared at the first tick after 1400 ms, not near twice the timeout", () => {
    const s = make({ worldSize: 3, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 1000 })
    Coordinator.start(s, 0)
    const arrivals = new Map([[2, 400]])
    let declaredMs: number | undefined
    for (let t = 100; t <= 3000 && declaredMs === undefined; t += 100) {
      heartbeat(s, t, t <= 200 ? [0, 1, 2] : [0, 1])
      if (tags(tickLikeTheShell(s, t, arrivals)).includes("Alert:RankLost")) declaredMs = t
    }
    expect(declaredMs).toBe(1500)
    expect(s.deaths.map((d) => [d.rank, d.cause])).toEqual([[2, "no frame for 1100 ms (timeout 1000 ms)"]])
  })

  it("a Seen older than the rank's last frame changes nothing; one later than the core's clock counts from the clock", () => {
    const s = make({ worldSize: 2, epochSamples: 30, epochs: 1, heartbeatTimeoutMs: 1000 })
    Coordinator.start(s, 0)
    heartbeat(s, 500, [0, 1])
    expect(Coordinator.step(s, { _tag: "Seen", rank: 1, nowMs: 300 })).toEqual([])
    expect(Coordinator.deadlineOf(s, 1)).toBe(1500)
    expect(Coordinator.step(s, { _tag: "Seen", rank: 1, nowMs: 700 })).toEqual([])
    expect(Coordinator.deadlineOf(s, 1)).toBe(1700)
    expect(Coordinator.expiring(s, 1600)).toEqual([0])
  })
})
