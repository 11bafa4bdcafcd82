// `cohort join --ranks N`: its bad input, in process (the ranks themselves run in the churn
// bench's check, test/bench/churn.full.test.ts).
import { describe, expect, it } from "vitest"
import * as Cli from "../../src/cli/index.ts"
import { capture, noLaunch } from "./fixtures.ts"

describe("join --ranks", () => {
  it("refuses a count below 1 and --ranks with --rank-from-env, one line and exit 2 each", async () => {
    const token = { COHORT_TOKEN: "join-ranks-test-token-0123456789" }
    const cases: ReadonlyArray<[ReadonlyArray<string>, string]> = [
      [["--ranks", "0"], "cohort: --ranks must be an integer >= 1, got '0'\n"],
      [["--ranks", "two"], "cohort: --ranks must be an integer >= 1, got 'two'\n"],
      [["--ranks", "4", "--rank-from-env", "INDEX"], "cohort: --ranks cannot be used with --rank-from-env\n"]
    ]
    for (const [flags, err] of cases) {
      const env = { ...token, INDEX: "0" }
      const captured = capture()
      const code = await Cli.main(
        ["join", "ws://127.0.0.1:9/", ...flags],
        { ...captured.io, env: (name) => env[name as keyof typeof env] },
        noLaunch
      )
      expect([code, captured.err()]).toEqual([2, err])
    }
  })
})
