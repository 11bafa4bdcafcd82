/**
 * What both ends of the WebSocket transport agree on: the join protocol's version and the
 * defaults of a resumable link (protocol 2) that the server and the client share. The protocol
 * itself is described in `web-socket.ts`.
 *
 * @since 0.1.0
 */

/**
 * The join handshake's newest protocol version: 2 (resumable links). A server reads joins of
 * version 1 (or none) as before and of version 2; see the module doc.
 *
 * @since 0.1.0
 * @category model
 */
export const joinProtocolVersion = 2

/** Default `pieceBytes`: 64 KiB. @since 0.1.0 @category options */
export const pieceBytesDefault = 64 * 1024

/** Default `resendBytesMax`: 64 MiB. @since 0.1.0 @category options */
export const resendBytesMaxDefault = 64 * 1024 * 1024

/**
 * How long after a rank last sent a message its pings keep going: 1500 ms. Pings fill the gaps
 * between the heartbeats the rank sends (every second by default), so that the last sign of life
 * before a cut is at most a ping interval old; they stop soon after the rank stops sending, so
 * that they never keep a stuck rank alive in the coordinator's eyes. (The server pings as long as
 * its process runs.)
 *
 * @since 0.1.0
 * @category options
 */
export const pingAfterSendMsDefault = 1500

/**
 * The text a beat link's proof signs (HMAC-SHA256 under the welcome's `beatKey`, base64url): the
 * rank and its session, so that a proof opens no other rank's or session's beat link
 * (`WebSocketServer.ServerOptions.beatLinks`).
 *
 * @since 0.1.0
 * @category model
 */
export const beatProofText = (rank: number, session: string): string => `cohort-beat|${rank}|${session}`
