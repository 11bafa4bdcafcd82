/**
 * Revocations of a served run's ranks and credentials while it goes on (`cohort revoke RUN_DIR
 * RANK|CREDENTIAL-ID`): one line each, appended to `<runDir>/revoked` (`rank 3`, `credential
 * c0a1b2c3d4e5f`), which the coordinator reads every `revocationPollMs`. A revoked credential is
 * refused at every later join or resume (`CredentialRevoked`, 4022), and the rank holding it is
 * closed with that code (so declared dead: its samples go to the survivors); a revoked rank is
 * closed the same way, and the credential it joined with is revoked with it. A rank that joined
 * with the run token itself has no credential of its own: revoking it closes it (and a dead rank
 * never comes back), but the run token stays good.
 *
 * @since 0.1.0
 */
import * as Files from "../../src/platform/files.ts"

/** The file in a run's folder that holds its revocations. @since 0.1.0 @category revocations */
export const revokedFileName = "revoked"

/** How often a served run reads its revocations (ms): 500. @since 0.1.0 @category revocations */
export const revocationPollMs = 500

/** The most bytes of revocations a run reads: 1 MiB (about 40,000 lines). @since 0.1.0 @category revocations */
export const revokedBytesMax = 1024 * 1024

/** One revocation: a rank index, or a credential's id. @since 0.1.0 @category revocations */
export type Revocation = { readonly rank: number } | { readonly credential: string }

/**
 * Reads `RANK|CREDENTIAL-ID` as `cohort revoke` takes it: digits are a rank, else a credential id
 * (1 to 32 characters of `[A-Za-z0-9_-]`, starting with a letter); `undefined` for anything else.
 *
 * @since 0.1.0
 * @category revocations
 */
export const parseTarget = (text: string): Revocation | undefined =>
  /^\d{1,9}$/.test(text) ? { rank: Number(text) } : /^[A-Za-z][A-Za-z0-9_-]{0,31}$/.test(text) ? { credential: text } : undefined

const lineOf = (revocation: Revocation): string =>
  "rank" in revocation ? `rank ${revocation.rank}` : `credential ${revocation.credential}`

/**
 * Appends `revocation` to `<runDir>/revoked` (created if missing). Rejects as the file system
 * does (`ENOENT` when `runDir` is not there).
 *
 * @since 0.1.0
 * @category revocations
 */
export const append = async (runDir: string, revocation: Revocation): Promise<void> => {
  const appender = Files.openAppend(`${runDir}/${revokedFileName}`)
  appender.write(`${lineOf(revocation)}\n`)
  await appender.close()
}

/**
 * Every revocation in `<runDir>/revoked`, in order (none when the file is missing; lines that do
 * not read as one are left out; a file over `revokedBytesMax` reads as none).
 *
 * @since 0.1.0
 * @category revocations
 */
export const read = async (runDir: string): Promise<ReadonlyArray<Revocation>> => {
  const read = await Files.readRegularFile(`${runDir}/${revokedFileName}`, revokedBytesMax).catch(() => undefined)
  if (read?._tag !== "Read") return []
  return new TextDecoder()
    .decode(read.bytes)
    .split("\n")
    .flatMap((line) => {
      const [kind, value] = line.trim().split(/\s+/)
      const target = value === undefined ? undefined : parseTarget(value)
      if (target === undefined) return []
      return (kind === "rank" && "rank" in target) || (kind === "credential" && "credential" in target) ? [target] : []
    })
}

/**
 * What a served run knows of credentials: which rank joined with which credential id, which ids
 * are revoked, and how many lines of `revoked` it has applied. At most one entry per rank that
 * joined, plus one per revocation.
 *
 * @since 0.1.0
 * @category revocations
 */
export interface Ledger {
  /** `rank` joined with credential `id`. */
  readonly joined: (rank: number, id: string) => void
  readonly isRevoked: (id: string) => boolean
  /** The revocations of `all` (the whole file, as `read` gives it) not applied yet. */
  readonly fresh: (all: ReadonlyArray<Revocation>) => ReadonlyArray<Revocation>
  /** Applies one: the rank to close (the credential's holder, or the rank named) and the credential revoked, each when known. */
  readonly revoke: (revocation: Revocation) => { readonly rank: number | undefined; readonly credential: string | undefined }
}

/** A new, empty `Ledger`. @since 0.1.0 @category revocations */
export const ledger = (): Ledger => {
  const credentialOf = new Map<number, string>()
  const holderOf = new Map<string, number>()
  const revoked = new Set<string>()
  let applied = 0
  return {
    joined: (rank, id) => {
      credentialOf.set(rank, id)
      holderOf.set(id, rank)
    },
    isRevoked: (id) => revoked.has(id),
    fresh: (all) => {
      const left = all.slice(applied)
      applied = Math.max(applied, all.length)
      return left
    },
    revoke: (revocation) => {
      const credential = "credential" in revocation ? revocation.credential : credentialOf.get(revocation.rank)
      if (credential !== undefined) revoked.add(credential)
      return { rank: "rank" in revocation ? revocation.rank : holderOf.get(revocation.credential), credential }
    }
  }
}
