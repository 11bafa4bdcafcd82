/**
 * What a finished run prints: the table per epoch, deaths, alerts, the outcome line and the run
 * directory (`renderResult`).
 *
 * @since 0.1.0
 */
import type { RunTypes } from "../../actors/cli-entry.ts"
import {
  accuracyText,
  alertText,
  deathText,
  failureLine,
  interruptedText,
  isDemoPlan,
  msText,
  plural,
  ranksText,
  resumeCommand,
  resumedText,
  storageLine
} from "./event-text.ts"
import { joinsLines, leavesLines } from "./leave-table.ts"
import { saveFolder } from "./defaults.ts"
import type { PartialRun } from "../../actors/cli-entry.ts"

const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => (row[column] ?? "").length)))
  const line = (cells: ReadonlyArray<string>): string => cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join("  ")
  return [line(headers), ...rows.map(line)].join("\n") + "\n"
}

const epochHeaders = ["epoch", "samples committed", "lost", "duplicated", "deaths", "detection ms", "recovery ms", "test accuracy"]

/** Which survivors saved after a save-and-shutdown, and which did not. */
const savesText = (saves: RunTypes.RunResult["saves"], folder: string): string => {
  // A summary written before `saves` existed: only the request is known.
  if (saves === undefined) return `survivors were asked to save under ${folder}`
  const { saved, notSaved } = saves
  if (saved.length === 0 && notSaved.length === 0) return "no survivor was left to save"
  const parts: Array<string> = []
  if (saved.length > 0) parts.push(`${ranksText(saved)} saved under ${folder}`)
  if (notSaved.length > 0) parts.push(`${ranksText(notSaved)} did not finish ${notSaved.length === 1 ? "its" : "their"} save`)
  return parts.join("; ")
}

/**
 * The stack of the run's first crash, printed once: the repeated crash that stopped the run
 * (`TrainerFault`), else the first crashed death that carried a stack. For a run that was not
 * stopped by it, a `cohort: warning:` line says whose crash it is.
 */
const crashLines = (result: RunTypes.RunResult | PartialRun): ReadonlyArray<string> => {
  const outcome = result.outcome
  const repeated = outcome?.repeatedCrash
  if (repeated !== undefined) {
    const head =
      outcome?.reason === "TrainerFault"
        ? []
        : [`cohort: warning: the trainer failed the same way on ranks ${repeated.ranks[0]} and ${repeated.ranks[1]}: ${repeated.error}`]
    return [...head, ...(repeated.stack === undefined ? [] : [repeated.stack])]
  }
  const crashed = result.deaths.find((death) => death.stack !== undefined)
  return crashed === undefined ? [] : [`cohort: warning: rank ${crashed.rank} ${crashed.cause}`, crashed.stack!]
}

/**
 * `averaging: ring, 2 generations, direct links between worker threads` (or
 * `shared-memory links` with `links` `shared`, `a shared-memory all-reduce` with `area`, `an
 * all-reduce through files in memory` with `file`, `direct
 * links between processes` with `direct`).
 */
const averagingText = (backend: "cpu" | "ring", ring: RunTypes.RunResult["ring"]): string =>
  backend === "cpu" || ring === undefined
    ? "averaging: cpu (the coordinator averaged every round)"
    : `averaging: ring, ${plural(ring.generations, "generation")}, ${
        ring.links === "port"
          ? "direct links between worker threads"
          : ring.links === "shared"
            ? "shared-memory links between worker threads"
            : ring.links === "area"
              ? "a shared-memory all-reduce between worker threads"
              : ring.links === "file"
                ? "an all-reduce through files in memory between processes"
                : ring.links === "direct"
                  ? `direct links between processes (${ring.relayed} steps fell back to the relay)`
                  : `steps relayed by the coordinator (${ring.relayed} relayed, ${ring.dropped} dropped)`
      }`

/** Whole bytes with thousands separators (`196,896`), the same on every runtime and locale. */
const bytesText = (bytes: number): string => String(Math.round(bytes)).replace(/\B(?=(\d{3})+(?!\d))/g, ",")

/**
 * `traffic: 393,792 bytes a round, 2,953 a committed sample (over direct links 196,896 sent and
 * 196,896 received by the ranks a round; at the coordinator 310 received and 0 sent)`: every byte
 * counted, at the coordinator (in and out) and over direct links (out and in), per round and per
 * sample the audits committed (docs/journal.md).
 */
const trafficText = (traffic: NonNullable<RunTypes.RunResult["traffic"]>, samples: number): string => {
  const perRound = (bytes: number): string => bytesText(bytes / traffic.rounds)
  const links = traffic.linkSentBytes !== undefined ? (traffic.linkSentBytes ?? 0) + (traffic.linkReceivedBytes ?? 0) : 0
  const total = traffic.receivedBytes + traffic.sentBytes + links
  const coordinator = `at the coordinator ${perRound(traffic.receivedBytes)} received and ${perRound(traffic.sentBytes)} sent`
  const parts =
    traffic.linkSentBytes === undefined
      ? coordinator
      : `over direct links ${perRound(traffic.linkSentBytes)} sent and ${perRound(traffic.linkReceivedBytes ?? 0)} received by the ranks a round; ${coordinator}`
  const perSample = samples > 0 ? `, ${bytesText(total / samples)} a committed sample` : ""
  return `traffic: ${perRound(total)} bytes a round over ${plural(traffic.rounds, "round")}${perSample} (${parts})`
}

const failedAudits = (result: RunTypes.RunResult | PartialRun): ReadonlyArray<RunTypes.RunResult["epochs"][number]> =>
  result.epochs.filter((epoch) => epoch.lost !== 0 || epoch.duplicated !== 0)

type Shown = Set<RunTypes.DeathTiming>

/**
 * The rows of the table per epoch, and the deaths they showed (`shown`). `completedEpochs` is
 * how many epochs the outcome says were completed (0 without an outcome).
 */
const epochRows = (
  result: RunTypes.RunResult | PartialRun,
  completedEpochs: number
): { readonly rows: Array<ReadonlyArray<string>>; readonly shown: Shown } => {
  const outcome = result.outcome
  // A finished epoch's deaths are the core's (its summary); a death declared after the run ended
  // carries the last epoch's number but belongs to no row (docs/design.md §3.6).
  const shown = new Set<RunTypes.DeathTiming>()
  const timingOf = (epoch: number, rank: number): RunTypes.DeathTiming | undefined => {
    const timing = result.deaths.find((d) => d.epoch === epoch && d.rank === rank && !shown.has(d))
    if (timing !== undefined) shown.add(timing)
    return timing
  }
  const timings = (deaths: ReadonlyArray<RunTypes.DeathTiming | undefined>, pick: (d: RunTypes.DeathTiming) => number | undefined) =>
    deaths.length === 0 ? "-" : deaths.map((d) => msText(d === undefined ? undefined : pick(d))).join(", ")
  const row = (
    epoch: number | string,
    cells: readonly [string, string, string],
    deaths: ReadonlyArray<RunTypes.DeathTiming | undefined>,
    accuracy: string
  ): ReadonlyArray<string> => [
    String(epoch),
    ...cells,
    String(deaths.length),
    timings(deaths, (d) => d.detectedAfterFaultMs),
    timings(deaths, (d) => d.recoveredAfterFaultMs),
    accuracy
  ]
  const rows = result.epochs.map((e) =>
    row(
      e.spansRuns === undefined ? String(e.epoch) : `${e.epoch}*`,
      [String(e.samplesCommitted), String(e.lost), String(e.duplicated)],
      e.deaths.map((death) => timingOf(e.epoch, death.rank)),
      accuracyText(e.accuracy)
    )
  )
  // An unrecoverable run stopped in the middle of an epoch: one more row, with that epoch's deaths.
  const stoppedEpoch = outcome !== undefined && outcome.status !== "completed" ? (outcome.uncommitted?.epoch ?? completedEpochs) : undefined
  if (stoppedEpoch !== undefined && !result.epochs.some((e) => e.epoch === stoppedEpoch)) {
    const deaths = result.deaths.filter((d) => d.epoch === stoppedEpoch && !shown.has(d))
    for (const death of deaths) shown.add(death)
    rows.push(row(stoppedEpoch, ["stopped", "-", "-"], deaths, "-"))
  }
  return { rows, shown }
}

/** The lines under the table: the resume, what a stopped run left uncommitted, deaths, joins, alerts. */
const noteLines = (result: RunTypes.RunResult | PartialRun, shown: Shown, lines: Array<string>): void => {
  const outcome = result.outcome
  const stopped = outcome !== undefined && outcome.status !== "completed" ? outcome.uncommitted : undefined
  const resumed = result.resumed
  if (resumed !== undefined) {
    const spanning = result.epochs.find((e) => e.spansRuns !== undefined)
    if (spanning?.spansRuns !== undefined) {
      const [before, after] = spanning.spansRuns
      lines.push(
        `* epoch ${spanning.epoch} spans runs ${before} and ${after}: ${plural(resumed.committedSamples, "sample")} committed by run ${before}, ` +
          `${spanning.samplesCommitted - resumed.committedSamples} by run ${after}; the audit covers both`
      )
    }
    lines.push(`resumed: this run ${resumedText(resumed)}`)
    for (const note of resumed.notes) lines.push(`  ${note}`)
  }
  for (const r of result.recoveries ?? []) {
    lines.push(
      `coordinator lost at ${(r.lostMs / 1000).toFixed(1)} s and taken over by a new serve process: ${(r.withoutCoordinatorMs / 1000).toFixed(1)} s without a coordinator; ` +
        `epoch ${r.epoch} went on from ${plural(r.committedSamples, "committed sample")}; ` +
        `${r.returned.length === 0 ? "no rank" : `rank${r.returned.length === 1 ? "" : "s"} ${r.returned.join(", ")}`} came back` +
        (r.missing.length === 0 ? "" : `, ${r.missing.join(", ")} did not (declared dead)`)
    )
  }
  if (stopped !== undefined) {
    const samples = stopped.ranges.reduce((sum, [, size]) => sum + size, 0)
    const listed = stopped.ranges.slice(0, 8).map(([offset, size]) => `[${offset}, ${offset + size})`)
    const more = stopped.ranges.length > 8 ? `, and ${stopped.ranges.length - 8} more` : ""
    lines.push(
      `uncommitted in epoch ${stopped.epoch}: ${plural(samples, "sample")} in ${plural(stopped.ranges.length, "range")}${
        listed.length > 0 ? `: ${listed.join(", ")}${more}` : ""
      }`
    )
  }
  if (result.deaths.length > 0) {
    lines.push("deaths:")
    for (const death of result.deaths) {
      // A cut journal has no outcome: a death no row showed happened in the epoch it was cut in.
      const when = shown.has(death) || outcome === undefined ? `in epoch ${death.epoch}` : "after the run ended"
      lines.push(`  rank ${death.rank} ${when} (${death.detector}): ${deathText(death)}`)
    }
  }
  const leaves = result.leaves ?? []
  if (leaves.length > 0) lines.push(...leavesLines(leaves))
  const joinCosts = result.joins ?? []
  if (joinCosts.length > 0) lines.push(...joinsLines(joinCosts))
  const joins = outcome?.joins ?? []
  if (joins.length > 0) {
    // Ranks that joined the running run: which index, when, and what it was given.
    lines.push("joins:")
    for (const j of joins) {
      lines.push(
        `  rank ${j.rank} joined in epoch ${j.epoch}, in the rounds from round ${j.firstRound}; ${plural(j.samples, "sample")} handed at once`
      )
    }
  }
  if (result.alerts.length > 0) {
    lines.push("alerts:")
    for (const alert of result.alerts) lines.push(`  ${alertText(alert).replace(/^alert /, "")}`)
  }
}

/** The `outcome:` line, with what the audits say (`failed`: the epochs whose audit failed). */
const outcomeLine = (
  result: RunTypes.RunResult | PartialRun,
  failed: ReadonlyArray<RunTypes.RunResult["epochs"][number]>,
  storageFault: RunTypes.RunResult["storageFault"],
  completedEpochs: number
): string => {
  const outcome = result.outcome
  // A record that could not be written claims no audit: the journal may lack what the run did.
  const audits =
    failed.length === 0 && storageFault !== undefined
      ? `its record is incomplete (cannot write ${storageFault.path}), so no audit is claimed`
      : failed.length === 0 && result.epochs.length === 0
        ? "no epoch finished, so no audit"
        : failed.length === 0
          ? outcome?.status === "unrecoverable"
            ? "every completed epoch's audit clean"
            : "every audit clean"
          : `audit failed in ${failed.map((e) => `epoch ${e.epoch} (lost ${e.lost}, duplicated ${e.duplicated})`).join(", ")}`
  if (outcome === undefined && result.failed !== undefined && !result.failed.formed) {
    return `outcome: failed at formation (${(result.durationMs / 1000).toFixed(1)} s into the run): nothing was trained`
  } else if (outcome === undefined) {
    const deadRanks = [...new Set(result.deaths.map((d) => d.rank))].sort((a, b) => a - b)
    return (
      `outcome: unknown: the journal ${result.cut} (${(result.durationMs / 1000).toFixed(1)} s into the run), before the run ended; ` +
      `${plural(result.epochs.length, "epoch")} finished; deaths so far: ${ranksText(deadRanks)}; ` +
      `last test accuracy ${accuracyText(result.finalAccuracy)}; ${audits === "every audit clean" ? "every audit read clean" : audits}`
    )
  } else {
    const head =
      outcome.status === "completed"
        ? `completed ${plural(outcome.epochsCompleted, "epoch")}`
        : outcome.status === "interrupted"
          ? `${interruptedText(outcome.detail)} after ${plural(completedEpochs, "completed epoch")}`
          : `unrecoverable (${outcome.reason ?? "no reason"}) after ${plural(completedEpochs, "completed epoch")}`
    return (
      `outcome: ${head} in ${(result.durationMs / 1000).toFixed(1)} s; failures: ${ranksText(outcome.failures)}; ` +
      `final test accuracy ${accuracyText(result.finalAccuracy)}; ${audits}`
    )
  }
}

/** The skipped faults, one warning each (the demo's own planned kill as a note). */
const skippedLines = (result: RunTypes.RunResult | PartialRun): ReadonlyArray<string> =>
  (result.skippedFaults ?? []).map((f) =>
    isDemoPlan(f)
      ? `cohort: note: the demo's planned kill of rank ${f.rank} (at ${Math.round((f.spec as { atFraction: number }).atFraction * 100)}% of epoch ${(f.spec as { atEpoch: number }).atEpoch}) did not happen: ${f.reason}`
      : `cohort: warning: --${f.fault} ${f.rank}@${"atSeconds" in f.spec ? f.spec.atSeconds : `epoch ${(f.spec as { atEpoch: number }).atEpoch}`} did not happen: ${f.reason}`
  )

/** The `cohort: ...` line for stderr of a run that did not complete cleanly, or `undefined`. */
const stopLine = (
  result: RunTypes.RunResult | PartialRun,
  runDir: string,
  command: string,
  failed: ReadonlyArray<RunTypes.RunResult["epochs"][number]>,
  storageFault: RunTypes.RunResult["storageFault"]
): string | undefined => {
  const outcome = result.outcome
  // A served run's ranks save on their own hosts (`cohort join --save-dir`), out of a resume's reach.
  const served = (result as { readonly transport?: string }).transport === "serve"
  const savedWhere = served ? "their hosts' --save-dir" : `${runDir}/${saveFolder}`
  // Interrupted before training started (still forming): nothing was trained, nothing to resume.
  const trainedNothing = outcome?.status === "interrupted" && outcome.uncommitted === undefined && result.epochs.length === 0
  // No survivor's save: a resume can only start from an epoch checkpoint, if the run wrote one.
  const nothingSaved = result.saves !== undefined && result.saves.saved.length === 0
  const resumedBy = (result as { readonly resumedBy?: { readonly runId: string; readonly runDir: string } }).resumedBy
  const resumeHint = trainedNothing
    ? ""
    : resumedBy !== undefined
      ? `; run ${resumedBy.runId} (${resumedBy.runDir}) resumed it and trained on from it`
      : nothingSaved
        ? `; if it saved an epoch checkpoint, resume it from there with: ${resumeCommand(runDir, command)}`
        : `; resume with: ${resumeCommand(runDir, command)}`
  return storageFault !== undefined && outcome !== undefined
    ? storageLine(
        storageFault,
        outcome.status,
        runDir,
        command,
        !trainedNothing
          ? undefined
          : result.resumed !== undefined
            ? `resume run ${result.resumed.parent.runId} again with: ${resumeCommand(result.resumed.parent.runDir, command)}`
            : "start the run again: there is nothing to resume"
      )
    : outcome === undefined && result.failed !== undefined
      ? failureLine(result.failed, runDir, command)
      : outcome === undefined
        ? `cohort: warning: ${result.journal} ${result.cut}: the report shows the run as far as it was read; its outcome is unknown; ` +
          (resumedBy !== undefined
            ? `run ${resumedBy.runId} (${resumedBy.runDir}) resumed it and trained on from it`
            : `if its coordinator's process died, resume it from its last checkpoint with: ${resumeCommand(runDir, command)}`)
        : outcome.status === "unrecoverable"
          ? `cohort: run stopped: ${outcome.reason ?? "no reason"}: ${outcome.detail}; ${savesText(result.saves, savedWhere)}${resumeHint}`
          : outcome.status === "interrupted" && trainedNothing && resumedBy !== undefined
            ? `cohort: run ${interruptedText(outcome.detail)}: run in ${runDir}; it stopped before training started; run ${resumedBy.runId} (${resumedBy.runDir}) resumed it and trained on from it`
            : outcome.status === "interrupted" && trainedNothing && result.resumed !== undefined
              ? `cohort: run ${interruptedText(outcome.detail)}: run in ${runDir}; it stopped before training started, so run ${result.resumed.parent.runId} ` +
                `was not resumed: resume it with: ${resumeCommand(result.resumed.parent.runDir, command)}`
              : outcome.status === "interrupted" && trainedNothing
                ? `cohort: run ${interruptedText(outcome.detail)}: run in ${runDir}; it stopped before training started: there is nothing to resume`
                : outcome.status === "interrupted"
                  ? `cohort: run ${interruptedText(outcome.detail)}: run in ${runDir}; ${savesText(result.saves, savedWhere)}; ` +
                    `the epoch's uncommitted ranges are in ${runDir}/summary.json${resumeHint}`
                  : failed.length > 0
                    ? `cohort: audit failed: ${failed.map((e) => `epoch ${e.epoch} lost ${e.lost}, duplicated ${e.duplicated}`).join("; ")}`
                    : undefined
}

/**
 * What a finished run prints: `out` (the table per epoch, deaths, alerts, the outcome line and
 * the run directory) for stdout, and `err`, one `cohort: ...` line for stderr when the run was
 * unrecoverable or an audit failed (else `undefined`). `runDir` overrides the directory shown
 * (`report` shows the folder it read). A `PartialRun` (a journal cut before the run ended) shows
 * what was read, an unknown outcome, and a warning line saying where the journal stops; one whose
 * journal ends with `failed` says so instead (`cohort: the run failed at formation: ...; nothing
 * was trained: there is nothing to resume`).
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderResult = (
  result: RunTypes.RunResult | PartialRun,
  runDir: string = result.runDir,
  command = "cohort"
): { readonly out: string; readonly err: string | undefined } => {
  const outcome = result.outcome
  // A resume stopped before it formed stopped in the epoch it was to resume in, not in epoch 0.
  const completedEpochs = outcome === undefined ? 0 : Math.max(outcome.epochsCompleted, result.resumed?.epoch ?? 0)
  const { rows, shown } = epochRows(result, completedEpochs)
  const lines: Array<string> = []
  if (rows.length > 0) lines.push(table(epochHeaders, rows).trimEnd())
  else lines.push("no epoch finished")
  noteLines(result, shown, lines)
  const failed = failedAudits(result)
  const storageFault = (result as { readonly storageFault?: RunTypes.RunResult["storageFault"] }).storageFault
  lines.push(outcomeLine(result, failed, storageFault, completedEpochs))
  if (result.backend !== undefined) lines.push(averagingText(result.backend, result.ring))
  if (result.traffic !== undefined)
    lines.push(
      trafficText(
        result.traffic,
        result.epochs.reduce((sum, epoch) => sum + epoch.samplesCommitted, 0)
      )
    )
  const refusals = Object.entries((result as { readonly refusals?: Readonly<Record<string, number>> }).refusals ?? {})
  if (refusals.length > 0) lines.push(`refused joins: ${refusals.map(([code, count]) => `${count} × ${code}`).join(", ")}`)
  lines.push(`run directory: ${runDir}`)
  const chain = (result as { readonly chain?: ReadonlyArray<{ readonly runId: string; readonly runDir: string }> }).chain
  if (chain !== undefined && chain.length > 1) {
    lines.push(
      `chain: ${chain.map((run) => (run.runId === result.runId ? `${run.runId} (this run)` : `${run.runId} (${run.runDir})`)).join(" -> ")}`
    )
  }
  const stoppedLine = stopLine(result, runDir, command, failed, storageFault)
  const skipped = skippedLines(result)
  const incomplete = (result as { readonly journalIncomplete?: string }).journalIncomplete
  // The trainer's error, once: the stop line names it, its stack follows.
  const errLines = [
    ...(incomplete === undefined ? [] : [`cohort: warning: ${incomplete}`]),
    ...(stoppedLine === undefined ? [] : [stoppedLine]),
    ...crashLines(result),
    ...skipped
  ]
  return { out: lines.join("\n") + "\n", err: errLines.length === 0 ? undefined : errLines.join("\n") }
}
