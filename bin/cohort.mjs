#!/usr/bin/env node
// Entry for the `cohort` command. Bun and Deno run TypeScript natively; Node 20 needs tsx's loader.
if (globalThis.Bun === undefined && globalThis.Deno === undefined) {
  const { register } = await import("tsx/esm/api")
  register()
}
const { main } = await import("../src/cli/index.ts")
process.exitCode = await main(process.argv.slice(2))
