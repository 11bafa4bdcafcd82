// One side of a resumable link (src/transport/internal/session.ts) without sockets: pieces and
// their reassembly, acknowledgements and the resend buffer, and hand-built bad pieces.
import { describe, expect, it } from "vitest"
import * as Session from "../../src/transport/internal/session.ts"
import * as Transport from "../../src/transport/transport.ts"
import * as WireFrames from "../../src/transport/wire-frames.ts"
import * as Codec from "../../src/wire/codec.ts"
import * as Frame from "../../src/wire/frame.ts"

interface Side {
  readonly session: Session.Session
  readonly delivered: Array<Uint8Array>
  readonly failures: Array<number>
  touches: number
}

const side = (
  options: { readonly pieceBytes?: number; readonly resendBytesMax?: number; readonly messageBytesMax?: number } = {}
): Side => {
  const delivered: Array<Uint8Array> = []
  const failures: Array<number> = []
  const made: Side = {
    delivered,
    failures,
    touches: 0,
    session: Session.make({
      pieceBytes: options.pieceBytes ?? 4,
      resendBytesMax: options.resendBytesMax ?? 1024,
      messageBytesMax: options.messageBytesMax ?? 1024,
      deliver: (message) => delivered.push(message),
      touch: () => (made.touches += 1),
      fail: (closeCode) => failures.push(closeCode)
    })
  }
  return made
}

/** A sink that keeps what was written (the runtime cannot say what it holds unsent). */
const wire = () => {
  const written: Array<Uint8Array> = []
  return { written, sink: { send: (bytes: Uint8Array) => written.push(bytes), bufferedBytes: () => undefined } }
}

const piece = (kind: number, last: boolean, seq: number, ack: number, payload: ReadonlyArray<number> = []) => {
  const out = new Uint8Array(Session.headerBytes + payload.length)
  const view = new DataView(out.buffer)
  view.setUint8(0, kind)
  view.setUint8(1, last ? 1 : 0)
  view.setUint32(4, seq, true)
  view.setUint32(8, ack, true)
  out.set(payload, Session.headerBytes)
  return out
}

describe("resumable link sessions", () => {
  it("a message travels in pieces of pieceBytes, each a touch, and is delivered whole once its last piece arrives", () => {
    const a = side()
    const b = side()
    const { written, sink } = wire()
    a.session.attach(sink, 0)
    a.session.send(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
    expect(written.map((p) => p.byteLength - Session.headerBytes)).toEqual([4, 4, 2])
    for (const p of written.slice(0, 2)) b.session.receive(p)
    expect([b.delivered.length, b.touches]).toEqual([0, 2])
    b.session.receive(written[2]!)
    expect(b.delivered).toEqual([Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)])
    expect(b.session.received()).toBe(1)
  })

  it("after a cut the new socket gets every message the peer had not received, whole, from the first one missing", () => {
    const a = side()
    const b = side()
    const first = wire()
    a.session.attach(first.sink, 0)
    a.session.send(Uint8Array.of(1))
    a.session.send(Uint8Array.of(2, 2, 2, 2, 2, 2))
    // The cut: b got the first message and the first piece of the second.
    b.session.receive(first.written[0]!)
    b.session.receive(first.written[1]!)
    a.session.detach()
    a.session.send(Uint8Array.of(3))
    const second = wire()
    expect(b.session.received()).toBe(1)
    expect(a.session.attach(second.sink, b.session.received())).toBe(true)
    // b drops its partial message when it attaches its own new socket.
    b.session.attach(wire().sink, 0)
    for (const p of second.written) b.session.receive(p)
    expect(b.delivered).toEqual([Uint8Array.of(1), Uint8Array.of(2, 2, 2, 2, 2, 2), Uint8Array.of(3)])
  })

  it("acknowledged messages leave the resend buffer: a resume from before them is refused", () => {
    const a = side()
    const { sink } = wire()
    a.session.attach(sink, 0)
    a.session.send(Uint8Array.of(1))
    a.session.send(Uint8Array.of(2))
    a.session.receive(piece(2, false, 0, 1))
    expect(a.session.canResume(0)).toBe(false)
    expect(a.session.canResume(1)).toBe(true)
    expect(a.session.canResume(3)).toBe(false)
  })

  it("sent messages over resendBytesMax are dropped oldest first; unsent ones over it fail the link with ResumeLost", () => {
    const a = side({ resendBytesMax: 8, pieceBytes: 64 })
    const { sink } = wire()
    a.session.attach(sink, 0)
    for (let i = 0; i < 4; i++) a.session.send(new Uint8Array(4).fill(i))
    expect([a.session.canResume(0), a.session.canResume(1), a.session.canResume(2)]).toEqual([false, false, true])
    expect(a.failures).toEqual([])
    a.session.detach()
    for (let i = 0; i < 3; i++) a.session.send(new Uint8Array(4))
    expect(a.failures).toContain(Transport.CloseCode.ResumeLost)
  })

  it("hand-built bad pieces: shorter than a header or an unknown kind (BadBatch 4006), a message out of sequence (4006), a message over messageBytesMax (1009)", () => {
    const a = side({ messageBytesMax: 6 })
    a.session.receive(new Uint8Array(5))
    a.session.receive(piece(9, true, 0, 0))
    a.session.receive(piece(1, true, 3, 0, [1]))
    a.session.receive(piece(1, false, 0, 0, [1, 2, 3, 4]))
    a.session.receive(piece(1, true, 0, 0, [5, 6, 7]))
    expect(a.failures).toEqual([
      Transport.CloseCode.BadBatch,
      Transport.CloseCode.BadBatch,
      Transport.CloseCode.BadBatch,
      Transport.CloseCode.MessageTooBig
    ])
    expect(a.delivered).toEqual([])
  })

  it("an order-free message goes between the pieces still waiting, unnumbered, and is delivered as it arrives; with nothing waiting it goes the ordered way", async () => {
    const a = side()
    const b = side()
    const written: Array<Uint8Array> = []
    // The socket holds a piece unsent until the test lets it drain: the pieces wait in the session.
    let unsent = 4
    a.session.attach({ send: (bytes) => written.push(bytes), bufferedBytes: () => unsent }, 0)
    a.session.send(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
    a.session.sendLoose(Uint8Array.of(42))
    // Kind 3 (loose), one byte: ahead of every piece of the message sent before it.
    expect(written.map((p) => [p[0], p.byteLength - Session.headerBytes])).toEqual([[3, 1]])
    unsent = 0
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(written.map((p) => [p[0], p.byteLength - Session.headerBytes])).toEqual([
      [3, 1],
      [1, 4],
      [1, 4],
      [1, 2]
    ])
    for (const p of written) b.session.receive(p)
    expect(b.delivered.map((m) => [...m])).toEqual([[42], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])
    // Not numbered: the next ordered message is message 1, and the peer acknowledges one.
    expect(b.session.received()).toBe(1)
    // Nothing waits now: an order-free message is an ordered one, numbered and kept for a resend.
    a.session.sendLoose(Uint8Array.of(43))
    expect([written.at(-1)![0], new DataView(written.at(-1)!.buffer).getUint32(4, true)]).toEqual([1, 1])
    a.session.stop()
  })

  it("WireFrames.orderFree: a Heartbeat or a CoordHeartbeat may overtake; nothing else does", () => {
    expect(WireFrames.orderFree(Codec.encode(Frame.fromRank(3, { _tag: "Heartbeat" })))).toBe(true)
    expect(WireFrames.orderFree(Codec.encode(Frame.fromCoordinator({ _tag: "CoordHeartbeat" })))).toBe(true)
    expect(WireFrames.orderFree(Codec.encode(Frame.fromRank(3, { _tag: "Progress", epoch: 1, samplesDone: 32, msPerBatch: 4 })))).toBe(
      false
    )
    expect(WireFrames.orderFree(Codec.encode(Frame.fromCoordinator({ _tag: "Checkpoint", version: 0 })))).toBe(false)
    expect(
      WireFrames.orderFree(
        Codec.encode(Frame.fromRank(0, { _tag: "Params", epoch: 0, round: 0, samplesDone: 32, params: new Float32Array(4) }))
      )
    ).toBe(false)
    expect(WireFrames.orderFree(Uint8Array.of(1, 2, 3))).toBe(false)
  })
})
