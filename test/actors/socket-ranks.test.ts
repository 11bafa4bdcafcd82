// `SocketRanks.joinRanks`'s own bound: how many of its ranks connect at once (the ranks
// themselves run in the churn tests, test/bench/churn.full.test.ts and test/actors/churn-serve).
import { describe, expect, it } from "vitest"
import * as SocketRanks from "../../actors/rank/socket-ranks.ts"

describe("joinRanks", () => {
  it("refuses joinsAtOnceMax below 1 or not an integer with JoinRanksError, before connecting anything", () => {
    const options = {
      url: "ws://127.0.0.1:9/",
      runToken: "socket-ranks-test-0123456789abcdef",
      rank: "auto",
      trainer: "t.ts",
      saveDir: "s",
      say: () => {},
      ranks: 2
    } as const
    for (const bad of [0, -1, 1.5]) {
      expect(() => SocketRanks.joinRanks({ ...options, joinsAtOnceMax: bad })).toThrow(SocketRanks.JoinRanksError)
    }
    expect(SocketRanks.joinsAtOnceMaxDefault).toBe(8)
  })
})
