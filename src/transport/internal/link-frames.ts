/**
 * The frames of a direct ring link (`PeerRing`) on a plain TCP stream: a fixed header of
 * `headerBytes`, then the payload. Header, little-endian: `u32` payload bytes, `u8` kind
 * (`kinds`), `u8` 0, `u16` a close code (`Close` frames, else 0), `u32` generation, `u32` round,
 * `u32` step (0 outside steps). Payloads: `Text` UTF-8 (the handshake's JSON), `Float64` and
 * `Float32` a step's values as raw little-endian floats, `Close` UTF-8 words saying why, `Packed`
 * a packed step's bytes as they are (`--compress`; `RingPacked`, which the ring reads).
 *
 * A step's values are read straight into a buffer of their own (one a `BufferPool` kept, where the
 * reader has one) and handed on as a typed-array view of it: no decoding, and no copy beyond the one
 * out of the stream's chunks, none where the stream reads into the reader's memory
 * (`FrameReader.readTarget`). `FrameReader`
 * checks every header before it takes any payload (kind, the reserved byte, the length against the
 * current bound and against the kind's value size), so a peer cannot make it hold more than the
 * bound, and stops at the first bad one.
 *
 * @since 0.1.0
 */

/** Frame kinds. @since 0.1.0 @category model */
export const kinds = { Text: 1, Float64: 2, Float32: 3, Close: 4, Packed: 5 } as const

/** Header bytes before every payload. @since 0.1.0 @category model */
export const headerBytes = 20

/** The largest generation, round or step a header holds (`u32`). @since 0.1.0 @category limits */
export const fieldMax = 0xffff_ffff

/** One frame read off the stream; `payload` is a view of a buffer of its own, starting at its offset 0. @since 0.1.0 @category model */
export interface Frame {
  readonly kind: number
  readonly code: number
  readonly generation: number
  readonly round: number
  readonly step: number
  readonly payload: Uint8Array<ArrayBuffer>
}

const header = (kind: number, payloadBytes: number, code: number, generation: number, round: number, step: number): Uint8Array => {
  const bytes = new Uint8Array(headerBytes)
  const view = new DataView(bytes.buffer)
  view.setUint32(0, payloadBytes, true)
  view.setUint8(4, kind)
  view.setUint16(6, code, true)
  view.setUint32(8, generation, true)
  view.setUint32(12, round, true)
  view.setUint32(16, step, true)
  return bytes
}

/** A `Text` frame of `text`, as parts for one write. @since 0.1.0 @category frames */
export const text = (words: string): ReadonlyArray<Uint8Array> => {
  const payload = new TextEncoder().encode(words)
  return [header(kinds.Text, payload.length, 0, 0, 0, 0), payload]
}

/** A `Close` frame with `code` and `reason`. @since 0.1.0 @category frames */
export const close = (code: number, reason: string): ReadonlyArray<Uint8Array> => {
  const payload = new TextEncoder().encode(reason)
  return [header(kinds.Close, payload.length, code, 0, 0, 0), payload]
}

/**
 * A step's frame: its header, then `data`'s own bytes (not copied: the stream sends from them).
 * Throws a `RangeError` when generation, round or step do not fit a `u32` (a broken invariant:
 * they are counters of one run).
 *
 * @since 0.1.0
 * @category frames
 */
export const step = (
  generation: number,
  round: number,
  index: number,
  data: Float64Array | Float32Array | Uint8Array
): ReadonlyArray<Uint8Array> => {
  for (const value of [generation, round, index]) {
    if (!Number.isSafeInteger(value) || value < 0 || value > fieldMax)
      throw new RangeError(`a ring step field of ${value} does not fit a u32`)
  }
  const kind = data instanceof Float64Array ? kinds.Float64 : data instanceof Uint8Array ? kinds.Packed : kinds.Float32
  return [header(kind, data.byteLength, 0, generation, round, index), new Uint8Array(data.buffer, data.byteOffset, data.byteLength)]
}

/** The values of a step frame, as a view of its payload (no copy). @since 0.1.0 @category frames */
export const valuesOf = (frame: Frame): Float64Array | Float32Array | Uint8Array =>
  frame.kind === kinds.Float64
    ? new Float64Array(frame.payload.buffer, 0, frame.payload.length / 8)
    : frame.kind === kinds.Packed
      ? frame.payload
      : new Float32Array(frame.payload.buffer, 0, frame.payload.length / 4)

/** Whether a frame of `kind` carries a ring step. @since 0.1.0 @category frames */
export const isStep = (kind: number): boolean => kind === kinds.Float64 || kind === kinds.Float32 || kind === kinds.Packed

/**
 * Buffers for step payloads, kept for reuse instead of each step allocating (and the garbage
 * collector freeing) a buffer of its own: a ring round sends and receives the same few sizes over
 * and over. `take` gives a view of `bytes` at the start of a buffer that may be a little larger
 * (its contents are whatever it last held): segments of one vector differ by a value, and a ring
 * rank receives other segments than it allocates, so an exact-size pool would miss on every round
 * of some ranks. `give` hands a buffer back once nothing holds it any more; it keeps at most
 * `buffersMax` buffers of the capacities it allocates, and leaves the rest to the collector.
 * `issued` tells whether a view starts a buffer `take` gave (so that a sender may give it back).
 * `allocate` (default: a new `ArrayBuffer`) makes a new buffer of at least the capacity asked, of
 * which the pool uses only that capacity (the ring's steps live in WebAssembly memories, whose
 * SIMD loops then add into them where they are: `RingSimd.stepBuffer`).
 *
 * @since 0.1.0
 * @category frames
 */
export class BufferPool {
  private readonly kept = new Map<number, Array<ArrayBuffer>>()
  private readonly given = new WeakSet<ArrayBuffer>()
  /** The capacity of each buffer `allocate` made, where it is not the buffer's length. */
  private readonly capacities = new WeakMap<ArrayBuffer, number>()
  private count = 0

  constructor(
    readonly buffersMax: number,
    private readonly allocate?: (capacityBytes: number) => ArrayBuffer
  ) {}

  take(bytes: number): Uint8Array<ArrayBuffer> {
    const buffer = this.kept.get(capacityOf(bytes))?.pop() ?? this.near(bytes)
    const view = buffer === undefined ? new Uint8Array(this.fresh(capacityOf(bytes)), 0, bytes) : new Uint8Array(buffer, 0, bytes)
    if (buffer !== undefined) this.count -= 1
    this.given.add(view.buffer)
    return view
  }

  /** A new buffer of `capacity` bytes (`allocate`'s, or a plain one). */
  private fresh(capacity: number): ArrayBuffer {
    if (this.allocate === undefined) return new ArrayBuffer(capacity)
    const buffer = this.allocate(capacity)
    if (buffer.byteLength !== capacity) this.capacities.set(buffer, capacity)
    return buffer
  }

  /**
   * Whether `view` starts a buffer `take` gave (the ring writes its own steps into the buffers of
   * steps it received and owns, `Ring.RingInbox.spare`, whatever length they had).
   */
  issued(view: ArrayBufferView): boolean {
    return view.buffer instanceof ArrayBuffer && view.byteOffset === 0 && this.given.has(view.buffer)
  }

  give(buffer: ArrayBuffer): void {
    // Only the capacities `take` allocates: a buffer a step fills exactly (the ring's own) could
    // not hold a segment a value longer, and kept, it would take the place of one that can.
    const capacity = this.capacities.get(buffer) ?? buffer.byteLength
    if (this.count >= this.buffersMax || capacity === 0 || capacityOf(capacity) !== capacity) return
    const same = this.kept.get(capacity)
    if (same === undefined) this.kept.set(capacity, [buffer])
    else same.push(buffer)
    this.count += 1
  }

  /** A kept buffer of at least `bytes` and at most an eighth more, when one is kept. */
  private near(bytes: number): ArrayBuffer | undefined {
    for (const [capacity, buffers] of this.kept) {
      if (capacity >= bytes && capacity - bytes <= bytes / 8 && buffers.length > 0) return buffers.pop()
    }
    return undefined
  }
}

/** The capacity a new pool buffer of `bytes` gets: whole 4 KiB pages past 64 KiB, so that segments a value apart share buffers. */
const capacityOf = (bytes: number): number => (bytes <= 65_536 ? bytes : Math.ceil(bytes / 4096) * 4096)

/**
 * Reads frames off a stream's chunks (`push`, in order) and hands each whole one to `onFrame`.
 * `payloadBytesMax` bounds the next payload (change it as the link's state changes: small until
 * the peer proved itself); a header over it, of an unknown kind, with a reserved byte set, or a
 * step whose length is not a whole number of values calls `onError` with the reason, once, and
 * nothing more is read.
 *
 * @since 0.1.0
 * @category frames
 */
export class FrameReader {
  private readonly head = new Uint8Array(headerBytes)
  private headAt = 0
  private frame:
    | { readonly kind: number; readonly code: number; readonly generation: number; readonly round: number; readonly step: number }
    | undefined
  private payload: Uint8Array<ArrayBuffer> | undefined
  private payloadAt = 0
  private failed = false

  constructor(
    public payloadBytesMax: number,
    private readonly onFrame: (frame: Frame) => void,
    private readonly onError: (reason: string) => void,
    /** Where step payloads go (a `BufferPool`'s `take`); other frames get a buffer of their own. */
    private readonly allocate?: (bytes: number) => Uint8Array<ArrayBuffer>
  ) {}

  push(chunk: Uint8Array): void {
    let at = 0
    while (at < chunk.length && !this.failed) {
      if (this.payload === undefined) {
        const take = Math.min(headerBytes - this.headAt, chunk.length - at)
        this.head.set(chunk.subarray(at, at + take), this.headAt)
        this.headAt += take
        at += take
        if (this.headAt < headerBytes) return
        this.headAt = 0
        if (!this.started()) return
      } else {
        const take = Math.min(this.payload.length - this.payloadAt, chunk.length - at)
        this.payload.set(chunk.subarray(at, at + take), this.payloadAt)
        this.payloadAt += take
        at += take
      }
      if (this.payload !== undefined && this.payloadAt === this.payload.length) this.emit()
    }
  }

  /**
   * Where the stream may read the next bytes straight (`TcpHandlers.readInto`), instead of handing
   * them to `push`: the rest of the header being read, or of the payload; `undefined` once a frame
   * failed. The header alone is asked for, so that the payload after it lands in its own buffer.
   */
  readTarget(): Uint8Array | undefined {
    if (this.failed) return undefined
    return this.payload === undefined ? this.head.subarray(this.headAt) : this.payload.subarray(this.payloadAt)
  }

  /** `bytes` were read into the region the last `readTarget` gave (at most its length): as `push` of them. */
  filled(bytes: number): void {
    if (this.failed) return
    if (this.payload === undefined) {
      this.headAt += bytes
      if (this.headAt < headerBytes) return
      this.headAt = 0
      if (!this.started()) return
    } else this.payloadAt += bytes
    if (this.payloadAt === this.payload!.length) this.emit()
  }

  /** Checks the header just read and makes room for its payload; `false` (after `onError`) when it is bad. */
  private started(): boolean {
    const view = new DataView(this.head.buffer)
    const bytes = view.getUint32(0, true)
    const kind = view.getUint8(4)
    const problem =
      kind < kinds.Text || kind > kinds.Packed
        ? `a frame of unknown kind ${kind}`
        : view.getUint8(5) !== 0
          ? "a frame with its reserved byte set"
          : bytes > this.payloadBytesMax
            ? `a frame of ${bytes} bytes, over the bound of ${this.payloadBytesMax}`
            : (kind === kinds.Float64 && bytes % 8 !== 0) || (kind === kinds.Float32 && bytes % 4 !== 0)
              ? `a step of ${bytes} bytes, not a whole number of values`
              : undefined
    if (problem !== undefined) {
      this.failed = true
      this.onError(problem)
      return false
    }
    this.frame = {
      kind,
      code: view.getUint16(6, true),
      generation: view.getUint32(8, true),
      round: view.getUint32(12, true),
      step: view.getUint32(16, true)
    }
    this.payload = this.allocate !== undefined && isStep(kind) ? this.allocate(bytes) : new Uint8Array(bytes)
    this.payloadAt = 0
    return true
  }

  private emit(): void {
    const frame = { ...this.frame!, payload: this.payload! }
    this.frame = undefined
    this.payload = undefined
    this.onFrame(frame)
  }
}
