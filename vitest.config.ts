import { defineConfig } from "vitest/config"

// The browser-rank test drives headless Chromium with playwright-core from the test process;
// Node is enough for it (the page's HTTP side runs under all three runtimes in
// test/transport/web-socket-http.test.ts), so the Bun and Deno passes leave that file out.
const runtime = (globalThis as { Bun?: unknown; Deno?: unknown })
// test/net/links.test.ts runs its served ranks on Node only (CI time; it says why).
const nodeOnly = runtime.Bun !== undefined || runtime.Deno !== undefined ? ["test/browser/**", "test/net/links.test.ts"] : []

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["**/node_modules/**", ...nodeOnly],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 30_000
  }
})
