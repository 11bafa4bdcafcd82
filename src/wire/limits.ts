/**
 * Limits checked before any decoding (docs/design.md §4, STYLE.md "Bound everything").
 *
 * `messageBytesMax` bounds a whole transport message (one frame or a batch). Every length or count
 * inside it (string and byte-string lengths, array counts) is checked against the bytes that remain
 * before anything is allocated, so no field can claim more than the message holds.
 *
 * @since 0.1.0
 */

/**
 * Decoding limits.
 *
 * - `messageBytesMax`: integer bytes, default `16 MiB` (16,777,216); a longer message is rejected
 *   with `FrameTooLarge` before decoding.
 * - `textBytesMax`: integer bytes, default `64 KiB` (65,536); a text field (an error, a stack, a
 *   checkpoint's detail) with more bytes is rejected with `FieldTooLarge` from its declared length,
 *   before it is read: one frame of a 15 MB string would otherwise cost the coordinator about
 *   100-300 ms of decoding.
 * - `paramsLengthMax`: values, default none (only `messageBytesMax` bounds it); a `params` field
 *   with more values is rejected with `FieldTooLarge` before it is copied, and so is a ring step's
 *   `data` (float32), or one value more for its float64 partial sums (they end with a count). The
 *   coordinator passes the parameter count the run agreed at formation.
 *
 * @since 0.1.0
 * @category options
 */
export interface Limits {
  readonly messageBytesMax: number
  readonly textBytesMax: number
  readonly paramsLengthMax: number
}

/**
 * The default limits: `{ messageBytesMax: 16 MiB, textBytesMax: 64 KiB, paramsLengthMax: none }`.
 *
 * @since 0.1.0
 * @category options
 */
export const defaults: Limits = { messageBytesMax: 16 * 1024 * 1024, textBytesMax: 64 * 1024, paramsLengthMax: Number.POSITIVE_INFINITY }
