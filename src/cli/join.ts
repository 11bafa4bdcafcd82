/**
 * `cohort join URL`: one rank in this process, on Node, Bun or Deno, on any host that reaches the
 * coordinator (`cohort serve`).
 *
 * Flags: `--trainer FILE` (default the bundled workload; the same trainer as the coordinator's,
 * loading its own data on this host), `--token-file FILE` or `COHORT_TOKEN` (one is required),
 * `--ranks N` (default 1: N ranks in this process, each with its own socket and trainer
 * instance, the trainer module loaded once; with `--rank R` they are R .. R + N - 1),
 * `--rank N`, `--rank auto` (default: the coordinator assigns the lowest free rank) or
 * `--rank-from-env NAME` (an integer from the environment variable NAME, e.g. a Kubernetes
 * Indexed Job's `JOB_COMPLETION_INDEX`), `--save-dir DIR` (saves go to `DIR/rank<r>`, checkpoints
 * to `DIR/checkpoints`; default `./cohort-save/<runId>`, one folder per run, `runId` from the
 * coordinator's welcome), `--connect-timeout-ms N` (default 300000: a coordinator that is not up
 * yet is tried again, with jittered back-off, for this long), `--coordinator-reconnect-ms N`
 * (default 60000, or twice the coordinator's heartbeat timeout when that is longer: how long a rank
 * whose coordinator dropped or went silent keeps its state and tries to reconnect before it saves
 * and exits 3; docs/recovery.md), `--ca FILE` or `--fingerprint SHA256`
 * (how a `wss://` server's certificate is checked: a private CA, or the fingerprint `cohort
 * serve` prints; default the system's roots), `--ring-listen HOST[:PORT]|off` and
 * `--ring-advertise HOST` (where the rank listens for its ring neighbours' direct links and the
 * address it tells them through the coordinator; `ringListenOf`).
 *
 * Its lines go to stderr: `cohort join: joined ws://HOST:PORT/ as rank R of N` once welcomed,
 * `cohort join: rank R saved its state under DIR/rank<r> (REASON)` after a `ShutdownWithSave`,
 * `cohort join: refused by URL: <words> (close code C)` for a refused join (1015: the server's
 * certificate failed the check, exit 18), and the rank's own
 * line when its coordinator is gone. Exit codes: `JoinExitCode` in `actors/rank/socket-rank.ts` (0 a
 * clean end, 10-16 one per refusal class, 15 unreachable, 3 coordinator gone, 2 bad input).
 *
 * @since 0.1.0
 */
import * as Commander from "commander"
import { importSocketRank, importSocketRanks } from "../../actors/cli-entry.ts"
import * as Files from "../platform/files.ts"
import * as HostAddresses from "../platform/host-addresses.ts"
import * as Signals from "../platform/signals.ts"
import { demoTrainer, type Io, loadTrainerPath, usage } from "./conduct.ts"
import { ExitCode } from "./defaults.ts"
import { integerAtLeast, refuseFlagsAsValues, UsageError } from "./flags.ts"
import { firstLine, oneLine } from "./parse.ts"
import { readToken, serveDefaults } from "./serve.ts"

/**
 * Defaults of the `join` flags: `rank` `"auto"`, `saveDir` `./cohort-save` (with the run's id
 * below it: `./cohort-save/<runId>`), `connectTimeoutMs` 300000.
 *
 * @since 0.1.0
 * @category cli
 */
export const joinDefaults = { rank: "auto", saveDir: "cohort-save", connectTimeoutMs: 300_000, signalLeaveMsMax: 10_000 } as const

interface RawJoinOptions {
  readonly trainer?: string
  readonly tokenFile?: string
  readonly rank?: string
  readonly rankFromEnv?: string
  readonly saveDir?: string
  readonly connectTimeoutMs?: string
  readonly ranks?: string
  readonly coordinatorReconnectMs?: string
  readonly ca?: string
  readonly fingerprint?: string
  readonly ringListen?: string
  readonly ringAdvertise?: string
}

/**
 * Where a joined rank listens for its ring neighbours' direct links (`host`, `port`) and the host
 * it advertises to them through the coordinator (`advertise`; docs/ring.md).
 *
 * @since 0.1.0
 * @category cli
 */
export interface RingListen {
  readonly host: string
  readonly port: number
  readonly advertise: string
}

const hostPortOf = (text: string, flag: string): { readonly host: string; readonly port: number | undefined } => {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]/]+)(?::(\d{1,5}))?$/.exec(text)
  const port = match?.[2] === undefined ? undefined : Number(match[2])
  if (match === null || (port !== undefined && port > 65535)) throw new UsageError(`${flag} must be HOST or HOST:PORT, got '${text}'`)
  const host = match[1]!
  return { host: host.startsWith("[") ? host.slice(1, -1) : host, port }
}

/**
 * `--ring-listen HOST[:PORT]|off` and `--ring-advertise HOST` of a join to `url`: by default the
 * rank listens on the address of the interface its route to the coordinator leaves from (else the
 * host's first address that is not loopback, else loopback), on a free port, and advertises that
 * address; with a wildcard (`0.0.0.0`, `::`) it advertises that interface's address; `off`: no
 * listener (every ring step through the coordinator's relay). `UsageError` for a malformed flag.
 *
 * @since 0.1.0
 * @category cli
 */
export const ringListenOf = async (
  url: string,
  listen: string | undefined,
  advertise: string | undefined
): Promise<RingListen | undefined> => {
  if (listen === "off") {
    if (advertise !== undefined) throw new UsageError("--ring-advertise goes with a ring listener, not --ring-listen off")
    return undefined
  }
  const asked = listen === undefined ? undefined : hostPortOf(listen, "--ring-listen")
  const told = advertise === undefined ? undefined : hostPortOf(advertise, "--ring-advertise")
  if (told?.port !== undefined)
    throw new UsageError(`--ring-advertise is a host, without a port (it is the listener's), got '${advertise}'`)
  const wildcard = asked === undefined || asked.host === "0.0.0.0" || asked.host === "::"
  let reached: string | undefined
  if (told === undefined && wildcard) {
    const coordinator = hostPortOf(new URL(url).host, "the URL")
    reached =
      (await HostAddresses.localAddressTowards(coordinator.host, coordinator.port ?? 80)) ??
      (/^(127\.|localhost$|::1$)/.test(coordinator.host) ? "127.0.0.1" : HostAddresses.externalAddresses()[0])
    if (reached === undefined) return undefined
  }
  return { host: asked?.host ?? reached!, port: asked?.port ?? 0, advertise: told?.host ?? (wildcard ? reached! : asked!.host) }
}

/**
 * How `join` checks a `wss://` server: `--ca FILE` (PEM) or `--fingerprint SHA256` (hex, colons
 * optional; `cohort serve` prints it), not both, and only with a `wss://` URL; neither: the
 * system's roots. `UsageError` otherwise, or for a file it cannot read or that holds no
 * certificate, or a fingerprint that is not 32 bytes of hex.
 *
 * @since 0.1.0
 * @category cli
 */
export const readTrust = async (
  url: string,
  caFile: string | undefined,
  fingerprint: string | undefined
): Promise<{ readonly ca?: string; readonly fingerprint256?: string } | undefined> => {
  if (caFile === undefined && fingerprint === undefined) return undefined
  if (caFile !== undefined && fingerprint !== undefined)
    throw new UsageError("--ca and --fingerprint are two ways to trust the server: give one")
  if (!url.startsWith("wss://")) throw new UsageError(`--ca and --fingerprint check a TLS server: the URL must be wss://, got '${url}'`)
  if (fingerprint !== undefined) {
    if (!/^(sha256:)?([0-9A-Fa-f]{2}:?){31}[0-9A-Fa-f]{2}$/.test(fingerprint))
      throw new UsageError(`--fingerprint expects a SHA-256 as cohort serve prints it (AB:CD:... 32 bytes of hex), got '${fingerprint}'`)
    return { fingerprint256: fingerprint }
  }
  let ca: string
  try {
    ca = new TextDecoder().decode(await Files.readFile(caFile!))
  } catch (error) {
    throw new UsageError(`--ca: cannot read ${caFile}: ${firstLine(error)}`)
  }
  if (!/-----BEGIN CERTIFICATE-----/.test(ca)) throw new UsageError(`--ca: ${caFile} holds no PEM certificate`)
  return { ca }
}

const rankOf = (text: string, flag: string): number | "auto" => {
  if (text === "auto") return "auto"
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)))
    throw new UsageError(`${flag} must be an integer >= 0 or auto, got '${text}'`)
  return Number(text)
}

/**
 * Why a URL is not one to join: a served run speaks WebSocket, `ws://HOST:PORT/` or, over TLS,
 * `wss://HOST:PORT/`, as `cohort serve` prints it; an `http://` or `https://` one gets the URL to
 * use instead.
 */
const urlRefusal = (url: string): string => {
  const web = /^(https?):\/\/([^\s/]+)/i.exec(url)
  const instead = web === null ? "" : `; try ${web[1]!.toLowerCase() === "https" ? "wss" : "ws"}://${web[2]}/`
  return `the URL must be ws://HOST:PORT/ or wss://HOST:PORT/ as cohort serve prints it, got '${url}'${instead}`
}

/**
 * Runs `cohort join` with `argv` (the arguments after `join`) and returns its exit code; once the
 * rank trains, the rank itself ends the process with its exit code, after `io.leaving(code)`.
 *
 * @since 0.1.0
 * @category cli
 */
export const main = async (argv: ReadonlyArray<string>, io: Io): Promise<number> => {
  let url: string | undefined
  let raw: RawJoinOptions = {}
  const env = io.env ?? (() => undefined)
  let rank: number | "auto"
  let token: Awaited<ReturnType<typeof readToken>>
  let connectTimeoutMs: number
  let ranks: number
  let coordinatorReconnectMs: number | undefined
  let tls: { readonly ca?: string; readonly fingerprint256?: string } | undefined
  let ringListen: RingListen | undefined
  try {
    const command = new Commander.Command("join")
      .exitOverride()
      .configureOutput({ writeOut: () => {}, writeErr: () => {}, outputError: () => {} })
      .helpOption(false)
      .showSuggestionAfterError(true)
      .argument("<URL>")
      .option("--trainer <file>")
      .option("--token-file <file>")
      .option("--rank <n>")
      .option("--rank-from-env <name>")
      .option("--save-dir <dir>")
      .option("--connect-timeout-ms <ms>")
      .option("--ranks <n>")
      .option("--coordinator-reconnect-ms <ms>")
      .option("--ca <file>")
      .option("--fingerprint <sha256>")
      .option("--ring-listen <host:port>")
      .option("--ring-advertise <host>")
    refuseFlagsAsValues(command)
      .action((given: string, options: RawJoinOptions) => {
        url = given
        raw = options
      })
      .parse([...argv], { from: "user" })
    if (url === undefined) throw new UsageError("join needs the coordinator's URL")
    if (!/^wss?:\/\/[^\s/]+\/?$/.test(url)) throw new UsageError(urlRefusal(url))
    if (raw.rank !== undefined && raw.rankFromEnv !== undefined) throw new UsageError("--rank cannot be used with --rank-from-env")
    if (raw.rankFromEnv !== undefined) {
      const value = env(raw.rankFromEnv)
      if (value === undefined) throw new UsageError(`--rank-from-env ${raw.rankFromEnv}: the variable is not set`)
      rank = rankOf(value.trim(), `--rank-from-env ${raw.rankFromEnv}`)
    } else {
      rank = rankOf(raw.rank ?? joinDefaults.rank, "--rank")
    }
    if (raw.saveDir === "") throw new UsageError("--save-dir needs a folder path")
    ranks = integerAtLeast("--ranks", raw.ranks, 1, 1)
    if (ranks > 1 && raw.rankFromEnv !== undefined) throw new UsageError("--ranks cannot be used with --rank-from-env")
    connectTimeoutMs = integerAtLeast("--connect-timeout-ms", raw.connectTimeoutMs, 1, joinDefaults.connectTimeoutMs)
    coordinatorReconnectMs =
      raw.coordinatorReconnectMs === undefined ? undefined : integerAtLeast("--coordinator-reconnect-ms", raw.coordinatorReconnectMs, 1, 1)
    token = await readToken(raw.tokenFile, env)
    if (token === undefined) throw new UsageError(`join needs the run token: --token-file FILE or ${serveDefaults.tokenEnv}`)
    tls = await readTrust(url, raw.ca, raw.fingerprint)
    ringListen = await ringListenOf(url, raw.ringListen, raw.ringAdvertise)
  } catch (error) {
    if (error instanceof UsageError || error instanceof Commander.CommanderError) return usage(io, oneLine(error.message))
    return usage(io, oneLine(String(error)))
  }
  let trainer = demoTrainer()
  if (raw.trainer !== undefined) {
    const loaded = await loadTrainerPath(io, raw.trainer)
    if (typeof loaded === "number") return loaded
    trainer = Files.fileUrl(loaded)
  }
  let joinRun: Awaited<ReturnType<typeof importSocketRank>>["joinRun"]
  try {
    joinRun = (await importSocketRank()).joinRun
  } catch (error) {
    io.err(`cohort: the rank is not available: ${firstLine(error)}\n`)
    return ExitCode.unavailable
  }
  const joinOptions = {
    url,
    runToken: token.token,
    rank,
    trainer,
    saveDir: Files.absolutePath(raw.saveDir ?? joinDefaults.saveDir),
    // The default folder is shared by every run joined from here: one subfolder per run.
    saveDirPerRun: raw.saveDir === undefined,
    connectTimeoutMs,
    ...(coordinatorReconnectMs === undefined ? {} : { coordinatorReconnectMs }),
    ...(tls === undefined ? {} : { tls }),
    ...(ringListen === undefined ? {} : { ringListen }),
    say: (line: string) => io.err(`${line}\n`)
  }
  const leaveAsked = new AbortController()
  const stopListening = leaveOnInterrupt(io, leaveAsked, ranks)
  try {
    if (ranks === 1)
      return await joinRun({
        ...joinOptions,
        leaveAsked: leaveAsked.signal,
        ...(io.leaving === undefined ? {} : { beforeExit: io.leaving })
      })
    return await joinMany({ ...joinOptions, ranks }, io, leaveAsked.signal)
  } finally {
    stopListening()
  }
}

/**
 * SIGINT or SIGTERM (a pod being stopped, Ctrl-C): the ranks leave the run gracefully, each after
 * its current batch: what it trained and did not contribute yet goes to the coordinator, then its
 * `Exiting`, and the coordinator hands the rest of its share to the others at once (no heartbeat
 * timeout). A second signal, or no end within `joinDefaults.signalLeaveMsMax`, ends the process as
 * the signal would (exit 130 or 143). Returns the function that stops listening.
 */
const leaveOnInterrupt = (io: Io, leaveAsked: AbortController, ranks: number): (() => void) => {
  let asked: Signals.InterruptSignal | undefined
  // Cleared when the ranks ended: Deno's timers cannot be unref'd, and this one would hold the
  // process open and then end it as the signal would.
  let fallback: ReturnType<typeof setTimeout> | undefined
  const stop = Signals.onInterrupt((signal) => {
    if (asked !== undefined) return Signals.endAsSignal(signal)
    asked = signal
    io.err(`cohort join: ${signal}: leaving the run after the current batch${ranks > 1 ? "es" : ""} (a second ${signal} stops at once)\n`)
    leaveAsked.abort()
    fallback = setTimeout(() => Signals.endAsSignal(signal), joinDefaults.signalLeaveMsMax)
  })
  return () => {
    stop()
    if (fallback !== undefined) clearTimeout(fallback)
  }
}

/** `--ranks N` above 1: the ranks train side by side; the process ends once every one has ended. */
const joinMany = async (
  options: Parameters<Awaited<ReturnType<typeof importSocketRanks>>["joinRanks"]>[0],
  io: Io,
  leaveAsked: AbortSignal
): Promise<number> => {
  let SocketRanks: Awaited<ReturnType<typeof importSocketRanks>>
  try {
    SocketRanks = await importSocketRanks()
  } catch (error) {
    io.err(`cohort: the rank is not available: ${firstLine(error)}\n`)
    return ExitCode.unavailable
  }
  const joined = SocketRanks.joinRanks(options)
  leaveAsked.addEventListener("abort", () => joined.forEach((rank) => void rank.leave()), { once: true })
  const codes = await Promise.all(joined.map((rank) => rank.ended))
  return SocketRanks.processExitCode(codes)
}
