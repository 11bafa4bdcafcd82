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
