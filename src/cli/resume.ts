/**
 * `cohort resume RUN_DIR`: continues a run that was interrupted, stopped unrecoverable, or cut off
 * by the death of its coordinator's process, as a new run (`run({ resume })` of
 * `actors/launcher/launcher.ts`; how the state is picked and what is refused: `actors/launcher/resume.ts`). Shows it
 * as `demo` and `run` do (`--dashboard [PORT]` and `--dashboard-faults` too); the notes of the resume (a fallback to a checkpoint, a journal cut short)
 * go to stderr as `cohort: note: ...` lines.
 *
 * @since 0.1.0
 */
import type { RunTypes } from "../../actors/cli-entry.ts"
import { conduct, type Io, withConsoleOnStderr } from "./conduct.ts"
import { defined, importLauncher } from "../../actors/cli-entry.ts"
import { defaults, ExitCode } from "./defaults.ts"
import type { ResumeCommandOptions } from "./flags.ts"
import { firstLine } from "./parse.ts"

/**
 * Runs `cohort resume` with `options` and returns the exit code: the resumed run's (0, 1, 4, 5, 130,
 * 143), 2 when the resume is refused (one `cohort: resume: ...` line), 3 when the launcher cannot
 * be loaded or fails.
 *
 * @since 0.1.0
 * @category cli
 */
export const resume = (io: Io, options: ResumeCommandOptions): Promise<number> =>
  withConsoleOnStderr(options.json, async () => {
    let run: (options: RunTypes.ResumeOptions) => Promise<RunTypes.RunResult>
    try {
      run = (await importLauncher()).run
    } catch (error) {
      io.err(`cohort: the launcher is not available: ${firstLine(error)}\n`)
      return ExitCode.unavailable
    }
    // The dashboard as for demo and run: loopback only, kill buttons with --dashboard-faults.
    const dashboard = options.dashboard === undefined ? undefined : { host: "127.0.0.1", ...options.dashboard }
    return conduct(
      io,
      { json: options.json, interruptGraceMs: options.interruptGraceMs ?? defaults.interruptGraceMs, dashboard },
      (hooks) =>
        run(
          defined<RunTypes.ResumeOptions>({
            killRequests: hooks.killRequests,
            coordinatorAlerts: hooks.coordinatorAlerts,
            resume: options.runDir,
            trainer: options.trainer,
            worldSize: options.worldSize,
            transport: options.transport,
            kills: options.kills,
            hangs: options.hangs,
            heartbeatTimeoutMs: options.heartbeatTimeoutMs,
            coordinatorTimeoutMs: options.coordinatorTimeoutMs,
            failureLimit: options.failureLimit,
            rankMemoryMb: options.rankMemoryMb,
            interruptGraceMs: options.interruptGraceMs,
            outDir: options.outDir,
            signal: hooks.signal,
            stopSignal: hooks.stopSignal,
            onRankOutput: hooks.onRankOutput,
            onEvent: (event) => {
              hooks.onEvent(event)
              if (event.type === "started") for (const note of event.resumed?.notes ?? []) io.err(`cohort: note: ${note}\n`)
            }
          })
        )
    )
  })
