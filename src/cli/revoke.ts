/**
 * `cohort revoke RUN_DIR RANK|CREDENTIAL-ID`: revokes a served run's rank or credential while the
 * run goes on (`actors/launcher/revocations.ts`): the line goes to `RUN_DIR/revoked`, which the coordinator
 * reads every half second; the rank holding it is closed with `CredentialRevoked` (4022), its
 * samples go to the survivors, and it is refused on return. Prints `cohort revoke: <what> revoked
 * in RUN_DIR (the coordinator applies it within a second)`. Exit 0, or 2 for bad input (a
 * RUN_DIR that is not a run's folder, a target that is neither a rank nor a credential id).
 *
 * @since 0.1.0
 */
import { Revocations } from "../../actors/cli-entry.ts"
import * as Files from "../platform/files.ts"
import { type Io, usage } from "./conduct.ts"
import { ExitCode, firstLine } from "./parse.ts"

/**
 * Runs `cohort revoke` with `argv` (the arguments after `revoke`) and returns its exit code.
 *
 * @since 0.1.0
 * @category cli
 */
export const main = async (argv: ReadonlyArray<string>, io: Io): Promise<number> => {
  const [runDir, target, ...rest] = argv
  if (runDir === undefined || target === undefined || rest.length > 0) return usage(io, "revoke expects RUN_DIR and one RANK or CREDENTIAL-ID")
  const revocation = Revocations.parseTarget(target)
  if (revocation === undefined) return usage(io, `revoke: '${target}' is neither a rank index nor a credential id (as the journal's joined events name them)`)
  if (!(await Files.exists(`${runDir}/events.ndjson`))) return usage(io, `revoke: ${runDir} is not a run's folder (it has no events.ndjson)`)
  try {
    await Revocations.append(runDir, revocation)
  } catch (error) {
    return usage(io, `revoke: cannot write ${runDir}/${Revocations.revokedFileName}: ${firstLine(error)}`)
  }
  const what = "rank" in revocation ? `rank ${revocation.rank}` : `credential ${revocation.credential}`
  io.out(`cohort revoke: ${what} revoked in ${runDir} (the coordinator applies it within a second)\n`)
  return ExitCode.ok
}
