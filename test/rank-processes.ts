// Rank processes of a test's run, found from the outside (Linux /proc), to stop them with a signal.
import { readdirSync, readFileSync } from "node:fs"

/**
 * The pid of rank `rank`'s process of the run whose start data names `dir` (the test's own
 * output folder, so that another test's ranks are never taken), or `undefined` while there is
 * none.
 */
export const rankPid = (rank: number, dir: string): number | undefined => {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, "utf8")
      const isRank = environ.startsWith(`COHORT_CHILD_RANK=${rank}\0`) || environ.includes(`\0COHORT_CHILD_RANK=${rank}\0`)
      if (isRank && environ.includes(dir)) return Number(entry)
    } catch {
      // a process that ended meanwhile, or one not ours
    }
  }
  return undefined
}

/** The host pids of `parent`'s children (from `/proc/<pid>/stat`'s ppid). */
export const childrenOf = (parent: number): Array<number> =>
  readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
        return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1] === String(parent)
      } catch {
        return false
      }
    })
