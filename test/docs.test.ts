// The README, CONTRIBUTING.md and docs/: every `npx cohort ...` command in a shell block parses as written, every
// relative link points at a file that exists, and the README stays short.
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { describe, expect, it } from "vitest"
import * as Cli from "../src/cli/index.ts"

const root = join(import.meta.dirname, "..")
const pages = [
  "README.md",
  "CONTRIBUTING.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`)
]
const read = (page: string): string => readFileSync(join(root, page), "utf8")

// Pages written on other branches at the same time; the README links them before they land.
const comingPages = new Set([
  "docs/storage-and-locks.md",
  "docs/liveness.md",
  "docs/liveness-links.md",
  "docs/install.md",
  "docs/testing.md",
  "docs/records.md"
])

/** The `npx cohort` command lines of a page's ```sh blocks, without trailing comments. */
const commandsOf = (text: string): Array<string> => {
  const blocks = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] ?? "")
  return blocks
    .flatMap((block) => block.split("\n"))
    .filter((line) => line.startsWith("npx cohort "))
    .map((line) => line.replace(/\s+#.*$/, "").trim())
}

describe("docs", () => {
  it("the README is at most 200 lines", () => {
    expect(read("README.md").split("\n").length).toBeLessThanOrEqual(200)
  })

  for (const page of pages) {
    const commands = commandsOf(read(page))
    for (const command of commands) {
      it(`${page}: ${command}`, () => {
        const argv = command.split(/\s+/).slice(2)
        const parsed = Cli.parse(argv)
        expect("error" in parsed ? parsed.error : undefined).toBeUndefined()
        // `--version` and `-V` are the `version` command's other names.
        expect(parsed).toHaveProperty("command", argv[0] === "--version" || argv[0] === "-V" ? "version" : argv[0])
      })
    }
  }

  it("every relative link of the README and docs/ points at a file", () => {
    const broken: Array<string> = []
    for (const page of pages) {
      for (const match of read(page).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = (match[1] ?? "").split("#")[0] ?? ""
        if (target === "" || /^[a-z]+:/.test(target)) continue
        const path = join(dirname(page), target)
        if (!comingPages.has(path) && !existsSync(join(root, path))) broken.push(`${page} -> ${target}`)
      }
    }
    expect(broken).toEqual([])
  })
})
