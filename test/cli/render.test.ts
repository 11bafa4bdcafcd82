// The end table, the result's stderr lines and the two live views of a run (split from test/cli.test.ts).
import { Terminal } from "@xterm/headless"
import { describe, expect, it } from "vitest"
import type * as RunTypes from "../../actors/record/run-types.ts"
import * as Cli from "../../src/cli/index.ts"
import { auditFailed, completed, completedEpochs, eventsOf, killTiming, rankLost, stoppedTiming, unrecoverable } from "./fixtures.ts"

describe("renderResult", () => {
  it("renders a completed run as a table per epoch, the deaths, the alerts and the outcome", () => {
    expect(Cli.renderResult(completed)).toEqual({
      out: [
        "epoch  samples committed  lost  duplicated  deaths  detection ms  recovery ms  test accuracy",
        "    0               8000     0           0       0             -            -         0.9105",
        "    1               8000     0           0       1           1.3          3.5         0.9350",
        "    2               8000     0           0       0             -            -         0.9420",
        "deaths:",
        "  rank 2 in epoch 1 (supervisor): killed by terminate; detected 1.3 ms after the fault; 1200 samples moved to the survivors 3.5 ms after the fault",
        "alerts:",
        "  critical RankLost root/rank2: rank 2 lost: killed by terminate",
        "outcome: completed 3 epochs in 41.2 s; failures: rank 2; final test accuracy 0.9420; every audit clean",
        "run directory: runs/abc123",
        ""
      ].join("\n"),
      err: undefined
    })
  })

  it("names the averaging backend and the ring's generations and links under the table", () => {
    const ring = Cli.renderResult({ ...completed, backend: "ring", ring: { generations: 2, links: "port", relayed: 0, dropped: 0 } }).out
    expect(ring).toContain("\naveraging: ring, 2 generations, direct links between worker threads\nrun directory: runs/abc123\n")
    const shared = Cli.renderResult({
      ...completed,
      backend: "ring",
      ring: { generations: 1, links: "shared", relayed: 0, dropped: 0 }
    }).out
    expect(shared).toContain("\naveraging: ring, 1 generation, shared-memory links between worker threads\nrun directory: runs/abc123\n")
    const area = Cli.renderResult({ ...completed, backend: "ring", ring: { generations: 3, links: "area", relayed: 0, dropped: 0 } }).out
    expect(area).toContain(
      "\naveraging: ring, 3 generations, a shared-memory all-reduce between worker threads\nrun directory: runs/abc123\n"
    )
    const file = Cli.renderResult({ ...completed, backend: "ring", ring: { generations: 1, links: "file", relayed: 0, dropped: 0 } }).out
    expect(file).toContain(
      "\naveraging: ring, 1 generation, an all-reduce through files in memory between processes\nrun directory: runs/abc123\n"
    )
    const relayed = Cli.renderResult({
      ...completed,
      backend: "ring",
      ring: { generations: 1, links: "relay", relayed: 120, dropped: 3 }
    }).out
    expect(relayed).toContain("\naveraging: ring, 1 generation, steps relayed by the coordinator (120 relayed, 3 dropped)\n")
    expect(Cli.renderResult({ ...completed, backend: "cpu" }).out).toContain("\naveraging: cpu (the coordinator averaged every round)\n")
  })

  it("gives the run's averaging traffic per round and per committed sample, direct-link bytes included", () => {
    const samples = completed.epochs.reduce((sum, e) => sum + e.samplesCommitted, 0)
    const direct = Cli.renderResult({
      ...completed,
      backend: "ring",
      ring: { generations: 1, links: "direct", relayed: 0, dropped: 0 },
      traffic: { rounds: 4, receivedBytes: 1200, sentBytes: 0, linkSentBytes: 787_584, linkReceivedBytes: 787_584 }
    }).out
    const total = 1200 + 2 * 787_584
    expect(direct).toContain(
      `\naveraging: ring, 1 generation, direct links between processes (0 steps fell back to the relay)\ntraffic: 394,092 bytes a round over 4 rounds, ${Math.round(total / samples).toLocaleString("en-US")} a committed sample (over direct links 196,896 sent and 196,896 received by the ranks a round; at the coordinator 300 received and 0 sent)\n`
    )
    const cpu = Cli.renderResult({ ...completed, backend: "cpu", traffic: { rounds: 2, receivedBytes: 6000, sentBytes: 5000 } }).out
    expect(cpu).toContain(`\ntraffic: 5,500 bytes a round over 2 rounds, `)
    expect(cpu).toContain(" a committed sample (at the coordinator 3,000 received and 2,500 sent)\n")
  })

  it("renders an unrecoverable run with the stopped epoch, its uncommitted ranges and a one-line reason", () => {
    expect(Cli.renderResult(unrecoverable)).toEqual({
      out: [
        "epoch  samples committed  lost  duplicated  deaths  detection ms  recovery ms  test accuracy",
        "    0            stopped     -           -       1           2.0            -              -",
        "uncommitted in epoch 0: 5600 samples in 4 ranges: [600, 2000), [2600, 4000), [4600, 6000), [6600, 8000)",
        "deaths:",
        "  rank 1 in epoch 0 (supervisor): killed by terminate; detected 2.0 ms after the fault; 1400 samples left uncommitted (the run stopped)",
        "outcome: unrecoverable (FailureLimitReached) after 0 completed epochs in 3.5 s; failures: rank 1; final test accuracy -; no epoch finished, so no audit",
        "run directory: runs/zz9",
        ""
      ].join("\n"),
      err: "cohort: run stopped: FailureLimitReached: 1 failure reached the failure limit of 1; ranks 0, 2, 3 saved under runs/zz9/save; resume with: cohort resume runs/zz9"
    })
  })

  it("says which survivors saved and which did not finish their save; with no save, a resume only from a checkpoint", () => {
    const stopped = "cohort: run stopped: FailureLimitReached: 1 failure reached the failure limit of 1; "
    const errOf = (saves: RunTypes.RunResult["saves"]) => Cli.renderResult({ ...unrecoverable, saves }).err
    const resume = "; resume with: cohort resume runs/zz9"
    const fromCheckpoint = "; if it saved an epoch checkpoint, resume it from there with: cohort resume runs/zz9"
    expect(errOf({ saved: [0, 3], notSaved: [2] })).toBe(
      `${stopped}ranks 0, 3 saved under runs/zz9/save; rank 2 did not finish its save${resume}`
    )
    expect(errOf({ saved: [], notSaved: [0, 2] })).toBe(`${stopped}ranks 0, 2 did not finish their save${fromCheckpoint}`)
    expect(errOf({ saved: [], notSaved: [] })).toBe(`${stopped}no survivor was left to save${fromCheckpoint}`)
    expect(errOf(undefined)).toBe(`${stopped}survivors were asked to save under runs/zz9/save${resume}`)
  })

  it("a run stopped on a storage fault before training started: no resume offered (its journal may lack its started line)", () => {
    const fault = { path: "runs/zz9/events.ndjson", error: "ENOSPC: no space left on device, write" }
    const stopped: RunTypes.RunResult = {
      ...unrecoverable,
      outcome: {
        ...unrecoverable.outcome,
        status: "interrupted",
        reason: "GracefulShutdown",
        detail: `cannot write ${fault.path}: ${fault.error}`,
        uncommitted: undefined
      },
      saves: { saved: [], notSaved: [0, 1, 2] },
      storageFault: fault,
      exitCode: 5
    }
    const head = `cohort: cannot write ${fault.path}: ${fault.error}; the run stopped before training started; once runs/zz9 can be written again, `
    expect(Cli.renderResult(stopped).err).toBe(`${head}start the run again: there is nothing to resume`)
    const parent = { runId: "par3nt", runDir: "runs/par3nt" }
    const resumed = {
      ...stopped,
      resumed: { parent, epoch: 0, firstRound: 0, committedSamples: 0, committed: [], state: "start", loadedFrom: "", notes: [] } as const
    }
    expect(Cli.renderResult(resumed).err).toBe(`${head}resume run par3nt again with: cohort resume runs/par3nt`)
    // Once training started, its resume continues it.
    expect(Cli.renderResult({ ...stopped, outcome: unrecoverable.outcome }).err).toContain("resume with: cohort resume runs/zz9")
  })

  it("a served run: its survivors saved on their hosts, and its refused joins are counted under the table", () => {
    const rendered = Cli.renderResult({ ...unrecoverable, transport: "serve", refusals: { 4001: 2, 4010: 1 } })
    expect(rendered.err).toBe(
      "cohort: run stopped: FailureLimitReached: 1 failure reached the failure limit of 1; ranks 0, 2, 3 saved under their hosts' --save-dir; resume with: cohort resume runs/zz9"
    )
    expect(rendered.out).toContain("\nrefused joins: 2 × 4001, 1 × 4010\nrun directory: runs/zz9\n")
  })

  it("names the failed audits", () => {
    const rendered = Cli.renderResult(auditFailed)
    expect(rendered.err).toBe("cohort: audit failed: epoch 1 lost 5, duplicated 2")
    expect(rendered.out).toContain("    1               7997     5           2       0             -            -         0.9100\n")
    expect(rendered.out).toContain("; audit failed in epoch 1 (lost 5, duplicated 2)\n")
  })

  it("lists several deaths of one epoch in the timing columns and at most 8 uncommitted ranges", () => {
    const hang: RunTypes.DeathTiming = {
      ...stoppedTiming,
      rank: 3,
      detector: "heartbeat",
      cause: "no frame for 10001 ms",
      detectedAfterFaultMs: 10_150.04,
      recoveredAfterFaultMs: 10_151
    }
    const ranges = Array.from({ length: 10 }, (_, i) => [i * 100, 10] as const)
    const result: RunTypes.RunResult = {
      ...unrecoverable,
      deaths: [stoppedTiming, hang],
      outcome: { ...unrecoverable.outcome, failures: [1, 3], uncommitted: { epoch: 0, ranges } }
    }
    const out = Cli.renderResult(result).out
    expect(out).toContain("    0            stopped     -           -       2  2.0, 10150.0   -, 10151.0              -\n")
    expect(out).toContain(
      "uncommitted in epoch 0: 100 samples in 10 ranges: [0, 10), [100, 110), [200, 210), [300, 310), [400, 410), [500, 510), [600, 610), [700, 710), and 2 more\n"
    )
    expect(out).toContain("failures: ranks 1, 3;")
  })

  it("counts a death declared after the run ended in no epoch and says so", () => {
    const late: RunTypes.DeathTiming = {
      ...killTiming,
      rank: 1,
      epoch: 2,
      detectedAfterFaultMs: 833,
      recoveredAfterFaultMs: undefined,
      remainderSamples: 0,
      redistributed: false
    }
    const out = Cli.renderResult({ ...completed, deaths: [killTiming, late] }).out
    expect(out).toContain("    2               8000     0           0       0             -            -         0.9420\n")
    expect(out).toContain(
      "  rank 1 after the run ended (supervisor): killed by terminate; detected 833.0 ms after the fault; 0 samples left uncommitted (the run stopped)\n"
    )
  })

  const stack = "Error: trainBatch always fails\n    at Object.trainBatch (file:///t.ts:9:13)\n    at run (rank.ts:1:1)"
  const crashTiming = (rank: number): RunTypes.DeathTiming => ({
    ...stoppedTiming,
    rank,
    cause: "crashed: trainBatch always fails",
    stack,
    faultMs: undefined,
    detectedAfterFaultMs: undefined,
    recoveredAfterFaultMs: undefined
  })

  it("a TrainerFault stops with one line naming the error on stderr first, then its stack, once", () => {
    const stopped: RunTypes.RunResult = {
      ...unrecoverable,
      outcome: {
        ...unrecoverable.outcome,
        reason: "TrainerFault",
        detail: "the trainer failed the same way on ranks 1 and 0: trainBatch always fails",
        failures: [0, 1],
        exits: [2],
        repeatedCrash: { ranks: [1, 0], error: "trainBatch always fails", stack }
      },
      deaths: [crashTiming(1), crashTiming(0)],
      saves: { saved: [2], notSaved: [] },
      skippedFaults: [{ rank: 2, fault: "kill", spec: { rank: 2, atSeconds: 3 }, reason: "the run ended after 0.1 s of training" }]
    }
    expect(Cli.renderResult(stopped).err).toBe(
      [
        "cohort: run stopped: TrainerFault: the trainer failed the same way on ranks 1 and 0: trainBatch always fails; rank 2 saved under runs/zz9/save; resume with: cohort resume runs/zz9",
        "Error: trainBatch always fails",
        "    at Object.trainBatch (file:///t.ts:9:13)",
        "    at run (rank.ts:1:1)",
        "cohort: warning: --kill 2@3 did not happen: the run ended after 0.1 s of training"
      ].join("\n")
    )
  })

  it("a crash that did not stop the run is shown once too, as a warning with its stack", () => {
    expect(Cli.renderResult({ ...completed, deaths: [killTiming, crashTiming(3)] }).err).toBe(
      ["cohort: warning: rank 3 crashed: trainBatch always fails", stack].join("\n")
    )
    const repeated = {
      ...completed,
      outcome: { ...completed.outcome, repeatedCrash: { ranks: [3, 1] as const, error: "trainBatch always fails", stack } }
    }
    expect(Cli.renderResult(repeated).err).toBe(
      ["cohort: warning: the trainer failed the same way on ranks 3 and 1: trainBatch always fails", stack].join("\n")
    )
  })

  it("warns about requested faults that never happened", () => {
    const skipped: RunTypes.SkippedFault = {
      rank: 1,
      fault: "kill",
      spec: { rank: 1, atSeconds: 3 },
      reason: "the run ended after 2.1 s of training"
    }
    expect(Cli.renderResult({ ...completed, skippedFaults: [skipped] }).err).toBe(
      "cohort: warning: --kill 1@3 did not happen: the run ended after 2.1 s of training"
    )
  })

  it("tells the demo's own kill that did not happen as the demo's plan, not as a --kill nobody passed", () => {
    const skipped: RunTypes.SkippedFault = {
      rank: 2,
      fault: "kill",
      spec: { rank: 2, atEpoch: 1, atFraction: 0.4, plan: "demo" },
      reason: "rank 2 had already left"
    }
    expect(Cli.renderResult({ ...completed, skippedFaults: [skipped] }).err).toBe(
      "cohort: note: the demo's planned kill of rank 2 (at 40% of epoch 1) did not happen: rank 2 had already left"
    )
    expect(Cli.eventText({ type: "fault-skipped", ms: 5, skipped })).toBe(
      "the demo's planned kill of rank 2 did not happen: rank 2 had already left"
    )
    expect(Cli.eventText({ type: "fault-skipped", ms: 5, skipped: { ...skipped, spec: { rank: 2, atEpoch: 1, atFraction: 0.4 } } })).toBe(
      "kill of rank 2 did not happen: rank 2 had already left"
    )
  })

  it("a trainer without evaluate: the epoch whose accuracy was pending is told it has none, and later epoch lines say so", () => {
    expect(Cli.eventText({ type: "noEval", ms: 5, epoch: 0, rank: 3 })).toBe(
      "epoch 0 has no test accuracy: rank 3 went on without evaluating (the trainer has no evaluate)"
    )
    expect(Cli.eventText({ type: "epoch", ms: 9, summary: completedEpochs[1]!, accuracy: undefined, noEval: true })).toBe(
      "epoch 1 done: 8000 samples committed, lost 0, duplicated 0, 1 death, test accuracy none (the trainer has no evaluate)"
    )
  })
})

describe("lineView", () => {
  it("prints timestamped lines and at most one progress line per rank per second", () => {
    let text = ""
    const view = Cli.lineView((line) => {
      text += line
    })
    const progress = (ms: number, rank: number, samplesDone: number): RunTypes.RunEvent => ({
      type: "progress",
      ms,
      rank,
      epoch: 0,
      samplesDone,
      samplesPerSecond: 312.4,
      state: "training"
    })
    for (const event of [
      eventsOf(completed)[0]!,
      progress(500, 0, 64),
      progress(900, 0, 96),
      progress(950, 1, 64),
      progress(1500, 0, 160),
      progress(1600, 0, 192),
      { type: "fault", ms: 12_345, rank: 2, fault: "kill" },
      { type: "alert", ms: 12_346, alert: { ...rankLost, count: 3 } },
      { type: "death", ms: 12_346, death: killTiming },
      { type: "decision", ms: 12_346, detail: "rank 2's 1200 samples go to ranks 0, 1, 3" },
      { type: "epoch", ms: 20_000, summary: completedEpochs[1]!, accuracy: undefined },
      { type: "eval", ms: 20_400, epoch: 1, rank: 3, accuracy: 0.93504, loss: 0.21 },
      { type: "ended", ms: 3_002, outcome: unrecoverable.outcome }
    ] satisfies ReadonlyArray<RunTypes.RunEvent>) {
      view.onEvent(event)
    }
    view.stop()
    expect(text).toBe(
      [
        "[   0.0s] run abc123: 4 ranks as worker threads, 3 epochs of 8000 samples, static mode; writing runs/abc123",
        "[   0.5s] rank 0 epoch 0: 64 samples done, 312 samples/s, training",
        "[   0.9s] rank 1 epoch 0: 64 samples done, 312 samples/s, training",
        "[   1.5s] rank 0 epoch 0: 160 samples done, 312 samples/s, training",
        "[  12.3s] rank 2 killed (injected fault)",
        "[  12.3s] alert critical RankLost root/rank2: rank 2 lost: killed by terminate (3 times)",
        "[  12.3s] rank 2 lost (supervisor): killed by terminate; detected 1.3 ms after the fault; 1200 samples moved to the survivors 3.5 ms after the fault",
        "[  12.3s] decision: rank 2's 1200 samples go to ranks 0, 1, 3",
        "[  20.0s] epoch 1 done: 8000 samples committed, lost 0, duplicated 0, 1 death, test accuracy pending",
        "[  20.4s] epoch 1 test accuracy 0.9350 (eval on rank 3, loss 0.2100)",
        "[   3.0s] run ended: unrecoverable (FailureLimitReached): 1 failure reached the failure limit of 1",
        ""
      ].join("\n")
    )
  })
})

describe("lineView: joins", () => {
  it("a welcomed line says what the joiner was given once, not the rank, epoch and round twice; a joiner given the same words gets a short line", () => {
    let text = ""
    const view = Cli.lineView((line) => {
      text += line
    })
    const welcomed = (ms: number, rank: number, samples: number, given: string): RunTypes.RunEvent => ({
      type: "welcomed",
      ms,
      rank,
      epoch: 0,
      firstRound: 3,
      samples,
      given
    })
    const chunks = (rank: number) =>
      `rank ${rank} joins at epoch 0, round 3 onwards (root/rank${rank}): its span and first chunks of epoch 0 now`
    for (const event of [welcomed(1000, 2, 64, chunks(2)), welcomed(1100, 3, 64, chunks(3)), welcomed(1200, 4, 0, "the run's own words")])
      view.onEvent(event)
    expect(text).toBe(
      [
        "[   1.0s] rank 2 joined the running run in epoch 0 (rounds from 3; 64 samples handed at once): its span and first chunks of epoch 0 now",
        "[   1.1s] rank 3 joined the running run in epoch 0 (rounds from 3; 64 samples handed at once)",
        "[   1.2s] rank 4 joined the running run in epoch 0 (rounds from 3; 0 samples handed at once): the run's own words",
        ""
      ].join("\n")
    )
  })
})

describe("barsView", () => {
  it("draws one bar per rank and prints other events above the bars", () => {
    let written = ""
    const stream = {
      isTTY: true,
      columns: 120,
      write: (chunk: string) => {
        written += chunk
        return true
      }
    } as unknown as NodeJS.WritableStream
    const view = Cli.barsView(stream)
    const [started] = eventsOf(completed)
    view.onEvent(started!)
    view.onEvent({ type: "progress", ms: 900, rank: 1, epoch: 0, samplesDone: 640, samplesPerSecond: 700.2, state: "training" })
    view.onEvent({ type: "death", ms: 12_346, death: killTiming })
    view.onEvent({ type: "ended", ms: 41_234, outcome: completed.outcome })
    view.stop()
    const plain = written.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "")
    expect(plain).toContain("[  12.3s] rank 2 lost (supervisor): killed by terminate;")
    expect(plain).toContain("rank 1 [")
    expect(plain).toContain("] 640/2000 samples | epoch 0 | 0 samples/s | done")
    expect(plain).toContain("[  41.2s] run ended: completed")
    expect(plain).toMatch(/rank 2 \[[^\]]*\] 0\/2000 samples \| epoch 0 \| 0 samples\/s \| dead/)
  })

  it("a live rank's bar ends full, at what it trained of the epoch, when the epoch ends: redistributed samples made its part differ from its share", () => {
    let written = ""
    const stream = {
      isTTY: true,
      columns: 120,
      write: (chunk: string) => {
        written += chunk
        return true
      }
    } as unknown as NodeJS.WritableStream
    const view = Cli.barsView(stream)
    const events = eventsOf(completed)
    view.onEvent(events[0]!)
    view.onEvent({ type: "death", ms: 100, death: { ...killTiming, epoch: 0 } })
    // Three live ranks: each bar's total is a third of the epoch, 2667; rank 1 trained 2592 of it,
    // rank 3 more (2741) and rank 0 stopped reporting at 2400 (its last report before the epoch's end).
    view.onEvent({ type: "progress", ms: 900, rank: 1, epoch: 1, samplesDone: 2592, samplesPerSecond: 700, state: "training" })
    view.onEvent({ type: "progress", ms: 900, rank: 3, epoch: 1, samplesDone: 2741, samplesPerSecond: 700, state: "training" })
    view.onEvent({ type: "progress", ms: 900, rank: 0, epoch: 1, samplesDone: 2400, samplesPerSecond: 700, state: "training" })
    view.onEvent({ type: "progress", ms: 950, rank: 0, epoch: 1, samplesDone: 2667, samplesPerSecond: 700, state: "waiting" })
    const epoch1 = events.find((e) => e.type === "epoch" && e.summary.epoch === 1)!
    view.onEvent(epoch1)
    view.onEvent({ type: "ended", ms: 41_234, outcome: completed.outcome })
    view.stop()
    const plain = written.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "")
    const last = (rank: number) =>
      [...plain.matchAll(new RegExp(`rank ${rank} \\[[^\\]]*\\] (\\d+/\\d+) samples \\| epoch (\\d) \\| [^|]*\\| (\\w+)`, "g"))]
        .at(-1)
        ?.slice(1)
    expect([0, 1, 2, 3].map(last)).toEqual([
      ["2667/2667", "1", "done"],
      ["2592/2592", "1", "done"],
      ["0/2000", "0", "dead"],
      ["2741/2741", "1", "done"]
    ])
  })

  it("on a real terminal (xterm.js, headless) every log line reads whole, with no bar text after it, and every rank's bar, a dead one's too, is on the screen at the end", async () => {
    const terminal = new Terminal({ cols: 200, rows: 60, allowProposedApi: true, convertEol: true }) // a tty turns "\n" into "\r\n"
    let pending = Promise.resolve()
    const stream = {
      isTTY: true,
      columns: 200,
      rows: 60,
      write: (chunk: string) => {
        pending = pending.then(() => new Promise<void>((resolve) => terminal.write(chunk, resolve)))
        return true
      },
      on: () => stream,
      removeListener: () => stream
    } as unknown as NodeJS.WritableStream
    const view = Cli.barsView(stream)
    const [started] = eventsOf(completed)
    view.onEvent(started!)
    const lines: Array<RunTypes.RunEvent> = []
    for (let rank = 0; rank < 4; rank++) {
      view.onEvent({ type: "progress", ms: 900, rank, epoch: 0, samplesDone: 1500 + rank, samplesPerSecond: 700, state: "training" })
    }
    // Several short lines at once, as decisions come in a burst, over the longer bar rows.
    for (let i = 0; i < 3; i++) {
      const event: RunTypes.RunEvent = { type: "alert", ms: 1000 + i, alert: { ...rankLost, detail: `short ${i}` } }
      lines.push(event)
      view.onEvent(event)
    }
    await new Promise((resolve) => setTimeout(resolve, 150)) // cli-progress redraws on its own timer
    view.onEvent({ type: "death", ms: 12_346, death: killTiming })
    view.onEvent({ type: "ended", ms: 41_234, outcome: completed.outcome })
    view.stop()
    await pending
    const screen: Array<string> = []
    for (let row = 0; row < terminal.buffer.active.length; row++) screen.push(terminal.buffer.active.getLine(row)!.translateToString(true))
    for (const event of lines) expect(screen).toContain(`[${(event.ms / 1000).toFixed(1).padStart(6)}s] ${Cli.eventText(event)}`)
    expect(screen.filter((row) => row.startsWith("["))).toEqual(screen.filter((row) => /^\[ *\d+\.\ds\] [^\]]*$/.test(row)))
    const bars = screen.filter((row) => row.startsWith("rank "))
    expect(bars.map((row) => row.replace(/\[[^\]]*\]/, "[]"))).toEqual([
      "rank 0 [] 1500/2000 samples | epoch 0 | 0 samples/s | done",
      "rank 1 [] 1501/2000 samples | epoch 0 | 0 samples/s | done",
      "rank 2 [] 1502/2000 samples | epoch 0 | 0 samples/s | dead",
      "rank 3 [] 1503/2000 samples | epoch 0 | 0 samples/s | done"
    ])
    terminal.dispose()
  })
})

describe("hints print the command the way it was started", () => {
  const started = (script: string, runtime: "node" | "bun" | "deno", viaNpx = false) =>
    Cli.commandOf({ script, cwd: "/home/me/cohort", runtime, viaNpx })

  it("npx cohort, cohort, bun --bun x cohort, deno run -A npm:cohort, node bin/cohort.mjs, npx bun ..., deno run -A ...; the entry relative to the current folder when inside it", () => {
    expect(started("/home/me/cohort/node_modules/.bin/cohort", "node", true)).toBe("npx cohort")
    expect(started("/usr/local/bin/cohort", "node")).toBe("cohort")
    expect(started("/home/me/cohort/node_modules/.bin/cohort", "bun", true)).toBe("bun --bun x cohort")
    expect(started("/home/me/cohort/node_modules/.bin/cohort", "deno")).toBe("deno run -A npm:cohort")
    expect(started("/home/me/cohort/bin/cohort.mjs", "node")).toBe("node bin/cohort.mjs")
    expect(started("/home/me/cohort/bin/cohort.mjs", "bun", true)).toBe("npx bun bin/cohort.mjs")
    expect(started("/home/me/cohort/bin/cohort.mjs", "bun")).toBe("bun bin/cohort.mjs")
    expect(started("/home/me/cohort/bin/cohort.mjs", "deno", true)).toBe("npx deno run -A bin/cohort.mjs")
    expect(started("/opt/my tools/bin/cohort.mjs", "node")).toBe("node '/opt/my tools/bin/cohort.mjs'")
  })

  it("the stop line's resume command and the failure line use it", () => {
    expect(Cli.renderResult(unrecoverable, "runs/x", "npx cohort").err).toMatch(/; resume with: npx cohort resume runs\/x$/)
    expect(Cli.resumeCommand("runs/x", "node bin/cohort.mjs")).toBe("node bin/cohort.mjs resume runs/x")
    expect(Cli.failureLine({ stage: "run", reason: "oops", formed: true }, "runs/x", "npx cohort")).toBe(
      "cohort: the run failed: run: oops; if it saved a checkpoint, resume it from there with: npx cohort resume runs/x"
    )
  })
})
