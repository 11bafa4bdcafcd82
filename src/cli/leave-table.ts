/**
 * The departures' cost lines in what `report` and a finished run print (`RunResult.leaves`,
 * docs/churn.md): one row per departure, then the median and p90 per kind.
 *
 * @since 0.1.0
 */
import type { RunTypes } from "../../actors/cli-entry.ts"
import { msText } from "./event-text.ts"

const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => (row[column] ?? "").length)))
  const line = (cells: ReadonlyArray<string>): string => `  ${cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join("  ")}`
  return [line(headers), ...rows.map(line)]
}

/** The `p`-quantile (0..1) of `values` by nearest rank; `undefined` for none. */
const quantile = (values: ReadonlyArray<number>, p: number): number | undefined => {
  if (values.length === 0) return undefined
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]
}

/**
 * The departures' cost lines (`RunResult.leaves`): one row each, then per kind the median and p90
 * of detection and recovery and the sums of samples and bytes.
 *
 * @since 0.1.0
 * @category rendering
 */
export const leavesLines = (leaves: ReadonlyArray<RunTypes.LeaveCost>): Array<string> => {
  const rows = leaves.map((l) => [
    String(l.rank),
    String(l.epoch),
    l.kind,
    String(l.detectionMs),
    msText(l.recoveryMs),
    String(l.remainderSamples),
    String(l.lostSamples),
    String(l.duplicatedSamples),
    String(l.redoneSamples),
    String(l.bytesMoved)
  ])
  const kinds = (["graceful", "crash", "silent"] as const)
    .map((kind) => {
      const of = leaves.filter((l) => l.kind === kind)
      const detection = of.map((l) => l.detectionMs)
      const recovery = of.flatMap((l) => (l.recoveryMs === undefined ? [] : [l.recoveryMs]))
      const sum = (pick: (l: RunTypes.LeaveCost) => number) => String(of.reduce((total, l) => total + pick(l), 0))
      return [
        kind,
        String(of.length),
        msText(quantile(detection, 0.5)),
        msText(quantile(detection, 0.9)),
        msText(quantile(recovery, 0.5)),
        msText(quantile(recovery, 0.9)),
        sum((l) => l.lostSamples),
        sum((l) => l.duplicatedSamples),
        sum((l) => l.redoneSamples),
        sum((l) => l.bytesMoved)
      ]
    })
    .filter((row) => row[1] !== "0")
  return [
    "departures (what each cost):",
    ...table(["rank", "epoch", "kind", "detection ms", "recovery ms", "remainder", "lost", "duplicated", "redone", "bytes moved"], rows),
    "departures by kind:",
    ...table(
      ["kind", "count", "detection median ms", "p90", "recovery median ms", "p90", "lost", "duplicated", "redone", "bytes moved"],
      kinds
    )
  ]
}

/**
 * The joiners' cost lines (`RunResult.joins`): one row each, then the median and p90 of the time
 * from connect to welcome and to first training, and of the bytes that brought each up to date.
 *
 * @since 0.1.0
 * @category rendering
 */
export const joinsLines = (joins: ReadonlyArray<RunTypes.JoinCost>): Array<string> => {
  const rows = joins.map((j) => [String(j.rank), String(j.epoch), msText(j.welcomeMs), msText(j.trainingMs), String(j.bytes)])
  const at = (pick: (j: RunTypes.JoinCost) => number, p: number) => quantile(joins.map(pick), p)
  const summary = [
    String(joins.length),
    msText(at((j) => j.welcomeMs, 0.5)),
    msText(at((j) => j.welcomeMs, 0.9)),
    msText(at((j) => j.trainingMs, 0.5)),
    msText(at((j) => j.trainingMs, 0.9)),
    String(at((j) => j.bytes, 0.5) ?? 0),
    String(at((j) => j.bytes, 0.9) ?? 0)
  ]
  return [
    "joins brought up to date (what each cost):",
    ...table(["rank", "epoch", "welcome ms", "training ms", "bytes"], rows),
    "joins in all:",
    ...table(["count", "welcome median ms", "p90", "training median ms", "p90", "bytes median", "p90"], [summary])
  ]
}
