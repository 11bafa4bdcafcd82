/**
 * WebSocket masking four bytes at a time for the `ws` package (Node only). Every frame a client
 * sends is masked (RFC 6455 §5.3), so a server unmasks every byte it receives: at 256 ranks sending
 * 40 KB of parameters each per round, `ws`'s fallback (one byte a step, used when neither
 * `http.websocketUnmask` nor the `bufferutil` addon is there) was the coordinator's largest single
 * cost. Here the aligned middle of the buffer is XORed as 32-bit words, with the mask rotated to
 * the first aligned byte; the unaligned head and tail go byte by byte. Same result, about 4 times
 * faster.
 *
 * `install` puts these in place of `ws`'s byte loops in its `buffer-util` module; `ws`'s receiver
 * and sender take them from there when they load, so it must run before anything imports `ws`
 * (`node.ts` imports this file first). A native implementation `ws` found is kept.
 *
 * @since 0.1.0
 */
import { createRequire } from "node:module"
import { dirname } from "node:path"
import * as Runtime from "./detect.ts"

/** Shorter buffers (control frames, small messages) go byte by byte: a view costs more than it saves. */
const wordsFromBytes = 32

const maskBytes = new Uint8Array(4)
const maskWord = new Int32Array(maskBytes.buffer)

/** The mask as the 32-bit word that covers bytes `at .. at + 3` of the buffer (platform byte order). */
const wordAt = (mask: Uint8Array, at: number): number => {
  maskBytes[0] = mask[at & 3]!
  maskBytes[1] = mask[(at + 1) & 3]!
  maskBytes[2] = mask[(at + 2) & 3]!
  maskBytes[3] = mask[(at + 3) & 3]!
  return maskWord[0]!
}

/**
 * XORs `bytes` in place with the 4-byte `mask` repeated from the buffer's first byte (what
 * masking and unmasking both are).
 *
 * @since 0.1.0
 * @category sockets
 */
export const unmask = (bytes: Uint8Array, mask: Uint8Array): void => {
  const length = bytes.length
  if (length < wordsFromBytes) {
    for (let i = 0; i < length; i++) bytes[i]! ^= mask[i & 3]!
    return
  }
  const head = Math.min(length, (4 - (bytes.byteOffset & 3)) & 3)
  let i = 0
  for (; i < head; i++) bytes[i]! ^= mask[i & 3]!
  const words = (length - i) >>> 2
  if (words > 0) {
    const word = wordAt(mask, i)
    const view = new Int32Array(bytes.buffer, bytes.byteOffset + i, words)
    for (let j = 0; j < words; j++) view[j]! ^= word
    i += words << 2
  }
  for (; i < length; i++) bytes[i]! ^= mask[i & 3]!
}

/**
 * Writes `source[0, length)` XOR the mask into `output` from `offset` (`ws`'s `mask` signature):
 * a copy, then `unmask` in place.
 *
 * @since 0.1.0
 * @category sockets
 */
export const mask = (source: Uint8Array, key: Uint8Array, output: Uint8Array, offset: number, length: number): void => {
  const target = output.subarray(offset, offset + length)
  if (source !== output || offset !== 0) target.set(length === source.length ? source : source.subarray(0, length))
  unmask(target, key)
}

interface BufferUtil {
  mask: (source: Uint8Array, key: Uint8Array, output: Uint8Array, offset: number, length: number) => void
  unmask: (bytes: Uint8Array, key: Uint8Array) => void
}

/**
 * Puts `mask` and `unmask` in `ws`'s `buffer-util` module where it uses its JavaScript byte loops
 * (module doc). Returns whether it did: false when `ws` found a native implementation, or its
 * module is not where it was.
 *
 * @since 0.1.0
 * @category sockets
 */
export const install = (): boolean => {
  try {
    const require = createRequire(import.meta.url)
    const util = require(`${dirname(require.resolve("ws/package.json"))}/lib/buffer-util.js`) as BufferUtil
    // `ws`'s own loops are named functions; its native wrappers are anonymous.
    let installed = false
    if (util.unmask.name === "_unmask") {
      util.unmask = unmask
      installed = true
    }
    if (util.mask.name === "_mask") {
      util.mask = mask
      installed = true
    }
    return installed
  } catch {
    return false
  }
}

/**
 * Whether `install` replaced `ws`'s loops when this module loaded (Node only: Bun and Deno serve
 * WebSockets without `ws`).
 *
 * @since 0.1.0
 * @category sockets
 */
export const installed: boolean = Runtime.detect() === "node" && install()
