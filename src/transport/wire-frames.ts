/**
 * Wire integration: an `Inspect` and an `isExiting` built on the CBOR codec of `src/wire`, so a
 * transport surfaces bad frames as `WireError` and refuses impersonation (DESIGN.md §3.10, §4, §5).
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
 * - a good frame passes;
 * - `SenderMismatch` (the frame names another sender) is `Impersonation`: never delivered, the
 *   link closes with `CloseCode.RankMismatch` (1008, the close code `WireError.closeCodeOf` gives);
 * - any other `WireError` is `Bad` with `WireError.closeCode(error)` (1002 or 1009, 1008 for a
 *   version mismatch), applied under `badFramePolicy: "close"`.
 *
 * `messageBytesMax` (bytes, default the wire's 16 MiB) is checked per frame before decoding.
 * The frame is decoded once here and again by its consumer; inspection costs one decode.
 *
 * @since 0.1.0
 * @category inspect
 */
export const inspect = (options: { readonly messageBytesMax?: number } = {}): Transport.Inspect => (peer, frame) => {
  const result = Codec.decode(frame, {
    from: peer === Transport.coordinatorPeer ? "coordinator" : peer,
    ...(options.messageBytesMax === undefined ? {} : { messageBytesMax: options.messageBytesMax })
  })
  if (Result.isSuccess(result)) return undefined
  const error = result.failure
  if (error.reason._tag === "SenderMismatch") return { _tag: "Impersonation", claimed: error.reason.got }
  return { _tag: "Bad", error, closeCode: WireError.closeCode(error) }
}

/**
 * Whether `frame` decodes to an `Exiting` message: the supervisor's `isExiting` option.
 *
 * @since 0.1.0
 * @category inspect
 */
export const isExiting = (frame: Uint8Array): boolean => {
  const result = Codec.decode(frame)
  lastFrame = frame
  lastResult = result
  return Result.isSuccess(result) && result.success.message._tag === "Exiting"
}

/**
 * The `{error, stack}` of a `Crashing` frame, else `undefined`: the supervisor's `crashOf` option.
 * Called on the same frame right after `isExiting`, it reuses that decode.
 *
 * @since 0.1.0
 * @category inspect
 */
export const crashOf = (frame: Uint8Array): { readonly error: string; readonly stack: string } | undefined => {
  const result = frame === lastFrame && lastResult !== undefined ? lastResult : Codec.decode(frame)
  lastFrame = undefined
  lastResult = undefined
  if (Result.isFailure(result)) return undefined
  const message = result.success.message
  return message._tag === "Crashing" ? { error: message.error, stack: message.stack } : undefined
}

// The supervisor asks `isExiting` and then `crashOf` about each frame: `isExiting` keeps its
// decode for the `crashOf` call on the same frame that follows it, which takes it.
let lastFrame: Uint8Array | undefined
let lastResult: ReturnType<typeof Codec.decode> | undefined
