// Which refusals `WebSocketClient.connect` tries again within its join timeout: those that say
// "later" and a join timeout (the link lost the join; this client sends it at once), never a
// refusal of who the client is or what it sent.
import { describe, expect, it } from "vitest"
import * as Transport from "../../src/transport/transport.ts"
import { isRetryableRefusal } from "../../src/transport/web-socket-client.ts"

describe("isRetryableRefusal", () => {
  it("retries 1013, 4008 and 4004; not a wrong token, a taken or out-of-range rank, or a bad join", () => {
    const { TryAgainLater, AddressBusy, JoinTimeout, WrongToken, DuplicateRank, RankOutOfRange, BadJoin } = Transport.CloseCode
    expect([TryAgainLater, AddressBusy, JoinTimeout].map(isRetryableRefusal)).toEqual([true, true, true])
    expect([WrongToken, DuplicateRank, RankOutOfRange, BadJoin].map(isRetryableRefusal)).toEqual([false, false, false, false])
  })
})
