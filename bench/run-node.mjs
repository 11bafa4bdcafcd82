// `npm run bench [-- --quick]` on Node: the core benches run from an esbuild bundle (so that they
// time V8 on plain ES modules, as Bun and Deno run them, not tsx's module wrappers); the failover
// and straggler benches start real rank workers through the launcher, which needs the source
// tree, so they run through tsx. Arguments are passed to each.
import { spawnSync } from "node:child_process"
import { build } from "esbuild"

const args = process.argv.slice(2)
await build({
  entryPoints: ["bench/run.ts"],
  bundle: true,
  platform: "node",
  format: "esm",
  packages: "external",
  outfile: "dist/bench.mjs",
  logLevel: "warning"
})
for (const command of [
  ["dist/bench.mjs", "--no-failover"],
  ["--import", "tsx", "bench/failover.ts"],
  ["--import", "tsx", "bench/straggler.ts"],
  ["--import", "tsx", "bench/churn.ts"]
]) {
  const { status } = spawnSync(process.execPath, [...command, ...args], { stdio: "inherit" })
  if (status !== 0) process.exit(status ?? 1)
}
