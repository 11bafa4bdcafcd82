// The save folder of a rank that `cohort join`ed a served run (its own host's, out of the coordinator's sight).
import { describe, expect, it } from "vitest"
import * as SocketRank from "../../actors/rank/socket-rank.ts"

describe("a joined rank's save folder", () => {
  it("without --save-dir each run has its own folder under it, named by the run id the welcome carries", () => {
    expect(SocketRank.runSaveDir("/home/me/cohort-save", true, { worldSize: 2, runId: "Xq3f9LmA2c" })).toBe(
      "/home/me/cohort-save/Xq3f9LmA2c"
    )
    expect(SocketRank.runSaveDir("/home/me/cohort-save", true, { worldSize: 2, runId: "ab_C-9" })).toBe("/home/me/cohort-save/ab_C-9")
  })

  it("a given --save-dir is used as it is", () => {
    expect(SocketRank.runSaveDir("/data/saves", false, { worldSize: 2, runId: "Xq3f9LmA2c" })).toBe("/data/saves")
  })

  it("a welcome without a run id (an older coordinator), or with one that is not a plain folder name, saves in the folder itself", () => {
    for (const run of [
      { worldSize: 2 },
      { runId: "../escape" },
      { runId: "a/b" },
      { runId: "" },
      { runId: 7 },
      { runId: "x".repeat(65) },
      undefined,
      null
    ]) {
      expect(SocketRank.runSaveDir("/home/me/cohort-save", true, run)).toBe("/home/me/cohort-save")
    }
  })
})

describe("how long a joined rank waits for its coordinator", () => {
  it("by default a minute, or twice the coordinator's heartbeat timeout when that is longer; a given --coordinator-reconnect-ms as it is", () => {
    expect(SocketRank.reconnectWindowMsOf({ heartbeatTimeoutMs: 10_000 })).toBe(SocketRank.coordinatorReconnectMsDefault)
    expect(SocketRank.coordinatorReconnectMsDefault).toBe(60_000)
    expect(SocketRank.reconnectWindowMsOf({ heartbeatTimeoutMs: 45_000 })).toBe(90_000)
    for (const run of [{}, { heartbeatTimeoutMs: "x" }, { heartbeatTimeoutMs: Number.POSITIVE_INFINITY }, undefined, null]) {
      expect(SocketRank.reconnectWindowMsOf(run)).toBe(60_000)
    }
    expect(SocketRank.reconnectWindowMsOf({ heartbeatTimeoutMs: 45_000 }, 4000)).toBe(4000)
  })
})
