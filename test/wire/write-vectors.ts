/**
 * Writes the golden vectors in test/wire/vectors/ from test/wire/fixtures.ts.
 *
 * Run only when the wire format changes on purpose (after bumping `Structures.protocolVersion` or
 * `structuresVersion`): `node --import tsx test/wire/write-vectors.ts --force`. Without `--force`
 * it refuses to overwrite an existing file, so the vectors stay the reference the tests check.
 * The frames of structures versions 3 to 7 stay in test/wire/vectors/v3/ to v7/ (they must still decode).
 */
import { existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as Codec from "../../src/wire/codec.ts"
import * as Packed from "../../src/wire/packed.ts"
import * as Fixtures from "./fixtures.ts"

const dir = join(import.meta.dirname, "vectors")
const force = process.argv.includes("--force")
const files: Array<readonly [string, Uint8Array]> = [
  ...Object.entries(Fixtures.frames).map(([tag, frame]) => [`${tag}.cbor`, Codec.encode(frame)] as const),
  ...Object.entries(Fixtures.withLoss).map(([tag, frame]) => [`${tag}-loss.cbor`, Codec.encode(frame)] as const),
  ...Object.entries(Fixtures.withLinkBytes).map(([name, frame]) => [`${name}.cbor`, Codec.encode(frame)] as const),
  ["RingData-relayed.cbor", Codec.encode(Fixtures.relayedRingData)],
  ["RingData-packed.cbor", Codec.encode(Fixtures.packedRingData)],
  ...Object.entries(Fixtures.withRingAddresses).map(([tag, frame]) => [`${tag}-ring.cbor`, Codec.encode(frame)] as const),
  ...Object.entries(Fixtures.packed).map(
    ([name, p]) => [`${name}.cbor`, Codec.encodePacked(p.frame, Packed.pack(Fixtures.packedValues, p.compression, 8))] as const
  )
]
for (const [name, bytes] of files) {
  const path = join(dir, name)
  if (existsSync(path) && !force) {
    console.log(`kept ${name} (exists; pass --force to overwrite)`)
    continue
  }
  writeFileSync(path, bytes)
  console.log(`wrote ${name} (${bytes.length} bytes)`)
}
