/**
 * `npm run bench [-- --quick]`: runs every benchmark, prints markdown tables and writes
 * `bench/results/<runtime>-<date>.json`. Benchmarks report; they never fail on a number, only on
 * a wrong result (a message that differs from the baseline, an audit that is not clean).
 */
import * as Churn from "./churn.ts"
import * as Failover from "./failover.ts"
import * as Forfeit from "./forfeit.ts"
import * as Join from "./join.ts"
import * as Lib from "./lib.ts"
import * as Redistribution from "./redistribution.ts"
import * as Straggler from "./straggler.ts"
import * as Tick from "./tick.ts"

const quick = Lib.isQuick()
const env = Lib.environment()
console.log(`# Cohort benchmarks (${quick ? "quick" : "full"}) on ${env.runtime}, ${env.platform}\n`)
const results: Record<string, unknown> = { quick }
type Section = (quick: boolean) => { readonly markdown: string } | Promise<{ readonly markdown: string }>
const sections: Array<readonly [string, Section]> = [
  ["tick", Tick.run],
  ["redistribution", Redistribution.run],
  ["forfeit", Forfeit.run],
  ["join", Join.run],
  // The Node bench runs bundled, and the launcher cannot start ranks from inside a bundle: there
  // `npm run bench` runs the failover section on its own after this (`--no-failover`).
  // The churn bench's rank processes are Node processes through tsx: on Node only (run-node.mjs runs it after this).
  ...(process.argv.includes("--no-failover") || env.runtime !== "node" ? [] : [["churn", Churn.run] as const]),
  ...(process.argv.includes("--no-failover") ? [] : [["failover", Failover.run] as const, ["straggler", Straggler.run] as const])
]
for (const [name, run] of sections) {
  const started = Lib.nowMs()
  console.log(`## ${name}\n`)
  const { markdown, ...data } = await run(quick)
  console.log(`${markdown}\n\n(${((Lib.nowMs() - started) / 1000).toFixed(1)} s)\n`)
  results[name] = data
}
console.log(`results: ${Lib.writeResults(results, quick)}`)
