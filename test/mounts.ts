// The full tier's storage faults (root on Linux): a small tmpfs, filled as another writer on the
// same disk would fill it, and removed even when its test failed.
import { spawnSync } from "node:child_process"
import { closeSync, openSync, rmSync, writeSync } from "node:fs"

/** Throws unless this process is root on Linux, naming what the test needs root for (`mount`, `unshare --pid`). */
export const requireRootLinux = (forWhat: string): void => {
  if (process.platform !== "linux" || process.getuid?.() !== 0) {
    throw new Error(`THIS TEST NEEDS ROOT ON LINUX (${forWhat}): uid ${process.getuid?.()} on ${process.platform}`)
  }
}

/** Runs `command args`; throws with its stderr when it fails. */
export const sh = (command: string, args: ReadonlyArray<string>): void => {
  const done = spawnSync(command, args, { encoding: "utf8" })
  if (done.status !== 0) throw new Error(`${command} ${args.join(" ")}: ${done.stderr}`)
}

/** Writes 4 KiB blocks to the new file `path` until its file system is full (ENOSPC); any other error is thrown. */
export const fillDisk = (path: string): void => {
  const fd = openSync(path, "w")
  try {
    const block = new Uint8Array(4096)
    for (;;) writeSync(fd, block)
  } catch (error) {
    if ((error as { code?: string }).code !== "ENOSPC") throw error
  } finally {
    closeSync(fd)
  }
}

/** Unmounts `mount` (lazily if busy) and removes its folder; never throws (a `finally` step). */
export const unmount = (mount: string): void => {
  if (spawnSync("umount", [mount]).status !== 0) spawnSync("umount", ["-l", mount])
  rmSync(mount, { recursive: true, force: true })
}
