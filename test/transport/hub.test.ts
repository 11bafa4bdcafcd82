import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as DeathReport from "../../src/actor/death-report.ts"
import * as Batch from "../../src/transport/internal/batch.ts"
import * as Hub from "../../src/transport/internal/hub.ts"
import * as Transport from "../../src/transport/transport.ts"

/** A frame that names its link and its index: `[link, index >> 8, index & 0xff]`. */
const frame = (link: number, index: number) => Uint8Array.of(link, index >> 8, index & 0xff)
const message = (link: number, from: number, count: number) =>
  Batch.encode(
    Array.from({ length: count }, (_, i) => frame(link, from + i)),
    3 * count
  )

/** A port that records the close codes asked of it (unit test: the hub is the unit). */
const port = (closes: Array<number>): Hub.Port => ({ post: () => {}, close: (code) => void closes.push(code) })

const takeAll = (hub: Hub.Hub, n: number) =>
  Effect.gen(function* () {
    const out: Array<Transport.Event> = []
    for (let i = 0; i < n; i++) out.push(yield* Effect.orDie(Queue.take(hub.transport.inbox)))
    return out
  })

describe("hub: per-link fairness and frame bounds (docs/design.md §3.10, docs/security.md)", () => {
  it.live("one link's 60,000-frame backlog delays another link's frame by at most one turn, not the backlog", () =>
    Effect.gen(function* () {
      const hub = yield* Hub.make(Transport.coordinatorPeer)
      const closes: Array<number> = []
      const flood = hub.attach(0, port(closes))
      const honest = hub.attach(1, port(closes))
      for (let m = 0; m < 60; m++) flood.receive(message(0, m * 1000, 1000))
      honest.receive(message(1, 0, 1))
      flood.end(DeathReport.killed("SIGKILL"))
      const events = yield* takeAll(hub, 60_002)
      const honestAt = events.findIndex((e) => e._tag === "Frame" && e.bytes[0] === 1)
      // The pump stops once the inbox holds 64 frames (one 64-frame turn),
      // or earlier when its 4 ms run ends; the honest frame then waits for at most one flood turn.
      assert.isAtMost(honestAt, 64 + 64 + 64)
      // Each link's frames stay in order, and the flood's end comes after its last frame.
      const floodIndices = events
        .filter((e) => e._tag === "Frame" && e.bytes[0] === 0)
        .map((e) => (e as Transport.Frame).bytes[1]! * 256 + (e as Transport.Frame).bytes[2]!)
      assert.strictEqual(floodIndices.length, 60_000)
      assert.isTrue(floodIndices.every((v, i) => v === (i & 0xffff)))
      assert.deepStrictEqual(events[60_001], { _tag: "Ended", peer: 0, cause: DeathReport.killed("SIGKILL") })
      assert.deepStrictEqual(closes, [])
    })
  )

  it.live("frames keep their arrival stamp while they wait, and lastArrivalMs is the latest message's", () =>
    Effect.gen(function* () {
      const hub = yield* Hub.make(Transport.coordinatorPeer)
      const link = hub.attach(3, port([]))
      assert.strictEqual(hub.transport.lastArrivalMs(3), undefined)
      const before = Date.now()
      link.receive(message(3, 0, 2))
      const [first] = yield* takeAll(hub, 1)
      assert.strictEqual(first!._tag, "Frame")
      const arrivedMs = (first as Transport.Frame).arrivedMs
      assert.isAtLeast(arrivedMs, before)
      assert.strictEqual(hub.transport.lastArrivalMs(3), arrivedMs)
      assert.strictEqual(hub.transport.lastArrivalMs(4), undefined)
    })
  )

  it.live("a header declaring more than messageFramesMax frames closes the link with 4007 before any frame is built", () =>
    Effect.gen(function* () {
      const hub = yield* Hub.make(Transport.coordinatorPeer, { messageFramesMax: 4096 })
      const closes: Array<number> = []
      const link = hub.attach(0, port(closes))
      // 4,194,303 empty frames: a 16 MiB message that would otherwise build four million views.
      const huge = new Uint8Array(4 + 4 * 4_194_303)
      new DataView(huge.buffer).setUint32(0, 4_194_303, true)
      link.receive(huge)
      assert.deepStrictEqual(closes, [Transport.CloseCode.TooManyFrames])
      const stats = yield* hub.transport.stats
      assert.deepStrictEqual([stats.messagesReceived, stats.refusedMessages, stats.framesReceived], [0, 1, 0])
      // Exactly messageFramesMax is accepted on another link.
      const other = hub.attach(1, port(closes))
      other.receive(message(1, 0, 4096))
      assert.deepStrictEqual(closes, [Transport.CloseCode.TooManyFrames])
      assert.strictEqual((yield* takeAll(hub, 4096)).length, 4096)
    })
  )

  it.live("a link whose waiting frames would pass linkFramesMax is closed with 4005; the others are untouched", () =>
    Effect.gen(function* () {
      const hub = yield* Hub.make(Transport.coordinatorPeer, { linkFramesMax: 2500 })
      const closes: Array<number> = []
      const flood = hub.attach(0, port(closes))
      const honest = hub.attach(1, port([]))
      // 64 go straight to the inbox and 1936 wait; then 2436 wait; 1000 more would make 3436.
      flood.receive(message(0, 0, 2000))
      flood.receive(message(0, 2000, 500))
      assert.deepStrictEqual(closes, [])
      flood.receive(message(0, 2500, 1000))
      assert.deepStrictEqual(closes, [Transport.CloseCode.InboxOverflow])
      honest.receive(message(1, 0, 1))
      const events = yield* takeAll(hub, 2501)
      assert.strictEqual(events.filter((e) => e._tag === "Frame" && e.bytes[0] === 0).length, 2500)
      assert.strictEqual((yield* hub.transport.stats).overflows, 1)
    })
  )
})

describe("hub: a leaving link goes first (its end, Transport.Options.urgent)", () => {
  // Three links with 300 frames each wait behind the inbox's first turn; a fourth sends 5 frames.
  const backlog = (hub: Hub.Hub) => {
    for (let link = 0; link < 3; link++) hub.attach(link, port([])).receive(message(link, 0, 300))
    const leaving = hub.attach(3, port([]))
    leaving.receive(message(3, 0, 5))
    return leaving
  }
  const indexOf = (events: ReadonlyArray<Transport.Event>, f: (e: Transport.Event) => boolean) => events.findIndex(f)

  it.live("a link that ended hands over its waiting frames and its end before the other links' backlog", () =>
    Effect.gen(function* () {
      const hub = yield* Hub.make(Transport.coordinatorPeer)
      backlog(hub).end(DeathReport.killed("SIGKILL"))
      const events = yield* takeAll(hub, 906)
      // The first turn (64 frames of link 0) was in the inbox already; then link 3's 5 frames, in order, and its end.
      const frames = events.slice(64, 69).map((e) => (e._tag === "Frame" ? [e.bytes[0], e.bytes[2]] : []))
      assert.deepStrictEqual(
        frames,
        [0, 1, 2, 3, 4].map((i) => [3, i])
      )
      assert.strictEqual(
        indexOf(events, (e) => e._tag === "Ended"),
        69
      )
    })
  )

  it.live("a message whose last frame is urgent puts its link first, once; without urgent it waits its turn", () =>
    Effect.gen(function* () {
      const urgentHub = yield* Hub.make(Transport.coordinatorPeer, { urgent: (frame) => frame[0] === 3 && frame[2] === 4 })
      backlog(urgentHub)
      const urgentEvents = yield* takeAll(urgentHub, 905)
      assert.strictEqual(
        indexOf(urgentEvents, (e) => e._tag === "Frame" && e.bytes[0] === 3),
        64
      )
      const plainHub = yield* Hub.make(Transport.coordinatorPeer)
      backlog(plainHub)
      const plainEvents = yield* takeAll(plainHub, 905)
      assert.isAbove(
        indexOf(plainEvents, (e) => e._tag === "Frame" && e.bytes[0] === 3),
        64 + 64
      )
    })
  )
})

describe("hub: order-free batches (Transport.Options.orderFree)", () => {
  it.live(
    "a batch made only of frames orderFree marks goes to the port's postLoose; a batch with any other frame, or a port without postLoose, goes to post",
    () =>
      Effect.gen(function* () {
        const hub = yield* Hub.make(Transport.coordinatorPeer, { orderFree: (f) => f[0] === 9 })
        const posted: Array<string> = []
        const record = (how: string) => (m: Uint8Array) =>
          void posted.push(
            `${how}:${Batch.decode(m)!
              .map((f) => f[0])
              .join(",")}`
          )
        hub.attach(0, { post: record("post"), postLoose: record("loose"), close: () => {} })
        hub.attach(1, { post: record("post"), close: () => {} })
        const flushed = () => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 0)))
        yield* hub.transport.send(0, Uint8Array.of(9))
        yield* flushed()
        yield* hub.transport.send(0, Uint8Array.of(9))
        yield* hub.transport.send(0, Uint8Array.of(1))
        yield* flushed()
        yield* hub.transport.send(1, Uint8Array.of(9))
        yield* flushed()
        assert.deepStrictEqual(posted, ["loose:9", "post:9,1", "post:9"])
      })
  )
})

describe("hub: one long frame to many ports that share messages (Port.sharesMessages)", () => {
  /** A port that records what was posted to it. */
  const recording = (posted: Array<Uint8Array>, sharesMessages: boolean): Hub.Port => ({
    post: (message) => void posted.push(message),
    close: () => {},
    sharesMessages
  })
  const long = Uint8Array.from({ length: 40_000 }, (_, i) => i & 0xff)

  it.live("is batched once for every sharing port, a fresh batch for the others, with the same bytes", () =>
    Effect.gen(function* () {
      const hub = yield* Hub.make(Transport.coordinatorPeer)
      const posted: Array<Array<Uint8Array>> = [[], [], [], []]
      posted.forEach((into, peer) => hub.attach(peer, recording(into, peer < 3)))
      for (let peer = 0; peer < 4; peer++) assert.strictEqual(hub.transport.sendUnsafe(peer, long), undefined)
      hub.flushAll()
      const [a, b, c, other] = posted.map((into) => into[0]!)
      assert.strictEqual(a, b)
      assert.strictEqual(a, c)
      assert.notStrictEqual(a, other)
      assert.deepStrictEqual(Batch.decode(a!), [long])
      assert.deepStrictEqual(Batch.decode(other!), [long])
    })
  )

  it.live("a long frame with others in the same batch, or a short one alone, gets a batch of its own per port", () =>
    Effect.gen(function* () {
      const hub = yield* Hub.make(Transport.coordinatorPeer)
      const posted: Array<Array<Uint8Array>> = [[], []]
      posted.forEach((into, peer) => hub.attach(peer, recording(into, true)))
      for (let peer = 0; peer < 2; peer++) {
        hub.transport.sendUnsafe(peer, long)
        hub.transport.sendUnsafe(peer, frame(peer, 0))
      }
      hub.flushAll()
      assert.notStrictEqual(posted[0]![0], posted[1]![0])
      assert.deepStrictEqual(Batch.decode(posted[1]![0]!), [long, frame(1, 0)])
      const short = frame(9, 9)
      for (let peer = 0; peer < 2; peer++) hub.transport.sendUnsafe(peer, short)
      hub.flushAll()
      assert.notStrictEqual(posted[0]![1], posted[1]![1])
      assert.deepStrictEqual(Batch.decode(posted[0]![1]!), [short])
    })
  )
})

describe("hub: a long shared frame beside a link's own frames, to a port that posts parts (Port.postParts)", () => {
  const long = Uint8Array.from({ length: 40_000 }, (_, i) => (i * 7) & 0xff)
  const joined = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
    const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0))
    let at = 0
    for (const part of parts) {
      out.set(part, at)
      at += part.byteLength
    }
    return out
  }

  it("Batch.parts: joined, the parts are the batch, and every long frame is a part as it is", () => {
    const short = (n: number) => Uint8Array.from({ length: n }, (_, i) => i + n)
    const cases: Array<Array<Uint8Array>> = [
      [long],
      [short(3), long],
      [long, short(5)],
      [short(1), long, short(2), short(3)],
      [long, long],
      [short(4), long, short(0), long, short(6)]
    ]
    for (const frames of cases) {
      const payload = frames.reduce((sum, f) => sum + f.byteLength, 0)
      const parts = Batch.parts(frames, 4096)!
      assert.deepStrictEqual(joined(parts), Batch.encode(frames, payload))
      for (const f of frames) if (f.byteLength >= 4096) assert.isTrue(parts.includes(f))
    }
    assert.strictEqual(Batch.parts([short(3), short(4)], 4096), undefined)
  })

  it.live("goes out in parts, the long frame not copied; a lone frame and short batches as before", () =>
    Effect.gen(function* () {
      const hub = yield* Hub.make(Transport.coordinatorPeer)
      const posted: Array<Uint8Array> = []
      const inParts: Array<ReadonlyArray<Uint8Array>> = []
      hub.attach(0, { post: (m) => void posted.push(m), postParts: (p) => void inParts.push(p), close: () => {}, sharesMessages: true })
      hub.transport.sendUnsafe(0, frame(0, 1))
      hub.transport.sendUnsafe(0, long)
      hub.transport.sendUnsafe(0, frame(0, 2))
      hub.flushAll()
      assert.strictEqual(inParts.length, 1)
      assert.strictEqual(posted.length, 0)
      assert.isTrue(inParts[0]!.includes(long))
      assert.deepStrictEqual(Batch.decode(joined(inParts[0]!)), [frame(0, 1), long, frame(0, 2)])
      hub.transport.sendUnsafe(0, long)
      hub.flushAll()
      hub.transport.sendUnsafe(0, frame(0, 3))
      hub.transport.sendUnsafe(0, frame(0, 4))
      hub.flushAll()
      assert.strictEqual(inParts.length, 1)
      assert.deepStrictEqual(
        posted.map((m) => Batch.decode(m)),
        [[long], [frame(0, 3), frame(0, 4)]]
      )
    })
  )
})

describe("hub: frames of a channel that gives its messages away (Port.givesMessages)", () => {
  it.live("are delivered with given, and the inspector is told; other channels' frames are not", () =>
    Effect.gen(function* () {
      const told: Array<[Transport.Peer, boolean | undefined]> = []
      const hub = yield* Hub.make(Transport.coordinatorPeer, {
        inspect: (peer, bytes, given) => {
          told.push([peer, given])
          return bytes[1] === 1 ? { _tag: "Decoded", value: "decoded" } : undefined
        }
      })
      const gives = hub.attach(0, { ...port([]), givesMessages: true })
      const keeps = hub.attach(1, port([]))
      gives.receive(message(0, 0, 1))
      keeps.receive(message(1, 0, 1))
      gives.receive(message(0, 256, 1))
      const events = yield* takeAll(hub, 3)
      assert.deepStrictEqual(told, [
        [0, true],
        [1, false],
        [0, true]
      ])
      assert.deepStrictEqual(
        events.map((event) => (event._tag === "Frame" ? [event.peer, event.given, event.decoded] : event._tag)),
        [
          [0, true, undefined],
          [1, undefined, undefined],
          [0, undefined, "decoded"]
        ]
      )
    })
  )
})
