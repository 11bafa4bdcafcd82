/**
 * The structural rules of docs/design.md §2, as a pure checker over `{path, text}` pairs so that the
 * tidy test can run it both on the real tree and on fixtures that must fail.
 */

export interface SourceFile {
  /** Path relative to the repository root, with forward slashes, e.g. `src/core/ledger.ts`. */
  readonly path: string
  readonly text: string
}

export interface Violation {
  readonly path: string
  readonly line: number
  readonly rule: "import" | "global" | "cycle" | "length"
  readonly detail: string
}

const stripComments = (text: string): string =>
  // Keep line structure so line numbers stay right.
  text.replace(/\/\*[\s\S]*?\*\//g, (block) => block.replace(/[^\n]/g, " ")).replace(/(^|[^:"'`\\])\/\/.*$/gm, (_m, lead: string) => lead)

/** Every import/export specifier in a file, with its 1-based line. */
export const importSpecifiers = (text: string): Array<{ readonly specifier: string; readonly line: number }> => {
  const code = stripComments(text)
  const found: Array<{ specifier: string; line: number }> = []
  const patterns = [
    /\bimport\s+(?:type\s+)?[^"'`;]*?\bfrom\s*["']([^"']+)["']/g,
    /\bexport\s+(?:type\s+)?[^"'`;]*?\bfrom\s*["']([^"']+)["']/g,
    /\bimport\s*["']([^"']+)["']/g,
    /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g,
    /\brequire\s*\(\s*["']([^"']+)["']\s*\)/g
  ]
  for (const pattern of patterns) {
    for (const match of code.matchAll(pattern)) {
      const index = match.index ?? 0
      found.push({ specifier: match[1] ?? "", line: code.slice(0, index).split("\n").length })
    }
  }
  return found.sort((a, b) => a.line - b.line)
}

const normalize = (parts: ReadonlyArray<string>): string => {
  const out: Array<string> = []
  for (const part of parts) {
    if (part === "" || part === ".") continue
    if (part === "..") out.pop()
    else out.push(part)
  }
  return out.join("/")
}

/** Resolves a relative specifier against the importing file's folder. */
export const resolveRelative = (fromPath: string, specifier: string): string =>
  normalize([...fromPath.split("/").slice(0, -1), ...specifier.split("/")])

type Area = "core" | "wire" | "actor" | "transport" | "platform" | "averaging" | "train" | "cli" | "dashboard" | "actors" | "other"

const areaOf = (path: string): Area => {
  if (path.startsWith("src/core/")) return "core"
  if (path.startsWith("src/wire/")) return "wire"
  if (path.startsWith("src/actor/")) return "actor"
  if (path.startsWith("src/platform/")) return "platform"
  if (path.startsWith("src/transport/")) return "transport"
  if (path.startsWith("src/averaging/")) return "averaging"
  if (path.startsWith("src/train/")) return "train"
  if (path === "src/cli.ts" || path.startsWith("src/cli/")) return "cli"
  if (path.startsWith("src/dashboard/")) return "dashboard"
  if (path.startsWith("actors/")) return "actors"
  return "other"
}

/** Which areas each area may import (relative imports), per docs/design.md §2. */
const allowedAreas: Record<Area, ReadonlyArray<Area>> = {
  core: ["core"],
  wire: ["core", "wire"],
  actor: ["core", "wire", "actor", "platform"],
  transport: ["core", "wire", "actor", "transport", "platform"],
  platform: ["platform"],
  averaging: ["core", "wire", "actor", "averaging", "platform"],
  train: ["core", "train", "platform"],
  // The command line composes everything; it reaches actors/ only through `cliEntry`.
  cli: ["core", "wire", "actor", "transport", "platform", "averaging", "train", "actors", "cli", "dashboard"],
  // The run page: its model and browser module, and the build that bundles them (platform).
  dashboard: ["core", "dashboard", "platform"],
  actors: ["core", "wire", "actor", "transport", "platform", "averaging", "train", "actors"],
  other: []
}

/** The one file of actors/ that src/ may import (docs/design.md §2). */
export const cliEntry = "actors/cli-entry.ts"

/** Which packages (bare specifiers, by package name) each area may import. */
const allowedPackages: Record<Area, ReadonlyArray<string>> = {
  core: [],
  wire: ["effect", "cbor-x"],
  actor: ["effect", "nanoid"],
  transport: ["effect", "nanoid"],
  platform: ["*"],
  averaging: ["effect"],
  train: ["effect", "pure-rand", "mnist"],
  // The command line parses with commander and draws progress bars with cli-progress.
  cli: ["effect", "nanoid", "commander", "cli-progress"],
  // The page's charts (bundled into the page by esbuild).
  dashboard: ["uplot"],
  actors: ["effect", "nanoid"],
  other: ["*"]
}

const packageName = (specifier: string): string => {
  const parts = specifier.split("/")
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : (parts[0] ?? specifier)
}

const runtimeSpecific = (specifier: string): boolean =>
  specifier.startsWith("node:") ||
  specifier.startsWith("bun:") ||
  specifier === "ws" ||
  specifier.startsWith("jsr:") ||
  specifier.startsWith("npm:")

/** Globals banned in `src/core`: the core takes time as `nowMs` and randomness as a seed. */
const coreBannedGlobals: ReadonlyArray<{ readonly name: string; readonly pattern: RegExp }> = [
  { name: "Date.now", pattern: /\bDate\s*\.\s*now\b/ },
  { name: "new Date", pattern: /\bnew\s+Date\b/ },
  { name: "Math.random", pattern: /\bMath\s*\.\s*random\b/ },
  { name: "setTimeout", pattern: /\bsetTimeout\b/ },
  { name: "setInterval", pattern: /\bsetInterval\b/ },
  { name: "performance", pattern: /\bperformance\b/ },
  { name: "process", pattern: /(?<![.\w$])process\b/ },
  { name: "crypto", pattern: /(?<![.\w$])crypto\s*\./ }
]

/** Runtime globals banned everywhere outside `src/platform/`. */
const runtimeGlobals: ReadonlyArray<{ readonly name: string; readonly pattern: RegExp }> = [
  { name: "Bun", pattern: /(?<![.\w$])Bun\s*\./ },
  { name: "Deno", pattern: /(?<![.\w$])Deno\s*\./ }
]

const stripStrings = (code: string): string =>
  code.replace(/"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`/g, (s) => s.replace(/[^\n]/g, " "))

/**
 * The import cycles among `files` (relative imports, type-only and dynamic ones included): one
 * violation per cycle, on its first file, naming the files around it in import order.
 */
export const cycles = (files: ReadonlyArray<SourceFile>): ReadonlyArray<Violation> => {
  const known = new Set(files.map((f) => f.path))
  const edges = new Map<string, Array<{ readonly target: string; readonly line: number }>>()
  for (const file of files) {
    const out = importSpecifiers(file.text)
      .filter(({ specifier }) => specifier.startsWith("."))
      .map(({ specifier, line }) => ({ target: resolveRelative(file.path, specifier), line }))
      .filter(({ target }) => known.has(target))
    edges.set(file.path, out)
  }
  // Depth-first search over the files in path order; a back edge closes a cycle.
  const state = new Map<string, "open" | "done">()
  const stack: Array<string> = []
  const found: Array<Violation> = []
  const seen = new Set<string>()
  const visit = (path: string): void => {
    state.set(path, "open")
    stack.push(path)
    for (const { target, line } of edges.get(path) ?? []) {
      const mark = state.get(target)
      if (mark === undefined) visit(target)
      else if (mark === "open") {
        const ring = stack.slice(stack.indexOf(target))
        const key = [...ring].sort().join(" ")
        if (!seen.has(key)) {
          seen.add(key)
          found.push({ path, line, rule: "cycle", detail: [...ring, target].join(" -> ") })
        }
      }
    }
    stack.pop()
    state.set(path, "done")
  }
  for (const path of [...known].sort()) if (!state.has(path)) visit(path)
  return found
}

/**
 * `text` with comments, strings, template text and regular expressions blanked (newlines kept),
 * and the code inside a template's `${…}` kept: what brace counting needs. Regular expressions
 * are told from division by the character before them.
 */
export const blankLiterals = (text: string): string => {
  const out = text.split("")
  const blank = (from: number, to: number): void => {
    for (let k = from; k < to; k++) if (out[k] !== "\n") out[k] = " "
  }
  // Each open template's brace depth at its `${`, innermost last.
  const templates: Array<number> = []
  let depth = 0
  let last = ""
  let i = 0
  const skipString = (quote: string): void => {
    const start = i
    i++
    while (i < text.length && text[i] !== quote && text[i] !== "\n") i += text[i] === "\\" ? 2 : 1
    blank(start + 1, i)
    i++
  }
  const skipTemplateText = (): void => {
    // From just after a backtick or a closing `}` of `${`: to the closing backtick or the next `${`.
    const start = i
    while (i < text.length && text[i] !== "`" && !(text[i] === "$" && text[i + 1] === "{")) i += text[i] === "\\" ? 2 : 1
    blank(start, i)
    if (text[i] === "`") {
      i++
      last = "`"
      return
    }
    templates.push(depth)
    depth++
    i += 2
    last = "{"
  }
  while (i < text.length) {
    const c = text[i]!
    const next = text[i + 1]
    if (c === "/" && next === "/") {
      const end = text.indexOf("\n", i)
      const stop = end === -1 ? text.length : end
      blank(i, stop)
      i = stop
    } else if (c === "/" && next === "*") {
      const end = text.indexOf("*/", i + 2)
      const stop = end === -1 ? text.length : end + 2
      blank(i, stop)
      i = stop
    } else if (c === "'" || c === '"') {
      skipString(c)
      last = c
    } else if (c === "`") {
      i++
      skipTemplateText()
    } else if (c === "/" && (last === "" || "(,=:[!&|?{};+-*%<>~^".includes(last))) {
      const start = i
      let inClass = false
      i++
      while (i < text.length && text[i] !== "\n" && (inClass || text[i] !== "/")) {
        if (text[i] === "\\") i++
        else if (text[i] === "[") inClass = true
        else if (text[i] === "]") inClass = false
        i++
      }
      blank(start + 1, i)
      i++
      last = "/"
    } else {
      if (c === "{") depth++
      else if (c === "}") {
        depth--
        if (templates.length > 0 && templates[templates.length - 1] === depth) {
          templates.pop()
          i++
          skipTemplateText()
          continue
        }
      }
      if (!/\s/.test(c)) last = /[\w$]/.test(c) ? "a" : c
      i++
    }
  }
  return out.join("")
}

/** The longest a function may be, in lines, without a stated reason. */
export const functionLinesMax = 120

const controlWords = new Set(["if", "for", "while", "switch", "catch", "with", "return", "else", "do", "try", "finally"])

/** Whether a line (comments and strings blanked) ends by opening a function's body. */
const opensFunction = (line: string): boolean => {
  if (!/\{\s*$/.test(line)) return false
  if (/=>\s*\{\s*$/.test(line)) return true
  if (/\bfunction\b\s*\*?\s*[\w$]*\s*(?:<[^>]*>)?\s*\([^]*\)[^{]*\{\s*$/.test(line)) return true
  const method =
    /^\s*(?:(?:public|private|protected|static|async|override|get|set)\s+)*\*?\s*([\w$]+)\s*(?:<[^>]*>)?\s*\([^]*\)\s*(?::[^{]*)?\{\s*$/.exec(
      line
    )
  return method !== null && !controlWords.has(method[1] ?? "")
}

/**
 * Functions longer than `functionLinesMax` lines (from the line that opens the body to the one
 * that closes it) whose body does not begin with a comment stating why: `// Long because …`.
 */
export const longFunctions = (files: ReadonlyArray<SourceFile>, linesMax = functionLinesMax): ReadonlyArray<Violation> => {
  const found: Array<Violation> = []
  for (const file of files) {
    const original = file.text.split("\n")
    const lines = blankLiterals(file.text).split("\n")
    lines.forEach((line, index) => {
      if (!opensFunction(line)) return
      let depth = 0
      for (let i = index; i < lines.length; i++) {
        const text = i === index ? (lines[i] ?? "").slice((lines[i] ?? "").lastIndexOf("{")) : (lines[i] ?? "")
        for (const char of text) {
          if (char === "{") depth += 1
          else if (char === "}") depth -= 1
          if (depth === 0) break
        }
        if (depth === 0) {
          const length = i - index + 1
          const reason = /^\s*\/\/\s*Long because\b/.test(original[index + 1] ?? "")
          if (length > linesMax && !reason) {
            found.push({
              path: file.path,
              line: index + 1,
              rule: "length",
              detail: `a function of ${length} lines (at most ${linesMax} without a "// Long because" reason)`
            })
          }
          return
        }
      }
    })
  }
  return found
}

/** Checks every rule on the given files; an empty result means the tree is tidy. */
export const check = (files: ReadonlyArray<SourceFile>): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = [...cycles(files), ...longFunctions(files.filter((f) => areaOf(f.path) !== "other"))]
  for (const file of files) {
    const area = areaOf(file.path)
    if (area === "other") continue
    for (const { specifier, line } of importSpecifiers(file.text)) {
      if (specifier.startsWith(".")) {
        const target = resolveRelative(file.path, specifier)
        const targetArea = areaOf(target)
        if (!allowedAreas[area].includes(targetArea)) {
          violations.push({ path: file.path, line, rule: "import", detail: `${area} may not import ${target}` })
        } else if (targetArea === "actors" && file.path.startsWith("src/") && target !== cliEntry) {
          violations.push({
            path: file.path,
            line,
            rule: "import",
            detail: `src may import actors/ only through ${cliEntry}, not ${target}`
          })
        }
        continue
      }
      if (runtimeSpecific(specifier) && area !== "platform") {
        violations.push({
          path: file.path,
          line,
          rule: "import",
          detail: `${specifier} is runtime-specific: only src/platform/ may import it`
        })
        continue
      }
      const allowed = allowedPackages[area]
      if (!allowed.includes("*") && !allowed.includes(packageName(specifier))) {
        violations.push({ path: file.path, line, rule: "import", detail: `${area} may not import package ${specifier}` })
      }
    }
    if (area === "platform") continue
    const lines = stripStrings(stripComments(file.text)).split("\n")
    const banned = area === "core" ? [...coreBannedGlobals, ...runtimeGlobals] : runtimeGlobals
    lines.forEach((text, index) => {
      for (const { name, pattern } of banned) {
        if (pattern.test(text)) {
          violations.push({ path: file.path, line: index + 1, rule: "global", detail: `${name} is banned in ${area}` })
        }
      }
    })
  }
  return violations
}
