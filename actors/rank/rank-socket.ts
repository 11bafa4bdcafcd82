/**
 * Entry of a local rank process that joins its coordinator over a WebSocket (TypeScript, for
 * Bun, Deno, or Node through tsx); see `socket-rank.ts`.
 *
 * @since 0.1.0
 */
import * as SocketRank from "./socket-rank.ts"

await SocketRank.processMain()
