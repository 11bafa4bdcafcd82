import { defineConfig } from "vitest/config"

// Two tiers (docs/testing.md). A test file that needs root (network namespaces, mounts, PID 1),
// Chromium, nftables or a packed install belongs to the full tier only: it lives in one of the
// folders below or its name ends in `.full.test.ts`. `npm test` runs the `quick` project on Node;
// `npm run test:all` runs both projects on Node, then again on Bun and Deno. Where a full-tier
// test cannot run it fails and says why; it never skips.
const fullOnly = ["test/net/**/*.test.ts", "test/browser/**/*.test.ts", "test/package/**/*.test.ts", "test/**/*.full.test.ts"]

// The browser-rank tests drive headless Chromium with playwright-core from the test process;
// Node is enough for them (the page's HTTP side runs under all three runtimes in
// test/transport/web-socket-http.test.ts), and the packed-package test drives Bun and Deno
// itself, so the Bun and Deno passes leave those folders out.
const runtime = globalThis as { Bun?: unknown; Deno?: unknown }
// test/net/links.test.ts runs its served ranks on Node only (CI time; it says why). The
// dashboard's and the ranks' listeners' connection caps are enforced by Node's server only
// (Bun.serve and Deno.serve count no connections), so their tests run on Node alone too; so do
// the served ring's links between hosts (where links go; how they run is tested on all three). The
// CLI's credentials test drives nothing runtime-specific (test/transport/credentials.test.ts
// runs that part on all three). The direct ring links' fault tests run on Node alone (their
// runtime-specific parts are in quick tests under every runtime). Robust aggregation is arithmetic
// in the coordinator, the same on every runtime, and packing is the codec's: their end-to-end runs
// (and the 2 Mbit/s link test's) are Node-only, as is the straggler bench's quick run (the same
// rounds and deadlines as launcher.test.ts's, which runs everywhere), and so are the tests of the
// coordinator's accounting with worker ranks: late training folded into the model, progress
// events adding up to the epoch (the ranks' paths there run everywhere in other tests). The churn
// bench's quick check starts its rank processes through tsx: Node only. So does the drain test (the launcher's drain is
// the same code everywhere; the order of its events is surest there).
const nodeOnly =
  runtime.Bun !== undefined || runtime.Deno !== undefined
    ? [
        "test/browser/**",
        "test/package/**",
        "test/net/links.test.ts",
        "test/net/calls.test.ts",
        "test/net/dashboard-flood.test.ts",
        "test/net/compress-link.test.ts",
        "test/net/served-ring.test.ts",
        "test/net/recover.test.ts",
        "test/dashboard/live-cap.test.ts",
        "test/cli/dashboard-descriptors.full.test.ts",
        "test/transport/web-socket-cap*.test.ts",
        "test/cli/credentials.full.test.ts",
        "test/actors/ring-direct.full.test.ts",
        "test/actors/aggregate.full.test.ts",
        "test/actors/compress.full.test.ts",
        "test/actors/ring-compress.full.test.ts",
        "test/actors/outer.full.test.ts",
        "test/cli/serve-vacate.full.test.ts",
        "test/actors/declared-stopped.full.test.ts",
        "test/actors/stopped-at-boundary.full.test.ts",
        "test/actors/served-stopped-in-save.full.test.ts",
        "test/actors/epoch-model-enospc.full.test.ts",
        "test/actors/resume-withheld.full.test.ts",
        "test/cli/pid1-signal.full.test.ts",
        "test/cli/served-save-full.full.test.ts",
        "test/bench/churn.full.test.ts",
        "test/bench/straggler.full.test.ts",
        "test/actors/late-training.test.ts",
        "test/actors/progress-sums.test.ts",
        "test/bench/wire-collective.full.test.ts",
        "test/actors/churn-serve.full.test.ts",
        "test/actors/drain-silent.test.ts"
      ]
    : []

const exclude = ["**/node_modules/**", ...nodeOnly]

// The projects do not extend the root config, so that the global setup runs once per pass, not
// once more per project.
const testTimeout = 30_000

export default defineConfig({
  test: {
    globalSetup: ["test/global-setup.ts"],
    projects: [
      { test: { name: "quick", include: ["test/**/*.test.ts"], exclude: [...exclude, ...fullOnly], testTimeout } },
      { test: { name: "full", include: fullOnly, exclude, testTimeout } }
    ]
  }
})
