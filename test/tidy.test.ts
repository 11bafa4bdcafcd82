import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { describe, expect, it } from "vitest"
import * as Tidy from "./tidy-rules.ts"

const root = join(import.meta.dirname, "..")

const walk = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return walk(path)
    return /\.(ts|mts|js|mjs)$/.test(entry.name) ? [path] : []
  })

const load = (base: string, dirs: ReadonlyArray<string>): Array<Tidy.SourceFile> =>
  dirs.flatMap((dir) => {
    let paths: Array<string>
    try {
      paths = walk(join(base, dir))
    } catch {
      return []
    }
    return paths.map((path) => ({ path: relative(base, path).split("\\").join("/"), text: readFileSync(path, "utf8") }))
  })

describe("tidy: docs/design.md §2 import rules, cycles, function length and banned globals", () => {
  it("the real tree has no violations", () => {
    const files = load(root, ["src", "actors"])
    expect(files.length).toBeGreaterThan(0)
    expect(Tidy.check(files)).toEqual([])
  })

  it("flags every forbidden import and global in the fixture tree", () => {
    const files = load(join(root, "test/fixtures/tidy"), ["src", "actors"])
    const found = [...Tidy.check(files)]
      .sort((a, b) => a.path.localeCompare(b.path) || a.line - b.line)
      .map((v) => `${v.path}:${v.line} ${v.rule} ${v.detail}`)
    expect(found).toEqual([
      "src/core/bad.ts:2 import core may not import src/wire/codec.ts",
      "src/core/bad.ts:3 import core may not import package effect",
      "src/core/bad.ts:4 import node:fs is runtime-specific: only src/platform/ may import it",
      "src/core/bad.ts:5 import core may not import actors/coordinator.ts",
      "src/core/bad.ts:8 global Date.now is banned in core",
      "src/core/bad.ts:9 global Math.random is banned in core",
      "src/core/bad.ts:10 global setTimeout is banned in core",
      "src/core/bad.ts:11 global setInterval is banned in core",
      "src/core/bad.ts:12 global performance is banned in core",
      "src/core/bad.ts:13 global process is banned in core",
      "src/transport/bad-transport.ts:1 import ws is runtime-specific: only src/platform/ may import it",
      "src/transport/bad-transport.ts:3 global Bun is banned in transport",
      "src/wire/bad-wire.ts:1 import wire may not import src/actor/kit.ts"
    ])
  })

  it("ignores mentions in comments and strings", () => {
    const text = [
      "// Date.now and Math.random are banned here",
      "/* setTimeout(process.exit) */",
      'export const note = "performance matters"',
      "export const x = 1"
    ].join("\n")
    expect(Tidy.check([{ path: "src/core/ok.ts", text }])).toEqual([])
  })

  it("flags an import cycle, type-only and dynamic imports included", () => {
    const files = [
      { path: "actors/a.ts", text: 'import type { B } from "./b.ts"' },
      { path: "actors/b.ts", text: 'export const load = () => import("./c.ts")' },
      { path: "actors/c.ts", text: 'import * as A from "./a.ts"' },
      { path: "actors/d.ts", text: 'import * as A from "./a.ts"' }
    ]
    expect(Tidy.check(files).map((v) => `${v.rule} ${v.detail}`)).toEqual([
      "cycle actors/a.ts -> actors/b.ts -> actors/c.ts -> actors/a.ts"
    ])
    expect(Tidy.check(files.slice(1))).toEqual([])
  })

  it("flags a function over the limit unless its body begins with the reason", () => {
    const body = (lines: number) => Array.from({ length: lines }, (_, i) => `  const x${i} = ${i}`)
    const long = ["export const f = (a: number): number => {", ...body(Tidy.functionLinesMax - 1), "  return a", "}"].join("\n")
    const fits = ["export function g(a: number): number {", ...body(Tidy.functionLinesMax - 3), "  return a", "}"].join("\n")
    const stated = long.replace("=> {", "=> {\n  // Long because one table reads best whole.")
    expect(Tidy.check([{ path: "src/core/f.ts", text: long }]).map((v) => `${v.line} ${v.rule}`)).toEqual(["1 length"])
    expect(Tidy.check([{ path: "src/core/g.ts", text: fits }])).toEqual([])
    expect(Tidy.check([{ path: "src/core/f.ts", text: stated }])).toEqual([])
  })

  it("counts braces in code only: strings, comments, regular expressions and template text are blanked, `${}` code kept", () => {
    const text = 'const a = "{" + `x${ { b: 1 }.b }}` + /[{]/.source // {\n/* { */ const c = 1'
    expect(Tidy.blankLiterals(text).replace(/\s+/g, " ")).toBe('const a = " " + ` ${ { b: 1 }.b } ` + / /.source const c = 1')
  })

  it("lets src/ reach actors/ only through the command line's entry", () => {
    const entry = `import * as Actors from "../../${Tidy.cliEntry}"`
    expect(Tidy.check([{ path: "src/cli/a.ts", text: entry }])).toEqual([])
    expect(Tidy.check([{ path: "src/cli/b.ts", text: 'import * as L from "../../actors/launcher.ts"' }]).map((v) => v.detail)).toEqual([
      `src may import actors/ only through ${Tidy.cliEntry}, not actors/launcher.ts`
    ])
    expect(
      Tidy.check([{ path: "src/platform/c.ts", text: 'import * as T from "../transport/transport.ts"' }]).map((v) => v.detail)
    ).toEqual(["platform may not import src/transport/transport.ts"])
  })

  it("resolves relative specifiers across folders", () => {
    expect(Tidy.resolveRelative("src/core/a.ts", "../wire/b.ts")).toBe("src/wire/b.ts")
    expect(Tidy.resolveRelative("actors/x.ts", "../src/core/y.ts")).toBe("src/core/y.ts")
    expect(Tidy.check([{ path: "src/core/a.ts", text: 'import * as B from "./b.ts"' }])).toEqual([])
  })
})
