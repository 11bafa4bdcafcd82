/**
 * A CBOR pre-scanner for one frame, run before cbor-x sees any byte.
 *
 * It walks the frame's items without allocating: every declared length or count is checked against
 * the bytes that remain (each item takes at least one byte), so no field can make the decoder
 * allocate more than the message holds. It reads the envelope, checks the versions first (so a peer
 * on another version gets `VersionMismatch`, whatever follows), and checks the frame's shape
 * against the structures table: only the table's record tags, the Float32Array and Float64Array tags (85, 86)
 * and, in `params`, the packed vector's Uint8Array tag (64) are allowed, no maps, no nesting beyond an array of numbers, no indefinite lengths, valid UTF-8.
 * cbor-x therefore only ever decodes frames of the protocol's own shape, and its shared structures
 * can never be redefined by a peer (record-definition tags are rejected here).
 *
 * Single-threaded and synchronous: the scan state lives in module variables for speed.
 */
import * as Structures from "../structures.ts"
import type * as WireError from "../wire-error.ts"

/** The outcome of scanning one frame that starts at `start`. */
export interface Scanned {
  /** Offset just past the frame (meaningful when `reason` is undefined). */
  readonly end: number
  /** The sender's wire id (a rank, or -1 for the coordinator), when the header was readable. */
  readonly from: number | undefined
  /** The structure index of the message record (meaningful when `reason` is undefined). */
  readonly structure: number
  /** The first problem found, if any. */
  readonly reason: WireError.Reason | undefined
}

const empty = new Uint8Array(0)
let src: Uint8Array = empty
let pos = 0
let lim = 0
let major = 0
let info = 0
let arg = 0
let soft: WireError.Reason | undefined
let textMax = Number.POSITIVE_INFINITY
let floatsMax = Number.POSITIVE_INFINITY

const truncated = (needed: number): WireError.Reason => ({
  _tag: "Truncated",
  bytes: lim,
  bytesNeeded: Math.min(needed, Number.MAX_SAFE_INTEGER)
})

const malformed = (offset: number, detail: string): WireError.Reason => ({ _tag: "MalformedCbor", offset, detail })

const mismatch = (path: ReadonlyArray<string | number>, message: string): WireError.Reason => ({
  _tag: "SchemaMismatch",
  path,
  message
})

const u32 = (at: number): number => src[at]! * 0x1000000 + ((src[at + 1]! << 16) | (src[at + 2]! << 8) | src[at + 3]!)

/** Reads one item head into `major`, `info`, `arg`; returns a fatal reason or undefined. */
const head = (): WireError.Reason | undefined => {
  if (pos >= lim) return truncated(pos + 1)
  const byte = src[pos]!
  major = byte >> 5
  info = byte & 31
  if (info < 24) {
    arg = info
    pos += 1
    return undefined
  }
  switch (info) {
    case 24:
      if (pos + 2 > lim) return truncated(pos + 2)
      arg = src[pos + 1]!
      pos += 2
      return undefined
    case 25:
      if (pos + 3 > lim) return truncated(pos + 3)
      arg = (src[pos + 1]! << 8) | src[pos + 2]!
      pos += 3
      return undefined
    case 26:
      if (pos + 5 > lim) return truncated(pos + 5)
      arg = u32(pos + 1)
      pos += 5
      return undefined
    case 27:
      if (pos + 9 > lim) return truncated(pos + 9)
      // Above 2^53 this is approximate, which is fine: it is only compared with what remains.
      arg = u32(pos + 1) * 0x100000000 + u32(pos + 5)
      pos += 9
      return undefined
    case 31:
      return malformed(
        pos,
        major === 7 ? "break outside an indefinite-length item" : "indefinite-length items are not used by this protocol"
      )
    default:
      return malformed(pos, `reserved additional information ${info}`)
  }
}

/** Skips `count` whole items, iteratively (no recursion, so nesting depth costs nothing). */
const skipItems = (count: number): WireError.Reason | undefined => {
  let pending = count
  while (pending > 0) {
    if (pending > lim - pos) return truncated(pos + pending)
    pending -= 1
    const bad = head()
    if (bad !== undefined) return bad
    switch (major) {
      case 2:
      case 3:
        if (arg > lim - pos) return truncated(pos + arg)
        pos += arg
        break
      case 4:
        pending += arg
        break
      case 5:
        pending += 2 * arg
        break
      case 6:
        pending += 1
        break
    }
  }
  return undefined
}

/** Skips the content of the item whose head was just read. */
const skipContent = (): WireError.Reason | undefined => {
  switch (major) {
    case 2:
    case 3:
      if (arg > lim - pos) return truncated(pos + arg)
      pos += arg
      return undefined
    case 4:
      return skipItems(arg)
    case 5:
      return skipItems(2 * arg)
    case 6:
      return skipItems(1)
    default:
      return undefined
  }
}

const validUtf8 = (from: number, to: number): boolean => {
  let i = from
  while (i < to) {
    const byte = src[i]!
    if (byte < 0x80) {
      i += 1
      continue
    }
    let more: number
    let min: number
    if ((byte & 0xe0) === 0xc0) {
      more = 1
      min = 0x80
    } else if ((byte & 0xf0) === 0xe0) {
      more = 2
      min = 0x800
    } else if ((byte & 0xf8) === 0xf0) {
      more = 3
      min = 0x10000
    } else {
      return false
    }
    if (i + more >= to) return false
    let point = byte & (0x3f >> more)
    for (let j = 1; j <= more; j++) {
      const next = src[i + j]!
      if ((next & 0xc0) !== 0x80) return false
      point = (point << 6) | (next & 0x3f)
    }
    if (point < min || point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff)) return false
    i += more + 1
  }
  return true
}

/** A major-7 item (its head already read): booleans, null, undefined and floats are readable. */
const simple = (at: number): void => {
  if ((info >= 20 && info <= 23) || info === 25 || info === 26 || info === 27) return
  soft = malformed(at, `unsupported simple value ${info === 24 ? arg : info}`)
}

/** One element of an array field: numbers only (booleans and null pass here; the schema rejects them). */
const element = (key: string, index: number): WireError.Reason | undefined => {
  const at = pos
  const bad = head()
  if (bad !== undefined) return bad
  if (soft !== undefined) return skipContent()
  if (major === 0 || major === 1) return undefined
  if (major === 7) {
    simple(at)
    return undefined
  }
  soft = mismatch([key, index], "expected a number")
  return skipContent()
}

/**
 * A packed parameter vector (tag 64 over a byte string; structures version 5), only in a `params`
 * field, or a packed ring step in a `data` field (version 7). Its bytes are bounded here by what
 * the largest packed form of `paramsLengthMax` values takes (`Packed.packedBytes`, and a ring
 * step's 8-byte head); the codec checks a `params` vector's rest when it unpacks, and the ring
 * a step's (`RingPacked`).
 */
const packed = (key: string): WireError.Reason | undefined => {
  const inner = head()
  if (inner !== undefined) return inner
  if ((key !== "params" && key !== "data") || major !== 2) {
    soft = mismatch(
      [key],
      key !== "params" && key !== "data"
        ? "a packed vector (tag 64) is only allowed in params and data"
        : "expected a packed vector: tag 64 over a byte string"
    )
    return skipContent()
  }
  if (arg > lim - pos) return truncated(pos + arg)
  // fp16 takes 2 bytes a value; int8 1 and a 4-byte scale a block of at least 8, so at most
  // 1.5 a value plus one block's scale: for 1 to 7 values int8 is the larger form.
  const bytesMax = 8 + 2 * floatsMax + 4 + (key === "data" ? 8 : 0)
  if (arg > bytesMax) soft = { _tag: "FieldTooLarge", field: key, bytes: arg, bytesMax }
  pos += arg
  return undefined
}

/** One field value of a record. */
const value = (key: string): WireError.Reason | undefined => {
  const at = pos
  const bad = head()
  if (bad !== undefined) return bad
  if (soft !== undefined) return skipContent()
  switch (major) {
    case 0:
    case 1:
      return undefined
    case 7:
      simple(at)
      return undefined
    case 2:
      if (arg > lim - pos) return truncated(pos + arg)
      pos += arg
      return undefined
    case 3:
      if (arg > lim - pos) return truncated(pos + arg)
      if (arg > textMax) soft = { _tag: "FieldTooLarge", field: key, bytes: arg, bytesMax: textMax }
      else if (!validUtf8(pos, pos + arg)) soft = malformed(pos, "invalid UTF-8 in a text string")
      pos += arg
      return undefined
    case 4: {
      const count = arg
      if (count > lim - pos) return truncated(pos + count)
      for (let i = 0; i < count; i++) {
        const failed = element(key, i)
        if (failed !== undefined) return failed
      }
      return undefined
    }
    case 5:
      soft = mismatch([key], "expected a number, text, boolean, Float32Array or array of numbers, got a map")
      return skipContent()
    default: {
      // major 6: a tag
      if (arg === Structures.uint8Tag) return packed(key)
      if (arg !== Structures.float32Tag && arg !== Structures.float64Tag) {
        soft = { _tag: "UnknownTag", kind: "cbor", tag: arg }
        return skipItems(1)
      }
      const width = arg === Structures.float32Tag ? 4 : 8
      const inner = head()
      if (inner !== undefined) return inner
      if (major !== 2 || arg % width !== 0) {
        soft = mismatch(
          [key],
          width === 4
            ? "expected a Float32Array: tag 85 over a byte string of 4-byte floats"
            : "expected a Float64Array: tag 86 over a byte string of 8-byte floats"
        )
        return skipContent()
      }
      if (arg > lim - pos) return truncated(pos + arg)
      // Ring data is bounded in values like params: one run's vector, whatever its width, and a
      // float64 partial sum one more (its contribution count: a 1-parameter model's sums are 2 values).
      const valuesMax = width === 8 ? floatsMax + 1 : floatsMax
      if (arg / width > valuesMax) soft = { _tag: "FieldTooLarge", field: key, bytes: arg / width, bytesMax: valuesMax }
      pos += arg
      return undefined
    }
  }
}

/** Checks one version field; returns a fatal `VersionMismatch`, or sets `soft` on a non-integer. */
const version = (field: "protocol" | "structures", want: number, read: ReadonlyArray<number> = [want]): WireError.Reason | undefined => {
  const bad = head()
  if (bad !== undefined) return bad
  if (major !== 0) {
    soft = mismatch([`${field}Version`], "expected an unsigned integer")
    return skipContent()
  }
  if (!read.includes(arg)) return { _tag: "VersionMismatch", field, got: arg, want }
  return undefined
}

const float64At = (at: number): number => new DataView(src.buffer, src.byteOffset + at, 8).getFloat64(0)

const isRank = (value: number): boolean => Number.isSafeInteger(value) && value >= 0

// Reads `major` through a call: TypeScript would otherwise keep a narrowing from before `head()`.
const majorNow = (): number => major

// What `scanBody` read so far: module state like the cursor, so that its many exits share one
// function rather than a closure made on every call.
let from: number | undefined
let structure = -1
const result = (
  fatal: WireError.Reason | undefined
): { readonly fatal: WireError.Reason | undefined; readonly from: number | undefined; readonly structure: number } => ({
  fatal,
  from,
  structure
})

const scanBody = (
  expectedFrom: number | undefined
): { readonly fatal: WireError.Reason | undefined; readonly from: number | undefined; readonly structure: number } => {
  from = undefined
  structure = -1

  let bad = head()
  if (bad !== undefined) return result(bad)
  if (majorNow() !== 4) {
    soft = mismatch([], "expected a frame: an array [protocolVersion, structuresVersion, from, message]")
    return result(skipContent())
  }
  const length = arg
  if (length < 2) {
    soft = mismatch([], `expected a frame of 4 items, got ${length}`)
    return result(skipItems(length))
  }
  // Versions come first and are read the same way in every version, so they are checked before
  // anything that a future version could lay out differently.
  bad = version("protocol", Structures.protocolVersion)
  if (bad !== undefined || soft !== undefined) return result(bad ?? skipItems(length - 1))
  bad = version("structures", Structures.structuresVersion, Structures.structuresVersionsRead)
  if (bad !== undefined || soft !== undefined) return result(bad ?? skipItems(length - 2))
  if (length !== 4) {
    soft = mismatch([], `expected a frame of 4 items, got ${length}`)
    return result(skipItems(length - 2))
  }
  if (2 > lim - pos) return result(truncated(pos + 2))

  bad = head()
  if (bad !== undefined) return result(bad)
  const senderMajor = majorNow()
  if (senderMajor === 0 && arg <= Number.MAX_SAFE_INTEGER) from = arg
  else if (senderMajor === 1 && arg === 0) from = Structures.coordinatorWireId
  else if (senderMajor === 7 && info === 27 && isRank(float64At(pos - 8))) {
    // cbor-x writes integers of 2^32 and above as float64.
    from = float64At(pos - 8)
  } else {
    soft = mismatch(["from"], "expected a rank (a non-negative safe integer) or -1 for the coordinator")
    bad = skipContent()
    return result(bad ?? skipItems(1))
  }
  if (expectedFrom !== undefined && from !== expectedFrom) {
    soft = { _tag: "SenderMismatch", got: from, want: expectedFrom }
    return result(skipItems(1))
  }

  bad = head()
  if (bad !== undefined) return result(bad)
  if (majorNow() !== 6) {
    soft = mismatch(["message"], "expected a message record (CBOR tag 57344 + structure)")
    return result(skipContent())
  }
  structure = arg - Structures.recordTagBase
  const keys = Structures.structures[structure]
  if (keys === undefined) {
    soft = { _tag: "UnknownTag", kind: "cbor", tag: arg }
    return result(skipItems(1))
  }
  bad = head()
  if (bad !== undefined) return result(bad)
  if (majorNow() !== 4 || arg !== keys.length) {
    soft = mismatch(["message"], `expected structure ${structure} as an array of ${keys.length} values`)
    return result(skipContent())
  }
  bad = head()
  if (bad !== undefined) return result(bad)
  if (majorNow() !== 0) {
    soft = mismatch(["_tag"], "expected a message id (an unsigned integer)")
    bad = skipContent()
    return result(bad ?? skipItems(keys.length - 1))
  }
  for (let k = 1; k < keys.length; k++) {
    bad = value(keys[k]!)
    if (bad !== undefined) return result(bad)
  }
  return result(undefined)
}

/**
 * Scans the frame that starts at `start` in `bytes` (a transport message). `expectedFrom` is the
 * sender wire id the connection is bound to, if any. Never throws.
 */
export const scanFrame = (
  bytes: Uint8Array,
  start: number,
  expectedFrom: number | undefined,
  limits: { readonly textBytesMax: number; readonly paramsLengthMax: number } = {
    textBytesMax: Number.POSITIVE_INFINITY,
    paramsLengthMax: Number.POSITIVE_INFINITY
  }
): Scanned => {
  src = bytes
  textMax = limits.textBytesMax
  floatsMax = limits.paramsLengthMax
  pos = start
  lim = bytes.length
  soft = undefined
  const body = scanBody(expectedFrom)
  const reason = body.fatal ?? soft
  const scanned: Scanned = {
    end: pos,
    from: body.from,
    structure: body.structure,
    reason
  }
  src = empty
  soft = undefined
  return scanned
}
