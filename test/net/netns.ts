/**
 * Hosts as Linux network namespaces, for the tests on a real network (docs/testing.md).
 *
 * `create(["a", "b", "c"])` makes one namespace per host, named `ch<pid>-<n><random>-<host>`, plus a
 * switch namespace `ch<pid>-<n><random>-sw` holding a bridge; each host has one link `eth0` (a veth pair
 * whose other end `v-<host>` sits on the bridge) with the address `10.213.0.<i+1>/24` in host order,
 * and its own loopback. Nothing is added to the machine's own namespace: the addresses exist
 * inside these namespaces only. Every link is capped by `tbf` (`rateKbit`, default 100 Mbit/s) so
 * that a test's traffic stays bounded, and every process a test starts through `exec` or `relay`
 * is killed after its `lifetimeMs`.
 *
 * - `exec(host, command, args)` starts a process inside the host's namespace (`ip netns exec`).
 * - `cut(host)` / `restore(host)`: the switch side of the host's link down / up
 *   (`ip link set v-<host> down`): the cable pulled at the switch; the host sees no error, only
 *   silence.
 * - `down(host)` / `up(host)`: the host's own `eth0` down / up (`ip link set eth0 down` in the
 *   host): the cable pulled on the host's side; its connections see no error, its new ones fail.
 * - `rateLimit(host, ...)`: `tc qdisc replace dev eth0 root tbf ...` in the host (what it sends);
 *   `rateLimitBoth(host, ...)` also on the switch side of its link (what it receives).
 * - `dropPercent(host, p)`: nftables drops `p`% of the packets arriving on the host's `eth0`
 *   (`numgen random`), so a percentage on every host is that loss on each direction of each link;
 *   `dropped(host)` reads the rule's counter.
 * - `relay(host, ...)`: a TCP relay (`relay.mjs`) in the host that forwards to a target with a
 *   delay of `delayMs ± jitterMs` per chunk, in order, both ways.
 * - `destroy()` kills every process started and deletes every namespace; call it in `finally` /
 *   `afterAll`. `create` also deletes namespaces left by runs whose process is gone.
 *
 * Root on Linux only: `requireRootLinux()` (called by `create`) throws a loud error otherwise, so
 * these tests fail, never pass or skip, where they cannot run (CI runs as root on Linux).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as Runtime from "../../src/platform/detect.ts"

/** The repository root: the working directory of every process started. */
export const repoRoot = fileURLToPath(new URL("../../", import.meta.url))

const relayScript = fileURLToPath(new URL("./relay.mjs", import.meta.url))

/** The /24 the hosts live on (inside the test's namespaces only). */
export const subnet = "10.213.0"

/**
 * Throws unless this process is root on Linux and `ip` runs: the message says why, so that a
 * test run elsewhere fails loudly rather than skipping.
 */
export const requireRootLinux = (): void => {
  const uid = typeof process.getuid === "function" ? process.getuid() : undefined
  if (process.platform !== "linux" || uid !== 0) {
    throw new Error(
      `NETWORK TESTS NEED ROOT ON LINUX: they create network namespaces (ip netns) as hosts; this process is ` +
        `uid ${uid ?? "unknown"} on ${process.platform}. CI runs them as root on Linux; run them there ` +
        `(or as root: sudo npx vitest run test/net).`
    )
  }
  const probe = spawnSync("ip", ["-V"], { encoding: "utf8" })
  if (probe.status !== 0) {
    throw new Error(`NETWORK TESTS NEED iproute2: \`ip -V\` failed (${probe.error?.message ?? probe.stderr}); apt-get install -y iproute2`)
  }
}

/** Runs a command to completion; throws with its output when it fails. */
export const run = (command: string, args: ReadonlyArray<string>, input?: string): string => {
  const result = spawnSync(command, args, { encoding: "utf8", input, timeout: 10_000 })
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} failed (${result.status ?? result.signal}): ${result.stderr || result.error?.message}`)
  }
  return result.stdout
}

const ip = (...args: ReadonlyArray<string>): string => run("ip", args)

/** Whether process `pid` exists (signal 0). */
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Deletes namespaces `ch<pid>-...` whose `pid` is no longer running: leftovers of a killed run. */
export const sweepLeftovers = (): ReadonlyArray<string> => {
  const names = ip("netns", "list")
    .split("\n")
    .map((line) => line.split(" ")[0] ?? "")
    .filter((n) => n !== "")
  const gone = names.filter((name) => {
    const pid = /^ch(\d+)-[0-9a-z]+-/.exec(name)?.[1]
    return pid !== undefined && Number(pid) !== process.pid && !alive(Number(pid))
  })
  for (const name of gone) spawnSync("ip", ["netns", "del", name])
  return gone
}

/** A process started inside a namespace, with its output collected. */
export interface Proc {
  readonly child: ChildProcess
  readonly host: string
  /** Everything written so far. */
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the first match of `pattern` in stdout + stderr (checked as output arrives); rejects after `timeoutMs` or when the process exits first. */
  readonly waitFor: (pattern: RegExp, timeoutMs: number) => Promise<RegExpMatchArray>
  /** Resolves with the exit code (or the signal's name) once the process has exited. */
  readonly exited: Promise<number | string>
  readonly kill: (signal?: NodeJS.Signals) => void
}

/** What `exec` and `relay` accept. */
export interface ExecOptions {
  /** The process is killed (SIGKILL) after this many milliseconds; default 60000. */
  readonly lifetimeMs?: number
  readonly env?: Readonly<Record<string, string>>
  /**
   * The process's nice value (`nice -n`; below 0 needs root, which these tests have): a test that
   * times its links runs at a negative value so that the machine's other work does not show in
   * its numbers. Default: the test's own priority.
   */
  readonly nice?: number
}

/** A started relay: the port it listens on in its host. */
export interface Relay {
  readonly port: number
  readonly proc: Proc
}

/** A network of hosts. */
export interface Network {
  /** Namespace name prefix of this network, `ch<pid>-<n><random>`. */
  readonly prefix: string
  /** The namespace of `host`. */
  readonly namespace: (host: string) => string
  /** The address of `host` on the bridge, `10.213.0.<i+1>`. */
  readonly address: (host: string) => string
  readonly exec: (host: string, command: string, args: ReadonlyArray<string>, options?: ExecOptions) => Proc
  /** Starts `script` (a `.ts` or `.mjs` file) in `host` with the runtime running this test. */
  readonly script: (host: string, script: string, args: ReadonlyArray<string>, options?: ExecOptions) => Proc
  readonly cut: (host: string) => void
  readonly restore: (host: string) => void
  readonly down: (host: string) => void
  readonly up: (host: string) => void
  readonly rateLimit: (
    host: string,
    options: { readonly rateKbit: number; readonly burstBytes?: number; readonly latencyMs?: number }
  ) => void
  readonly rateLimitBoth: (
    host: string,
    options: { readonly rateKbit: number; readonly burstBytes?: number; readonly latencyMs?: number }
  ) => void
  readonly dropPercent: (host: string, percent: number) => void
  /** `dropPercent` on the host's own side and, on the switch, `percent`% of what it sends: that loss both ways on its link only. */
  readonly dropPercentBoth: (host: string, percent: number) => void
  /** Packets `dropPercent`'s rule has dropped in `host` so far. */
  readonly dropped: (host: string) => number
  readonly relay: (
    host: string,
    options: {
      readonly listen: string
      readonly target: string
      readonly delayMs: number
      readonly jitterMs: number
      /** The relay stops (closing every connection) past this many bytes, both ways together; default 64 MiB. */
      readonly bytesMax?: number
      readonly lifetimeMs?: number
      /** Every byte relayed, both ways, is appended to this file (a capture of the link); default none. */
      readonly recordFile?: string
    }
  ) => Promise<Relay>
  readonly destroy: () => void
}

let networks = 0
/** Networks not yet destroyed: removed when this process exits, whatever the tests did. */
const live = new Set<() => void>()
let exitHook = false

/**
 * The command line that runs `script` with the runtime running this process: Node through tsx's
 * loader for `.ts`, `deno run -A`, or Bun as is.
 */
export const runtimeCommand = (script: string): { readonly command: string; readonly args: ReadonlyArray<string> } => {
  switch (Runtime.detect()) {
    case "deno":
      return { command: process.execPath, args: ["run", "-A", script] }
    case "bun":
      return { command: process.execPath, args: [script] }
    default:
      return { command: process.execPath, args: script.endsWith(".ts") ? ["--import", "tsx", script] : [script] }
  }
}

/** Creates the hosts (see the module comment); `rateKbit` caps every link (default 100000). */
export const create = (hosts: ReadonlyArray<string>, options: { readonly rateKbit?: number } = {}): Network => {
  requireRootLinux()
  sweepLeftovers()
  networks += 1
  // The pid for the sweep; a random part too, as test files may share a process (vitest threads).
  const prefix = `ch${process.pid}-${networks}${Math.random().toString(36).slice(2, 6)}`
  const namespace = (host: string) => `${prefix}-${host}`
  const sw = namespace("sw")
  const made: Array<string> = []
  const procs = new Set<Proc>()
  const destroy = () => {
    live.delete(destroy)
    for (const proc of procs) proc.kill("SIGKILL")
    for (const name of made.splice(0).reverse()) spawnSync("ip", ["netns", "del", name])
  }
  live.add(destroy)
  if (!exitHook) {
    exitHook = true
    process.once("exit", () => {
      for (const pending of [...live]) pending()
    })
  }
  const address = (host: string) => {
    const index = hosts.indexOf(host)
    if (index < 0) throw new Error(`no host ${host} in ${hosts.join(", ")}`)
    return `${subnet}.${index + 1}`
  }
  type Limit = { readonly rateKbit: number; readonly burstBytes?: number; readonly latencyMs?: number }
  const shape = (ns: string, dev: string, limit: Limit) =>
    run("ip", [
      "netns",
      "exec",
      ns,
      "tc",
      "qdisc",
      "replace",
      "dev",
      dev,
      "root",
      "tbf",
      "rate",
      `${limit.rateKbit}kbit`,
      "burst",
      String(limit.burstBytes ?? 64 * 1024),
      "latency",
      `${limit.latencyMs ?? 200}ms`
    ])
  const rateLimit = (host: string, limit: Limit) => {
    ip("-n", namespace(host), "link", "show", "eth0")
    shape(namespace(host), "eth0", limit)
  }
  try {
    ip("netns", "add", sw)
    made.push(sw)
    ip("-n", sw, "link", "set", "lo", "up")
    ip("-n", sw, "link", "add", "br0", "type", "bridge")
    ip("-n", sw, "link", "set", "br0", "up")
    for (const host of hosts) {
      const ns = namespace(host)
      ip("netns", "add", ns)
      made.push(ns)
      ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", `v-${host}`, "netns", sw)
      ip("-n", sw, "link", "set", `v-${host}`, "master", "br0")
      ip("-n", sw, "link", "set", `v-${host}`, "up")
      ip("-n", ns, "link", "set", "lo", "up")
      ip("-n", ns, "addr", "add", `${address(host)}/24`, "dev", "eth0")
      ip("-n", ns, "link", "set", "eth0", "up")
      rateLimit(host, { rateKbit: options.rateKbit ?? 100_000 })
    }
  } catch (error) {
    destroy()
    throw error
  }

  /** nftables drops `percent`% of the packets arriving on `eth0` in namespace `ns`. */
  const dropPercent = (ns: string, percent: number): void => {
    if (!hasNft())
      throw new Error("NETWORK TESTS NEED nftables for packet loss: `nft` is missing; apt-get install -y nftables (.ci/run does)")
    run(
      "ip",
      ["netns", "exec", ns, "nft", "-f", "-"],
      [
        "table inet cohort_loss {",
        "  chain input {",
        "    type filter hook input priority 0; policy accept;",
        `    iifname "eth0" numgen random mod 10000 < ${Math.round(percent * 100)} counter drop`,
        "  }",
        "}"
      ].join("\n")
    )
  }

  const exec = (host: string, command: string, args: ReadonlyArray<string>, execOptions: ExecOptions = {}): Proc => {
    const niced = execOptions.nice === undefined ? [command, ...args] : ["nice", "-n", String(execOptions.nice), command, ...args]
    const child = spawn("ip", ["netns", "exec", namespace(host), ...niced], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...execOptions.env }
    })
    let out = ""
    let err = ""
    const waiters = new Set<() => void>()
    const notify = () => {
      for (const waiter of [...waiters]) waiter()
    }
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      notify()
    })
    child.stderr?.on("data", (chunk: Buffer) => {
      err += chunk.toString()
      notify()
    })
    const exited = new Promise<number | string>((resolve) => {
      child.on("exit", (code, signal) => {
        clearTimeout(lifetime)
        // Let the pipes drain before anyone reads the output.
        setTimeout(() => {
          resolve(code ?? signal ?? "unknown")
          notify()
        }, 50)
      })
      child.on("error", (error) => {
        err += `\n[spawn error] ${error.message}`
        resolve("error")
      })
    })
    let done = false
    void exited.then(() => (done = true))
    const lifetime = setTimeout(() => child.kill("SIGKILL"), execOptions.lifetimeMs ?? 60_000)
    const proc: Proc = {
      child,
      host,
      stdout: () => out,
      stderr: () => err,
      exited,
      kill: (signal = "SIGTERM") => {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      },
      waitFor: (pattern, timeoutMs) =>
        new Promise((resolve, reject) => {
          const check = () => {
            const match = (out + err).match(pattern)
            if (match !== null) {
              finish()
              resolve(match)
            } else if (done) {
              finish()
              reject(new Error(`${command} in ${host} exited before printing ${pattern}\nstdout:\n${out}\nstderr:\n${err}`))
            }
          }
          const timer = setTimeout(() => {
            finish()
            reject(new Error(`${command} in ${host} did not print ${pattern} within ${timeoutMs} ms\nstdout:\n${out}\nstderr:\n${err}`))
          }, timeoutMs)
          const finish = () => {
            clearTimeout(timer)
            waiters.delete(check)
          }
          waiters.add(check)
          check()
        })
    }
    procs.add(proc)
    return proc
  }

  const script = (host: string, file: string, args: ReadonlyArray<string>, execOptions?: ExecOptions): Proc => {
    const line = runtimeCommand(file)
    return exec(host, line.command, [...line.args, ...args], execOptions)
  }

  return {
    prefix,
    namespace,
    address,
    exec,
    script,
    cut: (host) => void ip("-n", sw, "link", "set", `v-${host}`, "down"),
    restore: (host) => void ip("-n", sw, "link", "set", `v-${host}`, "up"),
    down: (host) => void ip("-n", namespace(host), "link", "set", "eth0", "down"),
    up: (host) => void ip("-n", namespace(host), "link", "set", "eth0", "up"),
    rateLimit,
    rateLimitBoth: (host, limit) => {
      rateLimit(host, limit)
      shape(sw, `v-${host}`, limit)
    },
    dropPercent: (host, percent) => dropPercent(namespace(host), percent),
    dropPercentBoth: (host, percent) => {
      dropPercent(namespace(host), percent)
      // Bridged frames pass the bridge family's hooks, not inet's: the rule names the host's port.
      run(
        "ip",
        ["netns", "exec", sw, "nft", "-f", "-"],
        [
          `table bridge cohort_loss_${host} {`,
          "  chain forward {",
          "    type filter hook forward priority 0; policy accept;",
          `    iifname "v-${host}" numgen random mod 10000 < ${Math.round(percent * 100)} counter drop`,
          "  }",
          "}"
        ].join("\n")
      )
    },
    dropped: (host) => {
      const listing = run("ip", ["netns", "exec", namespace(host), "nft", "list", "table", "inet", "cohort_loss"])
      return Number(/counter packets (\d+)/.exec(listing)?.[1] ?? Number.NaN)
    },
    relay: async (host, relayOptions) => {
      const proc = script(
        host,
        relayScript,
        [
          relayOptions.listen,
          relayOptions.target,
          String(relayOptions.delayMs),
          String(relayOptions.jitterMs),
          String(relayOptions.bytesMax ?? 64 * 1024 * 1024),
          ...(relayOptions.recordFile === undefined ? [] : [relayOptions.recordFile])
        ],
        { lifetimeMs: relayOptions.lifetimeMs ?? 60_000 }
      )
      const match = await proc.waitFor(/relay listening on \S+:(\d+)/, 20_000)
      return { port: Number(match[1]), proc }
    },
    destroy
  }
}

/** Whether `nft` runs here (Debian's `nftables`; `.ci/run` installs it). */
export const hasNft = (): boolean => spawnSync("nft", ["--version"]).status === 0
