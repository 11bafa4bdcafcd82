import { describe, expect, it } from "vitest"
import * as Messages from "../../src/core/messages.ts"
import * as MessageSchema from "../../src/wire/schema.ts"
import * as Structures from "../../src/wire/structures.ts"

describe("Structures: the fixed tables both peers agree on", () => {
  it("pins the table fingerprint to the structures version (change one, bump the other and the vectors)", () => {
    expect({ structuresVersion: Structures.structuresVersion, fingerprint: Structures.fingerprint }).toEqual({
      // Version 5 changed no row (a params field may hold a packed vector, tag 64); version 6 added
      // the optional ring addresses of Hello and FormRing; version 7 Update's optional base (and a
      // RingData's data may be a packed ring step, tag 64); version 8 RoundDone's direct-link bytes.
      structuresVersion: 8,
      fingerprint: 0xb61385c5
    })
    expect(Structures.protocolVersion).toBe(1)
  })

  it("lists every message once, with its schema's fields", () => {
    expect(Structures.messages.map((entry) => entry.tag).sort()).toEqual(Object.keys(MessageSchema.byTag).sort())
    for (const entry of Structures.messages) {
      const fields = Object.keys(MessageSchema.byTag[entry.tag].fields).filter((key) => key !== "_tag")
      expect([entry.tag, [...entry.fields, ...(entry.optional ?? []), ...(entry.later?.fields ?? [])].sort()]).toEqual([
        entry.tag,
        fields.sort()
      ])
    }
  })

  it("gives each message the direction of its union", () => {
    const toCoordinator = MessageSchema.ToCoordinator.members.map((member) => member.fields._tag.schema.literal)
    const toRank = MessageSchema.ToRank.members.map((member) => member.fields._tag.schema.literal)
    const sentBy = (direction: string) =>
      Structures.messages.filter((e) => e.direction === direction || e.direction === "both").map((e) => e.tag)
    expect(sentBy("toCoordinator")).toEqual(toCoordinator)
    expect(sentBy("toRank")).toEqual(toRank)
    expect(Structures.messages.filter((e) => e.direction === "both").map((e) => e.tag)).toEqual(["RingData"])
  })

  it("derives 27 structures, each starting with _tag, shared by messages with the same fields; the optional fields after version 3's, version 8's last", () => {
    expect(Structures.structures.length).toBe(27)
    expect(Structures.structures.slice(20)).toEqual([
      ["_tag", "epoch", "round", "samplesDone", "params", "loss"],
      ["_tag", "epoch", "round", "generation", "samplesDone", "loss"],
      ["_tag", "paramsLength", "ringAddress"],
      ["_tag", "generation", "ringRank", "ringSize", "peers", "prev", "next", "nextAddress", "ringSecret"],
      ["_tag", "round", "params", "base"],
      ["_tag", "epoch", "round", "generation", "samplesDone", "linkSentBytes", "linkReceivedBytes"],
      ["_tag", "epoch", "round", "generation", "samplesDone", "loss", "linkSentBytes", "linkReceivedBytes"]
    ])
    expect(Structures.fullStructureOf.flatMap((s, id) => (s === undefined ? [] : [[Structures.messages[id]!.tag, s]]))).toEqual([
      ["Hello", 22],
      ["Params", 20],
      ["Update", 24],
      ["FormRing", 23],
      ["RoundDone", 21]
    ])
    expect(Structures.laterStructuresOf.flatMap((s, id) => (s.length === 0 ? [] : [[Structures.messages[id]!.tag, s]]))).toEqual([
      ["RoundDone", [25, 26]]
    ])
    expect(Structures.structuresVersionsRead).toEqual([3, 4, 5, 6, 7, 8])
    expect(Structures.structures.every((keys) => keys[0] === "_tag")).toBe(true)
    expect(Structures.structureOf).toEqual([0, 1, 2, 3, 4, 1, 5, 6, 7, 3, 3, 3, 8, 9, 10, 11, 12, 13, 14, 15, 1, 1, 16, 17, 18, 19])
    expect(Structures.structures[0]).toEqual(["_tag", "paramsLength"])
    expect(Structures.structures[3]).toEqual(["_tag", "epoch", "offset", "size"])
  })

  it("accepts exactly the core's save reasons, in wire order", () => {
    expect(MessageSchema.SaveReason.literals).toEqual(Messages.saveReasons)
  })

  it("hashes with FNV-1a", () => {
    expect(Structures.fnv1a32("")).toBe(0x811c9dc5)
    expect(Structures.fnv1a32("a")).toBe(0xe40c292c)
    expect(Structures.fnv1a32("foobar")).toBe(0xbf9cf968)
  })
})
