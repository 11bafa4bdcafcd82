// A user's trainer module loads from any folder on every runtime (`Bundle.importModule`): a `.ts`
// in a folder with no package.json and a space in its path, a `.js` written as an ES module in a
// CommonJS-typed folder, a `.mts`; its relative imports and `import.meta.url` work as written; a
// module that does not compile is refused with the file and line.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import * as Bundle from "../../src/platform/bundle.ts"
import * as Runtime from "../../src/platform/detect.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort import module "))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const write = (path: string, text: string): string => {
  mkdirSync(join(path, ".."), { recursive: true })
  writeFileSync(path, text)
  return pathToFileURL(path).href
}

describe(`importing a user's module from anywhere (${Runtime.detect()})`, () => {
  it("a .ts in a folder with no package.json, with a relative import and its own import.meta.url", async () => {
    write(join(dir, "plain", "helper.ts"), `export const twice = (n: number): number => 2 * n\n`)
    const url = write(
      join(dir, "plain", "trainer.ts"),
      [
        `import { twice } from "./helper.ts"`,
        `export const trainSamples: number = twice(21)`,
        `export const here: string = import.meta.url`,
        ``
      ].join("\n")
    )
    const module = (await Bundle.importModule(url)) as { trainSamples: number; here: string }
    expect([module.trainSamples, module.here]).toEqual([42, url])
  })

  it("a .js written as an ES module in a CommonJS-typed folder, and a .mts", async () => {
    write(join(dir, "cjs", "package.json"), `{"type":"commonjs"}\n`)
    const js = write(join(dir, "cjs", "trainer.js"), `export const trainSamples = 7\n`)
    const mts = write(join(dir, "cjs", "trainer.mts"), `export const trainSamples: number = 8\n`)
    expect(((await Bundle.importModule(js)) as { trainSamples: number }).trainSamples).toBe(7)
    expect(((await Bundle.importModule(mts)) as { trainSamples: number }).trainSamples).toBe(8)
  })

  it("a module that does not compile is refused, naming the file and line (Node compiles it first)", async () => {
    const url = write(join(dir, "broken", "trainer.ts"), `export const trainSamples = (\n`)
    const error = await Bundle.importModule(url).then(
      () => undefined,
      (e: unknown) => e
    )
    expect(error).toBeInstanceOf(Error)
    if (Runtime.detect() === "node") {
      expect(error).toBeInstanceOf(Bundle.ModuleBuildError)
      expect((error as Error).message).toMatch(/trainer\.ts:2: /)
    }
  })
})
