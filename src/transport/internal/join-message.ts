/**
 * The message a connection to the WebSocket server opens with (`web-socket.ts` describes the
 * protocol): a join `{token, rank, v?}` (v 1 or 2), or a protocol 2 resume `{..., resume:
 * {session, received, attempt}}`. Internal to `src/transport`.
 *
 * @since 0.1.0
 */

/** A resume (protocol 2): the session, the messages the rank received, and its attempt's number. */
export interface Resume {
  readonly session: string
  readonly received: number
  readonly attempt: number
}

/** A join: the token, the rank asked for (checked by the server), the protocol version, and a resume. */
export interface Join {
  readonly token: string
  readonly rank: unknown
  readonly version: 1 | 2
  readonly resume: Resume | undefined
}

const parseResume = (value: unknown): Resume | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const { session, received, attempt } = value as { session?: unknown; received?: unknown; attempt?: unknown }
  return typeof session === "string" && Number.isSafeInteger(received) && Number.isSafeInteger(attempt)
    ? { session, received: received as number, attempt: attempt as number }
    : undefined
}

/** A connection's first message as a join, or `undefined` when it is not one (too long, not JSON, a bad field). */
export const parseJoin = (data: Uint8Array | string): Join | undefined => {
  if (typeof data !== "string" || data.length > 4096) return undefined
  try {
    const value = JSON.parse(data) as { token?: unknown; rank?: unknown; v?: unknown; resume?: unknown }
    if (typeof value !== "object" || value === null || typeof value.token !== "string") return undefined
    if (value.v === undefined || value.v === 1) return { token: value.token, rank: value.rank, version: 1, resume: undefined }
    if (value.v !== 2) return undefined
    const resume = value.resume === undefined ? undefined : parseResume(value.resume)
    if (value.resume !== undefined && resume === undefined) return undefined
    return { token: value.token, rank: value.rank, version: 2, resume }
  } catch {
    return undefined
  }
}
