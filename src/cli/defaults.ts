/**
 * Exit codes and defaults of the `cohort` command line (the flags are checked in `flags.ts`, the
 * command line parsed in `parse.ts`, the help text is in `help.ts`).
 *
 * @since 0.1.0
 */
import { LaunchOptions as Launch } from "../../actors/cli-entry.ts"
import { reportDefaults } from "../../actors/cli-entry.ts"
import type { RunTypes } from "../../actors/cli-entry.ts"
import * as Config from "../core/config.ts"

/**
 * Exit codes of the `cohort` command. A run's own codes (0, 1, 4, 5, 130, 143) are `RunResult.exitCode`.
 *
 * @since 0.1.0
 * @category cli
 */
export const ExitCode = {
  /** The command finished; for a run (or the run `report` reads), every epoch's audit passed. */
  ok: 0,
  /** The run was unrecoverable: the survivors saved their state and stopped (docs/design.md §3.6). */
  unrecoverable: 1,
  /** Bad input: an unknown command or flag, an invalid value, a missing file or folder. */
  usage: 2,
  /** The run could not be carried out: the launcher is missing or failed before a result. */
  unavailable: 3,
  /** An epoch's audit found lost or duplicated samples (docs/design.md §3.8). */
  auditFailed: 4,
  /** A write of the run's record failed (a full or failing disk): the run stopped, saving what it could. */
  storageFault: 5,
  /** The run was interrupted by SIGINT (Ctrl-C): the survivors were asked to save and stopped. */
  interrupted: 130,
  /** The run was interrupted by SIGTERM: the survivors were asked to save and stopped. */
  terminated: 143
} as const

/**
 * Defaults of the `demo` and `run` flags. The demo's default kill is `demoKill`.
 *
 * @since 0.1.0
 * @category cli
 */
export const defaults = {
  worldSize: Launch.defaults.worldSize,
  epochs: Launch.defaults.epochs,
  mode: Launch.defaults.mode,
  backend: Launch.defaults.backend,
  transport: Launch.defaults.transport,
  heartbeatTimeoutMs: Config.defaults.heartbeatTimeoutMs,
  /** Same as the rank's `coordinatorTimeoutMsDefault`. */
  coordinatorTimeoutMs: 10_000,
  rolePolicy: "fastest",
  seed: Launch.defaults.seed,
  outDir: Launch.defaults.outDir,
  onRepeatedCrash: Config.defaults.onRepeatedCrash,
  rankMemoryMb: Launch.defaults.rankMemoryMb,
  /** Same as the launcher's `defaults.interruptGraceMs`. */
  interruptGraceMs: 30_000
} as const

export { reportDefaults }

/**
 * The demo's default kill: rank 2's worker, 40% into epoch 1 (epochs count from 0). With fewer
 * ranks or epochs it moves to the last rank and the last epoch; with one rank there is none,
 * since nobody would survive it.
 *
 * @since 0.1.0
 * @category cli
 */
export const demoKill = (worldSize: number, epochs: number): ReadonlyArray<RunTypes.KillSpec> =>
  worldSize < 2 ? [] : [{ rank: Math.min(2, worldSize - 1), atEpoch: Math.min(1, epochs - 1), atFraction: 0.4, plan: "demo" }]

/** The folder, under a run's directory, where survivors save after a save-and-shutdown. @since 0.1.0 @category cli */
export const saveFolder = "save"
