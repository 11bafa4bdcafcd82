/**
 * `WireError`: why a transport message could not be decoded into frames (docs/design.md §4), with the
 * rank when known and the WebSocket close code that the connection's policy may use.
 *
 * Offsets and byte counts are integers, measured from the start of the transport message (a batch
 * of frames), not of one frame.
 *
 * @since 0.1.0
 */
import type { Rank } from "../core/messages.ts"
import type { Cause } from "effect"
import { Data } from "effect"

/** The message is longer than `messageBytesMax`; nothing was decoded. @since 0.1.0 @category reasons */
export interface FrameTooLarge {
  readonly _tag: "FrameTooLarge"
  readonly bytes: number
  readonly bytesMax: number
}

/**
 * One field is longer than its limit (`Limits`): a text field over `textBytesMax` bytes, or
 * `params` over `paramsLengthMax` values. Found from the field's declared length, before it is
 * decoded; `bytes` and `bytesMax` are in the field's unit (bytes of text, or values of `params`).
 *
 * @since 0.1.0
 * @category reasons
 */
export interface FieldTooLarge {
  readonly _tag: "FieldTooLarge"
  readonly field: string
  readonly bytes: number
  readonly bytesMax: number
}

/**
 * The bytes end inside a data item: `bytes` were received, at least `bytesNeeded` were needed
 * (a lower bound, from the item's declared length).
 *
 * @since 0.1.0
 * @category reasons
 */
export interface Truncated {
  readonly _tag: "Truncated"
  readonly bytes: number
  readonly bytesNeeded: number
}

/**
 * The bytes are not CBOR this protocol can read at `offset`: reserved or unsupported encodings
 * (indefinite lengths, unassigned simple values, a stray break), invalid UTF-8, or a decoder fault.
 *
 * @since 0.1.0
 * @category reasons
 */
export interface MalformedCbor {
  readonly _tag: "MalformedCbor"
  readonly offset: number
  readonly detail: string
}

/**
 * An unknown tag: `kind: "cbor"` for a CBOR tag number the protocol does not use (including a
 * record tag beyond the structures table), `kind: "message"` for a message id beyond the message
 * table.
 *
 * @since 0.1.0
 * @category reasons
 */
export interface UnknownTag {
  readonly _tag: "UnknownTag"
  readonly kind: "cbor" | "message"
  readonly tag: number
}

/**
 * The frame decoded but does not match its schema: `path` locates the value (`[]` for the frame
 * itself, `["from"]`, `["offset"]`, `["peers", 2]`), `message` says what was expected.
 *
 * @since 0.1.0
 * @category reasons
 */
export interface SchemaMismatch {
  readonly _tag: "SchemaMismatch"
  readonly path: ReadonlyArray<string | number>
  readonly message: string
}

/**
 * The peer speaks another protocol or structures-table version (`field`): `got` from the frame,
 * `want` ours. Nothing after the version is read.
 *
 * @since 0.1.0
 * @category reasons
 */
export interface VersionMismatch {
  readonly _tag: "VersionMismatch"
  readonly field: "protocol" | "structures"
  readonly got: number
  readonly want: number
}

/**
 * The frame names a sender (`got`: a rank, or `-1` for the coordinator) other than the one the
 * connection is bound to (`want`), docs/design.md §5.
 *
 * @since 0.1.0
 * @category reasons
 */
export interface SenderMismatch {
  readonly _tag: "SenderMismatch"
  readonly got: number
  readonly want: number
}

/**
 * Every reason a transport message fails to decode.
 *
 * @since 0.1.0
 * @category reasons
 */
export type Reason =
  | FrameTooLarge
  | FieldTooLarge
  | Truncated
  | MalformedCbor
  | UnknownTag
  | SchemaMismatch
  | VersionMismatch
  | SenderMismatch

// Named with its type written out so that JSR's fast type check (`deno publish`) can read it.
const WireErrorBase: new (args: {
  readonly reason: Reason
  readonly rank: Rank | undefined
}) => Cause.YieldableError & {
  readonly _tag: "WireError"
  readonly reason: Reason
  readonly rank: Rank | undefined
} = Data.TaggedError("WireError")

/**
 * A frame that failed to decode or validate: `reason` says why, `rank` is the sending rank when
 * known (from the connection, else from the frame header), `undefined` otherwise or for the
 * coordinator. Never thrown by the codec; returned in a `Result` or failed in an `Effect`.
 *
 * @since 0.1.0
 * @category errors
 */
export class WireError extends WireErrorBase {
  /** One line: the reason's tag and fields, and the rank. */
  override get message(): string {
    const { _tag, ...fields } = this.reason
    const from = this.rank === undefined ? "" : ` from rank ${this.rank}`
    return `${_tag} ${JSON.stringify(fields)}${from}`
  }
}

/**
 * A reason in words, for a rank's death cause and the journal: `field params of 3 values, above
 * its bound of 2 values`, `a frame that names rank 1 as its sender`, `malformed CBOR at byte 3:
 * ...`.
 *
 * @since 0.1.0
 * @category reasons
 */
export const words = (reason: Reason): string => {
  switch (reason._tag) {
    case "FrameTooLarge":
      return `a frame of ${reason.bytes} bytes, above its bound of ${reason.bytesMax} bytes`
    case "FieldTooLarge": {
      // Text fields are bounded in bytes, float vectors (params, ring data) in values.
      const unit = reason.field === "params" || reason.field === "data" ? "values" : "bytes"
      return `field ${reason.field} of ${reason.bytes} ${unit}, above its bound of ${reason.bytesMax} ${unit}`
    }
    case "Truncated":
      return `a truncated frame (${reason.bytes} of ${reason.bytesNeeded} bytes)`
    case "MalformedCbor":
      return `malformed CBOR at byte ${reason.offset}: ${reason.detail}`
    case "UnknownTag":
      return `an unknown ${reason.kind} tag ${reason.tag}`
    case "SchemaMismatch":
      return `a message that does not match its schema${reason.path.length === 0 ? "" : ` at ${reason.path.join(".")}`}: ${reason.message}`
    case "VersionMismatch":
      return `${reason.field} version ${reason.got}, not ${reason.want}`
    case "SenderMismatch":
      return `a frame that names ${reason.got === -1 ? "the coordinator" : `rank ${reason.got}`} as its sender`
  }
}

/**
 * The WebSocket close codes a decode failure maps to: 1002 protocol error, 1008 policy violation,
 * 1009 message too big (RFC 6455 §7.4.1).
 *
 * @since 0.1.0
 * @category close-codes
 */
export type CloseCode = 1002 | 1008 | 1009

/**
 * The close code for a reason: `FrameTooLarge` → 1009; `VersionMismatch` and `SenderMismatch` →
 * 1008 (the peer is well-formed but not allowed here); everything else → 1002.
 *
 * @since 0.1.0
 * @category close-codes
 */
export const closeCodeOf = (reason: Reason): CloseCode => {
  switch (reason._tag) {
    case "FrameTooLarge":
    case "FieldTooLarge":
      return 1009
    case "VersionMismatch":
    case "SenderMismatch":
      return 1008
    case "Truncated":
    case "MalformedCbor":
    case "UnknownTag":
    case "SchemaMismatch":
      return 1002
  }
}

/**
 * The close code for a `WireError` (see `closeCodeOf`).
 *
 * @since 0.1.0
 * @category close-codes
 */
export const closeCode = (error: WireError): CloseCode => closeCodeOf(error.reason)
