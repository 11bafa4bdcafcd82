import { basename } from "node:path"
import { describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"

// The runner's own binary is the independent witness of which runtime we are on.
const expectedRuntime = (): string => {
  const exe = basename(process.execPath).replace(/\.exe$/, "")
  if (exe.startsWith("bun")) return "bun"
  if (exe.startsWith("deno")) return "deno"
  if (exe.startsWith("node")) return "node"
  throw new Error(`cannot tell the runtime from execPath ${process.execPath}`)
}

describe("runtime detection", () => {
  it("names the runtime the suite is running under", () => {
    expect(Runtime.detect()).toBe(expectedRuntime())
    expect(Runtime.version()).toMatch(/^\d+\.\d+\.\d+/)
  })

  it("prefers Bun and Deno over the Node version they both advertise", () => {
    const process = { versions: { node: "26.3.0" } }
    expect(Runtime.detect({ Bun: { version: "1.4.5" }, process })).toBe("bun")
    expect(Runtime.detect({ Deno: { version: { deno: "2.9.6" } }, process })).toBe("deno")
    expect(Runtime.detect({ process })).toBe("node")
    expect(Runtime.detect({})).toBe("unknown")
    expect(Runtime.describe({ Deno: { version: { deno: "2.9.6" } }, process })).toBe("deno 2.9.6")
    expect(Runtime.describe({})).toBe("unknown unknown")
  })
})
