// The package's `cohort/transport` entry exports the WebSocket serve and connect (docs/install.md).
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"

describe("the cohort/transport entry", () => {
  it("package.json maps ./transport to the build of a module whose WebSocket has serve and connect, with the close codes", async () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      exports: Record<string, { default: string; types: string }>
    }
    expect(pkg.exports["./transport"]).toEqual({ types: "./dist/src/transport/index.d.ts", default: "./dist/src/transport/index.js" })
    // The build compiles src/transport/index.ts one to one into dist/src/transport/index.js.
    const source = pkg.exports["./transport"]!.default.replace(/^\.\/dist\//, "./").replace(/\.js$/, ".ts")
    const entry = (await import(new URL(`../../${source}`, import.meta.url).href)) as typeof import("../../src/transport/index.ts")
    expect([typeof entry.WebSocket.serve, typeof entry.WebSocket.connect, typeof entry.WebSocketRanks.host]).toEqual([
      "function",
      "function",
      "function"
    ])
    expect([entry.Transport.CloseCode.WrongToken, entry.Transport.CloseCode.RunFormed, entry.Transport.CloseCode.RankDead]).toEqual([
      4001, 4010, 4011
    ])
    expect(entry.WebSocket.joinProtocolVersion).toBe(2)
  })
})
