// A rank's watch on its coordinator does not count the time the rank spent in a call the
// coordinator asked for (a save, an eval) as the coordinator's silence: a synchronous trainer
// lets no frame in meanwhile (docs/liveness.md). Explicit times, a stand-in link.
import { describe, expect, it } from "vitest"
import * as CoordinatorGone from "../../actors/rank/rank-coordinator-gone.ts"
import type { Link } from "../../actors/rank/rank-data.ts"

const watchWith = (arrivals: { lastMs: number | undefined }) =>
  CoordinatorGone.watch({
    link: { rank: 0, transport: { lastArrivalMs: () => arrivals.lastMs } } as unknown as Link,
    rank: 0,
    saveDir: "/nonexistent",
    coordinatorTimeoutMs: 1000,
    startedMs: 0,
    save: async () => {},
    epoch: () => 0,
    leave: () => {}
  })

describe("the coordinator watch and calls the coordinator asked for", () => {
  it("a 3000 ms save 100 ms after a frame: the coordinator is silent once 1000 ms of listening time passed, not before", () => {
    const arrivals = { lastMs: 500 as number | undefined }
    const watch = watchWith(arrivals)
    watch.asked(600, 3600)
    expect(watch.silence(3600)).toBe(undefined)
    expect(watch.silence(4500)).toBe(undefined) // 100 ms of listening before the save, 900 after it
    expect(watch.silence(4501)).toEqual({ reason: "CoordinatorSilent", silentMs: 1001 })
  })

  it("a frame that arrives after the call counts from itself: the call's time no longer matters", () => {
    const arrivals = { lastMs: 500 as number | undefined }
    const watch = watchWith(arrivals)
    watch.asked(600, 3600)
    arrivals.lastMs = 3700
    expect(watch.silence(4700)).toBe(undefined)
    expect(watch.silence(4701)).toEqual({ reason: "CoordinatorSilent", silentMs: 1001 })
  })

  it("time in training is the coordinator's silence as before: without asked calls the timeout runs from the last frame", () => {
    const watch = watchWith({ lastMs: 500 })
    expect(watch.silence(1500)).toBe(undefined)
    expect(watch.silence(1501)).toEqual({ reason: "CoordinatorSilent", silentMs: 1001 })
  })
})
