/**
 * Shared-memory ring links between worker threads: one direction of a direct ring link
 * (ring rank `r` to `r + 1` of one generation) whose steps travel through a `SharedArrayBuffer`
 * segment instead of being posted one by one on the pair's `MessageChannel`.
 *
 * The sender makes the segment at its first step and announces it once on the channel's port;
 * from then on each step is written into the segment's next free slot and the receiver is woken
 * with `Atomics.notify`. The receiver waits with `Atomics.waitAsync`, never `Atomics.wait`: its
 * event loop stays free, so heartbeats, `DeclareDead` and a newer `FormRing` still arrive while it
 * waits, and the collective that takes the steps is interrupted as before (`Ring.BufferedLink`).
 * The port stays the link's second lane: the announcement, and any step that finds every slot
 * full or is larger than a slot, travel on it. Every step carries a sequence number and the
 * receiver delivers in sequence order across both lanes, so the order of sends is kept.
 *
 * Segment layout (all little-endian, as the platform's typed arrays): a header of `Int32` words
 * (`written`: slots written; `read`: slots taken; `closed`: 1 once either side closed), then
 * `slots` slots of `slotBytes` bytes: six float64 words `[seq, generation, round, step, kind,
 * length]` (`kind` 1: float64 data, 2: float32 data; `length` in values) and the data. The
 * counters are Int32 and never wrap within a generation's segment in practice (2^31 steps).
 *
 * Runtimes without `Atomics.waitAsync` (or `SharedArrayBuffer`) keep the port lane only
 * (`sharedMemoryAvailable`); Node 20, Bun 1.4 and Deno 2.9 all have both.
 *
 * @since 0.1.0
 */

/**
 * One ring step on a direct link: `data` is a float64 partial sum or a float32 finished segment
 * (`Ring.RingMessage`).
 *
 * @since 0.1.0
 * @category model
 */
export interface Step {
  readonly generation: number
  readonly round: number
  readonly step: number
  readonly data: Float64Array | Float32Array
}

/**
 * What the link posts on its `MessageChannel` port: the segment's announcement, or one step that
 * took the port lane (`seq`: its place in the order of sends).
 *
 * @since 0.1.0
 * @category model
 */
export type PortMessage =
  | { readonly cohortSegment: SharedArrayBuffer; readonly slots: number; readonly slotBytes: number }
  | { readonly cohortStep: number; readonly step: Step }

/**
 * Whether a value received on a ring port is one of this link's messages.
 *
 * @since 0.1.0
 * @category model
 */
export const isPortMessage = (value: unknown): value is PortMessage =>
  typeof value === "object" && value !== null && ("cohortSegment" in value || "cohortStep" in value)

/**
 * Whether this runtime can run the shared-memory lane: `SharedArrayBuffer` and
 * `Atomics.waitAsync` both exist.
 *
 * @since 0.1.0
 * @category model
 */
export const sharedMemoryAvailable = (): boolean =>
  typeof SharedArrayBuffer === "function" && typeof (Atomics as { waitAsync?: unknown }).waitAsync === "function"

/** Default slots of a segment (steps written and not yet taken). @since 0.1.0 @category limits */
export const slotsDefault = 4

const WRITTEN = 0
const READ = 1
const CLOSED = 2
const headerBytes = 16
const metaValues = 6
const metaBytes = metaValues * 8
const KIND_F64 = 1
const KIND_F32 = 2

/** The data bytes a slot holds: the first step's, with room for segments one value longer (`Ring.segmentOf`) and more. */
const slotDataBytesFor = (firstBytes: number): number => Math.ceil((firstBytes + 64) / 8) * 8

/**
 * Step buffers this worker gave up (written into a slot) kept for the steps it takes from a slot:
 * a ring rank forwards what it received, so in steady state no step allocates (a fresh 400 KB
 * typed array costs far more than the copy into it). At most `poolPerSizeMax` per kind and length.
 */
const pool = new Map<string, Array<Float64Array | Float32Array>>()
const poolPerSizeMax = 4
const poolKey = (f64: boolean, length: number): string => `${f64 ? 8 : 4}:${length}`

const release = (data: Float64Array | Float32Array): void => {
  // Only whole, unshared buffers: a view into a larger one may still be read through the rest.
  if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength || !(data.buffer instanceof ArrayBuffer)) return
  const key = poolKey(data instanceof Float64Array, data.length)
  const kept = pool.get(key)
  if (kept === undefined) pool.set(key, [data])
  else if (kept.length < poolPerSizeMax) kept.push(data)
}

const acquire = (f64: boolean, length: number): Float64Array | Float32Array =>
  pool.get(poolKey(f64, length))?.pop() ?? (f64 ? new Float64Array(length) : new Float32Array(length))

interface WaitAsync {
  (
    array: Int32Array,
    index: number,
    value: number
  ):
    | { readonly async: false; readonly value: string }
    | {
        readonly async: true
        readonly value: Promise<string>
      }
}

/** A segment as either side sees it. */
class Segment {
  readonly header: Int32Array
  constructor(
    readonly buffer: SharedArrayBuffer,
    readonly slots: number,
    readonly slotBytes: number
  ) {
    this.header = new Int32Array(buffer, 0, headerBytes / 4)
  }

  static create(slots: number, slotDataBytes: number): Segment {
    const slotBytes = metaBytes + slotDataBytes
    return new Segment(new SharedArrayBuffer(headerBytes + slots * slotBytes), slots, slotBytes)
  }

  get closed(): boolean {
    return Atomics.load(this.header, CLOSED) !== 0
  }

  close(): void {
    Atomics.store(this.header, CLOSED, 1)
    // Wakes a receiver waiting on `written`, so that it sees the close at once.
    Atomics.notify(this.header, WRITTEN)
  }

  private offsetOf(count: number): number {
    return headerBytes + (count % this.slots) * this.slotBytes
  }

  /** Writes `step` as number `seq` into the next free slot; false when every slot is taken or it does not fit. */
  tryWrite(seq: number, step: Step): boolean {
    const written = Atomics.load(this.header, WRITTEN)
    if (written - Atomics.load(this.header, READ) >= this.slots) return false
    if (metaBytes + step.data.byteLength > this.slotBytes) return false
    const offset = this.offsetOf(written)
    const meta = new Float64Array(this.buffer, offset, metaValues)
    const f64 = step.data instanceof Float64Array
    meta[0] = seq
    meta[1] = step.generation
    meta[2] = step.round
    meta[3] = step.step
    meta[4] = f64 ? KIND_F64 : KIND_F32
    meta[5] = step.data.length
    if (f64) new Float64Array(this.buffer, offset + metaBytes, step.data.length).set(step.data)
    else new Float32Array(this.buffer, offset + metaBytes, step.data.length).set(step.data)
    Atomics.store(this.header, WRITTEN, written + 1)
    Atomics.notify(this.header, WRITTEN, 1)
    return true
  }

  /** The sequence number of the next unread slot, or -1 when none is written. */
  peekSeq(read: number): number {
    if (Atomics.load(this.header, WRITTEN) === read) return -1
    return new Float64Array(this.buffer, this.offsetOf(read), 1)[0]!
  }

  /** Copies the next unread slot's step out and frees the slot. */
  take(read: number): Step {
    const offset = this.offsetOf(read)
    const meta = new Float64Array(this.buffer, offset, metaValues)
    const length = meta[5]!
    const f64 = meta[4] === KIND_F64
    const data = acquire(f64, length)
    data.set(f64 ? new Float64Array(this.buffer, offset + metaBytes, length) : new Float32Array(this.buffer, offset + metaBytes, length))
    const step: Step = { generation: meta[1]!, round: meta[2]!, step: meta[3]!, data }
    Atomics.store(this.header, READ, read + 1)
    return step
  }
}

/**
 * The sending side of one direction: `send` writes each step into the segment (made at the first
 * step with `slots` slots, announced on `post`) or, when every slot is taken or the step does not
 * fit, posts it on the port. `slots` 0 (or a runtime without `sharedMemoryAvailable`) keeps every
 * step on the port. Never blocks. `close` marks the segment closed (the receiver still takes what
 * was written before).
 *
 * @since 0.1.0
 * @category constructors
 */
export class Sender {
  private segment: Segment | undefined
  private seq = 0
  /** Steps that took the port lane because every slot was taken or the step did not fit a slot. */
  overflow = 0

  constructor(
    private readonly post: (message: PortMessage, transfer: ReadonlyArray<ArrayBuffer>) => void,
    private readonly slots: number = slotsDefault
  ) {}

  /**
   * Sends `step`. The caller gives up `step.data`: its buffer is transferred (the port lane) or
   * reused for a step this worker takes from a slot later (the shared lane).
   */
  send(step: Step): void {
    const seq = this.seq
    this.seq += 1
    if (this.segment === undefined && this.slots > 0 && sharedMemoryAvailable()) {
      this.segment = Segment.create(this.slots, slotDataBytesFor(step.data.byteLength))
      this.post({ cohortSegment: this.segment.buffer, slots: this.segment.slots, slotBytes: this.segment.slotBytes }, [])
    }
    const segment = this.segment
    if (segment !== undefined) {
      if (segment.closed) return // the receiver moved to a newer generation: nobody takes this step
      if (segment.tryWrite(seq, step)) {
        release(step.data)
        return
      }
      if (this.seq > 1) this.overflow += 1
    }
    this.post({ cohortStep: seq, step }, [step.data.buffer as ArrayBuffer])
  }

  close(): void {
    this.segment?.close()
  }
}

/**
 * The receiving side of one direction: feed it every `PortMessage` of its port (`portMessage`);
 * it calls `deliver` with each step in the order of sends, from the segment (waiting with
 * `Atomics.waitAsync`) and from the port. `close` stops deliveries at once and wakes its wait.
 *
 * @since 0.1.0
 * @category constructors
 */
export class Receiver {
  private segment: Segment | undefined
  private read = 0
  private next = 0
  private readonly viaPort: Array<{ readonly seq: number; readonly step: Step }> = []
  private waiting = false
  private closed = false

  constructor(private readonly deliver: (step: Step) => void) {}

  /** Takes one message of the port. */
  portMessage(message: PortMessage): void {
    if (this.closed) return
    if ("cohortSegment" in message) {
      this.segment ??= new Segment(message.cohortSegment, message.slots, message.slotBytes)
    } else {
      this.viaPort.push({ seq: message.cohortStep, step: message.step })
    }
    this.drain()
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    this.segment?.close()
  }

  private drain(): void {
    for (;;) {
      if (this.closed) return
      const head = this.viaPort[0]
      if (head !== undefined && head.seq === this.next) {
        this.viaPort.shift()
        this.next += 1
        this.deliver(head.step)
        continue
      }
      const segment = this.segment
      if (segment !== undefined && segment.peekSeq(this.read) === this.next) {
        const step = segment.take(this.read)
        this.read += 1
        this.next += 1
        this.deliver(step)
        continue
      }
      if (!this.arm()) return
    }
  }

  /**
   * Waits for the segment's next write, unless a wait is on already or the next step is due on
   * the port. True when a step became due meanwhile (drain again now).
   */
  private arm(): boolean {
    const segment = this.segment
    if (segment === undefined || this.waiting || this.closed) return false
    const seen = Atomics.load(segment.header, WRITTEN)
    // A slot written since the drain looked: due now, or waiting for an earlier step on the port.
    if (seen !== this.read) return segment.peekSeq(this.read) === this.next
    const result = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync(segment.header, WRITTEN, seen)
    if (!result.async) return true // written between the load and the wait
    this.waiting = true
    void result.value.then(() => {
      this.waiting = false
      this.drain()
    })
    return false
  }
}
