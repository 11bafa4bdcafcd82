/**
 * Rank entries for Node 20, which cannot load TypeScript in worker threads or child processes
 * without tsx's loader (TOOLCHAIN.md §3). Loading through tsx costs about 2 s per rank and slows
 * every worker's teardown; instead, the launcher bundles one entry per run with esbuild (our
 * TypeScript and the user's trainer compiled in, packages left as imports) and starts that.
 * Bun and Deno run TypeScript natively and do not need this.
 *
 * Bundles are cached by content hash in `node_modules/.cache/cohort/` (so bare imports resolve
 * from the project's `node_modules`), written by rename so that parallel runs share them.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Runtime from "./detect.ts"

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
    write: false,
    logLevel: "silent"
  })
  const code = result.outputFiles[0]!.contents
  const hash = createHash("sha256").update(code).digest("hex").slice(0, 16)
  const folder = join(dirname(fileURLToPath(import.meta.url)), "../../node_modules/.cache/cohort")
  const file = join(folder, `rank-entry.${hash}.mjs`)
  if (!existsSync(file)) {
    mkdirSync(folder, { recursive: true })
    const temporary = `${file}.${process.pid}.${Date.now()}`
    writeFileSync(temporary, code)
    renameSync(temporary, file)
  }
  return pathToFileURL(file).href
}
