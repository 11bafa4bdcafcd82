// Node 20 does not carry tsx's loader into worker threads (TOOLCHAIN.md §3): register it here,
// then load the TypeScript entry the parent asked for. Bun and Deno load .ts entries directly.
import { register } from "tsx/esm/api"
import { workerData } from "node:worker_threads"

register()
await import(workerData.cohortEntry)
