/**
 * Cohort's main entry: `run(options)` trains a cluster of ranks (worker threads, child
 * processes, or child processes over WebSocket) on the user's trainer module and returns the run's
 * result; `serve(options)` runs the coordinator alone for ranks that join over the network
 * (`cohort join`); the types describe their options, events and result.
 *
 * @since 0.1.0
 */
export { defaults, LaunchError, loadTrainer, newRunToken, recover, run, serve, serveDefaults } from "./launcher/launcher.ts"
export type {
  DeathTiming,
  HangSpec,
  KillSpec,
  LeaveCost,
  Listening,
  RankState,
  Resumed,
  ResumeOptions,
  RunEvent,
  RunOptions,
  RunResult,
  ServeOptions
} from "./record/run-types.ts"
export type { Trainer, TrainerContext, TrainerModule } from "../src/train/trainer.ts"
