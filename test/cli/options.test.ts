// The flags of demo and run are one table (src/cli/options.ts): the help text and docs/cli.md's
// options table are made from it, and the parser knows every flag in it.
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import * as Cli from "../../src/cli/index.ts"
import * as Options from "../../src/cli/options.ts"

const docs = readFileSync(new URL("../../docs/cli.md", import.meta.url), "utf8")

describe("the options table of demo and run", () => {
  it("is docs/cli.md's table of demo and run, row for row (paste Options.docTable() there when a flag changes)", () => {
    const section = docs.slice(docs.indexOf("## Options of `demo` and `run`"))
    const start = section.indexOf("| flag | default | meaning |")
    const rows = section.slice(start).split("\n")
    const table = rows
      .slice(
        0,
        rows.findIndex((line) => !line.startsWith("|"))
      )
      .join("\n")
    expect(table).toBe(Options.docTable())
  })

  it("is the help text's list of demo and run options", () => {
    expect(Cli.helpText()).toContain(`Options of demo and run:\n${Options.helpLines()}\n\n`)
  })

  it("names only flags the parser knows, each with its default from the parser's own", () => {
    for (const option of Options.runFlagTable) {
      const [name, argument] = option.flag.split(" ")
      const argv = ["run", "--trainer", "t.ts", name!, ...(argument === undefined || argument.startsWith("[") ? [] : ["1"])]
      expect(Cli.parse(argv)).not.toEqual({ error: `unknown option '${name}'` })
    }
    const byFlag = new Map(Options.runFlagTable.map((option) => [option.flag, option.default]))
    expect(byFlag.get("--world-size N")).toBe(String(Cli.defaults.worldSize))
    expect(byFlag.get("--heartbeat-timeout-ms N")).toBe(String(Cli.defaults.heartbeatTimeoutMs))
  })
})
