/**
 * Synchronous, positioned reads and writes of one file, for the file all-reduce of child-process
 * ranks on one machine (`FileAllReduce`): on a memory-backed file system (`/dev/shm` on Linux) a
 * positioned write or read is a plain memory copy in the kernel, the only memory Node, Bun and Deno
 * processes can share. `node:fs`'s synchronous calls behave the same on the three runtimes.
 *
 * Every function but `closeFile`, `removeFile` and `memoryFolder` throws the runtime's `Error` (`code`
 * `ENOSPC`, `EIO`, `ENOENT`, ...) when the operating system refuses; none retries.
 *
 * @since 0.1.0
 */
import { accessSync, closeSync, constants, openSync, readSync, statSync, unlinkSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"

/** Bytes of zeros written a call when a file is filled (`create`). */
const fillBytes = 1 << 20

/**
 * Creates `path` (it must not exist; mode 0600: this user's only) and fills it with `bytes` zero
 * bytes, so that a file system without room says so now (`ENOSPC`) rather than at a later write.
 * Gives the open descriptor (read and write). Removes what it made when it fails.
 *
 * @since 0.1.0
 * @category files
 */
export const createAreaFile = (path: string, bytes: number): number => {
  const fd = openSync(path, "wx+", 0o600)
  try {
    const zeros = new Uint8Array(Math.min(fillBytes, Math.max(bytes, 1)))
    for (let at = 0; at < bytes; ) {
      const size = Math.min(zeros.length, bytes - at)
      at += writeSync(fd, zeros, 0, size, at)
    }
    return fd
  } catch (error) {
    closeFile(fd)
    removeFile(path)
    throw error
  }
}

/**
 * Opens `path` for reading (another rank's file). Throws `ENOENT` when it is not there.
 *
 * @since 0.1.0
 * @category files
 */
export const openAreaFile = (path: string): number => openSync(path, "r")

/**
 * Writes all of `data`'s bytes into `fd` at byte `position`.
 *
 * @since 0.1.0
 * @category files
 */
export const writeAt = (fd: number, data: ArrayBufferView, position: number): void => {
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
  for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at, position + at)
}

/**
 * Reads `into.byteLength` bytes of `fd` from byte `position` into `into` (which may lie in a
 * shared or WebAssembly memory). Throws a `RangeError` when the file ends first.
 *
 * @since 0.1.0
 * @category files
 */
export const readAt = (fd: number, into: ArrayBufferView, position: number): void => {
  const bytes = new Uint8Array(into.buffer, into.byteOffset, into.byteLength)
  for (let at = 0; at < bytes.length; ) {
    const read = readSync(fd, bytes, at, bytes.length - at, position + at)
    if (read === 0) throw new RangeError(`the file ended at byte ${position + at}, ${bytes.length - at} bytes short`)
    at += read
  }
}

/** Closes `fd`; never throws. @since 0.1.0 @category files */
export const closeFile = (fd: number): void => {
  try {
    closeSync(fd)
  } catch {}
}

/** Removes file `path`; never throws (a file already gone is fine). @since 0.1.0 @category files */
export const removeFile = (path: string): void => {
  try {
    unlinkSync(path)
  } catch {}
}

/**
 * The folder for files that should live in memory: `/dev/shm` where it is a folder this process
 * may write in (Linux), else the system's temporary folder.
 *
 * @since 0.1.0
 * @category files
 */
export const memoryFolder = (): string => {
  try {
    if (statSync("/dev/shm").isDirectory()) {
      accessSync("/dev/shm", constants.W_OK | constants.X_OK)
      return "/dev/shm"
    }
  } catch {}
  return tmpdir()
}
