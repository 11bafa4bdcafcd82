/**
 * A scripted rank for transport tests: it runs on the rank's endpoint of any transport and obeys
 * JSON commands from the coordinator. Data frames are `[0x01, u32 index LE, padding]`; replies are
 * JSON text; `send` makes it send the given frames verbatim (e.g. wire frames built by the test).
 * It imports no codec, so worker and process fixtures start fast.
 */
import { getPriority } from "node:os"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Transport from "../../src/transport/transport.ts"

/** How a scripted rank leaves after a burst. */
export type Leave = "exit0" | "exit7" | "throw" | "reject" | "hang" | "oom"

export type Command =
  | { readonly op: "burst"; readonly n: number; readonly bytes: number; readonly then?: Leave }
  | { readonly op: "send"; readonly frames: ReadonlyArray<ReadonlyArray<number>> }
  | { readonly op: "stats" }
  | { readonly op: "nice" }
  /** Prints `text` through `console.log`/`console.error` (a line end added) or `process.stdout`/`stderr.write` (as is). */
  | { readonly op: "print"; readonly to: "log" | "error" | "stdout" | "stderr"; readonly text: string }
  /** Writes raw bytes on the frame channel (processes only): a record header announcing `lengthBytes`, then `bytes` zeros. */
  | { readonly op: "raw"; readonly lengthBytes: number; readonly bytes: number }

export interface Reply {
  readonly received: number
  readonly inOrder: boolean
  readonly stats: Transport.Stats
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export const command = (c: Command): Uint8Array => encoder.encode(JSON.stringify(c))

export const dataFrame = (index: number, bytes = 8): Uint8Array => {
  const out = new Uint8Array(Math.max(5, bytes))
  out[0] = 1
  new DataView(out.buffer).setUint32(1, index, true)
  return out
}

export const indexOf = (frame: Uint8Array): number =>
  frame[0] === 1 ? new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getUint32(1, true) : -1

export const parseReply = (frame: Uint8Array): Reply => JSON.parse(decoder.decode(frame)) as Reply

/** The calling thread's nice value (Linux), or the process's. */
export const ownNice = (): number => getPriority(0)

/** Asks the rank behind `transport`'s peer 0 for its nice value and waits for the answer. */
export const niceOf = (transport: Transport.TransportShape): Effect.Effect<number> =>
  Effect.gen(function* () {
    yield* Effect.orDie(transport.send(0, command({ op: "nice" })))
    while (true) {
      const event = yield* Effect.orDie(Queue.take(transport.inbox))
      if (event._tag === "Frame") return (JSON.parse(decoder.decode(event.bytes)) as { readonly nice: number }).nice
    }
  })

/** Runs the script until the coordinator's link ends or the rank leaves. */
export const run = (
  transport: Transport.TransportShape,
  leave: (how: Leave) => void,
  writeRaw?: (bytes: Uint8Array) => void
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const to = Transport.coordinatorPeer
    let received = 0
    let inOrder = true
    while (true) {
      const event = yield* Queue.take(transport.inbox).pipe(Effect.catch(() => Effect.succeed(undefined)))
      if (event === undefined || (event._tag === "Ended" && event.peer === to)) return
      if (event._tag !== "Frame") continue
      if (event.bytes[0] === 1) {
        if (indexOf(event.bytes) !== received) inOrder = false
        received += 1
        continue
      }
      const c = JSON.parse(decoder.decode(event.bytes)) as Command
      switch (c.op) {
        case "burst": {
          for (let i = 0; i < c.n; i++) yield* Effect.orDie(transport.send(to, dataFrame(i, c.bytes)))
          if (c.then !== undefined) {
            leave(c.then)
            if (c.then !== "hang") return
          }
          break
        }
        case "send": {
          for (const frame of c.frames) yield* Effect.orDie(transport.send(to, Uint8Array.from(frame)))
          break
        }
        case "nice": {
          // The calling thread's nice value on Linux (a worker's own), the process's elsewhere.
          yield* Effect.orDie(transport.send(to, encoder.encode(JSON.stringify({ nice: getPriority(0) }))))
          break
        }
        case "print": {
          if (c.to === "log") console.log(c.text)
          else if (c.to === "error") console.error(c.text)
          else {
            // Waits until the text is handed to the OS: a process that exits right after a big
            // write to a full pipe loses what Node still queued.
            const stream = c.to === "stdout" ? process.stdout : process.stderr
            yield* Effect.callback<void>((resume) => void stream.write(c.text, () => resume(Effect.void)))
          }
          yield* Effect.orDie(transport.send(to, encoder.encode(JSON.stringify({ printed: c.text.length }))))
          break
        }
        case "raw": {
          const header = new Uint8Array(4)
          new DataView(header.buffer).setUint32(0, c.lengthBytes, true)
          writeRaw?.(header)
          // In 1 MiB writes: the host stops reading after the header, so these block until it kills us.
          for (let left = c.bytes; left > 0; left -= 1 << 20) writeRaw?.(new Uint8Array(Math.min(left, 1 << 20)))
          break
        }
        case "stats": {
          const stats = yield* transport.stats
          yield* Effect.orDie(transport.send(to, encoder.encode(JSON.stringify({ received, inOrder, stats }))))
          break
        }
      }
    }
  })

/** The prints of `printAndExit`, one command each: both console methods, both raw streams, a line end split over two writes, CRLF, a line of 10,000 bytes, a last line without end. */
export const prints: ReadonlyArray<Command> = [
  { op: "print", to: "log", text: "hello from console.log" },
  { op: "print", to: "error", text: "oops from console.error" },
  { op: "print", to: "stdout", text: "partial " },
  { op: "print", to: "stdout", text: "line\r\nsecond line\n" },
  { op: "print", to: "stdout", text: `${"y".repeat(10_000)}\n` },
  { op: "print", to: "stderr", text: "no line end" }
]

/** The lines `prints` gives, stdout's then stderr's, each in order (with the default 4096-byte line bound). */
export const printedLines = {
  stdout: ["hello from console.log", "partial line", "second line", `${"y".repeat(4096)}… (5904 bytes cut)`],
  stderr: ["oops from console.error", "no line end"]
}

/**
 * Runs `prints` on `rank` of `transport`, then makes it exit 0; returns the frames' count and the
 * end, once the end arrived (every line is forwarded before it).
 */
export const printAndExit = (
  transport: Transport.TransportShape,
  rank = 0
): Effect.Effect<{ readonly replies: number; readonly ended: Transport.Event }> =>
  Effect.gen(function* () {
    for (const c of prints) yield* Effect.orDie(transport.send(rank, command(c)))
    yield* Effect.orDie(transport.send(rank, command({ op: "burst", n: 2, bytes: 8, then: "exit0" })))
    let replies = 0
    while (true) {
      const event = yield* Effect.orDie(Queue.take(transport.inbox))
      if (event._tag === "Ended") return { replies, ended: event }
      if (event._tag === "Frame") replies += 1
    }
  })
