// The launcher's private folders in memory (`FreePorts.socketFolder`): one whose owner died (a
// SIGKILLed launcher cannot remove it) is swept by the next launch; a live one, a young one, one
// of another name and a plain file are left alone.
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, utimesSync, writeFileSync, existsSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as FreePorts from "../../src/platform/free-ports.ts"

const root = mkdtempSync(join(tmpdir(), "sweep-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** Makes `path`'s modification time two minutes ago, so the sweep does not take it for one being made. */
const age = (path: string): void => {
  const then = new Date(Date.now() - 120_000)
  utimesSync(path, then, then)
}

/** A folder like `socketFolder`'s whose listener was closed by its owner's death: a socket file nobody listens on. */
const deadFolder = async (name: string): Promise<string> => {
  const path = join(root, name)
  mkdirSync(path, { mode: 0o700 })
  writeFileSync(join(path, "area-0-0.f32"), new Uint8Array(64))
  // A child that listens on the folder's alive.sock and is then SIGKILLed: the socket file stays.
  const child = spawn(process.execPath, [
    "-e",
    `require("node:net").createServer().listen(${JSON.stringify(join(path, "alive.sock"))}, () => process.stdout.write("up"))`
  ])
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()))
  child.kill("SIGKILL")
  await new Promise<void>((resolve) => child.once("exit", () => resolve()))
  expect(existsSync(join(path, "alive.sock"))).toBe(true)
  age(path)
  return path
}

describe.skipIf(process.platform === "win32")("stale socket folders (FreePorts.sweepStaleSocketFolders)", () => {
  it("removes a folder whose listener died; keeps one without a listener's socket (an older Cohort's), a live one, a young one and what it did not make", async () => {
    // A live folder made the way a launch makes one (first: a launch sweeps), aged: its listener answers.
    const live = await FreePorts.socketFolderIn(root)
    expect(live).toBeDefined()
    age(live!)
    const dead = await deadFolder("cohort-dead")
    const bare = join(root, "cohort-bare")
    mkdirSync(bare, { mode: 0o700 })
    age(bare)
    const young = join(root, "cohort-young")
    mkdirSync(young, { mode: 0o700 })
    const other = join(root, "other-dead")
    mkdirSync(other)
    age(other)
    writeFileSync(join(root, "cohort-file"), "not a folder")
    // A plain file where the socket would be: connecting to it is refused as well, but it is no listener's.
    const plain = join(root, "cohort-plain")
    mkdirSync(plain, { mode: 0o700 })
    writeFileSync(join(plain, "alive.sock"), "a user's own file")
    age(plain)

    const removed = await FreePorts.sweepStaleSocketFolders(root)
    expect(removed).toEqual([dead])
    expect(existsSync(dead)).toBe(false)
    for (const kept of [bare, plain, young, other, join(root, "cohort-file"), live!]) expect(existsSync(kept)).toBe(true)

    await FreePorts.removeSocketFolder(live!)
    expect(existsSync(live!)).toBe(false)
  })
})
