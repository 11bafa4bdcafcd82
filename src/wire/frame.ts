/**
 * The frame envelope: who sent a message (docs/design.md §4 "carries the sender's rank").
 *
 * On the wire a frame is the CBOR array `[protocolVersion, structuresVersion, from, message]`,
 * where `from` is the rank (an unsigned integer) or `-1` for the coordinator, and `message` is a
 * cbor-x record (see `Structures`). The versions are not part of the decoded value: a frame only
 * decodes when they match ours. A rank sends `ToCoordinator` messages, the coordinator `ToRank`.
 *
 * @since 0.1.0
 */
import type { Rank, ToCoordinator, ToRank } from "../core/messages.ts"

/**
 * A frame's sender: a rank index, or the string `"coordinator"`.
 *
 * @since 0.1.0
 * @category model
 */
export type Sender = Rank | "coordinator"

/**
 * A frame sent by rank `from` (a non-negative safe integer) to the coordinator.
 *
 * @since 0.1.0
 * @category model
 */
export interface RankFrame {
  readonly from: Rank
  readonly message: ToCoordinator
}

/**
 * A frame sent by the coordinator to a rank.
 *
 * @since 0.1.0
 * @category model
 */
export interface CoordinatorFrame {
  readonly from: "coordinator"
  readonly message: ToRank
}

/**
 * Any frame; narrow with `frame.from === "coordinator"`.
 *
 * @since 0.1.0
 * @category model
 */
export type Frame = RankFrame | CoordinatorFrame

/**
 * A frame from rank `from` carrying `message`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromRank = (from: Rank, message: ToCoordinator): RankFrame => ({ from, message })

/**
 * A frame from the coordinator carrying `message`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromCoordinator = (message: ToRank): CoordinatorFrame => ({ from: "coordinator", message })
