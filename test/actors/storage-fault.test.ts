// The words of a storage fault: the code first on every runtime, the path named, and which rank
// failure texts are storage faults.
import { describe, expect, it } from "vitest"
import * as StorageFault from "../../actors/launcher/storage-fault.ts"

const errorOf = (message: string, code: string): Error => Object.assign(new Error(message), { code })

describe("storage faults", () => {
  it("Node's message is kept; Deno's (no code in it) gets its code first; the line and the alert name the path", () => {
    const node = StorageFault.of("runs/a/events.ndjson", errorOf("ENOSPC: no space left on device, write", "ENOSPC"))
    const deno = StorageFault.of("runs/a/events.ndjson", errorOf("Read-only file system (os error 30)", "EROFS"))
    expect([node.error, deno.error]).toEqual(["ENOSPC: no space left on device, write", "EROFS: read-only file system (os error 30)"])
    expect(StorageFault.text(node)).toBe("cannot write runs/a/events.ndjson: ENOSPC: no space left on device, write")
    expect(StorageFault.alert(node, 7)).toEqual({
      ts: 7,
      severity: "critical",
      path: "root",
      class: "StorageFault",
      detail: "cannot write runs/a/events.ndjson: ENOSPC: no space left on device, write",
      count: 1
    })
  })

  it("a rank's failure text is a storage fault when it names a refused write's code", () => {
    expect(
      ["EIO: i/o error, write", "EMFILE: too many open files, open 'x'", "the trainer's save threw: boom", "ENOENTITY"].map(
        StorageFault.isStorageError
      )
    ).toEqual([true, true, false, false])
  })
})
