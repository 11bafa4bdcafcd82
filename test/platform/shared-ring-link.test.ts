/**
 * The shared-memory ring link's own logic (docs/ring.md), both sides in one thread over a real
 * `SharedArrayBuffer` and a fake port that delivers after random delays (order kept): every step
 * arrives once, in the order sent, bit for bit, whichever lane it took (a slot, or the port when
 * every slot was taken or it did not fit); a closed receiver delivers nothing more, and a sender
 * whose receiver closed drops its steps without throwing.
 */
import fc from "fast-check"
import { MessageChannel, Worker } from "node:worker_threads"
import { describe, expect, it } from "vitest"
import * as Runtime from "../../src/platform/detect.ts"
import * as SharedRingLink from "../../src/platform/shared-ring-link.ts"

const SEED = 20261202

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A port whose messages reach `receiver` after `delayMs()` each, never before the previous one. */
const portTo = (receiver: () => SharedRingLink.Receiver, delayMs: () => number) => {
  let last = Promise.resolve()
  let posted = 0
  const post = (message: SharedRingLink.PortMessage): void => {
    posted += 1
    const wait = delayMs()
    last = last.then(() => sleep(wait)).then(() => receiver().portMessage(message))
  }
  return { post, drained: () => last, posted: () => posted }
}

const stepOf = (index: number, length: number, f64: boolean): SharedRingLink.Step => {
  const data = f64 ? new Float64Array(length) : new Float32Array(length)
  for (let i = 0; i < length; i++) data[i] = index * 1000 + i + 0.5
  return { generation: 3, round: index >> 2, step: index & 3, data }
}

const copyOf = (step: SharedRingLink.Step) => ({ ...step, data: step.data.slice() })

/** Until `check()` holds, at most `ms`. */
const until = async (check: () => boolean, ms: number): Promise<void> => {
  const end = Date.now() + ms
  while (!check() && Date.now() < end) await sleep(1)
}

describe("SharedRingLink: one direction of a worker ring link over shared memory", () => {
  it("delivers every step once, in order and bit for bit, across slots and the port, with random delays on both sides", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 4 }),
        fc.array(fc.record({ length: fc.integer({ min: 0, max: 300 }), f64: fc.boolean(), pauseMs: fc.integer({ min: 0, max: 3 }) }), {
          minLength: 1,
          maxLength: 24
        }),
        fc.integer({ min: 0, max: 3 }),
        async (slots, plan, portDelayMs) => {
          const delivered: Array<SharedRingLink.Step> = []
          const receiver = new SharedRingLink.Receiver((step) => delivered.push(step))
          const port = portTo(
            () => receiver,
            () => Math.floor(Math.random() * (portDelayMs + 1))
          )
          const sender = new SharedRingLink.Sender(port.post, slots)
          const sent: Array<SharedRingLink.Step> = []
          for (const [index, { length, f64, pauseMs }] of plan.entries()) {
            const step = stepOf(index, length, f64)
            sent.push(copyOf(step))
            sender.send(step)
            if (pauseMs > 0) await sleep(pauseMs)
          }
          await port.drained()
          await until(() => delivered.length >= sent.length, 2000)
          expect(delivered.map((s) => [s.generation, s.round, s.step, s.data.constructor.name, [...s.data]])).toEqual(
            sent.map((s) => [s.generation, s.round, s.step, s.data.constructor.name, [...s.data]])
          )
          receiver.close()
        }
      ),
      { seed: SEED, numRuns: 60 }
    )
  })

  it("uses the slots when they are free: only the announcement and the steps that found every slot taken or did not fit take the port", async () => {
    const delivered: Array<SharedRingLink.Step> = []
    const receiver = new SharedRingLink.Receiver((step) => delivered.push(step))
    const port = portTo(
      () => receiver,
      () => 0
    )
    const sender = new SharedRingLink.Sender(port.post, 2)
    // Three steps before the receiver looks: two fill the slots, the third takes the port.
    for (const index of [0, 1, 2]) sender.send(stepOf(index, 100, true))
    await port.drained()
    await until(() => delivered.length === 3, 2000)
    expect(port.posted()).toBe(2)
    expect(sender.overflow).toBe(1)
    // A step far larger than a slot takes the port; small ones after it take the slots again.
    sender.send(stepOf(3, 5000, true))
    sender.send(stepOf(4, 100, false))
    await port.drained()
    await until(() => delivered.length === 5, 2000)
    expect(port.posted()).toBe(3)
    expect(delivered.map((s) => [s.round, s.step, s.data.length])).toEqual([
      [0, 0, 100],
      [0, 1, 100],
      [0, 2, 100],
      [0, 3, 5000],
      [1, 0, 100]
    ])
    receiver.close()
  })

  it("with 0 slots every step takes the port, in order", async () => {
    const delivered: Array<SharedRingLink.Step> = []
    const receiver = new SharedRingLink.Receiver((step) => delivered.push(step))
    const port = portTo(
      () => receiver,
      () => 1
    )
    const sender = new SharedRingLink.Sender(port.post, 0)
    for (const index of [0, 1, 2, 3]) sender.send(stepOf(index, 10, index % 2 === 0))
    await port.drained()
    expect(port.posted()).toBe(4)
    expect(delivered.map((s) => s.step)).toEqual([0, 1, 2, 3])
  })

  it("a receiver closed while it waits delivers nothing more, and its sender drops later steps without throwing", async () => {
    const delivered: Array<SharedRingLink.Step> = []
    const receiver = new SharedRingLink.Receiver((step) => delivered.push(step))
    const port = portTo(
      () => receiver,
      () => 0
    )
    const sender = new SharedRingLink.Sender(port.post, 4)
    sender.send(stepOf(0, 50, true))
    await port.drained()
    await until(() => delivered.length === 1, 2000)
    // The receiver now waits on the segment (Atomics.waitAsync); closing it ends the wait.
    receiver.close()
    sender.send(stepOf(1, 50, true))
    sender.send(stepOf(2, 50, true))
    await port.drained()
    await sleep(20)
    expect(delivered.map((s) => s.step)).toEqual([0])
    expect(port.posted()).toBe(1)
  })

  it("a closed sender's steps written before its close are still delivered", async () => {
    const delivered: Array<SharedRingLink.Step> = []
    const receiver = new SharedRingLink.Receiver((step) => delivered.push(step))
    const port = portTo(
      () => receiver,
      () => 5
    )
    const sender = new SharedRingLink.Sender(port.post, 4)
    sender.send(stepOf(0, 50, true))
    sender.send(stepOf(1, 50, true))
    sender.close()
    sender.send(stepOf(2, 50, true))
    await port.drained()
    await until(() => delivered.length >= 2, 2000)
    await sleep(20)
    expect(delivered.map((s) => s.step)).toEqual([0, 1])
    receiver.close()
  })

  it("this runtime has the shared-memory lane (Node 20, Bun and Deno all do)", () => {
    expect(SharedRingLink.sharedMemoryAvailable()).toBe(true)
  })
})

describe("SharedRingLink between two real threads", () => {
  it("a worker sending 2000 steps with random pauses, waiting for an answer after half of them: the parent receives every one, in order, bit for bit, with 1 and 4 slots", async () => {
    for (const slots of [1, 4]) {
      const { port1, port2 } = new MessageChannel()
      const answers = new MessageChannel()
      const entry = new URL("./fixtures/shared-ring-sender.ts", import.meta.url)
      const underNode = Runtime.detect() === "node"
      const url = underNode ? new URL("../../src/platform/worker-bootstrap.mjs", import.meta.url) : entry
      const count = 2000
      const delivered: Array<SharedRingLink.Step> = []
      const receiver = new SharedRingLink.Receiver((step) => {
        delivered.push(step)
        if (step.step === 1) answers.port1.postMessage("ack")
      })
      let done = false
      port1.on("message", (m: unknown) => {
        if (m === "done") done = true
        else if (SharedRingLink.isPortMessage(m)) receiver.portMessage(m)
      })
      const worker = new Worker(url, {
        workerData: { cohortEntry: entry.href, port: port2, acks: answers.port2, count, slots, seed: SEED + slots },
        transferList: [port2, answers.port2]
      })
      await until(() => done && delivered.length >= count, 60_000)
      await worker.terminate()
      answers.port1.close()
      receiver.close()
      port1.close()
      expect(delivered.length).toBe(count)
      const wrong = delivered.findIndex(
        (s, index) => s.round !== index || s.data[0] !== index * 1000 || s.data[s.data.length - 1] !== index * 1000 + s.data.length - 1
      )
      expect(wrong).toBe(-1)
    }
  }, 120_000)
})
