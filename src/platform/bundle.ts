/**
 * Rank entries for Node 20, which cannot load TypeScript in worker threads or child processes
 * without tsx's loader (TOOLCHAIN.md §3). Loading through tsx costs about 2 s per rank and slows
 * every worker's teardown; instead, the launcher bundles one entry per run with esbuild (our
 * TypeScript and the user's trainer compiled in, packages left as imports) and starts that.
 * Bun and Deno run TypeScript natively and do not need this.
 *
 * Bundles are cached by content hash in `node_modules/.cache/cohort/` of this package's own folder
 * (the repository, or `node_modules/cohort` where it is installed), so that bare imports resolve
 * from its dependencies and then from the project's; written by rename so that parallel runs share
 * them.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { basename, dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Data from "effect/Data"
import type { Plugin } from "esbuild"
import * as Runtime from "./detect.ts"
import * as Files from "./files.ts"

/** True when this runtime needs bundled entries (Node). @since 0.1.0 @category bundle */
export const needed = (): boolean => Runtime.detect() === "node"

/**
 * Bundles `source` (an ES module whose relative imports resolve from `resolveDir`, a folder path)
 * and returns the bundle's `file:` URL. Rejects with esbuild's error when the source does not build.
 *
 * @since 0.1.0
 * @category bundle
 */
export const bundle = async (source: string, resolveDir: string): Promise<string> => {
  const { build } = await import("esbuild")
  const result = await build({
    stdin: { contents: source, resolveDir, loader: "ts", sourcefile: "cohort-rank-entry.ts" },
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    plugins: [ownModuleUrls],
    write: false,
    logLevel: "silent"
  })
  return cached("rank-entry", result.outputFiles[0]!.contents)
}

/**
 * Keeps each compiled file's `import.meta.url` the URL of the file it was written in, not the
 * bundle's, so that a trainer that finds its data beside itself (`new URL("./data.bin",
 * import.meta.url)`) still does. Packages are not compiled in, so only the user's and Cohort's own
 * files pass through here.
 */
const ownModuleUrls: Plugin = {
  name: "cohort-own-module-urls",
  setup: (plugin) => {
    plugin.onLoad({ filter: /\.[cm]?[jt]s$/ }, (args) => {
      const text = readFileSync(args.path, "utf8")
      if (!text.includes("import.meta.url")) return undefined
      return {
        contents: text.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)),
        loader: /\.[cm]?ts$/.test(args.path) ? "ts" : "js"
      }
    })
  }
}

/** This package's folder: the nearest one above this file with a `package.json`. */
const packageFolder = (): string => {
  let folder = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(folder, "package.json")) && dirname(folder) !== folder) folder = dirname(folder)
  return folder
}

/** Writes `code` once under its content hash into the cache folder; returns its `file:` URL. */
const cached = (name: string, code: Uint8Array): string => {
  const hash = createHash("sha256").update(code).digest("hex").slice(0, 16)
  const folder = join(packageFolder(), "node_modules/.cache/cohort")
  const file = join(folder, `${name}.${hash}.mjs`)
  if (!existsSync(file)) {
    mkdirSync(folder, { recursive: true })
    const temporary = `${file}.${process.pid}.${Date.now()}`
    writeFileSync(temporary, code)
    renameSync(temporary, file)
  }
  return pathToFileURL(file).href
}

/**
 * Why a user's module could not be compiled for Node (`importModule`): esbuild's first error, as
 * `file:line: text`.
 *
 * @since 0.1.0
 * @category bundle
 */
export class ModuleBuildError extends Data.TaggedError("ModuleBuildError")<{
  readonly file: string
  readonly problem: string
}> {
  override get message(): string {
    return this.problem
  }
}

const imported = new Map<string, Promise<unknown>>()

/**
 * Imports the user's module at `url` (a `file:` URL: a trainer in `.ts`, `.mts`, `.js` or `.mjs`,
 * in any folder). Bun and Deno import it as it is. Node 20 cannot load TypeScript by itself and
 * decides between ES module and CommonJS by the nearest `package.json`, so there the module is
 * first compiled with esbuild into one ES module (its own relative imports compiled in, packages
 * left as imports) and that is imported. Once per process and URL. Rejects with
 * `ModuleBuildError` when the module does not compile, else with what importing it threw.
 *
 * @since 0.1.0
 * @category bundle
 */
export const importModule = (url: string): Promise<unknown> => {
  const known = imported.get(url)
  if (known !== undefined) return known
  const loading = needed() ? compiled(url).then((file) => import(file)) : import(url)
  imported.set(url, loading)
  loading.catch(() => imported.delete(url))
  return loading
}

const compiled = async (url: string): Promise<string> => {
  const { build } = await import("esbuild")
  const file = fileURLToPath(url)
  const result = await build({
    entryPoints: [file],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    plugins: [ownModuleUrls],
    write: false,
    logLevel: "silent"
  }).catch((error: { errors?: ReadonlyArray<{ text: string; location: { file: string; line: number } | null }> }) => {
    const first = error.errors?.[0]
    throw new ModuleBuildError({
      file,
      problem:
        first === undefined
          ? String(error)
          : first.location === null
            ? first.text
            : `${first.location.file}:${first.location.line}: ${first.text}`
    })
  })
  return cached(`module-${basename(file).replace(/[^\w.-]/g, "_")}`, result.outputFiles[0]!.contents)
}

/** The platform files that `browser.ts` stands in for in a browser bundle (`.js` once built). */
const replacedInBrowser = new Set(
  ["node", "bun", "bun-tcp", "deno", "files", "schedule", "area-file"].flatMap((name) => [`${name}.ts`, `${name}.js`])
)

/**
 * Why a browser bundle did not build: esbuild's errors, or its warnings (an import that a
 * browser stand-in lacks is a warning to esbuild, "will always be undefined", and an error here),
 * one line each as `file:line: text`.
 *
 * @since 0.1.0
 * @category bundle
 */
export class BrowserBundleError extends Data.TaggedError("BrowserBundleError")<{
  readonly problems: ReadonlyArray<string>
}> {
  /** The heading, then one problem a line. */
  override get message(): string {
    return `the browser bundle did not build:\n${this.problems.join("\n")}`
  }
}

/**
 * Bundles `source` (an ES module whose relative imports resolve from `resolveDir`, a folder path)
 * for a browser's module Web Worker: everything inlined (packages too, in their browser builds:
 * cbor-x without its native addon), ES2022, with `browser.ts` standing in for `node.ts`,
 * `bun.ts`, `bun-tcp.ts`, `deno.ts`, `files.ts` and `schedule.ts` wherever the bundle imports them. Returns
 * the module's text. `minify` (default false) shrinks it for serving. Rejects with
 * `BrowserBundleError` when the source does not build or imports what the stand-in lacks.
 *
 * @since 0.1.0
 * @category bundle
 */
export const bundleBrowser = async (source: string, resolveDir: string, minify = false): Promise<string> => {
  const { build } = await import("esbuild")
  const platformDir = dirname(fileURLToPath(import.meta.url))
  const browserFile = fileURLToPath(Files.moduleUrl("./browser.ts", import.meta.url))
  const describe = (message: { text: string; location: { file: string; line: number } | null }) =>
    message.location === null ? message.text : `${message.location.file}:${message.location.line}: ${message.text}`
  const result = await build({
    stdin: { contents: source, resolveDir, loader: "ts", sourcefile: "cohort-browser-rank.ts" },
    bundle: true,
    platform: "browser",
    format: "esm",
    target: "es2022",
    minify,
    write: false,
    logLevel: "silent",
    plugins: [
      {
        name: "cohort-browser-platform",
        setup: (plugin) => {
          plugin.onResolve({ filter: /\.[jt]s$/ }, (args) => {
            if (!args.path.startsWith(".")) return undefined
            const file = resolve(args.resolveDir, args.path)
            return dirname(file) === platformDir && replacedInBrowser.has(basename(file)) ? { path: browserFile } : undefined
          })
        }
      }
    ]
  }).catch((error: { errors?: ReadonlyArray<Parameters<typeof describe>[0]> }) => {
    throw new BrowserBundleError({ problems: error.errors?.map(describe) ?? [String(error)] })
  })
  if (result.warnings.length > 0) throw new BrowserBundleError({ problems: result.warnings.map(describe) })
  return new TextDecoder().decode(result.outputFiles[0]!.contents)
}

/**
 * A page's script and style, bundled for a browser (`bundlePage`).
 *
 * @since 0.1.0
 * @category bundle
 */
export interface PageBundle {
  readonly script: string
  readonly css: string
}

const pageBundles = new Map<string, Promise<PageBundle>>()

/**
 * Bundles the page module `entryFile` (an absolute path) for a browser as one classic script
 * (IIFE, ES2022, minified, packages inlined), and the style sheets `cssImports` (package paths
 * such as `uplot/dist/uPlot.min.css`, resolved from `entryFile`'s folder) into one sheet. Built
 * once per process and entry, then shared. Rejects with `BrowserBundleError` when either does not
 * build.
 *
 * @since 0.1.0
 * @category bundle
 */
export const bundlePage = (entryFile: string, cssImports: ReadonlyArray<string>): Promise<PageBundle> => {
  const key = `${entryFile}\n${cssImports.join("\n")}`
  const known = pageBundles.get(key)
  if (known !== undefined) return known
  const built = buildPage(entryFile, cssImports)
  pageBundles.set(key, built)
  built.catch(() => pageBundles.delete(key))
  return built
}

const buildPage = async (entryFile: string, cssImports: ReadonlyArray<string>): Promise<PageBundle> => {
  const { build } = await import("esbuild")
  const fail = (error: { errors?: ReadonlyArray<{ text: string; location: { file: string; line: number } | null }> }): never => {
    throw new BrowserBundleError({
      problems: error.errors?.map((m) => (m.location === null ? m.text : `${m.location.file}:${m.location.line}: ${m.text}`)) ?? [
        String(error)
      ]
    })
  }
  const script = await build({
    entryPoints: [entryFile],
    bundle: true,
    platform: "browser",
    format: "iife",
    target: "es2022",
    minify: true,
    write: false,
    logLevel: "silent"
  }).catch(fail)
  const css = await build({
    stdin: {
      contents: cssImports.map((path) => `@import ${JSON.stringify(path)};`).join("\n"),
      resolveDir: dirname(entryFile),
      loader: "css"
    },
    bundle: true,
    minify: true,
    write: false,
    logLevel: "silent"
  }).catch(fail)
  return {
    script: new TextDecoder().decode(script.outputFiles[0]!.contents),
    css: new TextDecoder().decode(css.outputFiles[0]!.contents)
  }
}
