/**
 * Join credentials of one rank, derived from the run token so that the coordinator keeps no list
 * of them: `cohort1.<id>.<rank>.<expiresAtMs>.<mac>`, where `rank` is an index or `any`,
 * `expiresAtMs` a Unix time in milliseconds (`0`: never) and `mac` the HMAC-SHA256 under the run
 * token of the run id and the other fields. Whoever holds the run token can issue them; whoever
 * holds one credential learns nothing of the token or of the others. The id is not secret: the
 * journal names it, and `cohort revoke` takes it.
 *
 * @since 0.1.0
 */
import * as Hmac from "../platform/hmac.ts"
import * as Transport from "./transport.ts"
import type { Credential } from "./web-socket.ts"

/** What starts every credential (its format's version). @since 0.1.0 @category credentials */
export const credentialPrefix = "cohort1"

/**
 * A credential's fields: `id` (1 to 32 characters of `[A-Za-z0-9_-]`), `rank` (an index >= 0, or
 * `"any"`), `expiresAtMs` (Unix ms; `undefined`: never).
 *
 * @since 0.1.0
 * @category credentials
 */
export interface Fields {
  readonly id: string
  readonly rank: number | "any"
  readonly expiresAtMs: number | undefined
}

const idPattern = /^[A-Za-z0-9_-]{1,32}$/

const signed = (runToken: string, runId: string, fields: Fields): string =>
  Hmac.hmacSha256(runToken, `${credentialPrefix}|${runId}|${fields.id}|${fields.rank}|${fields.expiresAtMs ?? 0}`)

/** A new credential id: `c` and 12 hex digits, 13 characters (48 random bits; ids only need to differ, and never read as a rank index). @since 0.1.0 @category credentials */
export const newId = (): string =>
  "c" + Array.from(globalThis.crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, "0")).join("")

/**
 * The credential text for `fields` in run `runId` under `runToken`. Throws a `RangeError` for an
 * id outside its pattern, a rank that is not an integer >= 0 or `"any"`, or an expiry that is not
 * a positive integer.
 *
 * @since 0.1.0
 * @category credentials
 */
export const issue = (runToken: string, runId: string, fields: Fields): string => {
  if (!idPattern.test(fields.id)) throw new RangeError(`a credential id is 1 to 32 characters of A-Z a-z 0-9 _ -, got '${fields.id}'`)
  if (fields.rank !== "any" && !(Number.isSafeInteger(fields.rank) && fields.rank >= 0))
    throw new RangeError(`a credential's rank is an integer >= 0 or any, got ${fields.rank}`)
  if (fields.expiresAtMs !== undefined && !(Number.isSafeInteger(fields.expiresAtMs) && fields.expiresAtMs > 0))
    throw new RangeError(`a credential's expiry is a positive integer (Unix ms), got ${fields.expiresAtMs}`)
  return `${credentialPrefix}.${fields.id}.${fields.rank}.${fields.expiresAtMs ?? 0}.${signed(runToken, runId, fields)}`
}

/** The fields and mac of a credential's text, or `undefined` when it is not one. */
const parse = (text: string): { readonly fields: Fields; readonly mac: string } | undefined => {
  const parts = text.split(".")
  if (parts.length !== 5 || parts[0] !== credentialPrefix) return undefined
  const [, id, rankText, expiryText, mac] = parts as [string, string, string, string, string]
  if (!idPattern.test(id) || !/^(any|\d{1,9})$/.test(rankText) || !/^\d{1,16}$/.test(expiryText)) return undefined
  const expiresAtMs = Number(expiryText)
  return {
    fields: { id, rank: rankText === "any" ? "any" : Number(rankText), expiresAtMs: expiresAtMs === 0 ? undefined : expiresAtMs },
    mac
  }
}

/** Equal strings, compared in time that does not depend on where they differ. */
const sameText = (a: string, b: string): boolean => {
  let diff = a.length ^ b.length
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0)
  return diff === 0
}

/**
 * Reads a join's token as a credential of run `runId` (`WebSocket.ServerOptions.credential`):
 * `undefined` when it is not a credential or its mac is not the run's (a wrong token: 4001); the
 * refusal `CredentialRevoked` (4022) when `revoked(id, rank)` says so, `CredentialExpired` (4023)
 * at `nowMs` past its expiry; else its `Credential`. The mac is compared in constant time.
 *
 * @since 0.1.0
 * @category credentials
 */
export const check = (
  runToken: string,
  runId: string,
  token: string,
  nowMs: number,
  revoked: (id: string) => boolean
): Credential | { readonly closeCode: number; readonly reason: string } | undefined => {
  const parsed = parse(token)
  if (parsed === undefined || !sameText(parsed.mac, signed(runToken, runId, parsed.fields))) return undefined
  const { id, rank, expiresAtMs } = parsed.fields
  if (revoked(id)) return { closeCode: Transport.CloseCode.CredentialRevoked, reason: `credential ${id} was revoked` }
  if (expiresAtMs !== undefined && nowMs >= expiresAtMs)
    return { closeCode: Transport.CloseCode.CredentialExpired, reason: `credential ${id} expired` }
  return { id, rank }
}
