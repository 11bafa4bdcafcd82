// Builds the published package into dist/ (run by `npm pack` and `npm publish` through `prepack`):
// every module of src/ and actors/ compiled one to one by esbuild into JavaScript (its relative
// imports renamed from .ts to .js, every package left as an import) and their declarations by tsc.
// The `cohort` command (bin/cohort.mjs) runs this build where the sources are absent, as in the
// package. Node then needs no TypeScript loader; Bun and Deno load the same files.
import { build } from "esbuild"
import { spawnSync } from "node:child_process"
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const dist = join(root, "dist")

/** Every file under `folder` (relative to the root) whose name passes `keep`. */
const filesUnder = (folder, keep) =>
  readdirSync(join(root, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && keep(entry.name))
    .map((entry) => join(entry.parentPath, entry.name))

rmSync(dist, { recursive: true, force: true })

const sources = ["src", "actors"].flatMap((folder) => filesUnder(folder, (name) => name.endsWith(".ts") && !name.endsWith(".d.ts")))
await build({
  entryPoints: sources,
  outdir: dist,
  outbase: root,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "es2022",
  logLevel: "warning",
  plugins: [
    {
      name: "one-module-per-file",
      setup: (plugin) => {
        plugin.onResolve({ filter: /.*/ }, (args) => {
          if (args.kind === "entry-point") return undefined
          const relative = args.path.startsWith("./") || args.path.startsWith("../")
          return { path: relative ? args.path.replace(/\.ts$/, ".js") : args.path, external: true }
        })
      }
    }
  ]
})

const tsc = spawnSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", join(root, "tsconfig.build.json")], {
  stdio: "inherit"
})
if (tsc.status !== 0) throw new Error(`tsc (declarations) failed with exit code ${tsc.status}`)
// tsc keeps the `.ts` of relative imports in declarations; the files beside them are `.d.ts`.
for (const file of filesUnder("dist", (name) => name.endsWith(".d.ts"))) {
  const text = readFileSync(file, "utf8")
  writeFileSync(file, text.replace(/((?:from|import)\s*\(?\s*["']\.{1,2}\/[^"']*?)\.ts(["'])/g, "$1.js$2"))
}

console.log(`built ${sources.length} modules and their declarations into dist/`)
