import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Result } from "effect"
import { describe, expect, it } from "vitest"
import * as Codec from "../../src/wire/codec.ts"
import * as Packed from "../../src/wire/packed.ts"
import * as Fixtures from "./fixtures.ts"

const dir = join(import.meta.dirname, "vectors")
const read = (name: string): Uint8Array => new Uint8Array(readFileSync(join(dir, name)))
const hex = (bytes: Uint8Array): string => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")

describe("Golden vectors (test/wire/vectors/*.cbor): every runtime and version agrees on the bytes", () => {
  it("has exactly one vector per message, plus the relayed RingData, the contributions with a loss, the packed parameters and the ring addresses", () => {
    const names = [...Object.keys(Fixtures.frames).map((tag) => `${tag}.cbor`), "RingData-relayed.cbor"]
    const withLoss = [...names, "Params-loss.cbor", "RoundDone-loss.cbor"]
    const v5Packed = ["Params-fp16.cbor", "Update-int8.cbor"]
    const packed = [...withLoss, ...Object.keys(Fixtures.packed).map((name) => `${name}.cbor`)]
    const ring = Object.keys(Fixtures.withRingAddresses).map((tag) => `${tag}-ring.cbor`)
    const links = Object.keys(Fixtures.withLinkBytes).map((name) => `${name}.cbor`)
    expect(
      readdirSync(dir)
        .filter((name) => !/^v[3-7]$/.test(name))
        .sort()
    ).toEqual([...packed, ...ring, "RingData-packed.cbor", ...links].sort())
    // Structures version 3's frames, kept as they were sent before the optional loss; version 4's
    // before packed parameters; version 5's before ring addresses.
    expect(readdirSync(join(dir, "v3")).sort()).toEqual(names.sort())
    expect(readdirSync(join(dir, "v4")).sort()).toEqual(withLoss.sort())
    expect(readdirSync(join(dir, "v5")).sort()).toEqual([...withLoss, ...v5Packed].sort())
    // Version 6's before changes and packed ring steps.
    expect(readdirSync(join(dir, "v6")).sort()).toEqual([...withLoss, ...v5Packed, ...ring].sort())
    // Version 7's before direct-link bytes.
    expect(readdirSync(join(dir, "v7")).sort()).toEqual([...packed, ...ring, "RingData-packed.cbor"].sort())
  })

  for (const name of readdirSync(join(dir, "v7"))) {
    it(`${name}: its structures version 7 vector still decodes to the same frame as today's`, () => {
      expect(Codec.decode(read(`v7/${name}`))).toEqual(Codec.decode(read(name)))
      expect(read(`v7/${name}`)[2]).toBe(7)
    })
  }

  for (const [name, frame] of Object.entries(Fixtures.withLinkBytes)) {
    it(`${name}: a RoundDone with its direct-link bytes encodes to the vector and decodes back`, () => {
      const golden = read(`${name}.cbor`)
      expect(hex(Codec.encode(frame))).toBe(hex(golden))
      expect(Codec.decode(golden)).toEqual(Result.succeed(frame))
    })
  }

  for (const name of readdirSync(join(dir, "v6"))) {
    it(`${name}: its structures version 6 vector still decodes to the same frame as today's`, () => {
      expect(Codec.decode(read(`v6/${name}`))).toEqual(Codec.decode(read(name)))
      expect(read(`v6/${name}`)[2]).toBe(6)
    })
  }

  it("RingData-packed: a packed ring step travels as its bytes (tag 64 in data)", () => {
    const golden = read("RingData-packed.cbor")
    expect(hex(Codec.encode(Fixtures.packedRingData))).toBe(hex(golden))
    expect(Codec.decode(golden)).toEqual(Result.succeed(Fixtures.packedRingData))
  })

  for (const [tag, frame] of Object.entries(Fixtures.withRingAddresses)) {
    it(`${tag}-ring: a frame with its ring addresses encodes to the vector and decodes back`, () => {
      const golden = read(`${tag}-ring.cbor`)
      expect(hex(Codec.encode(frame))).toBe(hex(golden))
      expect(Codec.decode(golden)).toEqual(Result.succeed(frame))
    })
  }

  for (const name of readdirSync(join(dir, "v5"))) {
    it(`${name}: its structures version 5 vector still decodes to the same frame as today's`, () => {
      expect(Codec.decode(read(`v5/${name}`))).toEqual(Codec.decode(read(name)))
      expect(read(`v5/${name}`)[2]).toBe(5)
    })
  }

  for (const [name, p] of Object.entries(Fixtures.packed)) {
    it(`${name}: a packed ${p.compression} vector encodes to the vector and decodes to the frame with its values unpacked`, () => {
      const golden = read(`${name}.cbor`)
      expect(hex(Codec.encodePacked(p.frame, Packed.pack(Fixtures.packedValues, p.compression, 8)))).toBe(hex(golden))
      expect(Codec.decode(golden)).toEqual(Result.succeed({ ...p.frame, message: { ...p.frame.message, params: p.unpacked } }))
    })
  }

  for (const name of readdirSync(join(dir, "v4"))) {
    it(`${name}: its structures version 4 vector still decodes to the same frame as today's`, () => {
      expect(Codec.decode(read(`v4/${name}`))).toEqual(Codec.decode(read(name)))
      expect(read(`v4/${name}`)[2]).toBe(4)
    })
  }

  for (const [tag, frame] of Object.entries(Fixtures.withLoss)) {
    it(`${tag}-loss: a contribution with its training loss encodes to the vector and decodes back`, () => {
      const golden = read(`${tag}-loss.cbor`)
      expect(hex(Codec.encode(frame))).toBe(hex(golden))
      expect(Codec.decode(golden)).toEqual(Result.succeed(frame))
    })
  }

  for (const [tag, frame] of Object.entries(Fixtures.frames)) {
    it(`${tag}: its structures version 3 vector still decodes to the frame`, () => {
      expect(Codec.decode(read(`v3/${tag}.cbor`))).toEqual(Result.succeed(frame))
    })
  }

  for (const [tag, frame] of Object.entries(Fixtures.frames)) {
    it(`${tag}: encodes to the vector byte for byte, and the vector decodes to the frame`, () => {
      const golden = read(`${tag}.cbor`)
      expect(hex(Codec.encode(frame))).toBe(hex(golden))
      expect(Codec.decode(golden)).toEqual(Result.succeed(frame))
    })
  }

  it("RingData-relayed: the coordinator's relay of a float32 segment (RingData travels both ways)", () => {
    const golden = read("RingData-relayed.cbor")
    expect(hex(Codec.encode(Fixtures.relayedRingData))).toBe(hex(golden))
    expect(Codec.decode(golden)).toEqual(Result.succeed(Fixtures.relayedRingData))
  })

  it("pins a few vectors in the test itself, so the files cannot drift with the code", () => {
    expect(hex(read("Heartbeat.cbor"))).toBe("84010811d9e0018101")
    expect(hex(read("v7/Heartbeat.cbor"))).toBe("84010711d9e0018101")
    expect(hex(read("v6/Heartbeat.cbor"))).toBe("84010611d9e0018101")
    expect(hex(read("v5/Heartbeat.cbor"))).toBe("84010511d9e0018101")
    expect(hex(read("v4/Heartbeat.cbor"))).toBe("84010411d9e0018101")
    expect(hex(read("v3/Heartbeat.cbor"))).toBe("84010311d9e0018101")
    expect(hex(read("ExtendPartition.cbor"))).toBe("84010820d9e003840a071a075bcd15191000")
    expect(hex(read("Params.cbor"))).toBe(
      "84010801d9e00485040318291a00011170d855582000" + "00803f000020c00100c07f000000800000807f000080ff010000009ec97f7f"
    )
    // The same with its loss: structure 20 (d9e014), one more value (0.3125 as a float).
    expect(hex(read("Params-loss.cbor")).slice(0, 20)).toBe("84010801d9e014860403")
    // Float64 partial sums as CBOR tag 86 (d856) over 32 bytes.
    expect(hex(read("RingData.cbor"))).toBe(
      "84010807d9e0138518190219012c05d8565820000000000000f03f010000000000f87f00000000000000800100000000000000"
    )
    // An int8 vector (tag 64, d840, over 26 bytes): format 2, block 8, 10 values, then 2 scales and 10 bytes.
    expect(hex(read("Update-int8.cbor")).slice(0, 40)).toBe("84010820d9e009830d1829d840581a020008000a")
  })
})
