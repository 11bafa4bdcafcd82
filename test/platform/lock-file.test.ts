// The resume lock: created exclusively, refused while its holder lives, taken over once its holder
// is gone (its process ended, its PID was reused, another boot, a container's PID namespace that
// is gone), removed on release. Real files and real processes.
import { spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as LockFile from "../../src/platform/lock-file.ts"

const dir = mkdtempSync(join(tmpdir(), "cohort-lock-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const linux = existsSync("/proc/self/stat")
/** What a lock of this process records beside its pid and time: on Linux its start, boot and PID namespace. */
const self = linux
  ? {
      startTicks: Number(readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ")[19]),
      bootId: readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim(),
      pidNamespace: readlinkSync("/proc/self/ns/pid")
    }
  : {}

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
    const written = JSON.parse(readFileSync(path, "utf8"))
    expect(written).toEqual({ pid: process.pid, acquiredAtMs: 1234, ...self })
    const second = await LockFile.acquire(path, 5678)
    expect(second).toEqual({ _tag: "Held", owner: written })
    if (first._tag !== "Acquired") return
    await first.release()
    expect(existsSync(path)).toBe(false)
    await first.release()
    const third = await LockFile.acquire(path, 9)
    expect(third._tag === "Acquired" && third.tookOver).toBe(undefined)
    if (third._tag === "Acquired") await third.release()
  })

  it("a lock whose process is gone is taken over and says from whom", async () => {
    const path = join(dir, "stale.lock")
    const pid = deadPid()
    expect(LockFile.processAlive(pid)).toBe(false)
    writeFileSync(path, `${JSON.stringify({ pid, acquiredAtMs: 1 })}\n`)
    const taken = await LockFile.acquire(path, 2)
    expect(taken._tag === "Acquired" && taken.tookOver).toEqual({ owner: { pid, acquiredAtMs: 1 }, why: `process ${pid} is gone` })
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ pid: process.pid, acquiredAtMs: 2, ...self })
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
    expect([
      LockFile.processAlive(process.pid),
      LockFile.processAlive(1),
      LockFile.processAlive(deadPid()),
      LockFile.processAlive(0),
      LockFile.processAlive(-5)
    ]).toEqual([true, true, false, false, false])
  })

  it("an old lock that holds only a live pid is held (the pid's liveness decides)", async () => {
    const path = join(dir, "old.lock")
    writeFileSync(path, `${JSON.stringify({ pid: process.pid, acquiredAtMs: 4 })}\n`)
    expect(await LockFile.acquire(path, 5)).toEqual({ _tag: "Held", owner: { pid: process.pid, acquiredAtMs: 4 } })
  })

  it.runIf(linux)("a lock naming a live pid that started at another time (a reused PID) is taken over, with why", async () => {
    const child = spawn("sleep", ["30"], { stdio: "ignore" })
    try {
      const pid = child.pid!
      const path = join(dir, "reused.lock")
      // The lock's holder had this pid but started earlier: the live `sleep` is another process.
      writeFileSync(path, `${JSON.stringify({ pid, acquiredAtMs: 6, ...self, startTicks: self.startTicks! - 1 })}\n`)
      const found = await LockFile.inspect(path)
      expect(found._tag === "Stale" && found.why).toBe(`process ${pid} started at another time (its PID was reused)`)
      const taken = await LockFile.acquire(path, 7)
      expect(taken._tag === "Acquired" && taken.tookOver?.why).toBe(`process ${pid} started at another time (its PID was reused)`)
      if (taken._tag === "Acquired") await taken.release()
    } finally {
      child.kill("SIGKILL")
    }
  })

  it.runIf(linux)(
    "a lock of this very process (same start, boot and namespace) is held; of another boot, or of a PID namespace that is gone, stale",
    async () => {
      const path = join(dir, "facts.lock")
      const write = (extra: object) => writeFileSync(path, `${JSON.stringify({ pid: process.pid, acquiredAtMs: 8, ...self, ...extra })}\n`)
      write({})
      expect((await LockFile.inspect(path))._tag).toBe("Live")
      write({ bootId: "00000000-0000-0000-0000-000000000000" })
      expect(await LockFile.inspect(path)).toMatchObject({
        _tag: "Stale",
        why: `process ${process.pid} ran before the machine restarted (another boot id)`
      })
      // PID 1 of a container that is gone: no process of that namespace is left.
      write({ pid: 1, pidNamespace: "pid:[1]" })
      expect(await LockFile.inspect(path)).toMatchObject({ _tag: "Stale", why: "process 1 of another PID namespace (a container) is gone" })
      // PID 1 of this namespace with another start time: the lock is not init's.
      write({ pid: 1 })
      expect(await LockFile.inspect(path)).toMatchObject({ _tag: "Stale", why: "process 1 started at another time (its PID was reused)" })
      expect(await LockFile.inspect(join(dir, "none.lock"))).toEqual({ _tag: "None" })
    }
  )
})
