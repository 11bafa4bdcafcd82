import { describe, expect, it } from "vitest"
import * as DigitsJson from "../../src/train/internal/digits-json.ts"
import * as Mnist from "../../src/train/mnist.ts"
import { fnv } from "./checksum.ts"

const QUOTAS = [200, 225, 198, 206, 196, 173, 203, 214, 189, 196]

describe("the 8000/2000 split", () => {
  it("gives each digit its largest-remainder share of the 2000 test images", () => {
    expect(Mnist.testQuotas(Mnist.DIGIT_COUNTS, Mnist.TEST_SAMPLES)).toEqual(QUOTAS)
    // 3 * 2 / 9 = 0.67 each: the two leftover images go to the lowest digits on the tie.
    expect(Mnist.testQuotas([3, 3, 3], 2)).toEqual([1, 1, 0])
    // 0.5, 2.5 and 2 exactly: the one leftover goes to digit 0, which ties digit 1 on remainder.
    expect(Mnist.testQuotas([1, 5, 4], 5)).toEqual([1, 2, 2])
    expect(Mnist.testQuotas([2, 7, 1], 5)).toEqual([1, 4, 0])
    expect(Mnist.testQuotas([0, 0], 0)).toEqual([0, 0])
    expect(Mnist.DIGIT_OFFSETS).toEqual([0, 1001, 2128, 3119, 4151, 5131, 5994, 7008, 8078, 9022, 10000])
  })

  it("is exactly 8000 training and 2000 test images, disjoint, ascending, covering every image", () => {
    const { train, test } = Mnist.split(Mnist.DIGIT_COUNTS, Mnist.TEST_SAMPLES, Mnist.SPLIT_SEED)
    expect(train.length).toBe(8000)
    expect(test.length).toBe(2000)
    const seen = new Uint8Array(Mnist.TOTAL_SAMPLES)
    for (const source of [...train, ...test]) seen[source] = seen[source]! + 1
    expect(seen.every((count) => count === 1)).toBe(true)
    expect(train.every((source, i) => i === 0 || source > train[i - 1]!)).toBe(true)
    expect(test.every((source, i) => i === 0 || source > test[i - 1]!)).toBe(true)
    const perDigit = Mnist.DIGIT_COUNTS.map(
      (_, d) => test.filter((s) => s >= Mnist.DIGIT_OFFSETS[d]! && s < Mnist.DIGIT_OFFSETS[d + 1]!).length
    )
    expect(perDigit).toEqual(QUOTAS)
  })

  it("is the same on every call and every runtime (golden checksums), and follows the seed", () => {
    const a = Mnist.split(Mnist.DIGIT_COUNTS, Mnist.TEST_SAMPLES, Mnist.SPLIT_SEED)
    const b = Mnist.split(Mnist.DIGIT_COUNTS, Mnist.TEST_SAMPLES, Mnist.SPLIT_SEED)
    expect(fnv(a.train)).toBe(538532434)
    expect(fnv(a.test)).toBe(2034884654)
    expect(fnv(b.train)).toBe(538532434)
    expect(fnv(b.test)).toBe(2034884654)
    expect([...a.test.subarray(0, 8)]).toEqual([13, 15, 20, 30, 31, 35, 37, 49])
    expect([...a.train.subarray(0, 8)]).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    const other = Mnist.split(Mnist.DIGIT_COUNTS, Mnist.TEST_SAMPLES, Mnist.SPLIT_SEED + 1)
    expect(other.test.length).toBe(2000)
    expect(fnv(other.test)).not.toBe(fnv(a.test))
  })
})

describe("loading the dataset from the mnist package", () => {
  it("fills both sets with the split's images, labels and pixels (golden checksums)", async () => {
    const dataset = await Mnist.load()
    const { train, test } = Mnist.split(Mnist.DIGIT_COUNTS, Mnist.TEST_SAMPLES, Mnist.SPLIT_SEED)
    expect(dataset.train.samples).toBe(8000)
    expect(dataset.test.samples).toBe(2000)
    expect(fnv(dataset.train.sources)).toBe(fnv(train))
    expect(fnv(dataset.test.sources)).toBe(fnv(test))
    expect(dataset.train.pixels.length).toBe(8000 * 784)
    expect(dataset.test.pixels.length).toBe(2000 * 784)
    const histogram = (labels: Uint8Array): Array<number> => {
      const counts = new Array<number>(10).fill(0)
      for (const label of labels) counts[label] = counts[label]! + 1
      return counts
    }
    expect(histogram(dataset.test.labels)).toEqual(QUOTAS)
    expect(histogram(dataset.train.labels)).toEqual(Mnist.DIGIT_COUNTS.map((n, d) => n - QUOTAS[d]!))
    expect(fnv(dataset.train.pixels)).toBe(901170621)
    expect(fnv(dataset.test.pixels)).toBe(1423842515)
    expect(fnv(dataset.train.labels)).toBe(1744374569)
    expect(fnv(dataset.test.labels)).toBe(1203561023)
    expect(dataset.loadMs).toBeGreaterThan(0)
    console.log(`mnist load: ${dataset.loadMs.toFixed(0)} ms`)
  })

  it("loads once per thread: later calls share the first result", async () => {
    expect(await Mnist.load()).toBe(await Mnist.load())
  })

  it("keeps grey levels whose table value is exactly the package's JSON value", () => {
    expect(Mnist.PIXEL_VALUES[0]).toBe(0)
    expect(Mnist.PIXEL_VALUES[1]).toBe(0.004)
    expect(Mnist.PIXEL_VALUES[159]).toBe(0.624)
    expect(Mnist.PIXEL_VALUES[255]).toBe(1)
    expect(Mnist.PIXEL_VALUES.every((v, g) => g === 0 || v > Mnist.PIXEL_VALUES[g - 1]!)).toBe(true)
  })
})

describe("reading a digit file", () => {
  const parse = (text: string): Uint8Array | string => DigitsJson.parseGreyLevels(new TextEncoder().encode(text))

  it("turns each value into its grey level", () => {
    expect(parse(`{ "data": [0, 0.624,1,0.004 , 0.6240, 1.000] }\n`)).toEqual(new Uint8Array([0, 159, 255, 1, 159, 255]))
    expect(parse(`{"data":[]}`)).toEqual(new Uint8Array(0))
    expect(parse(`{"data":[0,0,0]}`)).toEqual(new Uint8Array(3))
  })

  it("names the first value that is not a grey level / 255 rounded to 3 decimals", () => {
    const reason = (n: number, text: string): string =>
      `value ${n} (${JSON.stringify(text)}) is not a grey level / 255 rounded to 3 decimals`
    expect(parse(`{"data":[0,0.5,1]}`)).toBe(reason(1, "0.5,"))
    expect(parse(`{"data":[0.6241]}`)).toBe(reason(0, "0.6241]"))
    expect(parse(`{"data":[1e-3]}`)).toBe(reason(0, "1e"))
    expect(parse(`{"data":[-0]}`)).toBe(reason(0, "-"))
    expect(parse(`{"data":[00]}`)).toBe(reason(0, "00]"))
    expect(parse(`{"data":[2]}`)).toBe(reason(0, "2]"))
    expect(parse(`{"data":[0,]}`)).toBe(reason(1, "]"))
    expect(parse(`{"data":[0 1]}`)).toBe(reason(0, "0 1"))
    expect(parse(`{"data":["0"]}`)).toBe(reason(0, '"'))
  })

  it('refuses files that are not {"data": [...]}', () => {
    expect(parse(`{"data": 5}`)).toBe("no `data` array")
    expect(parse(`[0, 1]`)).toBe(`not a file of the form {"data": [...]}`)
    expect(parse(`{"pixels": [0]}`)).toBe(`not a file of the form {"data": [...]}`)
    expect(parse(`{"data": [0]}, 7`)).toBe(`not a file of the form {"data": [...]}`)
  })
})
