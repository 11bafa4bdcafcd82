/**
 * Runtime detection: the one place that decides which JavaScript runtime Cohort runs on.
 *
 * Bun and Deno both set `process.versions.node` (to 26.3.0 in Bun 1.4.5 and Deno 2.9.6), so the
 * check looks for their own globals first and falls back to Node only after (TOOLCHAIN.md §3).
 *
 * @since 0.1.0
 * @category runtime
 */

/**
 * The runtimes Cohort supports, plus `unknown` for anything else (a browser, an edge worker).
 *
 * @since 0.1.0
 * @category runtime
 */
export type Runtime = "bun" | "deno" | "node" | "unknown"

interface RuntimeGlobals {
  readonly Bun?: { readonly version?: string }
  readonly Deno?: { readonly version?: { readonly deno?: string } }
  readonly process?: { readonly versions?: { readonly node?: string } }
}

/**
 * Detects the runtime from its globals: Bun, then Deno, then Node.
 *
 * @param globals the object to inspect; defaults to `globalThis` (a parameter so tests can pass fakes)
 * @returns the runtime name; never throws
 * @since 0.1.0
 * @category runtime
 */
export const detect = (globals: object = globalThis): Runtime => {
  const g = globals as RuntimeGlobals
  if (g.Bun !== undefined) return "bun"
  if (g.Deno !== undefined) return "deno"
  if (typeof g.process?.versions?.node === "string") return "node"
  return "unknown"
}

/**
 * The detected runtime's version string (`"1.4.5"` for Bun, `"2.9.6"` for Deno, `"20.20.2"` for
 * Node), or `"unknown"`.
 *
 * @since 0.1.0
 * @category runtime
 */
export const version = (globals: object = globalThis): string => {
  const g = globals as RuntimeGlobals
  switch (detect(globals)) {
    case "bun":
      return g.Bun?.version ?? "unknown"
    case "deno":
      return g.Deno?.version?.deno ?? "unknown"
    case "node":
      return g.process?.versions?.node ?? "unknown"
    case "unknown":
      return "unknown"
  }
}

/**
 * `"<runtime> <version>"`, e.g. `"bun 1.4.5"`, for logs and benchmark results.
 *
 * @since 0.1.0
 * @category runtime
 */
export const describe = (globals: object = globalThis): string => `${detect(globals)} ${version(globals)}`
