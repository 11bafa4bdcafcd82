/**
 * `cohort serve`: runs the coordinator alone; its ranks join over the network (`cohort join`).
 *
 * It takes the run flags of `run` (the trainer, default the bundled workload; world size, epochs,
 * mode, heartbeat timeout, failure limit, role policy, seed, out...) and:
 *
 * - `--listen HOST:PORT` (default `127.0.0.1:0`: loopback, any free port; `[::1]:0` for IPv6).
 *   Binding to another address is an explicit choice, and the command says so.
 * - `--token-file FILE`, else `COHORT_TOKEN`, else a new 132-bit token written to
 *   `<out>/<runId>/token` (mode 0600). A token under 16 characters is refused (exit 2).
 * - `--formation-timeout-ms N` (default 300000): past it, without every rank joined, the run
 *   ends without training: `cohort: the run failed: formation: ranks ... did not join within N
 *   ms` and exit 3.
 * - `--max-ranks N` (default the world size: the run never grows) and `--min-ranks N` (default
 *   the world size): a run that may grow (docs/growing.md). Formation starts once
 *   `--min-ranks` ranks joined; while it trains, `cohort join --rank auto` (or a vacant index)
 *   joins it, up to `--max-ranks` ranks in all (with `--backend ring` too: a joiner gets the
 *   model from a ring member and enters the ring at the next round boundary). `--max-ranks` below
 *   the world size, and `--min-ranks` above it or under 1 (2 with `--backend ring`), are exit 2.
 * - `--tls-cert FILE --tls-key FILE` (PEM; both or neither): serve `wss://` (and the dashboard
 *   over HTTPS); the header then prints the certificate's SHA-256 fingerprint and the join
 *   command pins it (`--fingerprint`). Without them, listening off loopback prints
 *   `clearTextWarning`.
 * - `--issue-tokens N` (default 0) and `--token-ttl-ms MS` (default: never expire): writes a
 *   credential per rank index `0..N-1` to `<out>/<runId>/credentials/rank<r>` (mode 0600), each
 *   admitting its index only (`actors/launcher/revocations.ts`, `cohort revoke`); the run token still works.
 *   The join command then names rank 0's credential (each host uses its own) instead of the token.
 * - `--rank-connections-max N` (default two a rank of `--max-ranks`, the pending joins and 64
 *   more, `WebSocket.connectionsMaxOf`): connections the rank port holds at once; more are closed
 *   as they arrive (under Node), with a `CoordinatorResource` alert, never a rank's fault.
 * - `--serve-browser`: also serves a browser rank's page on the same port (`bundle.ts`): builds
 *   it for the run's trainer first (a trainer that does not build for a browser is exit 2) and
 *   prints `cohort serve: browser: http://HOST:PORT/?token=TOKEN` (the token itself: opening that
 *   address joins the run as `--rank auto`).
 *
 * Output (the lines other tools read; `--json` sends them to stderr, stdout then holds only the
 * result): first
 *
 * ```
 * cohort serve: run <runId> listening on ws://HOST:PORT/ for <N> ranks
 * cohort serve: token in <path> (mode 0600)          (only when the token was generated)
 * cohort serve: join with: cohort join ws://HOST:PORT/ [--trainer FILE] --token-file <path> --rank auto
 * ```
 *
 * (with `COHORT_TOKEN` as the token: `COHORT_TOKEN=<token> cohort join ...` is not printed, the
 * line reads `cohort serve: join with: cohort join ws://HOST:PORT/ --rank auto` and says to set
 * `COHORT_TOKEN`), then the run's timestamped lines as for `run` (`[   1.2s] rank 3 joined from
 * 127.0.0.1`, `... join refused with 4001 (wrong token) from 10.0.0.7`, `... formed: ...`,
 * progress, deaths, epochs), then the end table. Exit codes as `run`.
 *
 * @since 0.1.0
 */
import * as Commander from "commander"
import { importLauncher, type RuleName, type RunTypes, ruleNames } from "../../actors/cli-entry.ts"
import * as Files from "../platform/files.ts"
import * as HostAddresses from "../platform/host-addresses.ts"
import * as ServeBrowser from "./bundle.ts"
import { conduct, demoTrainer, type Io, loadTrainerPath, usage, withConsoleOnStderr } from "./conduct.ts"
import { ExitCode } from "./defaults.ts"
import { integerAtLeast, type RawRunOptions, refuseFlagsAsValues, runOptions, sharedRunOptions, UsageError } from "./flags.ts"
import { firstLine, oneLine, runFlags } from "./parse.ts"

/**
 * Defaults of the flags `serve` adds: `listen` `127.0.0.1:0`, `formationTimeoutMs` 300000 (the
 * launcher's `serveDefaults`), `tokenLengthMin` 16 (`WebSocket.runTokenLengthMin`), and
 * `tokenEnv`, the variable read when no `--token-file` is given.
 *
 * @since 0.1.0
 * @category cli
 */
export const serveDefaults = {
  listen: "127.0.0.1:0",
  formationTimeoutMs: 300_000,
  tokenLengthMin: 16,
  tokenEnv: "COHORT_TOKEN"
} as const

/**
 * `HOST:PORT` split and checked: a host (an IPv6 address in brackets) and a port from 0 to 65535.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseListen = (text: string): { readonly host: string; readonly port: number } => {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text)
  const port = Number(match?.[3])
  if (match === null || port > 65_535) throw new UsageError(`--listen expects HOST:PORT (e.g. 127.0.0.1:0 or [::1]:9000), got '${text}'`)
  return { host: match[1] ?? match[2]!, port }
}

/** Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost). */
const isLoopback = (host: string): boolean => /^127\.\d+\.\d+\.\d+$/.test(host) || host === "::1" || host === "localhost"

/**
 * Reads the run token: `--token-file` (its content without surrounding white space), else the
 * environment's `COHORT_TOKEN`, else `undefined` (the launcher makes one). Fails (`UsageError`)
 * for a file it cannot read, or a token under 16 characters.
 *
 * @since 0.1.0
 * @category cli
 */
export const readToken = async (
  tokenFile: string | undefined,
  env: (name: string) => string | undefined
): Promise<{ readonly token: string; readonly from: "file" | "env" } | undefined> => {
  let token: string
  let from: "file" | "env"
  if (tokenFile !== undefined) {
    try {
      token = new TextDecoder().decode(await Files.readFile(tokenFile)).trim()
    } catch (error) {
      throw new UsageError(`cannot read the token file ${tokenFile}: ${firstLine(error)}`)
    }
    from = "file"
  } else {
    const fromEnv = env(serveDefaults.tokenEnv)
    if (fromEnv === undefined) return undefined
    token = fromEnv.trim()
    from = "env"
  }
  if (token.length < serveDefaults.tokenLengthMin) {
    const where = from === "file" ? `the token in ${tokenFile}` : `the token in ${serveDefaults.tokenEnv}`
    throw new UsageError(`${where} is ${token.length} characters; a run token needs at least ${serveDefaults.tokenLengthMin}`)
  }
  return { token, from }
}

/**
 * The line `serve` prints when it listens off loopback without TLS: what an eavesdropper on the
 * network reads.
 *
 * @since 0.1.0
 * @category cli
 */
export const clearTextWarning =
  "warning: without --tls-cert, the run token, every frame and every model travel in clear between this host and its ranks"

/**
 * Reads `--tls-cert` and `--tls-key` (PEM files): both or neither (`UsageError` otherwise, or
 * for a file it cannot read or that holds no PEM block of its kind).
 *
 * @since 0.1.0
 * @category cli
 */
export const readTlsIdentity = async (
  certFile: string | undefined,
  keyFile: string | undefined
): Promise<{ readonly cert: string; readonly key: string } | undefined> => {
  if (certFile === undefined && keyFile === undefined) return undefined
  if (certFile === undefined || keyFile === undefined)
    throw new UsageError("--tls-cert and --tls-key go together (a certificate and its private key, PEM files)")
  const read = async (flag: string, file: string, block: RegExp, what: string): Promise<string> => {
    let text: string
    try {
      text = new TextDecoder().decode(await Files.readFile(file))
    } catch (error) {
      throw new UsageError(`${flag}: cannot read ${file}: ${firstLine(error)}`)
    }
    if (!block.test(text)) throw new UsageError(`${flag}: ${file} holds no PEM ${what}`)
    return text
  }
  return {
    cert: await read("--tls-cert", certFile, /-----BEGIN [A-Z ]*CERTIFICATE-----/, "certificate"),
    key: await read("--tls-key", keyFile, /-----BEGIN [A-Z ]*PRIVATE KEY-----/, "private key")
  }
}

/** A path as a shell reads it: quoted when it holds anything but plain characters. */
const shellWord = (text: string): string => (/^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`)

interface RawServeOptions extends RawRunOptions {
  readonly listen?: string
  readonly tokenFile?: string
  readonly formationTimeoutMs?: string
  readonly serveBrowser?: boolean
  readonly maxRanks?: string
  readonly minRanks?: string
  readonly tlsCert?: string
  readonly tlsKey?: string
  readonly issueTokens?: string
  readonly tokenTtlMs?: string
  readonly rankConnectionsMax?: string
  readonly churn?: string
  readonly recover?: string
  readonly recoveryWindowMs?: string
  readonly fresh?: boolean
}

/**
 * Runs `cohort serve` with `argv` (the arguments after `serve`) and returns its exit code.
 *
 * @since 0.1.0
 * @category cli
 */
export const main = async (argv: ReadonlyArray<string>, io: Io): Promise<number> => {
  // Long because it lists the command's own options inline (the run's are `runFlags`), one line each, then checks them and prints the served run's header.
  let raw: RawServeOptions | undefined
  const command = new Commander.Command("serve")
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {}, outputError: () => {} })
    .helpOption(false)
    .showSuggestionAfterError(true)
    .option("--trainer <file>")
  runFlags(command)
    .option("--listen <host:port>")
    .option("--token-file <file>")
    .option("--formation-timeout-ms <ms>")
    .option("--serve-browser")
    .option("--max-ranks <n>")
    .option("--min-ranks <n>")
    .option("--tls-cert <file>")
    .option("--tls-key <file>")
    .option("--issue-tokens <n>")
    .option("--token-ttl-ms <ms>")
    .option("--rank-connections-max <n>")
    .option("--churn <fraction>")
    .option("--recover <dir>")
    .option("--recovery-window-ms <ms>")
    .option("--fresh")
    .action((options: RawServeOptions) => {
      raw = options
    })
  let options: ReturnType<typeof runOptions>
  let listen: { readonly host: string; readonly port: number }
  let formationTimeoutMs: number
  let maxRanks: number
  let minRanks: number
  let rankConnectionsMax: number | undefined
  let token: Awaited<ReturnType<typeof readToken>>
  let tls: { readonly cert: string; readonly key: string } | undefined
  let issueTokens: number
  let tokenTtlMs: number | undefined
  let churn: number | undefined
  try {
    refuseFlagsAsValues(command).parse([...argv], { from: "user" })
    if (raw === undefined) return usage(io, "serve: no options parsed")
    if (raw.dashboardFaults === true)
      throw new UsageError("serve: --dashboard-faults needs ranks this process started (demo, run); served ranks run elsewhere")
    options = runOptions("serve", { ...raw, kill: false }, false)
    listen = parseListen(raw.listen ?? serveDefaults.listen)
    formationTimeoutMs = integerAtLeast("--formation-timeout-ms", raw.formationTimeoutMs, 1, serveDefaults.formationTimeoutMs)
    const ringMin = options.backend === "ring" ? 2 : 1
    maxRanks = integerAtLeast("--max-ranks", raw.maxRanks, 1, options.worldSize)
    minRanks = integerAtLeast("--min-ranks", raw.minRanks, 1, options.worldSize)
    if (minRanks < ringMin)
      throw new UsageError(`--min-ranks must be at least 2 with --backend ring (a ring of one rank cannot all-reduce), got ${minRanks}`)
    if (maxRanks < options.worldSize)
      throw new UsageError(`--max-ranks must be at least the world size (${options.worldSize}), got ${maxRanks}`)
    if (minRanks > options.worldSize)
      throw new UsageError(`--min-ranks must be at most the world size (${options.worldSize}), got ${minRanks}`)
    rankConnectionsMax =
      raw.rankConnectionsMax === undefined ? undefined : integerAtLeast("--rank-connections-max", raw.rankConnectionsMax, 1, 1)
    if (raw.tokenFile === "") throw new UsageError("--token-file needs a file path")
    token = await readToken(raw.tokenFile, io.env ?? (() => undefined))
    tls = await readTlsIdentity(raw.tlsCert, raw.tlsKey)
    issueTokens = integerAtLeast("--issue-tokens", raw.issueTokens, 0, 0)
    if (issueTokens > maxRanks)
      throw new UsageError(`--issue-tokens must be at most the ranks the run may hold (${maxRanks}), got ${issueTokens}`)
    tokenTtlMs = raw.tokenTtlMs === undefined ? undefined : integerAtLeast("--token-ttl-ms", raw.tokenTtlMs, 1, 0)
    if (tokenTtlMs !== undefined && issueTokens === 0)
      throw new UsageError("--token-ttl-ms is the lifetime of the credentials --issue-tokens writes: give both")
    churn = raw.churn === undefined ? undefined : Number(raw.churn)
    if (churn !== undefined && !(churn > 0 && churn < 1))
      throw new UsageError(`--churn must be a fraction of the live ranks between 0 and 1 (exclusive), got ${raw.churn}`)
  } catch (error) {
    if (error instanceof UsageError || error instanceof Commander.CommanderError) return usage(io, oneLine(error.message))
    return usage(io, oneLine(String(error)))
  }
  const parsed = options
  if (raw.recover !== undefined) return recoverRun(io, raw, parsed, token?.token, raw.listen === undefined ? undefined : listen)
  const lost = raw.fresh === true ? [] : await lostRuns(raw, parsed)
  if (lost.length === 1) {
    ;(parsed.json ? io.err : io.out)(
      `cohort serve: run ${lost[0]} lost its coordinator (no live process holds its lock, its journal has no end) and its ranks may still wait: taking it over as --recover would (--fresh starts a new run instead)\n`
    )
    return recoverRun(io, { ...raw, recover: lost[0]! }, parsed, token?.token, raw.listen === undefined ? undefined : listen)
  }
  if (lost.length > 1)
    (parsed.json ? io.err : io.out)(
      `cohort serve: note: ${lost.length} runs under ${parsed.outDir ?? "runs"} lost their coordinator (${lost.join(", ")}); starting a new run (take one over with --recover DIR)\n`
    )
  const tokenFileGiven = raw.tokenFile === undefined ? undefined : Files.absolutePath(raw.tokenFile)
  return withConsoleOnStderr(parsed.json, async () => {
    // Long because the serve command's steps in order (trainer, options, the listening lines), sharing its locals.
    let trainer = demoTrainer()
    if (parsed.trainer !== undefined) {
      const loaded = await loadTrainerPath(io, parsed.trainer)
      if (typeof loaded === "number") return loaded
      trainer = loaded
    }
    const browser = raw?.serveBrowser === true ? await ServeBrowser.serveBrowserOrUsage(io, parsed.trainer ?? trainer, trainer) : undefined
    if (typeof browser === "number") return browser
    let serve: (options: RunTypes.ServeOptions) => Promise<RunTypes.RunResult>
    try {
      serve = (await importLauncher()).serve
    } catch (error) {
      io.err(`cohort: the launcher is not available: ${firstLine(error)}\n`)
      return ExitCode.unavailable
    }
    // The header goes where the live lines go: stdout, or stderr under --json.
    const say = (line: string): void => (parsed.json ? io.err : io.out)(`cohort serve: ${line}\n`)
    // The dashboard listens on the run's host; off loopback it asks for the run token, known
    // once the run listens when it is made for the run.
    let runToken = token?.token
    const dashboard =
      parsed.dashboard === undefined
        ? undefined
        : {
            host: listen.host,
            port: parsed.dashboard.port,
            faults: false,
            ...(parsed.dashboard.connectionsMax === undefined ? {} : { connectionsMax: parsed.dashboard.connectionsMax }),
            ...(isLoopback(listen.host) ? {} : { token: () => runToken }),
            ...(tls === undefined ? {} : { tls })
          }
    return conduct(io, { ...parsed, dashboard }, (hooks) => {
      // The run's `started` line comes after serve's own header (the URL and the join command),
      // which the launcher reports right after it: it is held until then.
      let listened = false
      let started: RunTypes.RunEvent | undefined
      const onEvent = (event: RunTypes.RunEvent): void => {
        if (event.type === "started" && !listened) started = event
        else hooks.onEvent(event)
      }
      return serve({
        ...hooks,
        onEvent,
        trainer,
        ...sharedRunOptions(parsed),
        maxRanks,
        minRanks,
        host: listen.host,
        port: listen.port,
        formationTimeoutMs,
        ...(rankConnectionsMax === undefined ? {} : { rankConnectionsMax }),
        ...(token === undefined ? {} : { runToken: token.token }),
        ...(browser === undefined ? {} : { http: browser.http }),
        ...(tls === undefined ? {} : { tls }),
        issueTokens,
        ...(tokenTtlMs === undefined ? {} : { tokenTtlMs }),
        ...(churn === undefined ? {} : { churn }),
        onListening: (listening) => {
          runToken = listening.runToken
          say(
            `run ${listening.runId} listening on ${listening.url} for ${parsed.worldSize} ${parsed.worldSize === 1 ? "rank" : "ranks"}${
              maxRanks > parsed.worldSize || minRanks < parsed.worldSize ? ` (starts with ${minRanks}, grows to ${maxRanks})` : ""
            }`
          )
          if (!isLoopback(listening.host)) {
            say(`${listening.host} is not a loopback address: any host that reaches it and holds the token can join`)
            if (tls === undefined) say(clearTextWarning)
          }
          if (listening.fingerprint256 !== undefined) say(`TLS certificate SHA-256 fingerprint ${listening.fingerprint256}`)
          const tokenFile = listening.tokenFile === undefined ? tokenFileGiven : Files.absolutePath(listening.tokenFile)
          if (listening.tokenFile !== undefined) say(`token in ${tokenFile} (mode 0600)`)
          const issued = listening.credentials ?? []
          if (issued.length > 0) {
            const dir = Files.absolutePath(`${listening.runDir}/credentials`)
            say(
              `${issued.length} rank ${issued.length === 1 ? "credential" : "credentials"} in ${dir}/rank<r> (mode 0600${tokenTtlMs === undefined ? "" : `, valid for ${tokenTtlMs} ms`}): rank r joins with --token-file ${dir}/rank<r> --rank r; ids ${issued.map((c) => c.id).join(", ")} (cohort revoke ${shellWord(Files.absolutePath(listening.runDir))} ID|RANK)`
            )
          }
          const trainerFlag = parsed.trainer === undefined ? "" : ` --trainer ${shellWord(trainer)}`
          // With credentials issued, the command a rank's host copies holds one of them: the run
          // token is the secret every credential derives from, for nobody's host.
          const credentialFile = issued.length > 0 ? Files.absolutePath(`${listening.runDir}/credentials/rank0`) : undefined
          const joinFile = credentialFile ?? tokenFile
          const tokenFlag = joinFile === undefined ? "" : ` --token-file ${shellWord(joinFile)}`
          // A wildcard listen (0.0.0.0, [::]) is no address to join: the command names one of this
          // host's addresses instead, and the others are listed.
          const wildcard = listening.host === "0.0.0.0" || listening.host === "::"
          const addresses = wildcard ? HostAddresses.externalAddresses() : []
          const joinHost = addresses[0] === undefined ? undefined : addresses[0].includes(":") ? `[${addresses[0]}]` : addresses[0]
          const joinUrl = joinHost === undefined ? listening.url : `${tls === undefined ? "ws" : "wss"}://${joinHost}:${listening.port}/`
          // A pinned fingerprint works for any certificate; `--ca FILE` or nothing (a certificate the
          // joining host already trusts) are the alternatives docs/security.md describes.
          const pinFlag = listening.fingerprint256 === undefined ? "" : ` --fingerprint ${listening.fingerprint256}`
          if (wildcard) {
            say(
              addresses.length === 0
                ? `${listening.host} listens on every address of this host, and none was found: join with this host's address in place of ${listening.host}`
                : `${listening.host} listens on every address of this host: ${addresses.join(", ")}`
            )
          }
          say(`join with: ${io.command ?? "cohort"} join ${joinUrl}${trainerFlag}${tokenFlag}${pinFlag} --rank auto`)
          if (credentialFile !== undefined) say(`(on rank r's host, its own credential rank<r> in place of rank0)`)
          else if (tokenFile === undefined) say(`(set ${serveDefaults.tokenEnv} to the run token on the joining host)`)
          if (browser !== undefined)
            say(`browser: ${ServeBrowser.pageUrl(joinHost ?? listening.host, listening.port, listening.runToken, tls !== undefined)}`)
          listened = true
          if (started !== undefined) hooks.onEvent(started)
          started = undefined
        }
      })
    })
  })
}

/**
 * `cohort serve --recover RUN_DIR` (docs/recovery.md): takes the served run in `RUN_DIR` over
 * after its coordinator's process was lost, in the same folder, with the same token (its `token`
 * file, or `--token-file`/`COHORT_TOKEN`) and address (the run's, unless `--listen` is given).
 * `--recovery-window-ms MS` (default 60000) bounds how long the ranks have to come back.
 * Prints `cohort serve: run <runId> taken over on <url>` and goes on as `serve`.
 */
const recoverRun = async (
  io: Io,
  raw: RawServeOptions,
  parsed: ReturnType<typeof runOptions>,
  runToken: string | undefined,
  listen: { readonly host: string; readonly port: number } | undefined
): Promise<number> => {
  let recoveryWindowMs: number
  try {
    recoveryWindowMs = integerAtLeast("--recovery-window-ms", raw.recoveryWindowMs, 1, 60_000)
  } catch (error) {
    return usage(io, oneLine(error instanceof Error ? error.message : String(error)))
  }
  let launcher: Awaited<ReturnType<typeof importLauncher>>
  try {
    launcher = await importLauncher()
  } catch (error) {
    io.err(`cohort: the launcher is not available: ${firstLine(error)}\n`)
    return ExitCode.unavailable
  }
  const say = (line: string): void => (parsed.json ? io.err : io.out)(`cohort serve: ${line}\n`)
  return withConsoleOnStderr(parsed.json, () =>
    conduct(io, { ...parsed, dashboard: undefined }, (hooks) =>
      launcher.recover({
        ...hooks,
        runDir: raw.recover!,
        recoveryWindowMs,
        ...(runToken === undefined ? {} : { runToken }),
        ...(listen === undefined ? {} : { host: listen.host, port: listen.port }),
        given: givenRules(raw, parsed),
        onIgnored: (ignored) =>
          say(
            `note: a takeover runs by the run's own rules (docs/recovery.md); ignored: ${ignored
              .map(
                (i) => `${ruleFlag(i.name)} ${valueText(i.given)} (the run's: ${i.run === undefined ? "its default" : valueText(i.run)})`
              )
              .join(", ")}`
          ),
        onListening: (listening) => say(`run ${listening.runId} taken over on ${listening.url}`)
      })
    )
  )
}

/** The raw option (flag) that sets each rule whose flag is not named as the rule is. */
const ruleFlags: Partial<Record<RuleName, keyof RawServeOptions>> = {
  blockingSilenceQuietMax: "blockingQuietMax",
  livenessDetector: "liveness",
  adaptiveTimeoutMinMs: "liveness",
  trimFraction: "aggregate"
}

/** `--heartbeat-timeout-ms` for `heartbeatTimeoutMs`. */
const ruleFlag = (name: RuleName): string => `--${String(ruleFlags[name] ?? name).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`

const valueText = (value: unknown): string => (typeof value === "string" ? value : JSON.stringify(value))

/** The rules whose flag was given on this command line, as parsed (defaults are not given). */
const givenRules = (raw: RawServeOptions, parsed: ReturnType<typeof runOptions>): Record<string, unknown> => {
  const given: Record<string, unknown> = {}
  const flags = raw as unknown as Readonly<Record<string, unknown>>
  const values = parsed as unknown as Readonly<Record<string, unknown>>
  for (const name of ruleNames) {
    if (flags[ruleFlags[name] ?? name] !== undefined && values[name] !== undefined) given[name] = values[name]
  }
  return given
}

/**
 * The served runs under the run's `--out` folder whose coordinator was lost within the recovery
 * window (`findLost`): `serve` takes the only one over by itself, as a restarted pod with the same
 * volume would want. None when the launcher cannot load or the window is not a valid number.
 */
const lostRuns = async (raw: RawServeOptions, parsed: ReturnType<typeof runOptions>): Promise<ReadonlyArray<string>> => {
  try {
    const launcher = await importLauncher()
    const windowMs = integerAtLeast("--recovery-window-ms", raw.recoveryWindowMs, 1, launcher.recoveryWindowMsDefault)
    return await launcher.findLost(parsed.outDir ?? launcher.defaults.outDir, windowMs, Date.now())
  } catch {
    return []
  }
}
