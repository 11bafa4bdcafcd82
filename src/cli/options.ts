/**
 * The flags of `cohort demo` and `cohort run` as one table: the help text (`help.ts`) and the
 * options table of docs/cli.md are made from it, and the defaults are the parser's own
 * (`defaults.ts`, the core's and the dashboard's), so that a default is written once.
 *
 * @since 0.1.0
 */
import * as Config from "../core/config.ts"
import { liveDefaults } from "../dashboard/live.ts"
import { defaults } from "./defaults.ts"

/**
 * One flag: `flag` with its argument as the user types it, its `default` as shown (`undefined`:
 * none shown), `help` (the words of `cohort help`, plain text) and `doc` (the words of
 * docs/cli.md, Markdown).
 *
 * @since 0.1.0
 * @category cli
 */
export interface RunOption {
  readonly flag: string
  readonly default: string | undefined
  readonly help: string
  readonly doc: string
}

/**
 * The flags of `demo` and `run`, in the order the help and the docs list them.
 *
 * @since 0.1.0
 * @category cli
 */
export const runFlagTable: ReadonlyArray<RunOption> = [
  {
    flag: "--trainer FILE",
    default: undefined,
    help: "run only: the trainer module, a path from the current folder; it must export trainSamples and createTrainer",
    doc: "required by `run`: the trainer module, a path from the current folder; it must export `trainSamples` and `createTrainer`"
  },
  {
    flag: "--world-size N",
    default: String(defaults.worldSize),
    help: "ranks, 1 to 1024 on one machine",
    doc: "ranks, 1 to 1,024: one machine starts at most 1,024 ranks (worker threads or processes; the core itself is measured up to 1e6 ranks, see [benchmarks](benchmarks.md))"
  },
  {
    flag: "--epochs N",
    default: String(defaults.epochs),
    help: "epochs, N >= 1; they count from 0",
    doc: "epochs, N >= 1"
  },
  {
    flag: "--mode static|progressive",
    default: defaults.mode,
    help: "whole partitions, or small chunks on demand",
    doc: "whole partitions, or small chunks handed out on demand"
  },
  {
    flag: "--transport worker|process|websocket",
    default: defaults.transport,
    help: "ranks as worker threads, child processes, or child processes that join this process's WebSocket server over loopback with a run token (the network path)",
    doc: "ranks as worker threads, child processes, or child processes that join this process's WebSocket server over loopback with a run token made for the run (the network path of [serve and join](serve-and-join.md), on one machine)"
  },
  {
    flag: "--backend cpu|ring",
    default: defaults.backend,
    help: "averaging: the coordinator averages every round (cpu), or the ranks all-reduce among themselves: worker threads through a shared-memory area, processes in a ring over direct links; ring needs 2 ranks or more and stops with SingleSurvivor at 1",
    doc: "how parameters are averaged (see [averaging backends](ring.md)); `ring` needs `--world-size` 2 or more (exit 2 otherwise)"
  },
  {
    flag: "--ring-links direct|relay",
    default: "direct",
    help: "ring steps rank to rank where the transport can (worker threads; processes over loopback WebSockets; served ranks to the addresses they advertise; each link falling back to the relay), or every step through the coordinator, which checks it",
    doc: "with `--backend ring`: ring steps go rank to rank where the transport can (worker threads; processes over loopback WebSockets; `serve`: joined ranks to the addresses they advertise, see [direct links between hosts](ring.md#direct-links-between-hosts); each link falling back to the relay), or every step through the coordinator, which checks it (see [averaging backends](ring.md))"
  },
  {
    flag: "--ring-area-mb N",
    default: "256",
    help: "with --backend ring: the largest all-reduce area of a ring generation, MiB: worker threads share one in memory, child processes of one machine one file each in /dev/shm; a bigger model's steps go over the links, and 0 sends every step over them",
    doc: "with `--backend ring`: the largest all-reduce area of a ring generation, in MiB (worker threads share one in memory; child processes of one machine keep one file each in `/dev/shm`, see [area files between processes](ring.md#area-files-between-processes-of-one-machine)); a model whose area would be bigger averages over the links, and `0` sends every step over them"
  },
  {
    flag: "--ring-area-dir DIR",
    default: "/dev/shm",
    help: "with --backend ring and --transport process: the folder in which the run makes its own for its ranks' sockets and area files; a tmpfs mounted with huge pages (huge=always) makes their copies cheaper",
    doc: "with `--backend ring` and `--transport process`: the folder in which the run makes its own for its ranks' sockets and area files (default `/dev/shm` where it can write, else the system's temporary folder); a tmpfs mounted with huge pages makes their copies cheaper, see [area files between processes](ring.md#area-files-between-processes-of-one-machine)"
  },
  {
    flag: "--kill RANK@SECONDS",
    default: "demo: rank 2 at 40% of epoch 1; run: none",
    help: "kill RANK's worker SECONDS after training starts (2@5, 2@1.5, 2@1.5s, or milliseconds: 2@500ms); repeatable; replaces the demo's kill (the last rank or epoch if there are fewer; none with 1 rank)",
    doc: "kill RANK's worker SECONDS after training starts (`2@5`, `2@1.5`, `2@1.5s`, or milliseconds: `2@500ms`); repeatable; replaces the demo's kill. With fewer than 3 ranks the demo kills the last rank, with 1 epoch it kills in that epoch, and nobody with `--world-size 1`"
  },
  {
    flag: "--hang RANK@SECONDS",
    default: "none",
    help: "RANK stops responding SECONDS after training starts while its worker stays alive, so only heartbeats catch it; repeatable; the time as for --kill",
    doc: "RANK stops responding while its worker stays alive, so only heartbeats catch it; the time as for `--kill`; repeatable"
  },
  {
    flag: "--no-kill",
    default: undefined,
    help: "no kill at all (removes the demo's kill)",
    doc: "no kill at all (removes the demo's kill)"
  },
  {
    flag: "--heartbeat-timeout-ms N",
    default: String(defaults.heartbeatTimeoutMs),
    help: "a rank silent for more than N ms is dead",
    doc: "a rank silent for more than N ms is declared dead"
  },
  {
    flag: "--coordinator-timeout-ms N",
    default: String(defaults.coordinatorTimeoutMs),
    help: "a rank process that hears nothing from the coordinator for N ms saves (emergency) and exits; it does at once when its channel closes; worker threads die with the coordinator",
    doc: "a rank process that hears nothing from the coordinator for N ms saves (emergency) and exits; it does at once when its channel closes (see [faults](faults.md#when-the-coordinator-dies))"
  },
  {
    flag: "--save-timeout-ms N",
    default: String(Config.defaults.saveTimeoutMs),
    help: "a rank asked for a checkpoint may send nothing for up to --heartbeat-timeout-ms + N ms while it saves",
    doc: "a rank asked for a checkpoint may be silent for `--heartbeat-timeout-ms` + N ms while it saves; past it, a `SaveTimeout` alert and the rank is declared ([liveness](liveness.md))"
  },
  {
    flag: "--eval-timeout-ms N",
    default: String(Config.defaults.evalTimeoutMs),
    help: "the same for an eval",
    doc: "the same for an eval: past it, an `EvalTimeout` alert and the rank is declared ([liveness](liveness.md))"
  },
  {
    flag: "--beat-links",
    default: "off",
    help: "WebSocket ranks beat on a second connection while they save or evaluate, so a stopped one is declared at its timeout (plain ws:// only)",
    doc: "WebSocket ranks (`join`, `--transport websocket`) beat on a second connection of a thread of their own while they save or evaluate: a stopped one is declared at `--heartbeat-timeout-ms`, not held for the call's bound; plain `ws://` only ([liveness](liveness.md#served-ranks-beat-on-a-link-of-their-own))"
  },
  {
    flag: "--liveness fixed|adaptive",
    default: "fixed",
    help: "every rank's timeout is --heartbeat-timeout-ms, or each rank's follows its own frames, between half of it and it (docs/liveness.md)",
    doc: "`adaptive`: each rank's timeout follows its own frames, between half of `--heartbeat-timeout-ms` and it ([liveness](liveness.md))"
  },
  {
    flag: "--round-deadline-ms N",
    default: "off",
    help: "cpu backend: a round closes N ms after its first contribution without the ranks still training, once half the survivors contributed; a late contribution counts in the next round; off: every round waits for every rank with work",
    doc: "cpu backend: a round closes N ms after its first contribution without the ranks still training, once half the survivors contributed; a late contribution counts in the next round (see [records](records.md#stragglers-a-round-deadline-cpu-backend-off-by-default))"
  },
  {
    flag: "--round-quorum F",
    default: String(Config.defaults.roundQuorum),
    help: "with --round-deadline-ms: the fraction of the survivors (above 0, at most 1) a round needs before its deadline closes it",
    doc: "with `--round-deadline-ms`: the fraction of the survivors (above 0, at most 1) a round needs before its deadline closes it"
  },
  {
    flag: "--round-silence-ms N",
    default: "off",
    help: "cpu backend: a round does not wait on a rank that owes it a contribution but sent nothing for N ms (and twice the usual round); the rank is not declared, its late contribution counts in the round open then; progressive: its chunks are taken back when they are the epoch's last",
    doc: "cpu backend: a round does not wait on a rank that owes it a contribution but sent nothing for N ms (and for twice the run's usual round); the rank is not declared, and its late contribution counts in the round open then. Progressive mode: when its chunks are all the epoch has left, they are taken back and handed to idle ranks ([liveness](liveness.md#rounds-that-do-not-wait-on-silent-ranks-roundsilencems))"
  },
  {
    flag: "--blocking-silence-ms N",
    default: "off",
    help: "a rank the run waits on that sent nothing for N ms is declared dead (a silent leave) before --heartbeat-timeout-ms; at least twice the ranks' beat interval (1,000 ms at the default timeout)",
    doc: "a rank the run waits on (the open round, a ring's rendezvous, an epoch's last chunks) that sent nothing for N ms is declared dead as a silent leave, before `--heartbeat-timeout-ms`; at least twice the ranks' beat interval (a quarter of the timeout, at most 1,000 ms) ([liveness](liveness.md#a-silent-rank-the-run-waits-on-blockingsilencems))"
  },
  {
    flag: "--blocking-quiet-max F",
    default: String(Config.defaults.blockingSilenceQuietMax),
    help: "with --blocking-silence-ms: it declares nobody that fell silent together with more than this share (above 0, at most 1) of the live ranks (a stalled process or host of many ranks)",
    doc: "with `--blocking-silence-ms`: it declares nobody that fell silent together with more than this share (above 0, at most 1) of the live ranks: a stalled process or host of many ranks, not that many leaves"
  },
  {
    flag: "--aggregate RULE",
    default: "mean",
    help: "cpu backend: how a round's contributions are combined: mean, median, trimmed-mean[:F] (F cut from each end per coordinate, default 0.25) or clip:N (the mean of changes clipped to norm N) (docs/edge-averaging.md)",
    doc: "cpu backend: how a round's contributions are combined: `mean`, `median`, `trimmed-mean[:F]` (F cut from each end per coordinate, default 0.25) or `clip:N` (the mean of changes clipped to norm N) ([edge averaging](edge-averaging.md#robust-aggregation-cpu-backend))"
  },
  {
    flag: "--clip-norm N",
    default: "off",
    help: "clip each contribution's change from the last model to L2 norm N, with any --aggregate rule",
    doc: "clip each contribution's change from the last model to L2 norm N, with any `--aggregate` rule"
  },
  {
    flag: "--outlier-rounds-max K",
    default: "0",
    help: "declare a rank dead after K rounds its contribution was an outlier; 0: only an OutlierParams alert",
    doc: "declare a rank dead after K rounds its contribution was an outlier; 0: only an `OutlierParams` alert"
  },
  {
    flag: "--compress none|fp16|int8",
    default: "none",
    help: "cpu backend: how contributions and updates travel: float32, half floats, or int8 blocks with a scale each, with error feedback",
    doc: "how contributions and updates (cpu backend) and ring steps between processes (ring backend) travel: float32, half floats, or int8 blocks with a scale each, with error feedback ([edge averaging](edge-averaging.md#compression---compress-nonefp16int8))"
  },
  {
    flag: "--deltas on|off",
    default: "on with --compress, the outer optimizer, --round-deadline-ms or --round-silence-ms",
    help: "cpu backend: ranks contribute their change since the last model they were sent instead of their parameters (smaller values to pack)",
    doc: "cpu backend: ranks contribute their change since the last model they were sent instead of their parameters, so that `--compress` packs small changes rather than whole weights ([edge averaging](edge-averaging.md#deltas---deltas-onoff))"
  },
  {
    flag: "--outer-lr N, --outer-momentum F",
    default: "1 and 0",
    help: "cpu backend: apply each round's mean change with SGD at rate N and Nesterov momentum F; the defaults are plain averaging",
    doc: "cpu backend: apply each round's mean change with SGD at rate N and Nesterov momentum F; the defaults are plain averaging ([edge averaging](edge-averaging.md#outer-optimizer---outer-lr---outer-momentum))"
  },
  {
    flag: "--failure-limit N|F",
    default: "none",
    help: "save and stop once N ranks died (an integer >= 0) or a fraction F of the ranks (0 < F < 1); without it the run stops only when no rank is left",
    doc: "save and stop once N ranks died (an integer >= 0, e.g. `1`) or a fraction F of the ranks (0 < F < 1, e.g. `0.5`; of a served run that grows, of the ranks that were ever members: see [growing a run](growing.md)); without it the run stops only when no rank is left"
  },
  {
    flag: "--role-policy fastest|N",
    default: defaults.rolePolicy,
    help: "who runs eval and checkpoints: the fastest rank, or rank N",
    doc: "who runs eval and checkpoints: the fastest rank, or rank N"
  },
  {
    flag: "--on-repeated-crash stop|continue",
    default: defaults.onRepeatedCrash,
    help: "when a second rank crashes with the same error (message and top stack frame), save and stop the run (TrainerFault) or go on",
    doc: "when a second rank crashes with the same error as an earlier one (same message and top stack frame), `stop` saves and stops the run with the save reason `TrainerFault` (a bug in the trainer would only be handed to the survivors); `continue` treats it as any death"
  },
  {
    flag: "--rank-memory-mb N",
    default: String(defaults.rankMemoryMb),
    help: "each rank's heap limit in MiB, N >= 16, 0 for none; a rank over it is declared crashed: out of memory",
    doc: "each rank's memory limit in MiB (N >= 16, or 0 for none); a rank over it is declared `crashed: out of memory` (see [faults](faults.md#rank-memory))"
  },
  {
    flag: "--interrupt-grace-ms N",
    default: String(defaults.interruptGraceMs),
    help: "after SIGINT (Ctrl-C) or SIGTERM, how long the ranks have to save before they are stopped; a second signal stops at once",
    doc: "after Ctrl-C (SIGINT) or SIGTERM, how long the ranks have to save before they are stopped (see [faults](faults.md#interrupts))"
  },
  {
    flag: "--seed N",
    default: String(defaults.seed),
    help: "seed of the data order and the model, 0 to 4294967295",
    doc: "seed of the data order and the model, 0 to 4294967295"
  },
  {
    flag: "--out DIR",
    default: defaults.outDir,
    help: "write the run to DIR/<runId>/",
    doc: "the run is written to `DIR/<runId>/`: `events.ndjson`, `summary.json`, and the survivors' saves under `save/` after a save-and-shutdown"
  },
  {
    flag: "--json",
    default: "off",
    help: "print the result as JSON on stdout instead of tables, and nothing else (progress lines then go to stderr)",
    doc: "print the run's result (`summary.json`'s content) as JSON on stdout instead of tables, and nothing else: progress lines and whatever the ranks print go to stderr, so `npx cohort run ... --json \\| jq` works"
  },
  {
    flag: "--dashboard [PORT]",
    default: "off",
    help: "serve the run's live page on http://127.0.0.1:PORT/ (PORT default: a free port; the address is printed on stderr): ranks, timeline, deaths, charts, audits, alerts",
    doc: "serve the run's live page on `http://127.0.0.1:PORT/` from the coordinator's process (PORT default: a free port); the address is printed on stderr as `cohort: dashboard: http://127.0.0.1:PORT/`. See [the dashboard](dashboard.md)"
  },
  {
    flag: "--dashboard-faults",
    default: "off",
    help: "with --dashboard: a kill button per rank on the page",
    doc: "with `--dashboard`: a kill button per rank on the page, to try the failover by hand (never on by default)"
  },
  {
    flag: "--dashboard-connections-max N",
    default: String(liveDefaults.connectionsMax),
    help: "with --dashboard: connections its listener holds at once; more are closed, with a CoordinatorResource alert",
    doc: "connections the dashboard's listener holds at once; more are closed, with a `CoordinatorResource` alert ([liveness](liveness.md#the-coordinators-own-resources))"
  }
]

/** The help text's column for the words, and its width. */
const helpColumn = 30
const helpWidth = 98

/** `tokens` on lines of at most `width` characters (a longer token stands alone). */
const wrap = (tokens: ReadonlyArray<string>, width: number): Array<string> => {
  const lines: Array<string> = []
  let line = ""
  for (const word of tokens) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else line = line === "" ? word : `${line} ${word}`
  }
  if (line !== "") lines.push(line)
  return lines
}

/**
 * The options as `cohort help` lists them: the flag, then its words from column 30 wrapped at 98
 * columns, with `(default X)` last (on one line when short).
 *
 * @since 0.1.0
 * @category cli
 */
export const helpLines = (options: ReadonlyArray<RunOption> = runFlagTable): string => {
  const out: Array<string> = []
  const indent = " ".repeat(helpColumn)
  for (const option of options) {
    // A short default stays on one line with its parenthesis.
    const shown =
      option.default === undefined
        ? []
        : option.default.length <= 24
          ? [`(default ${option.default})`]
          : `(default ${option.default})`.split(" ")
    const wrapped = wrap([...option.help.split(" "), ...shown], helpWidth - helpColumn)
    const head = `  ${option.flag}`
    if (head.length < helpColumn - 1)
      out.push(`${head.padEnd(helpColumn)}${wrapped[0] ?? ""}`, ...wrapped.slice(1).map((line) => indent + line))
    else out.push(head, ...wrapped.map((line) => indent + line))
  }
  return out.join("\n")
}

/**
 * The options as docs/cli.md's table lists them: a header, then one row per flag (flag, default,
 * words).
 *
 * @since 0.1.0
 * @category cli
 */
export const docTable = (options: ReadonlyArray<RunOption> = runFlagTable): string =>
  [
    "| flag | default | meaning |",
    "|---|---|---|",
    ...options.map((option) => `| \`${option.flag.replaceAll("|", "\\|")}\` | ${option.default ?? ""} | ${option.doc} |`)
  ].join("\n")
