/**
 * The text of `cohort help`: every command, flag, default and exit code, in one place.
 *
 * @since 0.1.0
 */
import * as Runtime from "../platform/detect.ts"

/**
 * The text of `cohort help` (also `-h` and `--help` anywhere, and no arguments at all).
 *
 * @since 0.1.0
 * @category cli
 */
export const helpText = (): string =>
  `cohort: elastic data-parallel training for TypeScript (runtime: ${Runtime.describe()})

Usage:
  cohort demo [options]                train the bundled workload (handwritten digits, 8000
                                       training samples) and kill a rank mid-run
  cohort run --trainer FILE [options]  train your own trainer module (no kill by default)
  cohort serve [options]               run the coordinator alone; ranks join over the network
  cohort join URL [options]            join a served run as one rank (on any host)
  cohort revoke RUN_DIR RANK|CREDENTIAL-ID
                                       revoke a served run's rank or credential while it runs
  cohort report [--json] [--file-bytes-max N] RUN_DIR
                                       print a finished run's summary again from RUN_DIR;
                                       files above N bytes are not read (default 268435456)
  cohort report --html [--out FILE] RUN_DIR
                                       write the run's page (timeline, charts, audits, deaths,
                                       alerts) as one self-contained HTML file, by default
                                       RUN_DIR/report.html
  cohort resume RUN_DIR [options]      continue a run that was interrupted, stopped
                                       unrecoverable, or cut off (its coordinator's process
                                       died) from its survivors' saves or its last checkpoint,
                                       as a new run beside it (see "Options of resume")
  cohort bundle --trainer FILE --out DIR
                                       build a browser rank: DIR/index.html and the rank with
                                       the trainer compiled in, DIR/cohort-rank.js (one ES
                                       module for a Web Worker; see docs/browser.md)
  cohort help                          print this help (also -h, --help)
  cohort version                       print Cohort's version and the runtime (also --version, -V)

Options of demo and run:
  --trainer FILE              run only: the trainer module, a path from the current folder; it
                              must export trainSamples and createTrainer
  --world-size N              ranks, 1 to 1024 on one machine (default 4)
  --epochs N                  epochs, N >= 1; they count from 0 (default 3)
  --mode static|progressive   whole partitions, or small chunks on demand (default static)
  --transport worker|process|websocket
                              ranks as worker threads, child processes, or child processes
                              that join this process's WebSocket server over loopback with a
                              run token (the network path) (default worker)
  --backend cpu|ring          averaging: the coordinator averages every round (cpu), or the
                              ranks all-reduce among themselves: worker threads through a
                              shared-memory area, processes in a ring relayed by the
                              coordinator;
                              ring needs 2 ranks or more and stops with SingleSurvivor at 1
                              (default cpu)
  --kill RANK@SECONDS         kill RANK's worker SECONDS after training starts (2@5, 2@1.5,
                              2@1.5s, or milliseconds: 2@500ms); repeatable;
                              replaces the demo's kill (demo default: rank 2 killed 40% into
                              epoch 1; the last rank or epoch if there are fewer; none with 1 rank)
  --hang RANK@SECONDS         RANK stops responding SECONDS after training starts while its
                              worker stays alive, so only heartbeats catch it; repeatable; the
                              time as for --kill (default none)
  --no-kill                   no kill at all (removes the demo's kill)
  --heartbeat-timeout-ms N    a rank silent for more than N ms is dead (default 10000)
  --coordinator-timeout-ms N  a rank process that hears nothing from the coordinator for N ms
                              saves (emergency) and exits; it does at once when its channel
                              closes (default 10000; worker threads die with the coordinator)
  --save-timeout-ms N         a rank asked for a checkpoint may send nothing for up to
                              --heartbeat-timeout-ms + N ms while it saves (default 600000)
  --eval-timeout-ms N         the same for an eval (default 600000)
  --liveness fixed|adaptive   every rank's timeout is --heartbeat-timeout-ms, or each rank's
                              follows its own frames, between half of it and it (default fixed;
                              docs/liveness.md)
  --round-deadline-ms N       cpu backend: a round closes N ms after its first contribution
                              without the ranks still training, once half the survivors
                              contributed; a late contribution counts in the next round
                              (default off: every round waits for every rank with work)
  --round-quorum F            with --round-deadline-ms: the fraction of the survivors (above 0,
                              at most 1) a round needs before its deadline closes it (default 0.5)
  --failure-limit N|F         save and stop once N ranks died (an integer >= 0) or a fraction F
                              of the ranks (0 < F < 1) (default none: stop when no rank is left)
  --role-policy fastest|N     who runs eval and checkpoints: the fastest rank, or rank N
                              (default fastest)
  --on-repeated-crash stop|continue
                              when a second rank crashes with the same error (message and top
                              stack frame), save and stop the run (TrainerFault) or go on
                              (default stop)
  --rank-memory-mb N          each rank's heap limit in MiB, N >= 16, 0 for none; a rank over it
                              is declared crashed: out of memory (default 1024)
  --interrupt-grace-ms N      after SIGINT (Ctrl-C) or SIGTERM, how long the ranks have to save
                              before they are stopped; a second signal stops at once
                              (default 30000)
  --seed N                    seed of the data order and the model, 0 to 4294967295 (default 1)
  --out DIR                   write the run to DIR/<runId>/ (default runs)
  --json                      print the result as JSON on stdout instead of tables, and nothing
                              else (progress lines then go to stderr)
  --dashboard [PORT]          serve the run's live page on http://127.0.0.1:PORT/ (default: a
                              free port; the address is printed on stderr): ranks, timeline,
                              deaths, charts, audits, alerts (default off)
  --dashboard-faults          with --dashboard: a kill button per rank on the page (default off)
  --dashboard-connections-max N
                              with --dashboard: connections its listener holds at once; more are
                              closed, with a CoordinatorResource alert (default 256)

Options of serve (beside those of run, without --transport, --kill, --hang, --rank-memory-mb;
--trainer defaults to the bundled workload, --world-size goes up to 1000000):
  --listen HOST:PORT          where to listen (default 127.0.0.1:0: loopback, a free port; any
                              other address is an explicit choice: every host that reaches it
                              and holds the token can join)
  --token-file FILE           the run token (at least 16 characters); else COHORT_TOKEN; else a
                              new 132-bit token is written to DIR/<runId>/token (mode 0600)
  --formation-timeout-ms N    how long the ranks have to join (default 300000); then the run
                              fails to form (exit 3)
  --max-ranks N               let the run grow to N ranks while it trains (default the world
                              size: it never grows); cohort join --rank auto joins it then
  --min-ranks N               start training once N ranks joined (default the world size);
                              the others join while it trains
  --dashboard [PORT]          serve the run's live page on the --listen host, PORT (default a
                              free port); on an address that is not loopback the page asks for
                              ?token=<the run token> (no kill buttons for serve)
  --rank-connections-max N    connections the rank port holds at once; more are closed, with a
                              CoordinatorResource alert (default 2 per rank of --max-ranks + 128)
  --tls-cert FILE --tls-key FILE
                              serve wss:// (and the dashboard over https) with this certificate
                              and key (PEM); prints the certificate's SHA-256 fingerprint. Off
                              loopback without them, a warning says what travels in clear
  --issue-tokens N            write a credential per rank 0..N-1 to DIR/<runId>/credentials/rank<r>
                              (mode 0600): each admits its rank only and can be revoked while
                              the run goes on (cohort revoke); the run token still works
  --token-ttl-ms N            those credentials expire N ms after serve wrote them (default never)
  --serve-browser             also serve a browser rank's page on the same port: opening
                              http://HOST:PORT/?token=TOKEN in a browser joins as --rank auto;
                              it prints that address, token included (default off)
  It prints "cohort serve: run <runId> listening on ws://HOST:PORT/ for N ranks" and
  "cohort serve: join with: cohort join ws://HOST:PORT/ ... --rank auto" (on stderr with --json).

Options of join URL:
  --trainer FILE              the same trainer module as the coordinator's, on this host
                              (default the bundled workload); it loads its own data
  --token-file FILE           the run token; else COHORT_TOKEN (one is required)
  --rank N|auto               the rank to join as; auto: the lowest free rank (default auto)
  --rank-from-env NAME        the rank from environment variable NAME (e.g. JOB_COMPLETION_INDEX)
  --save-dir DIR              saves (DIR/rank<r>) and checkpoints (DIR/checkpoints) (default
                              ./cohort-save/<runId>: one folder per run joined); a rank that
                              saved says where in one line
  --connect-timeout-ms N      how long a coordinator that is not up yet is tried again, with
                              jittered back-off (default 300000)
  --ranks N                   N ranks in this process, each with its own socket and trainer
                              (default 1; with --rank R: ranks R .. R+N-1); it exits once every
                              rank ended, with the first exit code that is not 0
  --ca FILE                   a wss:// server's certificate must chain to this CA (PEM)
  --fingerprint SHA256        a wss:// server must show the certificate serve printed this for
                              (default for wss://: the system's roots and the host name)
  Exit codes of join: 0 clean end; 1 the trainer failed; 2 bad input; 3 the coordinator is gone
  (emergency save); 10 wrong token; 11 rank taken; 12 run already formed; 13 rank declared dead;
  14 rank out of range; 15 coordinator unreachable; 16 another refusal; 17 a growing run refused
  the join (full, a taken or exited index, not started, shutting down, over); 18 the server's
  certificate failed the check; 19 the rank's credential was refused (another rank's, revoked,
  expired). A refusal is one line on stderr and is never retried.

Revoking (cohort revoke RUN_DIR RANK|CREDENTIAL-ID):
  revokes a served run's rank or credential while it runs: the rank holding it is closed (close
  code 4022), its samples go to the survivors, and it is refused on return (4022; an expired
  credential: 4023). Join exit code 19 for either, or for a credential of another rank (4021).

Options of resume (the seed, epochs, mode, batch size, backend, role policy and
--on-repeated-crash are the run's own: --seed, --epochs, --mode, --backend, --role-policy and
--on-repeated-crash are refused, each with why; every option not given is the run's, except
faults: none unless given, so --no-kill is refused too):
  --world-size N, --transport worker|process|websocket, --kill RANK@SECONDS, --hang RANK@SECONDS,
  --heartbeat-timeout-ms N, --coordinator-timeout-ms N, --failure-limit N|F,
  --rank-memory-mb N, --interrupt-grace-ms N, --json, --dashboard [PORT], --dashboard-faults
                              as for run
  --trainer FILE              the run's trainer module if it moved: the same file (contents)
                              with the same dataset size (default: the one the run recorded)
  --out DIR                   write the new run to DIR/<runId>/ (default: beside RUN_DIR)

What the ranks print goes to stderr as "[rank N] line" lines (at most 4096 bytes a line and 100
lines per rank per second) and to DIR/<runId>/ranks/rank<N>.log.

The end table has one row per epoch: samples committed, lost and duplicated (the audit; both
must be 0), deaths, detection ms (from the injected fault to the declared death), recovery ms
(from the fault to the survivors holding the dead rank's remainder) and test accuracy.

Exit codes:
  0  the run completed and every epoch's audit passed (report: the run it reads did)
  1  the run was unrecoverable: the survivors saved their state and stopped
  2  bad input: unknown command or flag, invalid value, missing trainer file or run directory
  3  the run could not be carried out: the launcher is missing or failed
  4  an epoch's audit found lost or duplicated samples
  5  a write of the run's record failed (full, failing or read-only disk): the run
     stopped and saved what it could; resume it once the disk can be written
  130  the run was interrupted by SIGINT (Ctrl-C): the survivors saved; resume it with
       cohort resume RUN_DIR
  143  the run was interrupted by SIGTERM, likewise
`
