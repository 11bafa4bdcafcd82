/**
 * The CBOR codec for frames (docs/design.md §4), on cbor-x with the fixed structures table.
 *
 * Layout of one frame: the CBOR array `[protocolVersion, structuresVersion, from, message]`, where
 * `from` is the sender (a rank, or `-1` for the coordinator) and `message` is a cbor-x record: tag
 * `0xE000 + structure` over the array `[id, ...fields]` in the table's order (`Structures`).
 * `params` travel as CBOR tag 85 (little-endian `Float32Array`), a ring step's `data` as tag 85 or 86
 * (little-endian `Float64Array`). A batch (one transport message
 * carrying several frames) is the frames' bytes back to back: a CBOR sequence (RFC 8742).
 *
 * Decoding never throws. It checks `messageBytesMax` first, then pre-scans the bytes without
 * allocating (bounds on every length and count, versions first, only the protocol's tags and
 * shapes), then lets cbor-x decode, then validates the message against its schema.
 *
 * @since 0.1.0
 */
import { addExtension, Decoder, Encoder } from "cbor-x"
import type { Options } from "cbor-x"
import { Effect, Result, Schema, SchemaIssue } from "effect"
import type { Rank } from "../core/messages.ts"
import * as Frame from "./frame.ts"
import * as HotMessages from "./internal/hot-messages.ts"
import * as Scan from "./internal/scan.ts"
import * as Limits from "./limits.ts"
import * as Packed from "./packed.ts"
import * as MessageSchema from "./schema.ts"
import * as Structures from "./structures.ts"
import * as WireError from "./wire-error.ts"

/**
 * Options for decoding.
 *
 * - `messageBytesMax`: integer bytes; default `Limits.defaults.messageBytesMax` (16 MiB). A longer
 *   message is rejected with `FrameTooLarge` before any decoding.
 * - `from`: the sender the connection is bound to (docs/design.md §5); a frame naming another sender
 *   gets `SenderMismatch`. Also the rank reported in errors. Default: accept any sender.
 * - `textBytesMax`, `paramsLengthMax`: see `Limits`; a longer field gets `FieldTooLarge` before it
 *   is read.
 * - `adoptBytes`: default false. True when `bytes` are the caller's to give away: nothing reads,
 *   changes or reuses them after the call (a message a WebSocket server received into a buffer
 *   of its own). A `Params` frame's values are then a view on `bytes` instead of a copy, moved up
 *   to 3 bytes towards the frame's start where they are not 4-byte aligned (over the byte
 *   string's head, already read). Other messages decode as without it.
 *
 * @since 0.1.0
 * @category options
 */
export interface DecodeOptions {
  readonly messageBytesMax?: number
  readonly textBytesMax?: number
  readonly paramsLengthMax?: number
  readonly from?: Frame.Sender
  readonly adoptBytes?: boolean
}

const fieldLimits = (options: DecodeOptions | undefined) => ({
  textBytesMax: options?.textBytesMax ?? Limits.defaults.textBytesMax,
  paramsLengthMax: options?.paramsLengthMax ?? Limits.defaults.paramsLengthMax
})

// cbor-x reads `int64AsNumber` (8-byte integers as numbers, not BigInt) but does not declare it.
interface DecoderOptions extends Options {
  readonly int64AsNumber?: boolean
}

// cbor-x attaches readers and transition trees to the structures it is given: each side gets its
// own deep copy, and the exported table stays untouched.
const copyStructures = (): Array<Array<string>> => Structures.structures.map((keys) => [...keys])

const encoder = new Encoder({
  structures: copyStructures(),
  // Every object the codec encodes has a shape from the table; never grow the shared table.
  maxSharedStructures: Structures.structures.length
})

const decoderOptions: DecoderOptions = {
  structures: copyStructures(),
  // Decoded Float32Arrays own their memory: never views into a transport's (reusable) buffer.
  copyBuffers: true,
  int64AsNumber: true
}
const decoder = new Decoder(decoderOptions)
// For bytes given to the decoder (`adoptBytes`): byte strings are views on them, not copies.
const adoptingDecoder = new Decoder({ ...decoderOptions, structures: copyStructures(), copyBuffers: false })

/**
 * Whether the decode under way is this module's `decoder` (`copyBuffers`): only then is a byte
 * string's buffer a fresh copy of its own that a typed array may view.
 */
let decodingFrame = false
/** Whether the decode under way is `adoptingDecoder`'s: a byte string is a view on the given bytes. */
let adopting = false

/**
 * The little-endian typed array of tag 85 or 86 over `bytes`: in a frame's decode, a view where
 * `bytes` is aligned for it; otherwise a copy, as cbor-x makes. With `copyBuffers` cbor-x reads
 * the byte string into a fresh buffer and its own tag reader copied it once more: 40 KB per
 * `Params` of 10,000 values, twice, 256 times a round at the coordinator. The fresh buffer is the
 * frame's own, so a view on it is enough. Another cbor-x decoder in the process (a trainer's)
 * reads from its caller's buffer, which a view would alias: it gets the copy.
 */
const typedOver =
  <T>(Typed: { readonly BYTES_PER_ELEMENT: number; new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): T }) =>
  (bytes: Uint8Array): T => {
    const length = Math.floor(bytes.byteLength / Typed.BYTES_PER_ELEMENT)
    if (adopting) return new Typed(bytes.buffer, alignedInPlace(bytes, Typed.BYTES_PER_ELEMENT), length)
    return decodingFrame && bytes.byteOffset % Typed.BYTES_PER_ELEMENT === 0
      ? new Typed(bytes.buffer, bytes.byteOffset, length)
      : new Typed(Uint8Array.prototype.slice.call(bytes).buffer)
  }

/**
 * Moves `bytes` (a byte string of an adopted frame) back to the nearest offset of their buffer
 * that is a multiple of `alignBytes`, and returns that offset. The `alignBytes - 1` bytes at most
 * that this overwrites are the string's own tag and head (at least 3 bytes: `d8 55` and a length),
 * which the decoder has read. O(bytes) when it moves them; no allocation.
 */
const alignedInPlace = (bytes: Uint8Array, alignBytes: number): number => {
  const shift = bytes.byteOffset % alignBytes
  if (shift === 0) return bytes.byteOffset
  const start = bytes.byteOffset - shift
  new Uint8Array(bytes.buffer, start, bytes.byteLength + shift).copyWithin(0, shift)
  return start
}

// Registered for every cbor-x decoder of this process (cbor-x has no per-decoder tags), with the
// result cbor-x gives: only the extra copy goes. A big-endian machine keeps cbor-x's own, which
// swaps the bytes.
// No `Class`: the encoder keeps writing typed arrays itself (the typings ask for one all the same).
const decodeOnly = (tag: number, decode: (bytes: Uint8Array) => unknown): Parameters<typeof addExtension>[0] =>
  ({ tag, decode }) as unknown as Parameters<typeof addExtension>[0]
if (new Uint8Array(Uint16Array.of(1).buffer)[0] === 1) {
  addExtension(decodeOnly(85, typedOver(Float32Array)))
  addExtension(decodeOnly(86, typedOver(Float64Array)))
}

interface Row {
  readonly id: number
  readonly fields: ReadonlyArray<string>
  readonly optional: ReadonlyArray<string>
  readonly later: ReadonlyArray<string>
}

const rows: ReadonlyMap<string, Row> = new Map(
  Structures.messages.map((entry, id) => [
    entry.tag,
    { id, fields: entry.fields, optional: entry.optional ?? [], later: entry.later?.fields ?? [] }
  ])
)

const paramsId = Structures.messages.findIndex((entry) => entry.tag === "Params")
/** The structures a `Params` frame may be sent as (with and without its optional `loss`). */
const paramsStructures: ReadonlySet<number> = new Set(
  [Structures.structureOf[paramsId], Structures.fullStructureOf[paramsId], ...(Structures.laterStructuresOf[paramsId] ?? [])].filter(
    (structure): structure is number => structure !== undefined
  )
)

const validators = Structures.messages.map((entry) => Schema.decodeUnknownResult(MessageSchema.byTag[entry.tag]))

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()

const senderWireId = (from: Frame.Sender): number => (from === "coordinator" ? Structures.coordinatorWireId : from)

const toWire = (frame: Frame.Frame, packedParams?: Uint8Array): ReadonlyArray<unknown> => {
  const message = frame.message as unknown as Readonly<Record<string, unknown>>
  const row = rows.get(frame.message._tag)
  if (row === undefined) throw new Error(`Codec.encode: unknown message tag ${String(frame.message._tag)}`)
  // Keys in table order, so that cbor-x picks the agreed structure whatever order the caller used.
  const body: Record<string, unknown> = { _tag: row.id }
  for (const field of row.fields) {
    const value = message[field]
    // A packed ring step (structures version 7) goes as tag 64, even when it came in as a Buffer.
    body[field] =
      field === "params" && packedParams !== undefined
        ? plainBytes(packedParams)
        : field === "data" && value instanceof Uint8Array
          ? plainBytes(value)
          : value
  }
  // Optional fields all or none: the structure with them, or the one without (Structures).
  if (row.optional.length > 0 && row.optional.every((field) => message[field] !== undefined)) {
    for (const field of row.optional) body[field] = message[field]
  }
  // The second group likewise, after the first (structures version 8).
  if (row.later.length > 0 && row.later.every((field) => message[field] !== undefined)) {
    for (const field of row.later) body[field] = message[field]
  }
  return [Structures.protocolVersion, Structures.structuresVersion, senderWireId(frame.from), body]
}

// cbor-x writes a Buffer as a plain byte string and a Uint8Array as tag 64: a packed vector must be
// a Uint8Array proper, whatever the runtime's Buffer is.
const plainBytes = (bytes: Uint8Array): Uint8Array =>
  Object.getPrototypeOf(bytes) === Uint8Array.prototype ? bytes : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/**
 * Encodes one frame to CBOR bytes (a fresh `Uint8Array` with its own `ArrayBuffer`, safe to
 * transfer). Does not validate field values: the receiver does. Throws only on a message whose
 * `_tag` is not in the protocol (impossible for well-typed callers).
 *
 * @since 0.1.0
 * @category encoding
 */
export const encode = (frame: Frame.Frame): Uint8Array => encodePacked(frame, undefined)

/**
 * `encode` with a packed vector (`Packed.pack`, `Packed.withFeedback`) sent in place of the
 * message's `params` (a `Params` or `Update`; structures version 5): the receiver's `decode`
 * unpacks it into a `Float32Array`, so no reader of messages ever sees the packed form.
 * `packed` `undefined` is `encode`.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodePacked = (frame: Frame.Frame, packed: Uint8Array | undefined): Uint8Array => {
  const view = encoder.encode(toWire(frame, packed))
  const out = new Uint8Array(view.length)
  out.set(view)
  return out
}

/** The CBOR items `[protocolVersion, structuresVersion, from]` of a frame's header, after its array head. */
const headerItems = (from: number): Uint8Array => encoder.encode([Structures.protocolVersion, Structures.structuresVersion, from]).slice(1)
const coordinatorHeader = (() => {
  const items = headerItems(Structures.coordinatorWireId)
  const head = new Uint8Array(1 + items.length)
  head[0] = 0x84 // a CBOR array of 4 items
  head.set(items, 1)
  return head
})()

/**
 * The frame `bytes` (one encoded frame from rank `from`) as the coordinator would send the same
 * message: its header's sender replaced, its message bytes kept as they are (a message encodes
 * the same whoever sends it: the structure table is fixed). The coordinator's ring relay forwards a
 * checked `RingData` step this way instead of encoding it again. A fresh `Uint8Array`,
 * or `undefined` when `bytes` does not start with the header `encode` writes for `from`.
 * O(frame length), one copy.
 *
 * @since 0.1.0
 * @category encoding
 */
export const reframeFromCoordinator = (bytes: Uint8Array, from: Rank): Uint8Array | undefined => {
  const items = headerItems(from)
  if (bytes.length <= 1 + items.length || bytes[0] !== 0x84) return undefined
  for (let i = 0; i < items.length; i++) if (bytes[1 + i] !== items[i]) return undefined
  const body = bytes.subarray(1 + items.length)
  const out = new Uint8Array(coordinatorHeader.length + body.length)
  out.set(coordinatorHeader)
  out.set(body, coordinatorHeader.length)
  return out
}

const errorRank = (options: DecodeOptions | undefined, from: number | undefined): number | undefined => {
  if (options?.from !== undefined) return options.from === "coordinator" ? undefined : options.from
  return from !== undefined && from >= 0 ? from : undefined
}

const failure = (
  reason: WireError.Reason,
  options: DecodeOptions | undefined,
  from: number | undefined
): Result.Result<Frame.Frame, WireError.WireError> => Result.fail(new WireError.WireError({ reason, rank: errorRank(options, from) }))

const tooLarge = (bytes: Uint8Array, options: DecodeOptions | undefined): Result.Result<Frame.Frame, WireError.WireError> | undefined => {
  const bytesMax = options?.messageBytesMax ?? Limits.defaults.messageBytesMax
  return bytes.length > bytesMax ? failure({ _tag: "FrameTooLarge", bytes: bytes.length, bytesMax }, options, undefined) : undefined
}

const describe = (error: unknown): string => (error instanceof Error ? error.message : typeof error === "string" ? error : "unknown error")

/** Decodes a frame that the scanner accepted: cbor-x, then the message table, then the schema. */
const materialize = (
  bytes: Uint8Array,
  start: number,
  scanned: Scan.Scanned,
  options: DecodeOptions | undefined
): Result.Result<Frame.Frame, WireError.WireError> => {
  const from = scanned.from
  let raw: unknown
  try {
    // Always a fresh view: cbor-x caches a DataView on the object it is given.
    decodingFrame = true
    adopting = options?.adoptBytes === true && paramsStructures.has(scanned.structure)
    raw = (adopting ? adoptingDecoder : decoder).decode(bytes.subarray(start, scanned.end))
  } catch (error) {
    return failure({ _tag: "MalformedCbor", offset: start, detail: `cbor-x: ${describe(error)}` }, options, from)
  } finally {
    decodingFrame = false
    adopting = false
  }
  const body = Array.isArray(raw) && raw.length === 4 ? (raw[3] as unknown) : undefined
  if (typeof body !== "object" || body === null || from === undefined) {
    return failure({ _tag: "MalformedCbor", offset: start, detail: "cbor-x returned an unexpected value" }, options, from)
  }
  const record = body as Record<string, unknown>
  const id = record["_tag"]
  const entry = typeof id === "number" ? Structures.messages[id] : undefined
  if (entry === undefined) {
    return failure({ _tag: "UnknownTag", kind: "message", tag: typeof id === "number" ? id : -1 }, options, from)
  }
  const idNumber = id as number
  if (
    Structures.structureOf[idNumber] !== scanned.structure &&
    Structures.fullStructureOf[idNumber] !== scanned.structure &&
    !Structures.laterStructuresOf[idNumber]!.includes(scanned.structure)
  ) {
    return failure(
      { _tag: "SchemaMismatch", path: ["_tag"], message: `${entry.tag} is not sent as structure ${scanned.structure}` },
      options,
      from
    )
  }
  const fromCoordinator = from === Structures.coordinatorWireId
  if (entry.direction !== "both" && fromCoordinator !== (entry.direction === "toRank")) {
    const sender = fromCoordinator ? "the coordinator" : "a rank"
    return failure({ _tag: "SchemaMismatch", path: ["_tag"], message: `${entry.tag} is not sent by ${sender}` }, options, from)
  }
  record["_tag"] = entry.tag
  const params = record["params"]
  if (params instanceof Uint8Array) {
    const unpacked = Packed.unpack(params, fieldLimits(options).paramsLengthMax)
    if (Packed.isError(unpacked)) {
      return failure(
        unpacked._tag === "TooLong"
          ? { _tag: "FieldTooLarge", field: "params", bytes: unpacked.length, bytesMax: unpacked.lengthMax }
          : { _tag: "SchemaMismatch", path: ["params"], message: Packed.words(unpacked) },
        options,
        from
      )
    }
    record["params"] = unpacked
  }
  const hot = HotMessages.decode(record)
  const validated = hot === undefined ? validators[idNumber]!(record) : Result.succeed(hot)
  if (Result.isFailure(validated)) {
    const first = formatIssue(validated.failure.issue).issues[0]
    const path = (first?.path ?? []).map((key) => (typeof key === "number" ? key : String(key)))
    return failure({ _tag: "SchemaMismatch", path, message: first?.message ?? "invalid message" }, options, from)
  }
  const message = validated.success
  return Result.succeed(
    fromCoordinator
      ? Frame.fromCoordinator(message as Frame.CoordinatorFrame["message"])
      : Frame.fromRank(from, message as Frame.RankFrame["message"])
  )
}

/**
 * Decodes exactly one frame from a transport message; never throws.
 *
 * Fails with `WireError` and one of: `FrameTooLarge` (longer than `messageBytesMax`),
 * `FieldTooLarge` (a text field over `textBytesMax`, params over `paramsLengthMax`), `Truncated`,
 * `MalformedCbor` (including bytes left after the frame), `UnknownTag`, `SchemaMismatch`,
 * `VersionMismatch`, `SenderMismatch`.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decode = (bytes: Uint8Array, options?: DecodeOptions): Result.Result<Frame.Frame, WireError.WireError> => {
  const large = tooLarge(bytes, options)
  if (large !== undefined) return large
  const expected = options?.from === undefined ? undefined : senderWireId(options.from)
  const scanned = Scan.scanFrame(bytes, 0, expected, fieldLimits(options))
  if (scanned.reason !== undefined) return failure(scanned.reason, options, scanned.from)
  if (scanned.end !== bytes.length) {
    return failure({ _tag: "MalformedCbor", offset: scanned.end, detail: "bytes after the frame" }, options, scanned.from)
  }
  return materialize(bytes, 0, scanned, options)
}

/**
 * `decode` as an `Effect` that fails with `WireError` (for actors: `Effect.catchTag("WireError")`).
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodeEffect = (bytes: Uint8Array, options?: DecodeOptions): Effect.Effect<Frame.Frame, WireError.WireError> =>
  Effect.fromResult(decode(bytes, options))
