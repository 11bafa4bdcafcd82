// The command line's parsing, its bad-input lines (exit code 2) and its help (split from test/cli.test.ts).
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import * as Cli from "../../src/cli/index.ts"
import * as Runtime from "../../src/platform/detect.ts"
import { runMain, useScratch } from "./fixtures.ts"

const scratch = useScratch()

describe("parse", () => {
  it("fills every default of demo, including the default kill of rank 2 at 40% of epoch 1", () => {
    expect(Cli.parse(["demo"])).toEqual({
      command: "demo",
      options: {
        trainer: undefined,
        worldSize: 4,
        epochs: 3,
        mode: "static",
        backend: "cpu",
        transport: "worker",
        kills: [{ rank: 2, atEpoch: 1, atFraction: 0.4, plan: "demo" }],
        hangs: [],
        heartbeatTimeoutMs: 10_000,
        coordinatorTimeoutMs: 10_000,
        failureLimit: undefined,
        rolePolicy: "fastest",
        onRepeatedCrash: "stop",
        rankMemoryMb: 1024,
        interruptGraceMs: 30_000,
        livenessDetector: "fixed",
        seed: 1,
        outDir: "runs",
        json: false
      }
    })
  })

  it("reads every flag of demo", () => {
    const parsed = Cli.parse([
      "demo",
      "--world-size",
      "6",
      "--epochs",
      "2",
      "--mode",
      "progressive",
      "--backend",
      "ring",
      "--transport",
      "process",
      "--kill",
      "5@2.5",
      "--hang",
      "1@5",
      "--heartbeat-timeout-ms",
      "2000",
      "--coordinator-timeout-ms",
      "4000",
      "--failure-limit",
      "0.5",
      "--role-policy",
      "3",
      "--on-repeated-crash",
      "continue",
      "--rank-memory-mb",
      "64",
      "--interrupt-grace-ms",
      "5000",
      "--save-timeout-ms",
      "30000",
      "--eval-timeout-ms",
      "20000",
      "--liveness",
      "adaptive",
      "--seed",
      "42",
      "--out",
      "/tmp/my-runs",
      "--json",
      "--dashboard",
      "8080",
      "--dashboard-connections-max",
      "64"
    ])
    expect(parsed).toEqual({
      command: "demo",
      options: {
        trainer: undefined,
        worldSize: 6,
        epochs: 2,
        mode: "progressive",
        backend: "ring",
        transport: "process",
        kills: [{ rank: 5, atSeconds: 2.5 }],
        hangs: [{ rank: 1, atSeconds: 5 }],
        heartbeatTimeoutMs: 2000,
        coordinatorTimeoutMs: 4000,
        failureLimit: { fraction: 0.5 },
        rolePolicy: { rank: 3 },
        onRepeatedCrash: "continue",
        rankMemoryMb: 64,
        interruptGraceMs: 5000,
        saveTimeoutMs: 30_000,
        evalTimeoutMs: 20_000,
        livenessDetector: "adaptive",
        seed: 42,
        outDir: "/tmp/my-runs",
        json: true,
        dashboard: { port: 8080, faults: false, connectionsMax: 64 }
      }
    })
  })

  it("accepts --flag=value as well as --flag value", () => {
    expect(Cli.parse(["demo", "--world-size=2", "--kill=1@3"])).toMatchObject({
      options: { worldSize: 2, kills: [{ rank: 1, atSeconds: 3 }] }
    })
  })

  it("--kill and --hang take seconds bare or with s, or milliseconds with ms", () => {
    expect(
      Cli.parse(["demo", "--kill", "1@500ms", "--kill", "2@2s", "--kill", "3@1.5", "--hang", "0@250ms", "--hang", "1@.5s"])
    ).toMatchObject({
      options: {
        kills: [
          { rank: 1, atSeconds: 0.5 },
          { rank: 2, atSeconds: 2 },
          { rank: 3, atSeconds: 1.5 }
        ],
        hangs: [
          { rank: 0, atSeconds: 0.25 },
          { rank: 1, atSeconds: 0.5 }
        ]
      }
    })
    expect(Cli.parse(["demo", "--kill", "1@2m"])).toEqual({
      error: "--kill expects RANK@SECONDS (e.g. 2@5, 2@1.5s or 2@500ms), got '1@2m'"
    })
    expect(Cli.parse(["demo", "--kill", "1@-5ms"])).toEqual({ error: "--kill 1@-5ms: seconds must be >= 0" })
  })

  it("collects repeated --kill and --hang in order; --kill replaces the default kill", () => {
    expect(Cli.parse(["demo", "--kill", "1@3", "--kill", "3@0", "--hang", "0@1", "--hang", "2@7.25"])).toMatchObject({
      options: {
        kills: [
          { rank: 1, atSeconds: 3 },
          { rank: 3, atSeconds: 0 }
        ],
        hangs: [
          { rank: 0, atSeconds: 1 },
          { rank: 2, atSeconds: 7.25 }
        ]
      }
    })
  })

  it("reads --dashboard [PORT] and --dashboard-faults, which needs --dashboard", () => {
    expect(Cli.parse(["demo"])).toMatchObject({ options: { dashboard: undefined } })
    expect(Cli.parse(["demo", "--dashboard"])).toMatchObject({ options: { dashboard: { port: 0, faults: false } } })
    expect(Cli.parse(["run", "--trainer", "t.ts", "--dashboard", "8123", "--dashboard-faults"])).toMatchObject({
      options: { dashboard: { port: 8123, faults: true } }
    })
    expect(Cli.parse(["demo", "--dashboard-faults"])).toEqual({
      error: "--dashboard-faults goes with --dashboard (it adds kill buttons to the page)"
    })
    expect(Cli.parse(["demo", "--dashboard", "70000"])).toEqual({ error: "--dashboard PORT must be at most 65535, got '70000'" })
    expect(Cli.parse(["demo", "--dashboard", "x"])).toEqual({ error: "--dashboard must be an integer >= 0, got 'x'" })
  })

  it("serve refuses --dashboard-faults: its ranks are not this process's", async () => {
    const err: Array<string> = []
    const io = { out: () => {}, err: (text: string) => void err.push(text), isTerminal: false, progressStream: () => process.stderr }
    expect(await Cli.main(["serve", "--dashboard", "--dashboard-faults"], io)).toBe(2)
    expect(err).toEqual(["cohort: serve: --dashboard-faults needs ranks this process started (demo, run); served ranks run elsewhere\n"])
  })

  it("--ring-area-mb takes an integer from 0 to 65536 with the ring backend, and is absent (the launcher's default) without it", () => {
    expect(Cli.parse(["demo", "--backend", "ring", "--transport", "process", "--ring-area-mb", "0"])).toMatchObject({
      options: { ringAreaMemoryMb: 0 }
    })
    expect(Cli.parse(["demo", "--backend", "ring", "--ring-area-mb", "64"])).toMatchObject({ options: { ringAreaMemoryMb: 64 } })
    expect(Cli.parse(["demo", "--backend", "ring"])).not.toHaveProperty("options.ringAreaMemoryMb")
    expect(Cli.parse(["demo", "--backend", "ring", "--ring-area-mb", "-1"])).toEqual({
      error: "--ring-area-mb must be an integer >= 0, got '-1'"
    })
    expect(Cli.parse(["demo", "--backend", "ring", "--ring-area-mb", "70000"])).toEqual({
      error: "--ring-area-mb must be at most 65536, got '70000'"
    })
    expect(Cli.parse(["demo", "--ring-area-mb", "0"])).toEqual({ error: "--ring-area-mb goes with --backend ring" })
  })

  it("--ring-links takes direct or relay with the ring backend, and is absent (direct) without it", () => {
    expect(Cli.parse(["demo", "--backend", "ring", "--transport", "process", "--ring-links", "relay"])).toMatchObject({
      options: { ringLinks: "relay", transport: "process" }
    })
    expect(Cli.parse(["demo", "--backend", "ring"])).not.toHaveProperty("options.ringLinks")
    expect(Cli.parse(["demo", "--backend", "ring", "--ring-links", "mesh"])).toEqual({
      error: "--ring-links must be direct or relay, got 'mesh'"
    })
    expect(Cli.parse(["demo", "--ring-links", "relay"])).toEqual({ error: "--ring-links goes with --backend ring" })
  })

  it("--round-deadline-ms takes an integer >= 1 with the cpu backend, and is off without it", () => {
    expect(Cli.parse(["demo", "--round-deadline-ms", "250"])).toMatchObject({ options: { roundDeadlineMs: 250 } })
    expect(Cli.parse(["run", "--trainer", "t.ts"])).not.toHaveProperty("options.roundDeadlineMs")
    expect(Cli.parse(["demo", "--round-deadline-ms", "0"])).toEqual({ error: "--round-deadline-ms must be an integer >= 1, got '0'" })
    expect(Cli.parse(["demo", "--backend", "ring", "--round-deadline-ms", "250"])).toEqual({
      error: "--round-deadline-ms needs --backend cpu: a ring round is one collective of every member"
    })
    expect(Cli.parse(["demo", "--round-deadline-ms", "250", "--round-quorum", "0.75"])).toMatchObject({
      options: { roundDeadlineMs: 250, roundQuorum: 0.75 }
    })
    expect(Cli.parse(["demo", "--round-deadline-ms", "250", "--round-quorum", "1"])).toMatchObject({ options: { roundQuorum: 1 } })
    for (const bad of ["0", "1.5", "half", "-0.5"]) {
      expect(Cli.parse(["demo", "--round-deadline-ms", "250", "--round-quorum", bad])).toEqual({
        error: `--round-quorum must be a fraction above 0, at most 1, got '${bad}'`
      })
    }
    expect(Cli.parse(["demo", "--round-quorum", "0.5"])).toEqual({ error: "--round-quorum goes with --round-deadline-ms" })
  })

  it("--round-silence-ms (cpu backend), --blocking-silence-ms and --blocking-quiet-max reach the run's options", () => {
    expect(Cli.parse(["run", "--trainer", "t.ts"])).not.toHaveProperty("options.silence")
    const parsed = Cli.parse(["demo", "--round-silence-ms", "300", "--blocking-silence-ms", "750", "--blocking-quiet-max", "0.3"])
    expect(parsed).toMatchObject({ options: { silence: { roundSilenceMs: 300, blockingSilenceMs: 750, blockingSilenceQuietMax: 0.3 } } })
    const isRun = "options" in parsed && parsed.options !== undefined && "epochs" in parsed.options && "mode" in parsed.options
    expect(isRun).toBe(true)
    if (isRun) {
      expect(Cli.sharedRunOptions(parsed.options)).toMatchObject({
        roundSilenceMs: 300,
        blockingSilenceMs: 750,
        blockingSilenceQuietMax: 0.3
      })
    }
    expect(Cli.parse(["demo", "--backend", "ring", "--blocking-silence-ms", "750"])).toMatchObject({
      options: { silence: { blockingSilenceMs: 750 } }
    })
    expect(Cli.parse(["demo", "--backend", "ring", "--round-silence-ms", "300"])).toEqual({
      error: "--round-silence-ms needs --backend cpu: a ring round is one collective of every member"
    })
    expect(Cli.parse(["demo", "--blocking-silence-ms", "0"])).toEqual({ error: "--blocking-silence-ms must be an integer >= 1, got '0'" })
    expect(Cli.parse(["demo", "--blocking-quiet-max", "0.5"])).toEqual({ error: "--blocking-quiet-max goes with --blocking-silence-ms" })
    expect(Cli.parse(["demo", "--blocking-silence-ms", "750", "--blocking-quiet-max", "2"])).toEqual({
      error: "--blocking-quiet-max must be a fraction above 0, at most 1, got '2'"
    })
  })

  it("--aggregate takes mean, median, trimmed-mean[:F] or clip:N, --clip-norm goes with any rule, and robust rules need the cpu backend", () => {
    expect(Cli.parse(["run", "--trainer", "t.ts"])).not.toHaveProperty("options.aggregation")
    expect(Cli.parse(["demo", "--aggregate", "median"])).toMatchObject({ options: { aggregation: { aggregate: "median" } } })
    expect(Cli.parse(["demo", "--aggregate", "trimmed-mean"])).toMatchObject({ options: { aggregation: { aggregate: "trimmed-mean" } } })
    expect(Cli.parse(["demo", "--aggregate", "trimmed-mean:0.2", "--clip-norm", "5", "--outlier-rounds-max", "3"])).toMatchObject({
      options: { aggregation: { aggregate: "trimmed-mean", trimFraction: 0.2, clipNorm: 5, outlierRoundsMax: 3 } }
    })
    expect(Cli.parse(["demo", "--aggregate", "clip:2.5"])).toMatchObject({ options: { aggregation: { aggregate: "mean", clipNorm: 2.5 } } })
    for (const bad of ["mode", "trimmed-mean:0.5", "trimmed-mean:x", "clip:0", "clip:", "median:1"]) {
      expect(Cli.parse(["demo", "--aggregate", bad])).toEqual({
        error: `--aggregate must be mean, median, trimmed-mean, trimmed-mean:F (0 <= F < 0.5) or clip:N (N > 0), got '${bad}'`
      })
    }
    expect(Cli.parse(["demo", "--clip-norm", "-1"])).toEqual({ error: "--clip-norm must be a number above 0, got '-1'" })
    expect(Cli.parse(["demo", "--aggregate", "clip:1", "--clip-norm", "2"])).toEqual({
      error: "--clip-norm cannot be used with --aggregate clip:N (it says the norm already)"
    })
    expect(Cli.parse(["demo", "--backend", "ring", "--aggregate", "median"])).toEqual({
      error: "--aggregate and --clip-norm need --backend cpu: ring members average among themselves"
    })
  })

  it("--compress takes none, fp16 or int8, with either backend", () => {
    expect(Cli.parse(["demo"])).not.toHaveProperty("options.compress")
    expect(Cli.parse(["demo", "--compress", "int8"])).toMatchObject({ options: { compress: "int8" } })
    expect(Cli.parse(["demo", "--compress", "fp16"])).toMatchObject({ options: { compress: "fp16" } })
    expect(Cli.parse(["demo", "--compress", "int4"])).toEqual({ error: "--compress must be none, fp16 or int8, got 'int4'" })
    expect(Cli.parse(["demo", "--backend", "ring", "--compress", "int8"])).toMatchObject({ options: { backend: "ring", compress: "int8" } })
  })

  it("--deltas takes on or off with the cpu backend; without it the run's default holds", () => {
    expect(Cli.parse(["demo"])).not.toHaveProperty("options.deltas")
    expect(Cli.parse(["demo", "--compress", "int8", "--deltas", "off"])).toMatchObject({ options: { compress: "int8", deltas: false } })
    expect(Cli.parse(["demo", "--deltas", "on"])).toMatchObject({ options: { deltas: true } })
    expect(Cli.parse(["demo", "--deltas", "yes"])).toEqual({ error: "--deltas must be on or off, got 'yes'" })
    expect(Cli.parse(["demo", "--backend", "ring", "--deltas", "on"])).toEqual({
      error: "--deltas on needs --backend cpu: ring members average their parameters"
    })
  })

  it("--outer-lr and --outer-momentum take a rate above 0 and a momentum in [0, 1), with the cpu backend", () => {
    expect(Cli.parse(["demo"])).not.toHaveProperty("options.outer")
    expect(Cli.parse(["demo", "--outer-lr", "0.7", "--outer-momentum", "0.9"])).toMatchObject({
      options: { outer: { outerLr: 0.7, outerMomentum: 0.9 } }
    })
    expect(Cli.parse(["demo", "--outer-lr", "0"])).toEqual({ error: "--outer-lr must be a number above 0, got '0'" })
    expect(Cli.parse(["demo", "--outer-momentum", "1"])).toEqual({ error: "--outer-momentum must be a number from 0 to below 1, got '1'" })
    expect(Cli.parse(["demo", "--backend", "ring", "--outer-lr", "0.7"])).toEqual({
      error: "--outer-lr and --outer-momentum need --backend cpu: the coordinator applies the outer step"
    })
  })

  it("--no-kill removes the demo's kill", () => {
    expect(Cli.parse(["demo", "--no-kill"])).toMatchObject({ options: { kills: [] } })
  })

  it("moves the demo's kill to the last rank and epoch for small runs, and drops it for one rank", () => {
    expect(Cli.parse(["demo", "--world-size", "2", "--epochs", "1"])).toMatchObject({
      options: { kills: [{ rank: 1, atEpoch: 0, atFraction: 0.4, plan: "demo" }] }
    })
    expect(Cli.parse(["demo", "--world-size", "3"])).toMatchObject({
      options: { kills: [{ rank: 2, atEpoch: 1, atFraction: 0.4, plan: "demo" }] }
    })
    expect(Cli.parse(["demo", "--world-size", "1"])).toMatchObject({ options: { kills: [] } })
  })

  it("run takes --trainer and has no default kill", () => {
    expect(Cli.parse(["run", "--trainer", "./my-trainer.ts", "--epochs", "1"])).toEqual({
      command: "run",
      options: {
        trainer: "./my-trainer.ts",
        worldSize: 4,
        epochs: 1,
        mode: "static",
        backend: "cpu",
        transport: "worker",
        kills: [],
        hangs: [],
        heartbeatTimeoutMs: 10_000,
        coordinatorTimeoutMs: 10_000,
        failureLimit: undefined,
        rolePolicy: "fastest",
        onRepeatedCrash: "stop",
        rankMemoryMb: 1024,
        interruptGraceMs: 30_000,
        livenessDetector: "fixed",
        seed: 1,
        outDir: "runs",
        json: false
      }
    })
  })

  it("reads --failure-limit as a count (integer >= 0) or a fraction in (0, 1)", () => {
    const limit = (text: string) => {
      const parsed = Cli.parse(["demo", "--failure-limit", text])
      return "options" in parsed && (parsed.command === "demo" || parsed.command === "run") ? parsed.options.failureLimit : parsed
    }
    expect(limit("1")).toEqual({ absolute: 1 })
    expect(limit("0")).toEqual({ absolute: 0 })
    expect(limit("12")).toEqual({ absolute: 12 })
    expect(limit("0.5")).toEqual({ fraction: 0.5 })
    expect(limit(".25")).toEqual({ fraction: 0.25 })
    for (const bad of ["1.5", "1.0", "-1", "0.0", "half", ""]) {
      expect(limit(bad)).toEqual({
        error: `--failure-limit must be an integer >= 0 or a fraction between 0 and 1, got '${bad}'`
      })
    }
  })

  it("reads --role-policy as fastest or a rank", () => {
    expect(Cli.parse(["demo", "--role-policy", "fastest"])).toMatchObject({ options: { rolePolicy: "fastest" } })
    expect(Cli.parse(["demo", "--role-policy", "0"])).toMatchObject({ options: { rolePolicy: { rank: 0 } } })
    expect(Cli.parse(["demo", "--role-policy", "slowest"])).toEqual({
      error: "--role-policy must be fastest or a rank (an integer >= 0), got 'slowest'"
    })
    expect(Cli.parse(["demo", "--role-policy", "9"])).toEqual({ error: "--role-policy 9: rank 9 is out of range for 4 ranks (0 to 3)" })
    expect(Cli.parse(["demo", "--world-size", "1", "--role-policy", "1"])).toEqual({
      error: "--role-policy 1: rank 1 is out of range for 1 rank (0 to 0)"
    })
  })

  it("reads report with its run directory and --json", () => {
    const plain = { html: false, outFile: undefined }
    expect(Cli.parse(["report", "runs/abc"])).toEqual({
      command: "report",
      options: { runDir: "runs/abc", json: false, fileBytesMax: 268_435_456, ...plain }
    })
    expect(Cli.parse(["report", "--json", "runs/abc"])).toEqual({
      command: "report",
      options: { runDir: "runs/abc", json: true, fileBytesMax: 268_435_456, ...plain }
    })
    expect(Cli.parse(["report", "--file-bytes-max", "1000", "runs/abc"])).toEqual({
      command: "report",
      options: { runDir: "runs/abc", json: false, fileBytesMax: 1000, ...plain }
    })
  })

  it("reads report --html with --out FILE, and refuses --out without --html and --html with --json", () => {
    expect(Cli.parse(["report", "--html", "runs/abc"])).toEqual({
      command: "report",
      options: { runDir: "runs/abc", json: false, fileBytesMax: 268_435_456, html: true, outFile: undefined }
    })
    expect(Cli.parse(["report", "--html", "--out", "page.html", "runs/abc"])).toEqual({
      command: "report",
      options: { runDir: "runs/abc", json: false, fileBytesMax: 268_435_456, html: true, outFile: "page.html" }
    })
    expect(Cli.parse(["report", "--out", "page.html", "runs/abc"])).toEqual({
      error: "report: --out FILE goes with --html (the summary is printed)"
    })
    expect(Cli.parse(["report", "--html", "--json", "runs/abc"])).toEqual({ error: "report: --html and --json exclude each other" })
  })

  it("reads help, -h, --help and no arguments as help", () => {
    for (const argv of [[], ["help"], ["--help"], ["-h"], ["demo", "--help"], ["report", "-h"]]) {
      expect(Cli.parse(argv)).toEqual({ command: "help" })
    }
  })

  it("reads --rank-memory-mb 0 as no limit", () => {
    expect(Cli.parse(["demo", "--rank-memory-mb", "0"])).toMatchObject({ options: { rankMemoryMb: 0 } })
  })
})

// ---------------------------------------------------------------------------------------------
// Bad input: one line on stderr, exit code 2
// ---------------------------------------------------------------------------------------------

describe("parse resume", () => {
  it("takes the run directory and leaves every option not given undefined (the parent's), faults none", () => {
    expect(Cli.parse(["resume", "runs/abc"])).toEqual({
      command: "resume",
      options: {
        runDir: "runs/abc",
        trainer: undefined,
        worldSize: undefined,
        transport: undefined,
        kills: [],
        hangs: [],
        heartbeatTimeoutMs: undefined,
        coordinatorTimeoutMs: undefined,
        failureLimit: undefined,
        rankMemoryMb: undefined,
        interruptGraceMs: undefined,
        outDir: undefined,
        json: false,
        dashboard: undefined
      }
    })
  })

  it("reads every flag of resume", () => {
    const parsed = Cli.parse([
      "resume",
      "runs/abc",
      "--world-size",
      "3",
      "--transport",
      "process",
      "--kill",
      "1@2",
      "--hang",
      "2@4.5",
      "--heartbeat-timeout-ms",
      "5000",
      "--coordinator-timeout-ms",
      "3000",
      "--failure-limit",
      "2",
      "--rank-memory-mb",
      "0",
      "--interrupt-grace-ms",
      "0",
      "--trainer",
      "t.ts",
      "--out",
      "elsewhere",
      "--json",
      "--dashboard",
      "8123",
      "--dashboard-faults"
    ])
    expect(parsed).toEqual({
      command: "resume",
      options: {
        runDir: "runs/abc",
        trainer: "t.ts",
        worldSize: 3,
        transport: "process",
        kills: [{ rank: 1, atSeconds: 2 }],
        hangs: [{ rank: 2, atSeconds: 4.5 }],
        heartbeatTimeoutMs: 5000,
        coordinatorTimeoutMs: 3000,
        failureLimit: { absolute: 2 },
        rankMemoryMb: 0,
        interruptGraceMs: 0,
        outDir: "elsewhere",
        json: true,
        dashboard: { port: 8123, faults: true }
      }
    })
    expect(Cli.parse(["resume", "runs/abc", "--dashboard"])).toMatchObject({ options: { dashboard: { port: 0, faults: false } } })
  })

  it("refuses what a resume cannot change or read, in one line", () => {
    expect(Cli.parse(["resume"])).toEqual({ error: "missing required argument 'RUN_DIR'" })
    expect(Cli.parse(["resume", "runs/abc", "--unknown", "5"])).toEqual({ error: "unknown option '--unknown'" })
    expect(Cli.parse(["resume", "runs/abc", "--world-size", "0"])).toEqual({ error: "--world-size must be an integer >= 1, got '0'" })
    expect(Cli.parse(["resume", "runs/abc", "--world-size", "2", "--kill", "2@1"])).toEqual({
      error: "--kill 2@1: rank 2 is out of range for 2 ranks (0 to 1)"
    })
    expect(Cli.parse(["resume", "runs/abc", "--transport", "socket"])).toEqual({
      error: "--transport must be worker or process, got 'socket'"
    })
    expect(Cli.parse(["resume", "runs/abc", "--out", ""])).toEqual({ error: "--out needs a folder path" })
    expect(Cli.parse(["resume", "runs/abc", "--dashboard-faults"])).toEqual({
      error: "--dashboard-faults goes with --dashboard (it adds kill buttons to the page)"
    })
    expect(Cli.parse(["resume", "runs/abc", "--dashboard", "70000"])).toEqual({
      error: "--dashboard PORT must be at most 65535, got '70000'"
    })
  })

  it("refuses the run flags whose values are the parent's, saying that resume keeps them and why", () => {
    expect(Cli.parse(["resume", "runs/abc", "--seed", "3"])).toEqual({
      error:
        "resume: --seed cannot be given: resume keeps the parent's seed: the model's initialisation and every epoch's sample order come from it, and the samples the parent committed are those of that order"
    })
    expect(Cli.parse(["resume", "runs/abc", "--epochs", "5"])).toEqual({
      error:
        "resume: --epochs cannot be given: resume keeps the parent's number of epochs: the resumed run trains the rest of the parent's epochs"
    })
    expect(Cli.parse(["resume", "runs/abc", "--no-kill"])).toEqual({
      error: "resume: --no-kill cannot be given: resume injects no fault unless --kill or --hang is given: there is no kill to remove"
    })
    for (const [flag, value] of [
      ["--mode", "progressive"],
      ["--backend", "ring"],
      ["--role-policy", "1"],
      ["--on-repeated-crash", "continue"]
    ] as const) {
      expect((Cli.parse(["resume", "runs/abc", flag, value]) as { error: string }).error).toMatch(
        new RegExp(`^resume: ${flag} cannot be given: resume keeps the parent's `)
      )
    }
    // --kill still works beside the refused flags' options.
    expect(Cli.parse(["resume", "runs/abc", "--kill", "1@2"])).toMatchObject({ options: { kills: [{ rank: 1, atSeconds: 2 }] } })
  })

  it("resumeCommand quotes a directory only when a shell needs it", () => {
    expect(Cli.resumeCommand("runs/abc")).toBe("cohort resume runs/abc")
    expect(Cli.resumeCommand("/tmp/my runs/it's")).toBe(`cohort resume '/tmp/my runs/it'\\''s'`)
  })
})

describe("bad input gives one line on stderr and exit code 2", () => {
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, string]> = [
    ["an unknown flag", ["demo", "--bogus"], "cohort: unknown option '--bogus'"],
    ["a misspelt flag", ["demo", "--wrold-size", "3"], "cohort: unknown option '--wrold-size' (did you mean --world-size?)"],
    ["an unknown flag before the command", ["--verbose", "demo"], "cohort: unknown option '--verbose'"],
    ["an unknown command", ["train"], "cohort: unknown command 'train'"],
    ["a misspelt command", ["dmeo"], "cohort: unknown command 'dmeo' (did you mean demo?)"],
    ["an extra argument", ["demo", "now"], "cohort: too many arguments for 'demo'. Expected 0 arguments but got 1."],
    ["a flag without its value", ["demo", "--world-size"], "cohort: option '--world-size <n>' argument missing"],
    [
      "a flag without its value, before another flag",
      ["demo", "--world-size", "--epochs", "2"],
      "cohort: option '--world-size <n>' argument missing ('--epochs' is the next flag)"
    ],
    [
      "a repeatable flag without its value, before another flag",
      ["demo", "--kill", "--epochs", "2"],
      "cohort: option '--kill <spec>' argument missing ('--epochs' is the next flag)"
    ],
    [
      "join: --ring-advertise without its value, before --ring-listen",
      ["join", "ws://127.0.0.1:7070", "--ring-advertise", "--ring-listen", "0.0.0.0:7300"],
      "cohort: option '--ring-advertise <host>' argument missing ('--ring-listen' is the next flag)"
    ],
    [
      "serve: --listen without its value, before another flag",
      ["serve", "--listen", "--min-ranks", "2"],
      "cohort: option '--listen <host:port>' argument missing ('--min-ranks' is the next flag)"
    ],
    ["--world-size 0", ["demo", "--world-size", "0"], "cohort: --world-size must be an integer >= 1, got '0'"],
    ["--world-size 2.5", ["demo", "--world-size", "2.5"], "cohort: --world-size must be an integer >= 1, got '2.5'"],
    [
      "--world-size 1025",
      ["demo", "--world-size", "1025"],
      "cohort: --world-size must be at most 1024 (the ranks one machine starts), got '1025'"
    ],
    ["--epochs 0", ["demo", "--epochs", "0"], "cohort: --epochs must be an integer >= 1, got '0'"],
    ["--kill 9@1 with 4 ranks", ["demo", "--kill", "9@1"], "cohort: --kill 9@1: rank 9 is out of range for 4 ranks (0 to 3)"],
    [
      "--kill of a rank that --world-size leaves out",
      ["demo", "--world-size", "2", "--kill", "2@1"],
      "cohort: --kill 2@1: rank 2 is out of range for 2 ranks (0 to 1)"
    ],
    ["--kill -1@1", ["demo", "--kill", "-1@1"], "cohort: --kill -1@1: rank -1 is out of range for 4 ranks (0 to 3)"],
    ["a malformed --kill", ["demo", "--kill", "two@1"], "cohort: --kill expects RANK@SECONDS (e.g. 2@5, 2@1.5s or 2@500ms), got 'two@1'"],
    ["a --kill without seconds", ["demo", "--kill", "2"], "cohort: --kill expects RANK@SECONDS (e.g. 2@5, 2@1.5s or 2@500ms), got '2'"],
    ["negative seconds", ["demo", "--kill", "2@-1"], "cohort: --kill 2@-1: seconds must be >= 0"],
    ["a --hang out of range", ["demo", "--hang", "4@5"], "cohort: --hang 4@5: rank 4 is out of range for 4 ranks (0 to 3)"],
    ["a malformed --hang", ["demo", "--hang", "1@soon"], "cohort: --hang expects RANK@SECONDS (e.g. 2@5, 2@1.5s or 2@500ms), got '1@soon'"],
    ["--kill with --no-kill", ["demo", "--no-kill", "--kill", "1@2"], "cohort: --kill cannot be used with --no-kill"],
    ["a bad mode", ["demo", "--mode", "fast"], "cohort: --mode must be static or progressive, got 'fast'"],
    ["a bad transport", ["demo", "--transport", "tcp"], "cohort: --transport must be worker, process or websocket, got 'tcp'"],
    ["a bad backend", ["demo", "--backend", "gpu"], "cohort: --backend must be cpu or ring, got 'gpu'"],
    [
      "a ring of one rank",
      ["demo", "--backend", "ring", "--world-size", "1"],
      "cohort: --backend ring needs --world-size 2 or more (the ranks average among themselves), got 1"
    ],
    [
      "a zero heartbeat timeout",
      ["demo", "--heartbeat-timeout-ms", "0"],
      "cohort: --heartbeat-timeout-ms must be an integer >= 1, got '0'"
    ],
    [
      "a zero coordinator timeout",
      ["demo", "--coordinator-timeout-ms", "0"],
      "cohort: --coordinator-timeout-ms must be an integer >= 1, got '0'"
    ],
    [
      "a failure limit above 1 that is not an integer",
      ["demo", "--failure-limit", "1.5"],
      "cohort: --failure-limit must be an integer >= 0 or a fraction between 0 and 1, got '1.5'"
    ],
    [
      "a bad --on-repeated-crash",
      ["demo", "--on-repeated-crash", "retry"],
      "cohort: --on-repeated-crash must be stop or continue, got 'retry'"
    ],
    ["a rank memory limit below 16 MiB", ["demo", "--rank-memory-mb", "8"], "cohort: --rank-memory-mb must be an integer >= 16, got '8'"],
    [
      "a rank memory limit that is not an integer",
      ["demo", "--rank-memory-mb", "1.5"],
      "cohort: --rank-memory-mb must be an integer >= 16, got '1.5'"
    ],
    ["a negative seed", ["demo", "--seed", "-1"], "cohort: --seed must be an integer from 0 to 4294967295, got '-1'"],
    ["a seed above 32 bits", ["demo", "--seed", "4294967296"], "cohort: --seed must be an integer from 0 to 4294967295, got '4294967296'"],
    ["an empty --out", ["demo", "--out", ""], "cohort: --out needs a folder path"],
    ["run without --trainer", ["run"], "cohort: run needs --trainer FILE"],
    ["--trainer on demo", ["demo", "--trainer", "x.ts"], "cohort: unknown option '--trainer'"],
    ["report without RUN_DIR", ["report"], "cohort: missing required argument 'RUN_DIR'"],
    [
      "report --file-bytes-max 0",
      ["report", "--file-bytes-max", "0", "runs/x"],
      "cohort: --file-bytes-max must be an integer >= 1, got '0'"
    ]
  ]

  for (const [name, argv, message] of cases) {
    it(name, async () => {
      const { code, out, err } = await runMain(argv)
      expect({ code, out, err }).toEqual({ code: 2, out: "", err: `${message}\n` })
    })
  }

  it("a missing trainer file", async () => {
    const { code, out, err } = await runMain(["run", "--trainer", `${scratch()}/nowhere.ts`])
    expect({ code, out, err }).toEqual({ code: 2, out: "", err: `cohort: trainer file not found: ${scratch()}/nowhere.ts\n` })
  })

  it("a trainer that does not export the factory", async () => {
    const { code, out, err } = await runMain(["run", "--trainer", `${scratch()}/no-factory.mjs`])
    expect({ code, out, err }).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${scratch()}/no-factory.mjs: the trainer module does not export createTrainer\n`
    })
  })

  it("a trainer that does not load", async () => {
    const { code, out, err } = await runMain(["run", "--trainer", `${scratch()}/broken-trainer.mjs`])
    expect(code).toBe(2)
    expect(out).toBe("")
    expect(err).toMatch(new RegExp(`^cohort: cannot import the trainer module ${scratch()}/broken-trainer\\.mjs: .+\\n$`))
  })

  it("a missing run directory for report", async () => {
    const { code, out, err } = await runMain(["report", `${scratch()}/no-such-run`])
    expect({ code, out, err }).toEqual({ code: 2, out: "", err: `cohort: no run directory at ${scratch()}/no-such-run\n` })
  })

  it("a folder that is not a run directory for report", async () => {
    const { code, out, err } = await runMain(["report", scratch()])
    expect({ code, out, err }).toEqual({
      code: 2,
      out: "",
      err: `cohort: ${scratch()} has neither summary.json nor events.ndjson; is it a run directory?\n`
    })
  })
})

// ---------------------------------------------------------------------------------------------
// help
// ---------------------------------------------------------------------------------------------

describe("help", () => {
  it("prints the help text on stdout with exit code 0", async () => {
    const { code, out, err } = await runMain(["help"])
    expect({ code, err }).toEqual({ code: 0, err: "" })
    expect(out).toBe(Cli.helpText())
    expect(out.startsWith(`cohort: elastic data-parallel training for TypeScript (runtime: ${Runtime.describe()})\n`)).toBe(true)
  })

  it("version, --version and -V print the package's version and the runtime with exit code 0; with more arguments they are not a version request", async () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
    for (const argv of [["version"], ["--version"], ["-V"]]) {
      expect(Cli.parse(argv)).toEqual({ command: "version" })
      const { code, out, err } = await runMain(argv)
      expect({ code, out, err }).toEqual({ code: 0, out: `cohort ${pkg.version} (runtime: ${Runtime.describe()})\n`, err: "" })
    }
    expect(Cli.parse(["demo", "--version"])).toEqual({ error: "unknown option '--version'" })
  })

  it("documents every flag with its default and every exit code", () => {
    const text = Cli.helpText()
    for (const flag of [
      "--trainer FILE",
      "--world-size N",
      "(default 4)",
      "--epochs N",
      "(default 3)",
      "--mode static|progressive",
      "(default static)",
      "--transport worker|process",
      "(default worker)",
      "--kill RANK@SECONDS",
      "(default demo: rank 2 at 40% of epoch 1; run: none)",
      "--hang RANK@SECONDS",
      "--no-kill",
      "--heartbeat-timeout-ms N",
      "(default 10000)",
      "--coordinator-timeout-ms N",
      "(default 10000)",
      "--round-deadline-ms N",
      "(default off)",
      "--round-quorum F",
      "a round needs before its deadline closes it (default 0.5)",
      "--aggregate RULE",
      "--clip-norm N",
      "--outlier-rounds-max K",
      "--compress none|fp16|int8",
      "--deltas on|off",
      "--outer-lr N, --outer-momentum F",
      "--failure-limit N|F",
      "(default none",
      "--role-policy fastest|N",
      "(default fastest)",
      "--seed N",
      "(default 1)",
      "--out DIR",
      "(default runs)",
      "--json",
      "cohort serve [options]",
      "cohort join URL [options]",
      "--listen HOST:PORT",
      "(default 127.0.0.1:0",
      "--token-file FILE",
      "COHORT_TOKEN",
      "--formation-timeout-ms N",
      "(default 300000)",
      "--rank N|auto",
      "(default auto)",
      "--rank-from-env NAME",
      "--save-dir DIR",
      "./cohort-save/<runId>: one folder per run joined",
      "--connect-timeout-ms N",
      "--coordinator-reconnect-ms N",
      "10 wrong token; 11 rank taken; 12 run already formed; 13 rank declared dead;",
      "cohort bundle --trainer FILE --out DIR",
      "--serve-browser",
      "--backend cpu|ring"
    ]) {
      expect(text).toContain(flag)
    }
    for (const code of [0, 1, 2, 3, 4, 130, 143]) expect(text).toMatch(new RegExp(`^  ${code}  \\S`, "m"))
    expect(text).toContain("cohort resume RUN_DIR [options]")
    expect(text).toContain("--trainer FILE              the run's trainer module if it moved")
    expect(Math.max(...text.split("\n").map((line) => line.length))).toBeLessThanOrEqual(100)
  })
})
