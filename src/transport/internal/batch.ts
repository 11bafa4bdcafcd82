/**
 * Batches: several frames in one underlying message. Layout, little endian:
 * `u32 count`, then per frame `u32 length` and its bytes. 4 + 4 per frame bytes of overhead.
 *
 * @since 0.1.0
 * @internal
 */

/** Bytes a batch of `frames` frames totalling `payloadBytes` occupies. @since 0.1.0 @category internal */
export const size = (frames: number, payloadBytes: number): number => 4 + 4 * frames + payloadBytes

/** Encodes `frames` into one new buffer. @since 0.1.0 @category internal */
export const encode = (frames: ReadonlyArray<Uint8Array>, payloadBytes: number): Uint8Array => {
  const out = new Uint8Array(size(frames.length, payloadBytes))
  const view = new DataView(out.buffer)
  view.setUint32(0, frames.length, true)
  let at = 4
  for (const frame of frames) {
    view.setUint32(at, frame.byteLength, true)
    out.set(frame, at + 4)
    at += 4 + frame.byteLength
  }
  return out
}

/**
 * `encode`'s bytes in parts that, back to back, are the batch: every frame of `longFromBytes` or
 * more is a part of its own (the frame itself, not copied); the header, the lengths and the
 * shorter frames around them are copied into the parts between. `undefined` when no frame is
 * that long. O(bytes of the shorter frames).
 *
 * @since 0.1.0
 * @category internal
 */
export const parts = (frames: ReadonlyArray<Uint8Array>, longFromBytes: number): Array<Uint8Array> | undefined => {
  if (!frames.some((frame) => frame.byteLength >= longFromBytes)) return undefined
  const out: Array<Uint8Array> = []
  // The copied part under way: the frames from `from` on (the count first when `from` is 0),
  // ended by the length of the long frame that follows them.
  let from = 0
  const copied = (to: number, long: Uint8Array | undefined): Uint8Array => {
    let bytes = from === 0 ? 4 : 0
    for (let i = from; i < to; i++) bytes += 4 + frames[i]!.byteLength
    if (long !== undefined) bytes += 4
    const part = new Uint8Array(bytes)
    const view = new DataView(part.buffer)
    let at = 0
    if (from === 0) {
      view.setUint32(0, frames.length, true)
      at = 4
    }
    for (let i = from; i < to; i++) {
      view.setUint32(at, frames[i]!.byteLength, true)
      part.set(frames[i]!, at + 4)
      at += 4 + frames[i]!.byteLength
    }
    if (long !== undefined) view.setUint32(at, long.byteLength, true)
    return part
  }
  for (let i = 0; i < frames.length; i++) {
    const frame = frames[i]!
    if (frame.byteLength < longFromBytes) continue
    out.push(copied(i, frame), frame)
    from = i + 1
  }
  if (from < frames.length) out.push(copied(frames.length, undefined))
  return out
}

/** The frame count a batch's header declares; `undefined` when the header is missing. @since 0.1.0 @category internal */
export const count = (message: Uint8Array): number | undefined =>
  message.byteLength < 4 ? undefined : new DataView(message.buffer, message.byteOffset, 4).getUint32(0, true)

/** Decodes a batch into views on `message`; `undefined` when it does not parse exactly. @since 0.1.0 @category internal */
export const decode = (message: Uint8Array): Array<Uint8Array> | undefined => {
  if (message.byteLength < 4) return undefined
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength)
  const count = view.getUint32(0, true)
  if (count > (message.byteLength - 4) / 4) return undefined
  const frames: Array<Uint8Array> = []
  let at = 4
  for (let i = 0; i < count; i++) {
    if (at + 4 > message.byteLength) return undefined
    const length = view.getUint32(at, true)
    if (at + 4 + length > message.byteLength) return undefined
    frames.push(message.subarray(at + 4, at + 4 + length))
    at += 4 + length
  }
  return at === message.byteLength ? frames : undefined
}
