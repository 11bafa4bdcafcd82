/**
 * `cohort revoke RUN_DIR RANK|CREDENTIAL-ID`: revokes a served run's rank or credential while the
 * run goes on (`actors/launcher/revocations.ts`): the line goes to `RUN_DIR/revoked`, which the coordinator
 * reads every half second; the rank holding it is closed with `CredentialRevoked` (4022), its
 * samples go to the survivors, and it is refused on return. Prints `cohort revoke: <what> revoked
 * in RUN_DIR (the coordinator applies it within a second)`. Exit 0, or 2 for bad input (a
 * RUN_DIR that is not a run's folder or whose run has ended, a target that is neither a rank nor a
 * credential id, a rank the run cannot hold, an id the run never issued): a revocation that
 * could not apply must never look as if it did.
 *
 * @since 0.1.0
 */
import { parseJournal, readText, Revocations, reportDefaults } from "../../actors/cli-entry.ts"
import * as Files from "../platform/files.ts"
import { type Io, usage } from "./conduct.ts"
import { ExitCode } from "./defaults.ts"
import { firstLine } from "./parse.ts"

/**
 * Runs `cohort revoke` with `argv` (the arguments after `revoke`) and returns its exit code.
 *
 * @since 0.1.0
 * @category cli
 */
export const main = async (argv: ReadonlyArray<string>, io: Io): Promise<number> => {
  const [runDir, target, ...rest] = argv
  if (runDir === undefined || target === undefined || rest.length > 0)
    return usage(io, "revoke expects RUN_DIR and one RANK or CREDENTIAL-ID")
  const revocation = Revocations.parseTarget(target)
  if (revocation === undefined)
    return usage(io, `revoke: '${target}' is neither a rank index nor a credential id (as the journal's joined events name them)`)
  if (!(await Files.exists(`${runDir}/events.ndjson`)))
    return usage(io, `revoke: ${runDir} is not a run's folder (it has no events.ndjson)`)
  const run = await runOf(runDir)
  if (typeof run === "string") return usage(io, `revoke: ${run}`)
  if (run.ended) return usage(io, `revoke: the run in ${runDir} has ended: there is nothing to revoke`)
  if ("rank" in revocation && revocation.rank >= run.ranksMax) {
    return usage(io, `revoke: rank ${revocation.rank} is not a rank of this run (it holds ranks 0 to ${run.ranksMax - 1})`)
  }
  if ("credential" in revocation && !(await issuedIds(runDir, run.ranksMax)).includes(revocation.credential)) {
    return usage(io, `revoke: this run issued no credential '${revocation.credential}' (their ids are in ${runDir}/credentials/)`)
  }
  try {
    await Revocations.append(runDir, revocation)
  } catch (error) {
    return usage(io, `revoke: cannot write ${runDir}/${Revocations.revokedFileName}: ${firstLine(error)}`)
  }
  const what = "rank" in revocation ? `rank ${revocation.rank}` : `credential ${revocation.credential}`
  io.out(`cohort revoke: ${what} revoked in ${runDir} (the coordinator applies it within a second)\n`)
  return ExitCode.ok
}

/**
 * The ranks a run may hold and whether it has ended, from its journal (read as `cohort report`
 * reads it: a last line cut short by a write still going on is fine); a string when unreadable.
 */
const runOf = async (runDir: string): Promise<{ readonly ranksMax: number; readonly ended: boolean } | string> => {
  const path = `${runDir}/events.ndjson`
  const read = await readText(path, reportDefaults.fileBytesMax)
  if (typeof read === "string") return read
  const journal = parseJournal(read.text, path)
  if (typeof journal === "string") return journal
  // A growing run's ranks go up to its `maxRanks` (RunResult carries neither, hence the started event).
  const { worldSize, options } = journal.started
  const maxRanks = options?.["maxRanks"]
  const { result } = journal
  const ended = result.outcome !== undefined || ("failed" in result && result.failed !== undefined)
  return { ranksMax: typeof maxRanks === "number" ? Math.max(maxRanks, worldSize) : worldSize, ended }
}

/** The ids of the credentials `serve --issue-tokens` wrote for the run (`credentials/rank<r>`). */
const issuedIds = async (runDir: string, ranksMax: number): Promise<ReadonlyArray<string>> => {
  const ids: Array<string> = []
  for (let rank = 0; rank < ranksMax; rank++) {
    const read = await readText(`${runDir}/credentials/rank${rank}`, credentialBytesMax)
    if (typeof read === "string") break
    const id = read.text.trim().split(".")[1]
    if (id !== undefined) ids.push(id)
  }
  return ids
}

/** A credential's text is under 200 bytes; a larger file there is none of ours. */
const credentialBytesMax = 4096
