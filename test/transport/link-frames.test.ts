// The frames of a direct ring link (`LinkFrames`): a step's values come back as a view of their
// own buffer however the stream cuts them, and a bad header stops the reader before any payload.
import { describe, expect, it } from "vitest"
import * as LinkFrames from "../../src/transport/internal/link-frames.ts"

const joined = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

const read = (bytes: Uint8Array, chunkBytes: number, payloadBytesMax = 1 << 20) => {
  const frames: Array<LinkFrames.Frame> = []
  const errors: Array<string> = []
  const reader = new LinkFrames.FrameReader(
    payloadBytesMax,
    (frame) => frames.push(frame),
    (reason) => errors.push(reason)
  )
  for (let at = 0; at < bytes.length; at += chunkBytes) reader.push(bytes.subarray(at, at + chunkBytes))
  return { frames, errors }
}

describe("direct ring link frames", () => {
  it("steps and texts come back whole and in order, whatever the chunks: float64 and float32 values as views", () => {
    const bytes = joined([
      ...LinkFrames.step(3, 7, 0, new Float64Array([1.5, -2, 3])),
      ...LinkFrames.step(3, 7, 1, new Float32Array([0.25, 4])),
      ...LinkFrames.text("hello"),
      ...LinkFrames.step(3, 8, 0, new Float32Array(0))
    ])
    for (const chunkBytes of [1, 3, LinkFrames.headerBytes, LinkFrames.headerBytes + 1, 64, bytes.length]) {
      const { frames, errors } = read(bytes, chunkBytes)
      expect(errors).toEqual([])
      expect(frames.map((f) => [f.kind, f.generation, f.round, f.step])).toEqual([
        [LinkFrames.kinds.Float64, 3, 7, 0],
        [LinkFrames.kinds.Float32, 3, 7, 1],
        [LinkFrames.kinds.Text, 0, 0, 0],
        [LinkFrames.kinds.Float32, 3, 8, 0]
      ])
      const values = LinkFrames.valuesOf(frames[0]!)
      expect([values instanceof Float64Array, Array.from(values)]).toEqual([true, [1.5, -2, 3]])
      expect(Array.from(LinkFrames.valuesOf(frames[1]!))).toEqual([0.25, 4])
      expect(new TextDecoder().decode(frames[2]!.payload)).toBe("hello")
    }
  })

  it("a packed step (`--compress`) comes back as its bytes, whatever the chunks, and takes the bound like any step", () => {
    const packed = new Uint8Array([2, 0, 0, 0, 255, 255, 255, 255, 1, 0, 0, 0, 1, 0, 0, 0, 0, 60, 7])
    const bytes = joined([...LinkFrames.step(3, 7, 2, packed), ...LinkFrames.step(3, 7, 3, new Float32Array([1]))])
    for (const chunkBytes of [1, 5, bytes.length]) {
      const { frames, errors } = read(bytes, chunkBytes)
      expect(errors).toEqual([])
      expect(frames.map((f) => [f.kind, f.step, LinkFrames.isStep(f.kind)])).toEqual([
        [LinkFrames.kinds.Packed, 2, true],
        [LinkFrames.kinds.Float32, 3, true]
      ])
      const values = LinkFrames.valuesOf(frames[0]!)
      expect([values instanceof Uint8Array, Array.from(values)]).toEqual([true, Array.from(packed)])
    }
    expect(read(bytes, 4, 8).errors).toEqual(["a frame of 19 bytes, over the bound of 8"])
    expect(LinkFrames.isStep(LinkFrames.kinds.Text)).toBe(false)
  })

  it("read straight into the reader's memory (`readTarget`, `filled`), mixed with pushed chunks, the frames are the same; a bad header stops it", () => {
    const bytes = joined([
      ...LinkFrames.step(3, 7, 0, new Float64Array([1.5, -2, 3])),
      ...LinkFrames.text("hello"),
      ...LinkFrames.step(3, 8, 0, new Float32Array(0)),
      ...LinkFrames.step(3, 8, 1, new Float32Array([0.25, 4]))
    ])
    // Reads of at most `readBytes` into the target, every `pushEvery`-th read pushed as a chunk instead.
    for (const [readBytes, pushEvery] of [
      [1, 0],
      [7, 0],
      [1 << 20, 0],
      [5, 3],
      [64, 2]
    ] as const) {
      const frames: Array<LinkFrames.Frame> = []
      const errors: Array<string> = []
      const reader = new LinkFrames.FrameReader(
        1 << 20,
        (frame) => frames.push(frame),
        (reason) => errors.push(reason)
      )
      let at = 0
      for (let read = 1; at < bytes.length; read++) {
        if (pushEvery > 0 && read % pushEvery === 0) {
          reader.push(bytes.subarray(at, at + readBytes))
          at += Math.min(readBytes, bytes.length - at)
          continue
        }
        const target = reader.readTarget()!
        const n = Math.min(readBytes, target.length, bytes.length - at)
        target.set(bytes.subarray(at, at + n))
        reader.filled(n)
        at += n
      }
      expect(errors).toEqual([])
      expect(frames.map((f) => [f.kind, f.round, f.step])).toEqual([
        [LinkFrames.kinds.Float64, 7, 0],
        [LinkFrames.kinds.Text, 0, 0],
        [LinkFrames.kinds.Float32, 8, 0],
        [LinkFrames.kinds.Float32, 8, 1]
      ])
      expect(Array.from(LinkFrames.valuesOf(frames[0]!))).toEqual([1.5, -2, 3])
      expect(new TextDecoder().decode(frames[1]!.payload)).toBe("hello")
      expect(Array.from(LinkFrames.valuesOf(frames[3]!))).toEqual([0.25, 4])
    }
    const errors: Array<string> = []
    const reader = new LinkFrames.FrameReader(
      64,
      () => {},
      (reason) => errors.push(reason)
    )
    const big = joined(LinkFrames.step(0, 0, 0, new Float64Array(16)))
    const target = reader.readTarget()!
    expect(target.length).toBe(LinkFrames.headerBytes)
    target.set(big.subarray(0, LinkFrames.headerBytes))
    reader.filled(LinkFrames.headerBytes)
    expect(errors).toEqual(["a frame of 128 bytes, over the bound of 64"])
    expect(reader.readTarget()).toBeUndefined()
  })

  it("a close frame carries its code and words", () => {
    const { frames } = read(joined(LinkFrames.close(4023, "bad step")), 5)
    expect([frames[0]!.kind, frames[0]!.code, new TextDecoder().decode(frames[0]!.payload)]).toEqual([
      LinkFrames.kinds.Close,
      4023,
      "bad step"
    ])
  })

  it("a header over the bound, of an unknown kind, with its reserved byte set, or a step of part of a value stops the reader before its payload", () => {
    const header = (edit: (view: DataView) => void): Uint8Array => {
      const bytes = joined(LinkFrames.step(0, 0, 0, new Float64Array(4)))
      edit(new DataView(bytes.buffer))
      return bytes
    }
    const cases: Array<[Uint8Array, RegExp]> = [
      [joined(LinkFrames.step(0, 0, 0, new Float64Array(16))), /over the bound of 64/],
      [header((v) => v.setUint8(4, 9)), /unknown kind 9/],
      [header((v) => v.setUint8(5, 1)), /reserved byte/],
      [header((v) => v.setUint32(0, 12, true)), /not a whole number of values/]
    ]
    for (const [bytes, reason] of cases) {
      const { frames, errors } = read(joined([bytes, ...LinkFrames.text("after")]), 7, 64)
      expect(frames).toEqual([])
      expect(errors.length).toBe(1)
      expect(errors[0]).toMatch(reason)
    }
  })

  it("a generation, round or step beyond a u32 is refused when the step is made", () => {
    expect(() => LinkFrames.step(2 ** 32, 0, 0, new Float32Array(1))).toThrow(RangeError)
    expect(() => LinkFrames.step(0, -1, 0, new Float32Array(1))).toThrow(RangeError)
  })

  it("the buffer pool serves a step a value longer or shorter from a buffer it kept, and tells views at the start of its buffers from others", () => {
    const pool = new LinkFrames.BufferPool(4)
    // Segments of 407,050 values over 8 ranks: 50,882 and 50,881 values, sums with their count.
    const first = pool.take(50_882 * 8 + 8)
    expect(first.byteLength).toBe(50_882 * 8 + 8)
    expect(pool.issued(first)).toBe(true)
    expect(pool.issued(first.subarray(8))).toBe(false)
    expect(pool.issued(new Uint8Array(first.byteLength))).toBe(false)
    pool.give(first.buffer)
    const second = pool.take(50_881 * 8 + 8)
    expect(second.buffer).toBe(first.buffer)
    expect(second.byteLength).toBe(50_881 * 8 + 8)
    // A view of another length at the start of a buffer it gave counts too (the ring writes its
    // own steps into buffers it received); one that starts further in does not.
    expect(pool.issued(new Float32Array(second.buffer, 0, 50_881))).toBe(true)
    expect(pool.issued(new Float32Array(second.buffer, 4, 50_881))).toBe(false)
    // Nothing kept that is near enough: a buffer of its own.
    expect(pool.take(1000).buffer).not.toBe(first.buffer)
    // A buffer a step fills exactly could not hold a segment a value longer: not kept.
    pool.give(new ArrayBuffer(50_881 * 8 + 8))
    expect(pool.take(50_881 * 8 + 8).buffer.byteLength).toBe(409_600)
    expect(pool.take(50_882 * 8 + 8).buffer.byteLength).toBe(409_600)
  })

  it("a pool given an allocator takes its new buffers from it, uses only the capacity it asked for, and keeps them by that capacity", () => {
    const asked: Array<number> = []
    // Larger than asked, as a WebAssembly memory of whole pages with room past the capacity.
    const pool = new LinkFrames.BufferPool(4, (capacity) => {
      asked.push(capacity)
      return new ArrayBuffer(capacity + 65_536)
    })
    const first = pool.take(50_882 * 8 + 8)
    expect(asked).toEqual([409_600])
    expect(first.buffer.byteLength).toBe(409_600 + 65_536)
    pool.give(first.buffer)
    // Kept as a buffer of 409,600 bytes: a step a value shorter or longer reuses it, none further off.
    expect(pool.take(50_881 * 8 + 8).buffer).toBe(first.buffer)
    pool.give(first.buffer)
    expect(pool.take(409_600 + 4096).buffer).not.toBe(first.buffer)
    expect(asked).toEqual([409_600, 409_600 + 4096])
  })
})
