#!/usr/bin/env node
// Entry for the `cohort` command. Bun and Deno run TypeScript natively; Node 20 needs tsx's loader.
if (globalThis.Bun === undefined && globalThis.Deno === undefined) {
  const { register } = await import("tsx/esm/api")
  register()
}
const { main } = await import("../src/cli/index.ts")
const code = await main(process.argv.slice(2))
process.exitCode = code
// The command is done. A trainer module imported into this process (the launcher checks it here)
// may have left a timer or a socket open: it must not keep the command alive. The process exits
// on its own when nothing is left; else this timer, which holds nothing open itself, ends it.
const timer = setTimeout(() => process.exit(code), 1000)
if (typeof timer === "object" && typeof timer?.unref === "function") timer.unref()
else if (typeof globalThis.Deno?.unrefTimer === "function") globalThis.Deno.unrefTimer(timer)
