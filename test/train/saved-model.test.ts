/** Cohort's own resumable model in a save folder (docs/resume.md): round trip and every unusable case. */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as ModelFile from "../../src/train/model-file.ts"
import * as SavedModel from "../../src/train/saved-model.ts"

const root = mkdtempSync(join(tmpdir(), "cohort-saved-model-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let folders = 0
const folder = () => join(root, `f${folders++}`)

describe("SavedModel", () => {
  it("writes cohort-params.f32 (little-endian float32) and cohort-params.json, and reads them back exactly", async () => {
    const dir = folder()
    const params = new Float32Array([1.5, -2, 0, Math.PI, 3e-38])
    const meta = await SavedModel.write(dir, params, { epoch: 2, round: 17, rank: 3 })
    expect(meta).toEqual({ paramsLength: 5, checksum: SavedModel.checksum(new Uint8Array(params.buffer)), epoch: 2, round: 17, rank: 3 })
    const bytes = readFileSync(join(dir, "cohort-params.f32"))
    expect(bytes.length).toBe(20)
    expect(new DataView(bytes.buffer, bytes.byteOffset).getFloat32(0, true)).toBe(1.5)
    const read = await SavedModel.read(dir)
    expect(read._tag).toBe("Model")
    if (read._tag !== "Model") return
    expect(Array.from(read.params)).toEqual(Array.from(params))
    expect(read.meta).toEqual(meta)
  })

  // A checkpoint folder holds the coordinator's epoch model, the checkpoint rank's own model and
  // whatever the trainer's save wrote (the bundled trainer: ModelFile's files), written at the same
  // time: none may overwrite another, in either order.
  it("the coordinator's epoch model, a rank's model and the bundled trainer's files share one folder, each read back", async () => {
    for (const trainerFirst of [true, false]) {
      const dir = folder()
      const coordinators = new Float32Array([1, 2, 3])
      const trainers = new Float32Array([4, 5, 6])
      const writeTrainers = () => ModelFile.write(dir, trainers, { model: "mlp" })
      if (trainerFirst) await writeTrainers()
      await SavedModel.write(dir, coordinators, { epoch: 0, round: 1, rank: -1 }, SavedModel.coordinatorFiles)
      await SavedModel.write(dir, coordinators, { epoch: 0, round: 1, rank: 2 })
      if (!trainerFirst) await writeTrainers()
      const own = await SavedModel.read(dir, SavedModel.coordinatorFiles)
      expect(own._tag === "Model" && [Array.from(own.params), own.meta.rank], `trainer first: ${trainerFirst}`).toEqual([[1, 2, 3], -1])
      const rank = await SavedModel.read(dir)
      expect(rank._tag === "Model" && [Array.from(rank.params), rank.meta.rank]).toEqual([[1, 2, 3], 2])
      const saved = await ModelFile.read(dir)
      expect([Array.from(saved.params), saved.meta.model]).toEqual([[4, 5, 6], "mlp"])
    }
  })

  it("checksum is FNV-1a 32: the empty input and 'a' give the published values", () => {
    expect(SavedModel.checksum(new Uint8Array(0))).toBe("811c9dc5")
    expect(SavedModel.checksum(new TextEncoder().encode("a"))).toBe("e40c292c")
  })

  const broken: ReadonlyArray<readonly [string, (dir: string) => void, string]> = [
    ["no cohort-params.json", (dir) => rmSync(join(dir, "cohort-params.json")), "no cohort-params.json"],
    [
      "cohort-params.json not JSON",
      (dir) => writeFileSync(join(dir, "cohort-params.json"), "{oops"),
      "cohort-params.json is not valid JSON"
    ],
    [
      "cohort-params.json a folder",
      (dir) => {
        rmSync(join(dir, "cohort-params.json"))
        mkdirSync(join(dir, "cohort-params.json"))
      },
      "cohort-params.json is a directory, not a file"
    ],
    [
      "no paramsLength",
      (dir) => writeFileSync(join(dir, "cohort-params.json"), JSON.stringify({ checksum: "00000000", epoch: 0, round: 0, rank: 0 })),
      "cohort-params.json has no valid paramsLength"
    ],
    ["no cohort-params.f32", (dir) => rmSync(join(dir, "cohort-params.f32")), "no cohort-params.f32"],
    [
      "a short cohort-params.f32",
      (dir) => writeFileSync(join(dir, "cohort-params.f32"), new Uint8Array(7)),
      "cohort-params.f32 has 7 bytes, expected 12"
    ],
    [
      "a long cohort-params.f32",
      (dir) => writeFileSync(join(dir, "cohort-params.f32"), new Uint8Array(16)),
      "cohort-params.f32 has 16 bytes, expected 12"
    ],
    [
      "a flipped byte",
      (dir) => {
        const bytes = readFileSync(join(dir, "cohort-params.f32"))
        bytes[5] = bytes[5]! ^ 1
        writeFileSync(join(dir, "cohort-params.f32"), bytes)
      },
      "cohort-params.f32 does not match its checksum"
    ]
  ]

  it.each(broken)("%s: Unusable with one line", async (_name, damage, reason) => {
    const dir = folder()
    await SavedModel.write(dir, new Float32Array([1, 2, 3]), { epoch: 0, round: -1, rank: 0 })
    damage(dir)
    expect(await SavedModel.read(dir)).toEqual({ _tag: "Unusable", reason })
  })

  it("a folder that does not exist: no cohort-params.json", async () => {
    expect(await SavedModel.read(join(root, "missing"))).toEqual({ _tag: "Unusable", reason: "no cohort-params.json" })
  })
})
