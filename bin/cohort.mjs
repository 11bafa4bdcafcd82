#!/usr/bin/env node
// Entry for the `cohort` command. In the source tree it runs the TypeScript: Bun and Deno run it
// natively, Node 20 needs tsx's loader. The published package holds no TypeScript sources, only
// their build in dist/ (scripts/build-package.mjs), which needs no loader.
import { existsSync } from "node:fs"

// A signal that comes before the command installs its own handler (while modules load, a trainer
// is bundled, ...) or after it removed it ends the process as by default. Without this, a process
// that runs as PID 1 (a container's entry, `unshare --pid --fork`) would drop it: PID 1 gets no
// default action, so a container's stop (SIGTERM) would be lost and only its SIGKILL would end it.
let done = false
const numbers = { SIGINT: 2, SIGTERM: 15 }
for (const [signal, number] of Object.entries(numbers)) {
  const early = () => {
    if (process.listenerCount(signal) > 1) return // the command's own handler has it
    done = true
    process.removeListener(signal, early)
    process.kill(process.pid, signal) // the default action, where there is one
    process.exit(128 + number) // PID 1: none
  }
  process.on(signal, early)
}
const built = !existsSync(new URL("../src/cli/index.ts", import.meta.url))
if (!built && globalThis.Bun === undefined && globalThis.Deno === undefined) {
  const { register } = await import("tsx/esm/api")
  register()
}
const cli = built ? "../dist/src/cli/index.js" : "../src/cli/index.ts"
const platform = built ? "../dist/src/platform/detect.js" : "../src/platform/detect.ts"
// Something that ends the process before the command is done (a trainer module that calls
// process.exit while the launcher imports it to check it) is named, not silent. `cohort join`
// ends its process itself when its rank leaves: it says so through `io.leaving` first.
process.on("exit", (code) => {
  if (!done)
    process.stderr.write(
      `cohort: the process exited with code ${code} before the command finished (did the trainer module call process.exit?)\n`
    )
})
const { commandOf, main, terminalIo } = await import(cli)
const { detect } = await import(platform)
const code = await main(process.argv.slice(2), {
  ...terminalIo(),
  // Hints print the command the way it was started (`npx cohort`, `node bin/cohort.mjs`, ...).
  command: commandOf({ script: process.argv[1] ?? "", cwd: process.cwd(), runtime: detect(), viaNpx: process.env.npm_command === "exec" }),
  leaving: () => {
    done = true
  }
})
done = true
process.exitCode = code
// The command is done. A trainer module imported into this process (the launcher checks it here)
// may have left a timer or a socket open: it must not keep the command alive. The process exits
// on its own when nothing is left; else this timer, which holds nothing open itself, ends it.
const timer = setTimeout(() => process.exit(code), 1000)
if (typeof timer === "object" && typeof timer?.unref === "function") timer.unref()
else if (typeof globalThis.Deno?.unrefTimer === "function") globalThis.Deno.unrefTimer(timer)
