/**
 * The `cohort` command line: `demo`, `run --trainer FILE`, `serve`, `join URL`, `report RUN_DIR`
 * and `help`.
 *
 * `main` parses with `commander` (whose own output and `process.exit` are switched off: every
 * error becomes one `cohort: ...` line on stderr and exit code 2), then runs the launcher
 * (imported lazily, so that `help`, `report` and bad input never load the training stack), shows
 * each run's events as they happen (progress bars from `cli-progress` when stdout is a terminal,
 * timestamped lines otherwise) and ends with a table per epoch. All output goes through an `Io`
 * object, so that tests can capture it. One file per responsibility: `defaults.ts`, `flags.ts`, `parse.ts`, `help.ts`,
 * `event-text.ts`, `live-view.ts`, `result-table.ts`, `main.ts` (reading a run back: `actors/record/read-run.ts`).
 *
 * @since 0.1.0
 */
export * from "./conduct.ts"
export * from "./help.ts"
export * as Join from "./join.ts"
export * from "./main.ts"
export * as Serve from "./serve.ts"
export * from "./defaults.ts"
export * from "./flags.ts"
export * from "./parse.ts"
export * from "../../actors/cli-entry.ts"
export * from "./event-text.ts"
export * from "./live-view.ts"
export * from "./result-table.ts"
