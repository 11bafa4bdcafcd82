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
    const child: RuntimeTypes.RawChild = NodeRuntime.spawnWorker({ entry, rank: 0, data: null }, {
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
    })
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
