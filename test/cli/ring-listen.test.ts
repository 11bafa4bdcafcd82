// `cohort join --ring-listen HOST[:PORT]|off --ring-advertise HOST`: where a joined rank listens
// for its ring neighbours and what it advertises (docs/ring.md), on every runtime (the default
// asks the system which interface reaches the coordinator).
import { describe, expect, it } from "vitest"
import { ringListenOf } from "../../src/cli/join.ts"
import { UsageError } from "../../src/cli/flags.ts"

const url = "ws://127.0.0.1:7070/"

describe("join --ring-listen and --ring-advertise", () => {
  it("by default listens on the interface that reaches the coordinator, on a free port, and advertises it", async () => {
    expect(await ringListenOf(url, undefined, undefined)).toEqual({ host: "127.0.0.1", port: 0, advertise: "127.0.0.1" })
    expect(await ringListenOf(url, "0.0.0.0:7300", undefined)).toEqual({ host: "0.0.0.0", port: 7300, advertise: "127.0.0.1" })
  })

  it("takes a listen address, an IPv6 one in brackets, and another address to advertise; off: no listener", async () => {
    expect(await ringListenOf(url, "10.1.2.3:7300", undefined)).toEqual({ host: "10.1.2.3", port: 7300, advertise: "10.1.2.3" })
    expect(await ringListenOf(url, "[::1]", undefined)).toEqual({ host: "::1", port: 0, advertise: "::1" })
    expect(await ringListenOf(url, "0.0.0.0:7300", "gateway.example")).toEqual({
      host: "0.0.0.0",
      port: 7300,
      advertise: "gateway.example"
    })
    expect(await ringListenOf(url, "off", undefined)).toBeUndefined()
  })

  it("refuses a malformed address, a port out of range, an advertised port, and an advertisement without a listener", async () => {
    for (const [listen, advertise] of [
      ["a:b:c", undefined],
      ["10.0.0.1:99999", undefined],
      [undefined, "10.0.0.1:7300"],
      ["off", "10.0.0.1"]
    ] as const) {
      await expect(ringListenOf(url, listen, advertise)).rejects.toBeInstanceOf(UsageError)
    }
  })
})
