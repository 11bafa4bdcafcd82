import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { journalFold, journalModel, writeReport } from "../../src/cli/report-html.ts"
import * as Html from "../../src/dashboard/html.ts"
import * as Model from "../../src/dashboard/model.ts"

const scratch = mkdtempSync(join(tmpdir(), "cohort-report-html-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const started = {
  type: "started",
  ms: 0,
  runId: "r1",
  runDir: "runs/r1",
  worldSize: 2,
  epochs: 1,
  epochSamples: 10,
  mode: "static",
  transport: "worker"
}
const line = (value: unknown): string => `${JSON.stringify(value)}\n`

describe("cohort report --html: the run page as one file", () => {
  it("inlines JSON that no journal string can break out of", () => {
    expect(Html.inlineJson({ detail: "</script><b>&\u2028" })).toBe('{"detail":"\\u003c/script\\u003e\\u003cb\\u003e\\u0026\\u2028"}')
  })

  it("folds the shown events of a journal, strips control characters, and leaves out a last line cut short", () => {
    const text =
      line(started) +
      line({ type: "decision", ms: 1, detail: "2 × StartEpoch: planned" }) +
      line({
        type: "alert",
        ms: 2,
        alert: { ts: 1, severity: "warn", path: "root", class: "Overflow", detail: "a\u001b[31mb", count: 1 }
      }) +
      '{"type":"round","ms":3,"epo'
    expect(journalModel(text, "events.ndjson")).toEqual({
      model: Model.fromEvents([
        started,
        { type: "alert", ms: 2, alert: { ts: 1, severity: "warn", path: "root", class: "Overflow", detail: "a[31mb", count: 1 } }
      ]),
      failed: undefined
    })
  })

  it("folds the same model from the journal in pieces of any size, split inside a line or a character", () => {
    const text =
      line(started) +
      line({ type: "formed", ms: 5, worldSize: 2 }) +
      line({ type: "alert", ms: 6, alert: { ts: 1, severity: "warn", path: "root", class: "Overflow", detail: "é ✓ 𝄞", count: 1 } }) +
      line({ type: "round", ms: 7, epoch: 0, round: 0, contributors: 2, openMs: 1, loss: 0.5 })
    const whole = journalModel(text, "j")
    const bytes = new TextEncoder().encode(text)
    for (const size of [1, 2, 3, 7, 64]) {
      const fold = journalFold("j")
      for (let at = 0; at < bytes.length; at += size) fold.push(bytes.subarray(at, at + size))
      expect(fold.finish()).toEqual(whole)
    }
    expect(typeof whole !== "string" && whole.model.alerts[0]?.detail).toBe("é ✓ 𝄞")
  })

  it("refuses a bad whole line, naming it, and a journal without its started event", () => {
    expect(journalModel(line(started) + "nope\n", "j")).toBe("j line 2 is not JSON")
    expect(journalModel(line(started) + line({ type: "round", ms: "soon" }), "j")).toMatch(/^j line 2 is not a valid round event: /)
    expect(journalModel(line({ type: "formed", ms: 1, worldSize: 2 }), "j")).toBe("j has no started event")
  })

  it("shows a run that failed at formation: the model's failed event, and the failure for the command", () => {
    const failed = { type: "failed", ms: 20_001, stage: "formation", reason: "ranks 1 did not join within 20000 ms", formed: false }
    const folded = journalModel(line(started) + line({ type: "joined", ms: 3, rank: 0, address: "worker" }) + line(failed), "j")
    expect(folded).toEqual({
      model: Model.fromEvents([started, { type: "joined", ms: 3, rank: 0, address: "worker" }, failed]),
      failed: { stage: "formation", reason: "ranks 1 did not join within 20000 ms", formed: false }
    })
    const model = (folded as { model: Model.Model }).model
    expect([model.failed, model.ranks.map((r) => r.status)]).toEqual([
      { ms: 20_001, stage: "formation", reason: "ranks 1 did not join within 20000 ms", formed: false },
      ["exited", "exited"]
    ])
  })

  it("writes one self-contained page with the model inline, and says why when there is no journal", async () => {
    const dir = join(scratch, "r1")
    const { mkdirSync } = await import("node:fs")
    mkdirSync(dir)
    expect(await writeReport(dir, undefined, 1_000_000)).toBe(`${dir} has no events.ndjson; report --html draws the run from its journal`)
    writeFileSync(join(dir, "events.ndjson"), line(started) + line({ type: "formed", ms: 5, worldSize: 2 }))
    const out = join(scratch, "page.html")
    const written = await writeReport(dir, out, 1_000_000)
    expect(written).toEqual({ file: out, bytes: expect.any(Number) })
    const html = readFileSync(out, "utf8")
    expect(readFileSync(out).length).toBe((written as { bytes: number }).bytes)
    expect(html).toContain(
      `<script type="application/json" id="cohort-model">${Html.inlineJson(Model.fromEvents([started, { type: "formed", ms: 5, worldSize: 2 }]))}</script>`
    )
    expect(html).toContain(`<script type="application/json" id="cohort-config">{"mode":"static","faults":false,"key":""}</script>`)
    expect(html).toContain(".uplot")
    expect(html).not.toMatch(/<script[^>]* src=|<link[^>]* rel="stylesheet"|https?:\/\//)
    expect(await writeReport(join(scratch, "none"), undefined, 1_000_000)).toBe(`no run directory at ${join(scratch, "none")}`)
    expect(await writeReport(dir, undefined, 10)).toBe(`${dir}/events.ndjson is larger than 10 bytes (--file-bytes-max); it was not read`)
  })
})
