// One consistency check over every record of a finished run, for the end-to-end tests: the
// journal (its eval, death and epoch events, and the run `report` rebuilds from it alone),
// `summary.json`, the result printed with `--json`, `cohort report --json`, and the run page's
// model (`cohort report --html`) list the same evals, audits and deaths; the first three, the same
// averaging traffic.
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { expect } from "vitest"
import { resultFromEvents } from "../actors/record/read-run.ts"
import type * as RunTypes from "../actors/record/run-types.ts"
import * as Cli from "../src/cli/index.ts"
import { journalModel } from "../src/cli/report-html.ts"

type Event = { readonly type: string; readonly [key: string]: unknown }

/** What every record must agree on: evals `[epoch, rank, accuracy]`, audits, deaths `[rank, epoch, detector]`. */
export interface Records {
  readonly evals: ReadonlyArray<readonly [number, number, number]>
  readonly accuracy: ReadonlyArray<readonly [number, number | undefined]>
  readonly audits: ReadonlyArray<readonly [number, number, number, number, number]>
  readonly deaths: ReadonlyArray<readonly [number, number, string]>
}

const ofResult = (result: RunTypes.RunResult): Records => ({
  evals: (result.outcome.evals ?? []).map((e) => [e.epoch, e.rank, e.accuracy] as const),
  accuracy: result.epochs.map((e) => [e.epoch, e.accuracy] as const),
  audits: result.epochs.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated, e.deaths.length] as const),
  deaths: result.deaths.map((d) => [d.rank, d.epoch, d.detector] as const)
})

/**
 * Reads every record of the finished run in `runDir` and expects them to agree, with `printed`
 * (the `--json` result) when given; returns what they agree on. Each epoch's accuracy is the one
 * its eval gave (none when no eval came for it).
 */
export const expectRecordsAgree = async (runDir: string, printed?: RunTypes.RunResult): Promise<Records> => {
  const summary = JSON.parse(readFileSync(join(runDir, "summary.json"), "utf8")) as RunTypes.RunResult
  const text = readFileSync(join(runDir, "events.ndjson"), "utf8")
  const events = text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Event)
  const rebuilt = resultFromEvents(text)
  if (typeof rebuilt === "string" || rebuilt.outcome === undefined)
    throw new Error(`the journal of ${runDir} does not read as a finished run: ${typeof rebuilt === "string" ? rebuilt : rebuilt.cut}`)
  let reported = ""
  const code = await Cli.main(["report", runDir, "--json"], {
    out: (chunk) => void (reported += chunk),
    err: () => {},
    isTerminal: false,
    progressStream: () => {
      throw new Error("no terminal in tests")
    }
  })
  expect(code).toBe(summary.exitCode)
  const page = journalModel(text, "events.ndjson")
  if (typeof page === "string") throw new Error(page)

  const expected = ofResult(summary)
  const evalEvents = events.filter((e) => e.type === "eval")
  const journal: Records = {
    evals: evalEvents.map((e) => [e.epoch as number, e.rank as number, e.accuracy as number] as const),
    // An epoch line goes out before its eval: the accuracy is the last eval event's for the epoch.
    accuracy: events
      .filter((e) => e.type === "epoch")
      .map((e) => {
        const epoch = (e.summary as { readonly epoch: number }).epoch
        return [epoch, [...evalEvents].reverse().find((v) => v.epoch === epoch)?.accuracy as number | undefined] as const
      }),
    audits: events
      .filter((e) => e.type === "epoch")
      .map((e) => {
        const s = e.summary as RunTypes.RunResult["epochs"][number]
        return [s.epoch, s.samplesCommitted, s.lost, s.duplicated, s.deaths.length] as const
      }),
    deaths: events
      .filter((e) => e.type === "death")
      .map((e) => {
        const d = e.death as RunTypes.DeathTiming
        return [d.rank, d.epoch, d.detector] as const
      })
  }
  const pageRecords: Records = {
    evals: expected.evals,
    accuracy: page.model.epochRows.map((e) => [e.epoch, e.accuracy] as const),
    audits: page.model.epochRows.map((e) => [e.epoch, e.samplesCommitted, e.lost, e.duplicated, e.deaths] as const),
    deaths: page.model.deaths.map((d) => [d.rank, d.epoch, d.detector] as const)
  }
  const records: ReadonlyArray<readonly [string, Records]> = [
    ["the journal's events", journal],
    ["the run rebuilt from the journal", ofResult(rebuilt)],
    ["cohort report --json", ofResult(JSON.parse(reported) as RunTypes.RunResult)],
    ["the run page", pageRecords],
    ...(printed === undefined ? [] : [["the printed --json result", ofResult(printed)] as const])
  ]
  for (const [name, record] of records) expect({ [name]: record }).toEqual({ [name]: expected })
  // The averaging traffic: summary.json's tally of the round lines written, and the sums over the journal's.
  const reportedTraffic = (JSON.parse(reported) as RunTypes.RunResult).traffic
  expect({ rebuilt: rebuilt.traffic, reported: reportedTraffic }).toEqual({ rebuilt: summary.traffic, reported: summary.traffic })
  // Within summary.json: the outcome's deaths are the deaths, and each epoch's accuracy is its eval's.
  expect((summary.outcome.deaths ?? []).map((d) => [d.rank, d.epoch, d.detector])).toEqual(expected.deaths)
  const evalOf = new Map(expected.evals.map(([epoch, , accuracy]) => [epoch, accuracy]))
  expect(expected.accuracy).toEqual(expected.audits.map(([epoch]) => [epoch, evalOf.get(epoch)]))
  return expected
}
