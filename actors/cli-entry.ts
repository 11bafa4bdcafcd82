/**
 * The command line's one way into the actors: `src/` imports `actors/` only through this file
 * (docs/design.md §2; the tidy test holds it). It hands the command line the run record (its
 * types, schema and reading), the launcher's options, and the launcher and the joining rank on
 * demand (`importLauncher`, `importSocketRank`), so a command that runs nothing does not load them.
 *
 * @since 0.1.0
 */
import * as Files from "../src/platform/files.ts"

export { firstLine } from "./record/error-text.ts"
export * as LaunchOptions from "./launcher/launch-options.ts"
export * from "./record/read-run.ts"
export * as Revocations from "./launcher/revocations.ts"
export { defined } from "./launcher/resume.ts"
export { ruleNames, type RuleName } from "./launcher/carried-options.ts"
export * as RunSchema from "./record/run-schema.ts"
export type * as RunTypes from "./record/run-types.ts"

/**
 * The launcher (`run`, `serve`), loaded when a command first needs it.
 *
 * @since 0.1.0
 * @category entry
 */
export const importLauncher = (): Promise<typeof import("./launcher/launcher.ts")> => import("./launcher/launcher.ts")

/**
 * The rank that joins a served run (`joinRun`), loaded when `cohort join` needs it.
 *
 * @since 0.1.0
 * @category entry
 */
export const importSocketRank = (): Promise<typeof import("./rank/socket-rank.ts")> => import("./rank/socket-rank.ts")

/**
 * Many joining ranks in one process (`joinRanks`), loaded when `cohort join --ranks N` needs it.
 *
 * @since 0.1.0
 * @category entry
 */
export const importSocketRanks = (): Promise<typeof import("./rank/socket-ranks.ts")> => import("./rank/socket-ranks.ts")

/**
 * The URL of the browser rank's module (`actors/rank/rank-browser.ts`, `.js` in the built package),
 * which `cohort bundle` bundles with a trainer.
 *
 * @since 0.1.0
 * @category entry
 */
export const rankBrowserUrl = (): URL => Files.moduleUrl("./rank/rank-browser.ts", import.meta.url)
