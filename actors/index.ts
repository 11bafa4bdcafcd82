/**
 * Cohort's main entry: `run(options)` trains a cluster of ranks (worker threads or child
 * processes) on the user's trainer module and returns the run's result; the types describe its
 * options, events and result.
 *
 * @since 0.1.0
 */
export { defaults, LaunchError, loadTrainer, run } from "./launcher.ts"
export type { DeathTiming, HangSpec, KillSpec, RankState, Resumed, ResumeOptions, RunEvent, RunOptions, RunResult } from "./run-types.ts"
export type { Trainer, TrainerContext, TrainerModule } from "../src/train/trainer.ts"
