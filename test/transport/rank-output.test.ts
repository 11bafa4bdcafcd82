import { describe, expect, it } from "vitest"
import * as RankOutput from "../../src/transport/rank-output.ts"

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)

/** A splitter for rank 2 with a clock the test sets; returns the lines it forwarded. */
const splitter = (options: Omit<RankOutput.Options, "onOutput"> = {}) => {
  const lines: Array<string> = []
  let now = 0
  const made = RankOutput.make(2, { ...options, onOutput: (rank, line) => lines.push(`${rank}:${line}`) }, () => now)
  return { lines, push: made.push, end: made.end, at: (ms: number) => void (now = ms) }
}

describe("rank output: lines from raw chunks", () => {
  it("splits on \\n across chunks, drops one \\r before it, keeps the streams apart and forwards partial last lines at the end", () => {
    const s = splitter()
    s.push("stdout", bytes("a\nb"))
    s.push("stderr", bytes("x"))
    s.push("stdout", bytes("c\r\n\nd"))
    s.push("stderr", bytes("y\r\r\n"))
    expect(s.lines).toEqual(["2:a", "2:bc", "2:", "2:xy\r"])
    s.end()
    expect(s.lines).toEqual(["2:a", "2:bc", "2:", "2:xy\r", "2:d"])
  })

  it("keeps the first outputLineBytesMax bytes of a longer line and says how many were cut", () => {
    const s = splitter({ outputLineBytesMax: 4 })
    s.push("stdout", bytes("abcdefg"))
    s.push("stdout", bytes("hij\nxyz\n1234\n12345"))
    s.end()
    expect(s.lines).toEqual(["2:abcd… (6 bytes cut)", "2:xyz", "2:1234", "2:1234… (1 bytes cut)"])
  })

  it("decodes UTF-8 split across chunks", () => {
    const s = splitter()
    const text = bytes("héllo ✓\n")
    s.push("stdout", text.subarray(0, 2))
    s.push("stdout", text.subarray(2, 8))
    s.push("stdout", text.subarray(8))
    expect(s.lines).toEqual(["2:héllo ✓"])
  })
})

describe("rank output: at most outputLinesPerSecondMax lines per rank per second", () => {
  it("drops the lines past the limit in a window, counts them exactly, and says so before the next line forwarded", () => {
    const s = splitter({ outputLinesPerSecondMax: 3 })
    s.at(1000)
    s.push("stdout", bytes("1\n2\n"))
    s.push("stderr", bytes("3\n4\n"))
    s.at(1999)
    s.push("stdout", bytes("5\n"))
    expect(s.lines).toEqual(["2:1", "2:2", "2:3"])
    s.at(2000)
    s.push("stdout", bytes("6\n7\n8\n9\n"))
    expect(s.lines).toEqual(["2:1", "2:2", "2:3", "2:(2 lines dropped: over 3 lines per second)", "2:6", "2:7", "2:8"])
    s.end()
    expect(s.lines.slice(7)).toEqual(["2:(1 line dropped: over 3 lines per second)"])
  })

  it("opens a window with the first line after the last one closed, not on a fixed grid", () => {
    const s = splitter({ outputLinesPerSecondMax: 1 })
    s.at(500)
    s.push("stdout", bytes("a\n"))
    s.at(1499)
    s.push("stdout", bytes("b\n"))
    s.at(1500)
    s.push("stdout", bytes("c\n"))
    s.at(5000)
    s.push("stdout", bytes("d\n"))
    s.end()
    expect(s.lines).toEqual(["2:a", "2:(1 line dropped: over 1 lines per second)", "2:c", "2:d"])
  })

  it("has the documented defaults: 4096 bytes a line, 100 lines a second", () => {
    expect([RankOutput.outputLineBytesMaxDefault, RankOutput.outputLinesPerSecondMaxDefault]).toEqual([4096, 100])
    expect(RankOutput.prefixed(7, "hi")).toBe("[rank 7] hi")
  })
})
