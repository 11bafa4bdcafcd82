/**
 * The fixed tables both peers agree on: message ids and cbor-x record `structures` (docs/design.md §4,
 * TOOLCHAIN.md §2).
 *
 * A frame's message is a cbor-x record: CBOR tag `0xE000 + structure` over an array of values in
 * the structure's key order. The first key is always `_tag`, whose value on the wire is the
 * message's id (its index in `messages`), so messages with the same fields share one structure.
 *
 * Versioning: every frame starts with `[protocolVersion, structuresVersion, ...]`. Any change to
 * `messages` (ids, fields or their order) changes `fingerprint`; a test pins the fingerprint to
 * `structuresVersion`, so the table cannot change without bumping the version, and a peer with
 * another table gets `VersionMismatch` instead of misreading records.
 *
 * Optional fields (structures version 4): a message row may end with `optional` fields. A message
 * that carries them is sent as a second structure, `["_tag", ...fields, ...optional]`, appended
 * after every structure of version 3 (whose indices stay the same); one without them is sent as
 * before. Frames of `structuresVersionsRead` (3 and 4) are read, so a version 3 frame stays valid.
 *
 * Packed parameters (structures version 5): a `params` field may hold a packed vector (`Packed`,
 * CBOR tag 64 over its bytes) instead of a Float32Array; the table itself is unchanged, and frames
 * of versions 3 and 4 (which never hold one) are still read.
 *
 * Ring addresses (structures version 6): `Hello` may carry the rank's `ringAddress` (where its
 * neighbours reach its ring listener), and `FormRing` its `prev`, `next`, `nextAddress` and
 * `ringSecret`, with `peers` then empty: each rank gets its neighbours, not the whole ring. Both
 * are optional fields, so frames of versions 3 to 5 (which never hold them) are still read.
 *
 * Changes and packed ring steps (structures version 7): `Update` may carry `base`, the round of
 * the model its `params` are a change to (a packed change, `--compress`), and a `RingData` step's
 * `data` may be a packed ring step (`Uint8Array`, CBOR tag 64; `RingPacked`), which the codec
 * hands up as bytes. Frames of versions 3 to 6 (which never hold either) are still read.
 *
 * Direct-link bytes (structures version 8): `RoundDone` may carry `linkSentBytes` and
 * `linkReceivedBytes`, the bytes of the round's ring steps the rank moved over its direct links
 * (the coordinator never sees them). They are a second optional group (`later`), all or none
 * independently of `loss`: a message with a `later` group has two more structures, with the group
 * alone and with `optional` and the group, appended after every older structure. Frames of versions
 * 3 to 7 (which never hold them) are still read.
 *
 * @since 0.1.0
 */
import type * as Schema from "./schema.ts"

/**
 * Version of the frame envelope and codec rules; bump on any change to how frames are laid out.
 *
 * @since 0.1.0
 * @category versions
 */
export const protocolVersion = 1

/**
 * Version of the `messages`/`structures` tables; bump on any change to them (the fingerprint test
 * says when).
 *
 * @since 0.1.0
 * @category versions
 */
export const structuresVersion = 8

/**
 * The structures versions a frame may carry and still be read: 3 (before `optional` fields, whose
 * frames are laid out the same), 4 (before packed parameters), 5 (before ring addresses), 6
 * (before changes and packed ring steps), 7 (before direct-link bytes) and 8.
 *
 * @since 0.1.0
 * @category versions
 */
export const structuresVersionsRead: ReadonlyArray<number> = [3, 4, 5, 6, 7, 8]

/**
 * Who sends a message: a rank (`toCoordinator`), the coordinator (`toRank`), or either (`both`:
 * `RingData`, which the coordinator relays between ring neighbours).
 *
 * @since 0.1.0
 * @category tables
 */
export type Direction = "toCoordinator" | "toRank" | "both"

/**
 * One row of the message table: the `_tag`, its direction, its fields in wire order, the
 * `optional` fields that may follow them (structures version 4), and the structures version that
 * added them (`optionalSince`, default 4: their structure goes after every older one).
 *
 * @since 0.1.0
 * @category tables
 */
export interface MessageEntry {
  readonly tag: Schema.Tag
  readonly direction: Direction
  readonly fields: ReadonlyArray<string>
  readonly optional?: ReadonlyArray<string>
  readonly optionalSince?: number
  /** A second optional group, all or none independently of `optional`, and the version that added it (8 on). */
  readonly later?: { readonly fields: ReadonlyArray<string>; readonly since: number }
}

/**
 * The message table; a message's wire id is its index. Append only, and bump `structuresVersion`.
 *
 * @since 0.1.0
 * @category tables
 */
export const messages: ReadonlyArray<MessageEntry> = [
  // rank to coordinator: ids 0..8
  { tag: "Hello", direction: "toCoordinator", fields: ["paramsLength"], optional: ["ringAddress"], optionalSince: 6 },
  { tag: "Heartbeat", direction: "toCoordinator", fields: [] },
  { tag: "Progress", direction: "toCoordinator", fields: ["epoch", "samplesDone", "msPerBatch"] },
  { tag: "ChunkDone", direction: "toCoordinator", fields: ["epoch", "offset", "size"] },
  { tag: "Params", direction: "toCoordinator", fields: ["epoch", "round", "samplesDone", "params"], optional: ["loss"] },
  { tag: "Exiting", direction: "toCoordinator", fields: [] },
  { tag: "CheckpointResult", direction: "toCoordinator", fields: ["version", "ok", "detail"] },
  { tag: "EvalResult", direction: "toCoordinator", fields: ["epoch", "accuracy", "loss"] },
  { tag: "RingReady", direction: "toCoordinator", fields: ["generation"] },
  // coordinator to rank: ids 9..21
  { tag: "StartEpoch", direction: "toRank", fields: ["epoch", "offset", "size"] },
  { tag: "ExtendPartition", direction: "toRank", fields: ["epoch", "offset", "size"] },
  { tag: "AssignChunk", direction: "toRank", fields: ["epoch", "offset", "size"] },
  { tag: "RequestParams", direction: "toRank", fields: ["round"] },
  { tag: "Update", direction: "toRank", fields: ["round", "params"], optional: ["base"], optionalSince: 7 },
  { tag: "SetRoles", direction: "toRank", fields: ["checkpoint", "eval", "epochFn"] },
  { tag: "Checkpoint", direction: "toRank", fields: ["version"] },
  { tag: "Eval", direction: "toRank", fields: ["epoch"] },
  { tag: "DeclareDead", direction: "toRank", fields: ["rank"] },
  {
    tag: "FormRing",
    direction: "toRank",
    fields: ["generation", "ringRank", "ringSize", "peers"],
    optional: ["prev", "next", "nextAddress", "ringSecret"],
    optionalSince: 6
  },
  { tag: "ShutdownWithSave", direction: "toRank", fields: ["reason"] },
  { tag: "Shutdown", direction: "toRank", fields: [] },
  { tag: "CoordHeartbeat", direction: "toRank", fields: [] },
  // appended in structures version 2: ids 22..
  { tag: "Crashing", direction: "toCoordinator", fields: ["error", "stack"] },
  // appended in structures version 3 (the ring backend): ids 23..
  {
    tag: "RoundDone",
    direction: "toCoordinator",
    fields: ["epoch", "round", "generation", "samplesDone"],
    optional: ["loss"],
    later: { fields: ["linkSentBytes", "linkReceivedBytes"], since: 8 }
  },
  { tag: "RoundCommitted", direction: "toRank", fields: ["round", "generation"] },
  { tag: "RingData", direction: "both", fields: ["generation", "round", "step", "data"] }
]

const keysOf = (entry: MessageEntry): ReadonlyArray<string> => ["_tag", ...entry.fields]

const buildStructures = (): {
  readonly structures: ReadonlyArray<ReadonlyArray<string>>
  readonly structureOf: ReadonlyArray<number>
  readonly fullStructureOf: ReadonlyArray<number | undefined>
  readonly laterStructuresOf: ReadonlyArray<ReadonlyArray<number>>
} => {
  const structures: Array<ReadonlyArray<string>> = []
  const index = new Map<string, number>()
  const structureFor = (keys: ReadonlyArray<string>): number => {
    const key = keys.join("\u0000")
    let id = index.get(key)
    if (id === undefined) {
      id = structures.length
      structures.push(keys)
      index.set(key, id)
    }
    return id
  }
  const structureOf = messages.map((entry) => structureFor(keysOf(entry)))
  // After every older version's structures, so that their indices do not move.
  const fullStructureOf: Array<number | undefined> = messages.map(() => undefined)
  const since = (entry: MessageEntry): number => entry.optionalSince ?? 4
  const withOptional = messages.flatMap((entry, id) => (entry.optional === undefined ? [] : [{ entry, id }]))
  withOptional.sort((a, b) => since(a.entry) - since(b.entry) || a.id - b.id)
  for (const { entry, id } of withOptional) fullStructureOf[id] = structureFor([...keysOf(entry), ...entry.optional!])
  // A `later` group's structures (alone, then after `optional`) go after all of those.
  const laterStructuresOf: Array<ReadonlyArray<number>> = messages.map(() => [])
  const withLater = messages.flatMap((entry, id) => (entry.later === undefined ? [] : [{ entry, id, later: entry.later }]))
  withLater.sort((a, b) => a.later.since - b.later.since || a.id - b.id)
  for (const { entry, id, later } of withLater) {
    const alone = structureFor([...keysOf(entry), ...later.fields])
    laterStructuresOf[id] =
      entry.optional === undefined ? [alone] : [alone, structureFor([...keysOf(entry), ...entry.optional, ...later.fields])]
  }
  return { structures, structureOf, fullStructureOf, laterStructuresOf }
}

const built = buildStructures()

/**
 * The cbor-x `structures` table: each entry is a key list starting with `_tag`, deduplicated from
 * `messages` in first-appearance order. Hand cbor-x a deep copy (it attaches readers to the arrays).
 *
 * @since 0.1.0
 * @category tables
 */
export const structures: ReadonlyArray<ReadonlyArray<string>> = built.structures

/**
 * The structure index of each message id: `structures[structureOf[id]]` is `["_tag", ...fields]`.
 *
 * @since 0.1.0
 * @category tables
 */
export const structureOf: ReadonlyArray<number> = built.structureOf

/**
 * The structure index of each message id sent with its `optional` fields (`undefined` for a
 * message without any): `structures[fullStructureOf[id]]` is `["_tag", ...fields, ...optional]`.
 *
 * @since 0.1.0
 * @category tables
 */
export const fullStructureOf: ReadonlyArray<number | undefined> = built.fullStructureOf

/**
 * The structure indices of each message id sent with its `later` group (structures version 8;
 * empty for a message without one): the group alone, then, for a message with `optional` fields
 * too, `["_tag", ...fields, ...optional, ...later]`.
 *
 * @since 0.1.0
 * @category tables
 */
export const laterStructuresOf: ReadonlyArray<ReadonlyArray<number>> = built.laterStructuresOf

/**
 * The CBOR tag of structure 0; structure `s` is tag `recordTagBase + s` (cbor-x's record tags).
 *
 * @since 0.1.0
 * @category tables
 */
export const recordTagBase = 0xe000

/**
 * The CBOR tag of a little-endian `Float32Array` (RFC 8746), which carries `params`.
 *
 * @since 0.1.0
 * @category tables
 */
export const float32Tag = 85

/**
 * The CBOR tag of a little-endian `Float64Array` (RFC 8746), which carries a ring step's partial
 * sums (`RingData.data`).
 *
 * @since 0.1.0
 * @category tables
 */
export const float64Tag = 86

/**
 * The CBOR tag of a `Uint8Array` (RFC 8746), which carries a packed parameter vector in a `params`
 * field (`Packed`; structures version 5). The codec unpacks it: decoded messages always hold a
 * `Float32Array`.
 *
 * @since 0.1.0
 * @category tables
 */
export const uint8Tag = 64

/**
 * The sender id of the coordinator on the wire (`-1`, like `Transport.coordinatorPeer`); ranks
 * are sent as themselves.
 *
 * @since 0.1.0
 * @category tables
 */
export const coordinatorWireId = -1

/**
 * Message id by `_tag`.
 *
 * @since 0.1.0
 * @category tables
 */
export const idOf: ReadonlyMap<Schema.Tag, number> = new Map(messages.map((entry, id) => [entry.tag, id]))

/**
 * 32-bit FNV-1a hash of a string's UTF-16 code units, as an unsigned integer.
 *
 * @since 0.1.0
 * @category versions
 */
export const fnv1a32 = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return hash >>> 0
}

/**
 * Fingerprint of the message table (ids, tags, directions and field order): an unsigned 32-bit
 * integer that a test pins next to `structuresVersion`.
 *
 * @since 0.1.0
 * @category versions
 */
export const fingerprint: number = fnv1a32(
  JSON.stringify(
    messages.map((entry) => {
      const row =
        entry.optional === undefined
          ? [entry.tag, entry.direction, entry.fields]
          : [entry.tag, entry.direction, entry.fields, entry.optional]
      return entry.later === undefined ? row : [...row, entry.later.fields]
    })
  )
)
