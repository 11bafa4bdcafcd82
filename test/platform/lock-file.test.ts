// The resume lock: created exclusively, refused while its process lives, taken over once its
// process is gone, removed on release. Real files and real processes.
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as LockFile from "../../src/platform/lock-file.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort-lock-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** The id of a process that has ended (a finished child). */
const deadPid = (): number => {
  const child = spawnSync(process.execPath, [...(typeof (globalThis as { Deno?: unknown }).Deno === "object" ? ["eval"] : ["-e"]), "0"])
  expect(child.status).toBe(0)
  return child.pid!
}

describe("lock files", () => {
  it("the first acquire holds the lock (its pid in the file), a second is refused naming the holder, release removes it", async () => {
    const path = join(dir, "a.lock")
    const first = await LockFile.acquire(path, 1234)
    expect(first._tag).toBe("Acquired")
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ pid: process.pid, acquiredAtMs: 1234 })
    const second = await LockFile.acquire(path, 5678)
    expect(second).toEqual({ _tag: "Held", owner: { pid: process.pid, acquiredAtMs: 1234 } })
    if (first._tag !== "Acquired") return
    await first.release()
    expect(existsSync(path)).toBe(false)
    await first.release()
    const third = await LockFile.acquire(path, 9)
    expect(third._tag === "Acquired" && third.tookOverFrom).toBe(undefined)
    if (third._tag === "Acquired") await third.release()
  })

  it("a lock whose process is gone is taken over and says from whom", async () => {
    const path = join(dir, "stale.lock")
    const pid = deadPid()
    expect(LockFile.processAlive(pid)).toBe(false)
    writeFileSync(path, `${JSON.stringify({ pid, acquiredAtMs: 1 })}\n`)
    const taken = await LockFile.acquire(path, 2)
    expect(taken._tag === "Acquired" && taken.tookOverFrom).toBe(pid)
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ pid: process.pid, acquiredAtMs: 2 })
    if (taken._tag === "Acquired") await taken.release()
    expect(existsSync(path)).toBe(false)
  })

  it("a lock file that is not a lock counts as held, and is left alone", async () => {
    const path = join(dir, "garbage.lock")
    writeFileSync(path, "not json")
    expect(await LockFile.acquire(path, 3)).toEqual({ _tag: "Held", owner: undefined })
    expect(readFileSync(path, "utf8")).toBe("not json")
  })

  it("processAlive: this process and pid 1 are alive; an ended child and nonsense ids are not", () => {
    expect([LockFile.processAlive(process.pid), LockFile.processAlive(1), LockFile.processAlive(deadPid()), LockFile.processAlive(0), LockFile.processAlive(-5)])
      .toEqual([true, true, false, false, false])
  })
})
