import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, it } from "vitest"
import { demoEpoch } from "./demo-epoch.ts"

// Full tier: a whole demo epoch on rank processes over WebSocket (20 s and more on a loaded
// machine); the quick tier has the demo on worker ranks and WebSocket ranks in launcher.test.ts.
const outDir = mkdtempSync(join(tmpdir(), "cohort-demo-ws-"))
afterAll(() => rmSync(outDir, { recursive: true, force: true }))

describe("cohort demo over WebSocket", () => {
  it("trains the bundled digits for one epoch on 4 websocket ranks with a clean audit", async () => {
    await demoEpoch("websocket", "SIGKILL", outDir)
  }, 120_000)
})
