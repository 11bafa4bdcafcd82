/**
 * Limits checked before any decoding (DESIGN.md §4, STYLE.md "Bound everything").
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
 *
 * @since 0.1.0
 * @category options
 */
export interface Limits {
  readonly messageBytesMax: number
}

/**
 * The default limits: `{ messageBytesMax: 16 MiB }`.
 *
 * @since 0.1.0
 * @category options
 */
export const defaults: Limits = { messageBytesMax: 16 * 1024 * 1024 }
