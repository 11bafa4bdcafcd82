import { describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as NodeRuntime from "../../src/platform/node.ts"
import type * as RuntimeTypes from "../../src/platform/types.ts"

const runtime = Runtime.detect()
const entry = new URL("../transport/fixtures/raw-stream.mjs", import.meta.url).href

/** Starts the streaming worker, terminates it once `killAfter` messages arrived, and records what follows. */
const terminateMidStream = (killAfter: number) =>
  new Promise<{ readonly received: number; readonly gaps: number; readonly after: ReadonlyArray<string> }>((resolve) => {
    const after: Array<string> = []
    let received = 0
    let gaps = 0
    let killed = false
    const child: RuntimeTypes.RawChild = NodeRuntime.spawnWorker(
      { entry, rank: 0, data: null },
      {
        message: (message) => {
          if (after.length > 0) after.push("message")
          const index = new DataView(message.buffer, message.byteOffset, message.byteLength).getUint32(0, true)
          if (index !== received) gaps += 1
          received += 1
          if (received >= killAfter && !killed) {
            killed = true
            child.kill()
          }
        },
        error: (error) => after.push(`error ${String(error)}`),
        closed: () => after.push("closed"),
        exit: () => {
          after.push("exit")
          resolve({ received, gaps, after })
        }
      }
    )
  })

describe(`spawnWorker (${runtime}): the end of a terminated worker`, () => {
  it("every message comes in order before the end: `closed` then `exit`, or `exit` alone", async () => {
    for (let run = 0; run < 5; run++) {
      const { received, gaps, after } = await terminateMidStream(1000 + run * 700)
      expect(gaps).toBe(0)
      expect(received).toBeGreaterThanOrEqual(1000 + run * 700)
      // `closed` usually comes first; when `exit` wins the race (Deno for an idle worker, Node on
      // a loaded machine), the queued messages were drained before it and `closed` is not told.
      expect(after).toEqual(after.length === 1 ? ["exit"] : ["closed", "exit"])
    }
  })
})

describe(`spawnWorker (${runtime}): frames on the port`, () => {
  it("a view on part of a buffer arrives as exactly its bytes, both ways, and the sender's buffer stays whole", async () => {
    const echo = new URL("../transport/fixtures/echo-tail.ts", import.meta.url).href
    const answers: Array<Array<number>> = []
    let child: RuntimeTypes.RawChild | undefined
    await new Promise<void>((resolve, reject) => {
      child = NodeRuntime.spawnWorker(
        { entry: echo, rank: 0, data: null },
        {
          message: (message) => {
            answers.push([...message])
            if (answers.length === 2) resolve()
          },
          error: (error) => reject(error),
          exit: () => reject(new Error("the echo worker exited early"))
        }
      )
      const shared = Uint8Array.from([9, 9, 1, 2, 3, 4, 9, 9])
      child.post(shared.subarray(2, 6))
      // The part was copied: the caller's buffer is neither detached nor changed.
      expect([...shared]).toEqual([9, 9, 1, 2, 3, 4, 9, 9])
      child.post(Uint8Array.from([5, 6, 7]))
    })
    child?.kill()
    expect(answers).toEqual([
      [2, 3, 4],
      [6, 7]
    ])
  }, 30_000)
})

describe(`spawnChild (${runtime}): a child that exits right after its last frame`, () => {
  const lastWords = new URL("./fixtures/last-words.ts", import.meta.url).href
  const once = (size: number) =>
    new Promise<ReadonlyArray<string>>((resolve) => {
      const seen: Array<string> = []
      NodeRuntime.spawnChild(
        { entry: lastWords, rank: 0, data: size },
        {
          message: (message) => seen.push(`frame ${message.byteLength} ${message[size - 1]}`),
          output: (stream, chunk) => seen.push(`${stream} ${new TextDecoder().decode(chunk).trim()}`),
          error: (error) => seen.push(`error ${String(error)}`),
          exit: (code) => {
            seen.push(`exit ${code}`)
            resolve(seen)
          }
        }
      )
    })

  // Bun's and Deno's `close` can come before the frame channel's last bytes were read: the
  // child's last frame (a rank's `Crashing`) must still come before its exit.
  it("its frame and its line come before its exit, many children at once", async () => {
    const sizes = [16, 300_000, 16, 1_000_000, 64, 300_000, 16, 2_000_000]
    const ends = await Promise.all(sizes.map(once))
    for (const [k, seen] of ends.entries()) {
      const size = sizes[k]!
      expect(seen).toContain(`frame ${size} ${(size - 1) % 251}`)
      expect(seen).toContain("stdout last line")
      expect(seen.at(-1)).toBe("exit 1")
    }
  })
})
