/**
 * Wire integration: an `Inspect` built on the CBOR codec of `src/wire`, so a
 * transport surfaces bad frames as `WireError` and refuses impersonation (docs/design.md §3.10, §4, §5).
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Codec from "../wire/codec.ts"
import * as WireError from "../wire/wire-error.ts"
import * as Transport from "./transport.ts"

/**
 * An inspector that decodes each frame with `Codec.decode`, bound to the connection's peer
 * (`from`: the rank, or the coordinator for `coordinatorPeer`):
 *
 * - a good frame passes as `Decoded` with its `Frame` (so its consumer need not decode it again);
 * - `SenderMismatch` (the frame names another sender) is `Impersonation`: never delivered, the
 *   link closes with `CloseCode.RankMismatch` (1008, the close code `WireError.closeCodeOf` gives);
 * - any other `WireError` is `Bad` with `WireError.closeCode(error)` (1002 or 1009, 1008 for a
 *   version mismatch), applied under `badFramePolicy: "close"`.
 *
 * `messageBytesMax` (bytes, default the wire's 16 MiB) is checked per frame before decoding.
 * The frame is decoded once, here. A frame the channel gave away (`given`) is decoded with
 * `adoptBytes`: a `Params`' values are then a view on its bytes, not a copy.
 *
 * @since 0.1.0
 * @category inspect
 */
export const inspect =
  (options: { readonly messageBytesMax?: number } = {}): Transport.Inspect =>
  (peer, frame, given) => {
    const result = Codec.decode(frame, {
      from: peer === Transport.coordinatorPeer ? "coordinator" : peer,
      ...(options.messageBytesMax === undefined ? {} : { messageBytesMax: options.messageBytesMax }),
      ...(given === true ? { adoptBytes: true } : {})
    })
    if (Result.isSuccess(result)) return { _tag: "Decoded", value: result.success }
    const error = result.failure
    if (error.reason._tag === "SenderMismatch") return { _tag: "Impersonation", claimed: error.reason.got }
    return { _tag: "Bad", error, closeCode: WireError.closeCode(error) }
  }

/** The messages that say only that their sender is alive. */
const beacons = new Set(["Heartbeat", "CoordHeartbeat"])
/** A heartbeat frame is a few bytes; anything longer is not one (and is not decoded here). */
const beaconBytesMax = 32

/**
 * `Transport.Options.orderFree` for frames of `src/wire`: true for a `Heartbeat` or a
 * `CoordHeartbeat`, which say only that their sender is alive, so that a resumable WebSocket link
 * sends them between the pieces of a large `Params` or `Update` rather than after it. Every other
 * message keeps its order (a `Checkpoint` must follow the `Update` it saves; a `ChunkDone` must
 * precede the `Params` that commits it).
 *
 * @since 0.1.0
 * @category inspect
 */
export const orderFree = (frame: Uint8Array): boolean => {
  if (frame.byteLength > beaconBytesMax) return false
  const result = Codec.decode(frame)
  return Result.isSuccess(result) && beacons.has(result.success.message._tag)
}

/**
 * `Transport.Options.urgent` for frames of `src/wire`: true for an `Exiting` (a rank that leaves),
 * so that its remainder is handed over without waiting for the other links' backlog. Frames
 * longer than a few bytes are never decoded here.
 *
 * @since 0.1.0
 * @category inspect
 */
export const urgent = (frame: Uint8Array): boolean => {
  if (frame.byteLength > beaconBytesMax) return false
  const result = Codec.decode(frame)
  return Result.isSuccess(result) && result.success.message._tag === "Exiting"
}
