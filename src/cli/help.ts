/**
 * The text of `cohort help`: every command, flag, default and exit code, in one place.
 *
 * @since 0.1.0
 */
import * as Runtime from "../platform/detect.ts"
import * as Options from "./options.ts"

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
${Options.helpLines()}

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
  --churn F                   a fault for trying churn: after every averaging round, F (0 < F < 1)
                              of the live ranks leave, a third each gracefully, by a crash
                              (socket cut) and silently (frames dropped); default off
  --serve-browser             also serve a browser rank's page on the same port: opening
                              http://HOST:PORT/?token=TOKEN in a browser joins as --rank auto;
                              it prints that address, token included (default off)
  --recover DIR               take the served run in DIR over after its coordinator's process
                              was lost: same folder, token (DIR/token, or --token-file) and
                              address (or --listen); the ranks still running come back
  --recovery-window-ms N      how long those ranks have to come back (default 60000); the
                              others are declared dead ("did not return after the coordinator's
                              restart")
  --fresh                     start a new run even when the --out folder holds a served run
                              that lost its coordinator within the recovery window (serve
                              takes the only such run over by itself otherwise)
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
  --coordinator-reconnect-ms N
                              how long a rank whose coordinator dropped or went silent keeps
                              its state and tries to reconnect before it saves and exits 3
                              (default 60000, or twice the heartbeat timeout if longer)
  --ca FILE                   a wss:// server's certificate must chain to this CA (PEM)
  --fingerprint SHA256        a wss:// server must show the certificate serve printed this for
                              (default for wss://: the system's roots and the host name)
  --ring-listen HOST[:PORT]|off
                              with --backend ring: where the rank listens for its ring
                              neighbours' direct links (default the interface that reaches the
                              coordinator, a free port); off: every step through the relay
  --ring-advertise HOST       the address its neighbours reach the listener at (default the
                              listen address; with 0.0.0.0 or ::, the interface that reaches
                              the coordinator)
  Exit codes of join: 0 clean end; 1 the trainer failed; 2 bad input; 3 the coordinator is gone
  (emergency save); 10 wrong token; 11 rank taken; 12 run already formed; 13 rank declared dead;
  14 rank out of range; 15 coordinator unreachable; 16 another refusal; 17 a growing run refused
  the join (full, a taken or exited index, not started, shutting down, over); 18 the server's
  certificate failed the check; 19 the rank's credential was refused (another rank's, revoked,
  expired). A refusal is one line on stderr and is never retried. SIGINT or SIGTERM: the ranks
  leave gracefully after their current batch (what they trained is contributed) and exit 0; a
  second signal stops at once.

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
