import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Coordinator from "../../src/core/coordinator.ts"
import * as Liveness from "../../src/core/liveness.ts"
import { deliveries, frame, heartbeat, make, params, tags, tick } from "./harness.ts"

const adaptive = (timeoutMs: number, floorMs: number, deviations = 8, samplesMin = 8): Liveness.Detector => ({
  kind: "adaptive",
  timeoutMs,
  floorMs,
  deviations,
  samplesMin
})

describe("liveness with per-rank timeouts (docs/design.md §3.1)", () => {
  it("a fixed timeout: stale strictly after it, least recently seen first, one entry examined when nothing expires", () => {
    const l = Liveness.make(4, 0, 4, Liveness.fixed(1000))
    Liveness.touch(l, 2, 100)
    Liveness.touch(l, 0, 200)
    const before = l.examined
    expect(Liveness.expired(l, 1000)).toEqual([])
    expect(l.examined - before).toBe(1)
    expect(Liveness.expired(l, 1001)).toEqual([1, 3])
    expect(Liveness.expired(l, 1201)).toEqual([1, 3, 2, 0])
  })

  it("a hold keeps a rank seen after the ask out of the stale ones until timeoutMs + forMs after the ask; its release makes the rank stale at once", () => {
    const l = Liveness.make(3, 0, 3, Liveness.fixed(1000))
    Liveness.hold(l, 1, "save", 0, 0, 3000)
    expect(Liveness.deadlineOf(l, 1)).toBe(1000) // not seen since the ask: judged by its frames
    Liveness.touch(l, 1, 10) // its frame as it starts the save
    expect(Liveness.deadlineOf(l, 1)).toBe(4000)
    expect(Liveness.expired(l, 1001)).toEqual([0, 2])
    Liveness.touch(l, 0, 3500)
    Liveness.touch(l, 2, 3500)
    expect(Liveness.expired(l, 4000)).toEqual([])
    expect(Liveness.expired(l, 4001)).toEqual([1])
    expect(Liveness.overrun(l, 1)).toEqual([{ call: "save", id: 0, askedAtMs: 0, untilMs: 4000, passedAtEpoch: Infinity }])
    Liveness.release(l, 1, "save", 0)
    expect(Liveness.overrun(l, 1)).toEqual([])
    Liveness.touch(l, 0, 3900)
    Liveness.touch(l, 2, 3900)
    expect(Liveness.expired(l, 3900)).toEqual([1])
  })

  it("calls held together run one after the other; a hold never answered runs out and the rank is judged by its frames again", () => {
    const l = Liveness.make(1, 0, 1, Liveness.fixed(1000))
    Liveness.hold(l, 0, "eval", 0, 0, 2000)
    Liveness.hold(l, 0, "save", 0, 0, 3000)
    Liveness.touch(l, 0, 1)
    expect(Liveness.deadlineOf(l, 0)).toBe(6000)
    Liveness.release(l, 0, "eval", 0) // the eval answered; the save runs on
    expect(Liveness.deadlineOf(l, 0)).toBe(6000)
    Liveness.release(l, 0, "save", 0)
    Liveness.hold(l, 0, "eval", 1, 10_000, 2000) // never answered (a trainer without evaluate)
    Liveness.touch(l, 0, 12_500)
    expect(Liveness.deadlineOf(l, 0)).toBe(13_500)
    expect(Liveness.expired(l, 13_501)).toEqual([0])
    expect(Liveness.overrun(l, 0)).toEqual([]) // its frames, not its hold, set the deadline
  })

  it("a beaten hold postpones nothing: the rank's beats keep it fresh, and past the hold's end unanswered it is named as overrun", () => {
    const l = Liveness.make(2, 0, 2, Liveness.fixed(1000))
    Liveness.hold(l, 0, "eval", 0, 0, 2000, Infinity, true)
    Liveness.hold(l, 0, "save", 0, 0, 3000, Infinity, true)
    expect(Liveness.deadlineOf(l, 0)).toBe(1000)
    expect(Liveness.expired(l, 1001)).toEqual([0, 1])
    Liveness.touch(l, 0, 500)
    expect(Liveness.overrun(l, 0)).toEqual([]) // stopped early: no call ran past its bound
    for (let t = 1000; t <= 6000; t += 500) Liveness.touch(l, 0, t) // beats while it evaluates, then saves
    expect(Liveness.expired(l, 7001)).toEqual([1, 0])
    // It beat for longer than both bounds (2000 and 3000 after the ask): both ran past them.
    expect(Liveness.overrun(l, 0).map((h) => h.call)).toEqual(["eval", "save"])
    Liveness.release(l, 0, "eval", 0)
    expect(Liveness.overrun(l, 0).map((h) => h.call)).toEqual(["save"])
  })

  it("a suspect seen again goes back to the list and is judged from its new sighting", () => {
    const l = Liveness.make(2, 0, 2, Liveness.fixed(1000))
    Liveness.hold(l, 0, "save", 3, 0, 5000)
    Liveness.touch(l, 0, 1)
    Liveness.touch(l, 1, 1)
    expect(Liveness.expired(l, 2001)).toEqual([1]) // rank 0 is now a suspect, within its hold
    Liveness.touch(l, 0, 2500)
    Liveness.release(l, 0, "save", 3)
    Liveness.unwatch(l, 1)
    expect(Liveness.expired(l, 3500)).toEqual([])
    expect(Liveness.expired(l, 3501)).toEqual([0])
  })

  it("a sighting in the past (seen) counts from its own time, in the list or among the suspects; an older one changes nothing", () => {
    const l = Liveness.make(3, 0, 3, Liveness.fixed(1000))
    Liveness.touch(l, 0, 500)
    Liveness.touch(l, 1, 600)
    Liveness.seen(l, 2, 300) // in the list, behind ranks seen later: it moves to the suspects
    expect(Liveness.deadlineOf(l, 2)).toBe(1300)
    Liveness.seen(l, 2, 200)
    expect(Liveness.deadlineOf(l, 2)).toBe(1300)
    expect(Liveness.expired(l, 1301)).toEqual([2])
    Liveness.seen(l, 2, 900) // a suspect: its deadline moves, it stays a suspect
    expect(Liveness.expired(l, 1601)).toEqual([0, 1])
    expect(Liveness.expired(l, 1901)).toEqual([0, 1, 2])
    Liveness.seen(l, 1, 2000) // later than every sighting: the list's back, as a touch
    expect(Liveness.expired(l, 3000)).toEqual([0, 2])
    expect(Liveness.expired(l, 3001)).toEqual([0, 2, 1])
  })

  it("a pause shifts every deadline, suspects' and holds' included", () => {
    const l = Liveness.make(2, 0, 2, Liveness.fixed(1000))
    Liveness.hold(l, 1, "eval", 0, 0, 1000)
    Liveness.seen(l, 1, 1)
    expect(Liveness.expired(l, 1500)).toEqual([0])
    Liveness.pause(l, 3000)
    Liveness.touch(l, 0, 4500)
    expect(Liveness.expired(l, 5000)).toEqual([])
    expect(Liveness.expired(l, 5001)).toEqual([1])
  })

  it("answers as a scan of every rank would, whatever the sightings (past ones too), holds, releases, pauses and departures (fast-check)", () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("touch" as const), rank: fc.nat(7), dt: fc.nat(700) }),
      fc.record({ kind: fc.constant("seen" as const), rank: fc.nat(7), backMs: fc.nat(1500) }),
      fc.record({
        kind: fc.constant("hold" as const),
        rank: fc.nat(7),
        id: fc.nat(2),
        ms: fc.constantFrom(250, 1500, 4000),
        beaten: fc.boolean()
      }),
      fc.record({ kind: fc.constant("release" as const), rank: fc.nat(7), id: fc.nat(2) }),
      fc.record({ kind: fc.constant("unwatch" as const), rank: fc.nat(7) }),
      fc.record({ kind: fc.constant("pause" as const), ms: fc.nat(400) }),
      fc.record({ kind: fc.constant("scan" as const), dt: fc.nat(900) })
    )
    fc.assert(
      fc.property(fc.boolean(), fc.array(op, { maxLength: 80 }), (isAdaptive, ops) => {
        const detector = isAdaptive ? adaptive(1000, 300, 4, 2) : Liveness.fixed(1000)
        const l = Liveness.make(8, 0, 8, detector)
        let now = 0
        for (const o of ops) {
          if (o.kind === "touch") Liveness.touch(l, o.rank, (now += o.dt))
          else if (o.kind === "seen") Liveness.seen(l, o.rank, now - o.backMs)
          else if (o.kind === "hold") Liveness.hold(l, o.rank, "save", o.id, now, o.ms, Infinity, o.beaten)
          else if (o.kind === "release") Liveness.release(l, o.rank, "save", o.id)
          else if (o.kind === "unwatch") Liveness.unwatch(l, o.rank)
          else if (o.kind === "pause") {
            // A pause is a stall of the coordinator: its own clock moved on meanwhile.
            Liveness.pause(l, o.ms)
            now += o.ms
          } else {
            now += o.dt
            const naive = [0, 1, 2, 3, 4, 5, 6, 7]
              .filter((r) => Liveness.isWatched(l, r) && now > Liveness.deadlineOf(l, r))
              .sort((a, b) => l.lastSeenMs[a]! - l.lastSeenMs[b]! || a - b)
            expect(Liveness.expired(l, now)).toEqual(naive)
          }
        }
      }),
      { seed: 26, numRuns: 500 }
    )
  })

  it("a tick over 100,000 steady ranks with the adaptive detector examines one entry when nothing expires", () => {
    const l = Liveness.make(100_000, 0, 100_000, adaptive(10_000, 2_000))
    for (let t = 1; t <= 3; t++) for (let r = 0; r < 100_000; r++) Liveness.touch(l, r, t * 1000)
    const before = l.examined
    for (let t = 3100; t < 5000; t += 100) expect(Liveness.expired(l, t)).toEqual([])
    expect(l.examined - before).toBe(19)
  })
})

describe("the adaptive detector: timeouts that follow each link, within [adaptiveTimeoutMinMs, heartbeatTimeoutMs]", () => {
  it("a steady link gets the lower bound; a dead one is declared then, not at the fixed timeout", () => {
    const l = Liveness.make(1, 0, 1, adaptive(10_000, 2_500))
    let now = 0
    for (let i = 0; i < 30; i++) Liveness.touch(l, 0, (now += 1000))
    expect(Liveness.timeoutOf(l, 0)).toBe(2_500)
    expect(Liveness.expired(l, now + 2_500)).toEqual([])
    expect(Liveness.expired(l, now + 2_501)).toEqual([0])
  })

  it("a lossy link (frames late by retransmissions) gets a longer timeout, capped at the fixed one; it survives a 6 s gap", () => {
    const l = Liveness.make(1, 0, 1, adaptive(10_000, 2_500))
    let now = 0
    const gaps = [1000, 1000, 3200, 200, 1000, 5800, 100, 1000, 2600, 1000, 400, 4700, 1000, 1000]
    for (const gap of [...gaps, ...gaps]) Liveness.touch(l, 0, (now += gap))
    const timeoutMs = Liveness.timeoutOf(l, 0)
    expect(timeoutMs).toBeGreaterThan(6_000)
    expect(timeoutMs).toBeLessThanOrEqual(10_000)
    expect(Liveness.expired(l, now + 6_000)).toEqual([])
    expect(Liveness.expired(l, now + 10_001)).toEqual([0])
  })

  it("never later than the fixed timeout: a link with huge gaps is still declared at heartbeatTimeoutMs", () => {
    const l = Liveness.make(1, 0, 1, adaptive(10_000, 2_500))
    let now = 0
    for (let i = 0; i < 20; i++) Liveness.touch(l, 0, (now += i % 2 === 0 ? 9_000 : 10))
    expect(Liveness.timeoutOf(l, 0)).toBe(10_000)
    expect(Liveness.expired(l, now + 10_001)).toEqual([0])
  })

  it("before samplesMin gaps the fixed timeout applies; a joiner starts afresh", () => {
    const l = Liveness.make(2, 0, 1, adaptive(10_000, 2_500))
    for (let i = 1; i <= 7; i++) Liveness.touch(l, 0, i * 1000)
    expect(Liveness.timeoutOf(l, 0)).toBe(10_000)
    Liveness.touch(l, 0, 8000)
    expect(Liveness.timeoutOf(l, 0)).toBe(2_500)
    Liveness.watch(l, 1, 8000)
    expect(Liveness.timeoutOf(l, 1)).toBe(10_000)
  })

  it("through the core: livenessDetector adaptive declares a steady rank gone silent at its own timeout, with the cause naming it", () => {
    const s = make({
      worldSize: 2,
      epochSamples: 20,
      epochs: 1,
      heartbeatTimeoutMs: 10_000,
      livenessDetector: "adaptive",
      adaptiveTimeoutMinMs: 2_000
    })
    Coordinator.start(s, 0)
    for (let t = 1000; t <= 12_000; t += 1000) heartbeat(s, t, [0, 1])
    for (let t = 13_000; t <= 14_000; t += 1000) heartbeat(s, t, [0])
    const cmds = tick(s, 14_001)
    expect(tags(cmds)).toContain("Alert:RankLost")
    expect(s.deaths.map((d) => [d.rank, d.cause])).toEqual([[1, "no frame for 2001 ms (adaptive timeout 2000 ms of at most 10000)"]])
  })

  it("rejects bounds outside (0, heartbeatTimeoutMs] and a negative multiple", () => {
    for (const bad of [
      { adaptiveTimeoutMinMs: 0 },
      { adaptiveTimeoutMinMs: 20_000 },
      { adaptiveDeviations: -1 },
      { livenessDetector: "phi" as "fixed" }
    ]) {
      const made = Coordinator.make({ worldSize: 1, epochSamples: 1, epochs: 1, heartbeatTimeoutMs: 10_000, ...bad }, 0)
      expect("_tag" in made && made._tag).toBe("Invalid")
    }
  })
})

describe("a call the coordinator asked for holds its rank (saveTimeoutMs, evalTimeoutMs)", () => {
  /** Two ranks, one epoch each committed at `nowMs`: rank 0 is asked for the eval and the checkpoint. */
  const endEpoch = (options: {
    readonly saveTimeoutMs?: number
    readonly evalTimeoutMs?: number
    readonly epochs?: number
    readonly checkpointEveryEpochs?: number
  }) => {
    const s = make({
      worldSize: 3,
      epochSamples: 30,
      epochs: options.epochs ?? 2,
      heartbeatTimeoutMs: 1000,
      rolePolicy: { rank: 0 },
      ...options
    })
    Coordinator.start(s, 0)
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    const end = params(s, 2, 100, 10)
    expect(tags(end)).toContain(options.checkpointEveryEpochs === 0 ? "Send:Eval" : "Send:Checkpoint")
    return s
  }

  it("a save three times the heartbeat timeout: no death; once the result is in, the heartbeat timeout applies again", () => {
    const s = endEpoch({ saveTimeoutMs: 5000, evalTimeoutMs: 5000 })
    heartbeat(s, 150, [0]) // its frame as it starts the calls
    for (let t = 200; t <= 3100; t += 100) {
      heartbeat(s, t, [1, 2])
      expect(tick(s, t)).toEqual([])
    }
    expect(frame(s, 0, 3100, { _tag: "EvalResult", epoch: 0, accuracy: 0.5, loss: 1 })).toEqual([])
    expect(frame(s, 0, 3100, { _tag: "CheckpointResult", version: 0, ok: true, detail: "v0" })).toEqual([])
    heartbeat(s, 4000, [1, 2])
    expect(tick(s, 4000)).toEqual([])
    heartbeat(s, 4101, [1, 2])
    const cmds = tick(s, 4101)
    expect(tags(cmds)[0]).toBe("Alert:RankLost")
    expect(s.deaths.map((d) => [d.rank, d.cause])).toEqual([[0, "no frame for 1001 ms (timeout 1000 ms)"]])
  })

  it("a save past its hold: a SaveTimeout alert names the bound, the rank is declared, and the checkpoint fails over with a hold of its own", () => {
    // Asked at 100 behind the eval: the eval's hold ends at 100 + 1000 + 500, the save's 3000 later.
    const s = endEpoch({ saveTimeoutMs: 3000, evalTimeoutMs: 500 })
    frame(s, 0, 150, { _tag: "EvalResult", epoch: 0, accuracy: 0.5, loss: 1 })
    for (let t = 200; t <= 4600; t += 100) {
      heartbeat(s, t, [1, 2])
      expect(tick(s, t)).toEqual([])
    }
    heartbeat(s, 4651, [1, 2])
    const cmds = tick(s, 4651)
    expect(tags(cmds).slice(0, 2)).toEqual(["Alert:SaveTimeout", "Alert:RankLost"])
    const alert = cmds[0]!._tag === "Alert" ? cmds[0].alert : undefined
    expect(alert?.detail).toBe("rank 0 ran past saveTimeoutMs 3000 on checkpoint 0 (no frame for 4501 ms)")
    expect(s.deaths[0]?.cause).toBe("no frame for 4501 ms (timeout 1000 ms + saveTimeoutMs 3000 for the calls it was asked)")
    expect(deliveries(s, cmds).filter(([, m]) => m._tag === "Checkpoint")).toEqual([[1, { _tag: "Checkpoint", version: 0 }]])
    // Rank 1 now saves: held from 4651 once its frame as it starts is in, it is not stale at 1000 ms of silence.
    heartbeat(s, 4700, [1])
    heartbeat(s, 6000, [2])
    expect(tick(s, 6000)).toEqual([])
    expect(Coordinator.isLive(s, 1)).toBe(true)
  })

  it("a role holder silent since before the ask (it left without a word) is not held: declared at the heartbeat timeout, no SaveTimeout, and the checkpoint fails over", () => {
    // Rank 0's last frame is its contribution at 100, which ended the epoch and asked it for the
    // eval and the checkpoint; it never read them. Held, it would stall the run for saveTimeoutMs.
    const s = endEpoch({ saveTimeoutMs: 600_000, evalTimeoutMs: 600_000 })
    expect(Coordinator.deadlineOf(s, 0)).toBe(1100)
    for (let t = 200; t <= 1100; t += 100) {
      heartbeat(s, t, [1, 2])
      expect(tick(s, t)).toEqual([])
    }
    heartbeat(s, 1101, [1, 2])
    const cmds = tick(s, 1101)
    expect(tags(cmds)[0]).toBe("Alert:RankLost")
    expect(tags(cmds)).not.toContain("Alert:SaveTimeout")
    expect(s.deaths.map((d) => [d.rank, d.cause])).toEqual([[0, "no frame for 1001 ms (timeout 1000 ms)"]])
    expect(deliveries(s, cmds).filter(([, m]) => m._tag === "Checkpoint")).toEqual([[1, { _tag: "Checkpoint", version: 0 }]])
  })

  it("an Eval a trainer without evaluate never answers: the rank's first frame of the next epoch ends its hold, so a rank stuck later is declared at the heartbeat timeout", () => {
    const s = endEpoch({ saveTimeoutMs: 5000, evalTimeoutMs: 5000, checkpointEveryEpochs: 0 })
    heartbeat(s, 150, [0]) // a frame past the ask: the hold counts
    expect(Coordinator.deadlineOf(s, 0)).toBe(6100) // the eval's hold: asked at 100, 1000 + 5000
    frame(s, 0, 200, { _tag: "Progress", epoch: 1, samplesDone: 2, msPerBatch: 1 })
    expect(Coordinator.deadlineOf(s, 0)).toBe(1200)
    heartbeat(s, 1201, [1, 2])
    expect(tags(tick(s, 1201))[0]).toBe("Alert:RankLost")
    expect(s.deaths.map((d) => [d.rank, d.cause])).toEqual([[0, "no frame for 1001 ms (timeout 1000 ms)"]])
  })

  it("a checkpoint's answer ends the hold of the eval asked before it: the rank read the eval first, and answered none", () => {
    const s = endEpoch({ saveTimeoutMs: 5000, evalTimeoutMs: 5000 })
    heartbeat(s, 150, [0]) // as it starts the save: both holds count
    expect(Coordinator.deadlineOf(s, 0)).toBe(11_100) // 1000 + the eval's 5000, then the save's 5000
    frame(s, 0, 200, { _tag: "CheckpointResult", version: 0, ok: true, detail: "v0" })
    expect(Coordinator.deadlineOf(s, 0)).toBe(1200)
    expect(s.evalsUnanswered).toBe(true)
  })

  it("once a rank went past an eval without answering, later evals hold nobody: a rank that left silently after a frame sent past the ask is declared at its timeout", () => {
    const s = make({
      worldSize: 3,
      epochSamples: 30,
      epochs: 3,
      heartbeatTimeoutMs: 1000,
      rolePolicy: { rank: 0 },
      checkpointEveryEpochs: 0
    })
    Coordinator.start(s, 0)
    for (const rank of [0, 1, 2]) params(s, rank, 100, 10)
    expect(Coordinator.deadlineOf(s, 0)).toBe(1100) // held once seen past the ask
    frame(s, 0, 150, { _tag: "Heartbeat" })
    expect(Coordinator.deadlineOf(s, 0)).toBe(600_000 + 1100)
    frame(s, 0, 200, { _tag: "Progress", epoch: 1, samplesDone: 2, msPerBatch: 1 })
    expect(s.evalsUnanswered).toBe(true)
    for (const rank of [0, 1, 2]) params(s, rank, 300, 10)
    expect(s.epoch).toBe(2)
    frame(s, 0, 350, { _tag: "Heartbeat" }) // past the ask of epoch 1's eval, then silent
    expect(Coordinator.deadlineOf(s, 0)).toBe(1350)
  })

  it("an eval past its bound: EvalTimeout; a rank asked for nothing is declared at the heartbeat timeout", () => {
    const s = endEpoch({ saveTimeoutMs: 5000, evalTimeoutMs: 2000, checkpointEveryEpochs: 0 })
    heartbeat(s, 150, [0]) // as it starts the eval
    heartbeat(s, 200, [1])
    const early = tick(s, 1101) // rank 2 holds no call: 1001 ms of silence is too long
    expect(tags(early)[0]).toBe("Alert:RankLost")
    expect(s.deaths.map((d) => d.rank)).toEqual([2])
    for (let t = 300; t <= 3100; t += 100) heartbeat(s, t, [1])
    const late = tick(s, 3151)
    expect(tags(late).slice(0, 2)).toEqual(["Alert:EvalTimeout", "Alert:RankLost"])
    expect(s.deaths.map((d) => d.rank)).toEqual([2, 0])
  })
})

describe("ranks that beat while they run a call the coordinator asked for (beatsDuringCalls)", () => {
  /** Three ranks, one epoch each committed at 100: rank 0 is asked for the eval and the checkpoint. */
  const endEpoch = (options: { readonly saveTimeoutMs?: number; readonly evalTimeoutMs?: number }) => {
    const s = make({
      worldSize: 3,
      epochSamples: 30,
      epochs: 2,
      heartbeatTimeoutMs: 1000,
      rolePolicy: { rank: 0 },
      beatsDuringCalls: true,
      ...options
    })
    Coordinator.start(s, 0)
    params(s, 0, 100, 10)
    params(s, 1, 100, 10)
    expect(tags(params(s, 2, 100, 10))).toContain("Send:Checkpoint")
    return s
  }

  it("a rank stopped at any instant from the ask to well past its answer is declared at its last frame's timeout, and every sample of the epoch stays committed once", () => {
    // The rank's last frame at `lastMs`: before it read the ask, while it evaluated or saved
    // (beats), after it answered, or once it trained the next epoch.
    for (let lastMs = 100; lastMs <= 4000; lastMs += 50) {
      const s = endEpoch({ saveTimeoutMs: 600_000, evalTimeoutMs: 600_000 })
      for (let t = 150; t <= lastMs; t += 50) frame(s, 0, t, { _tag: "Heartbeat" })
      if (lastMs >= 2000) frame(s, 0, 2000, { _tag: "CheckpointResult", version: 0, ok: true, detail: "v0" })
      let declaredMs: number | undefined
      for (let t = lastMs + 50; declaredMs === undefined && t <= lastMs + 3000; t += 50) {
        heartbeat(s, t, [1, 2])
        tick(s, t)
        if (!Coordinator.isLive(s, 0)) declaredMs = t
      }
      expect(declaredMs).toBe(lastMs + 1050) // stale strictly after 1000 ms, at the next tick of 50
      expect(s.deaths.map((d) => d.cause)).toEqual([`no frame for 1050 ms (timeout 1000 ms)`])
      expect(s.summaries.map((e) => [e.lost, e.duplicated])).toEqual([[0, 0]])
    }
  })

  it("a save three times the heartbeat timeout with beats: no death, no alert", () => {
    const s = endEpoch({ saveTimeoutMs: 5000 })
    for (let t = 200; t <= 3100; t += 100) {
      heartbeat(s, t, [0, 1, 2])
      expect(tick(s, t)).toEqual([])
    }
    expect(frame(s, 0, 3100, { _tag: "CheckpointResult", version: 0, ok: true, detail: "v0" })).toEqual([])
    expect(s.deaths).toEqual([])
  })

  it("beats that stop past the save's bound: the rank is declared with SaveTimeout, and the checkpoint fails over", () => {
    const s = endEpoch({ saveTimeoutMs: 3000, evalTimeoutMs: 500 })
    frame(s, 0, 150, { _tag: "EvalResult", epoch: 0, accuracy: 0.5, loss: 1 })
    // The save's hold ends at 100 + 1000 + 500 + 3000; the rank's beater stops 3000 after the save began.
    for (let t = 200; t <= 3200; t += 100) {
      heartbeat(s, t, [0, 1, 2])
      expect(tick(s, t)).toEqual([])
    }
    for (let t = 3300; t <= 4200; t += 100) {
      heartbeat(s, t, [1, 2])
      expect(tick(s, t)).toEqual([])
    }
    heartbeat(s, 4700, [1, 2])
    const cmds = tick(s, 4700)
    expect(tags(cmds).slice(0, 2)).toEqual(["Alert:SaveTimeout", "Alert:RankLost"])
    expect(deliveries(s, cmds).filter(([, m]) => m._tag === "Checkpoint")).toEqual([[1, { _tag: "Checkpoint", version: 0 }]])
  })

  it("a rank asked nothing, or whose call was answered, is judged by its timeout as before; the option must be a boolean", () => {
    const s = endEpoch({})
    expect(Coordinator.deadlineOf(s, 0)).toBe(1100)
    expect(Coordinator.deadlineOf(s, 1)).toBe(1100)
    const made = Coordinator.make({ worldSize: 1, epochSamples: 1, epochs: 1, beatsDuringCalls: "yes" as unknown as boolean }, 0)
    expect("_tag" in made && made.option).toBe("beatsDuringCalls")
  })

  it("per rank: only a rank the shell marked as beating is declared at its timeout inside a save; an unmarked one, or one unmarked again, is held", () => {
    const asked = (mark: ReadonlyArray<boolean>) => {
      const s = make({
        worldSize: 3,
        epochSamples: 30,
        epochs: 2,
        heartbeatTimeoutMs: 1000,
        rolePolicy: { rank: 0 },
        saveTimeoutMs: 600_000
      })
      Coordinator.start(s, 0)
      for (const on of mark) Coordinator.setBeatsDuringCalls(s, 0, on)
      Coordinator.setBeatsDuringCalls(s, 7, true) // out of range: no-op
      params(s, 0, 100, 10)
      params(s, 1, 100, 10)
      expect(tags(params(s, 2, 100, 10))).toContain("Send:Checkpoint")
      frame(s, 0, 150, { _tag: "Heartbeat" }) // as it starts the call
      return s
    }
    const marked = asked([true])
    heartbeat(marked, 1200, [1, 2])
    tick(marked, 1200)
    expect(Coordinator.isLive(marked, 0)).toBe(false)
    expect(marked.deaths.map((d) => d.cause)).toEqual(["no frame for 1050 ms (timeout 1000 ms)"])
    expect(Liveness.beats(marked.liveness, 0)).toBe(false) // its death clears the mark: a joiner at the index starts unmarked
    for (const s of [asked([]), asked([true, false])]) {
      heartbeat(s, 5000, [1, 2])
      tick(s, 5000)
      expect(Coordinator.isLive(s, 0)).toBe(true)
      expect(Coordinator.deadlineOf(s, 0)).toBeGreaterThan(600_000)
    }
  })
})

describe("whole runs with per-rank deadlines (seeded simulation with faults, then a liveness phase)", () => {
  it("with the adaptive detector and holds for saves and evals, every epoch commits every sample once, a save-and-stop is sent at most once, and every run ends", async () => {
    const Simulation = await import("./simulation.ts")
    let completed = 0
    let deaths = 0
    fc.assert(
      fc.property(
        fc.record({
          seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          worldSize: fc.integer({ min: 2, max: 8 }),
          epochSamples: fc.integer({ min: 8, max: 160 }),
          mode: fc.constantFrom("static" as const, "progressive" as const),
          backend: fc.constantFrom("cpu" as const, "ring" as const),
          adaptive: fc.boolean(),
          floorMs: fc.integer({ min: 60, max: 300 }),
          saveTimeoutMs: fc.integer({ min: 1, max: 600 }),
          evalTimeoutMs: fc.integer({ min: 1, max: 600 }),
          kills: fc.integer({ min: 0, max: 3 }),
          hangs: fc.integer({ min: 0, max: 2 }),
          safetySteps: fc.integer({ min: 0, max: 600 })
        }),
        (s) => {
          const result = Simulation.run({
            seed: s.seed,
            options: {
              worldSize: s.worldSize,
              epochSamples: s.epochSamples,
              epochs: 2,
              mode: s.mode,
              backend: s.backend,
              batchSize: 4,
              chunkSamples: 8,
              livenessDetector: s.adaptive ? "adaptive" : "fixed",
              adaptiveTimeoutMinMs: s.floorMs,
              saveTimeoutMs: s.saveTimeoutMs,
              evalTimeoutMs: s.evalTimeoutMs
            },
            kills: s.kills,
            hangs: s.hangs,
            exits: 0,
            lateFrames: 2,
            averageEvery: 2,
            safetySteps: s.safetySteps
          })
          expect(result.shutdownWithSaveCount).toBeLessThanOrEqual(1)
          if (result.state.outcome?.status === "completed") completed += 1
          deaths += result.state.deaths.length
        }
      ),
      { seed: 26_2026, numRuns: 150 }
    )
    expect(completed).toBeGreaterThan(30)
    expect(deaths).toBeGreaterThan(50)
  })
})
