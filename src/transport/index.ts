/**
 * Cohort's transports for building on the network path yourself (package entry
 * `cohort/transport`): the WebSocket server and client the coordinator and `cohort join` use
 * (`WebSocket.serve`, `WebSocket.connect`: run-token joins, join protocols 1 and 2 (resumable
 * links, `resumable: true`) with `"auto"` ranks,
 * one connection per rank, limits and close codes), the contract every transport shares
 * (`Transport`: `TransportShape`, `TransportError`, `CloseCode`), and the WebSocket ranks host
 * that `run({ transport: "websocket" })` starts (`WebSocketRanks`).
 *
 * ```ts
 * import { WebSocket } from "cohort/transport"
 * // coordinator side, in an Effect scope:
 * const server = yield* WebSocket.serve({ runToken, worldSize: 4 }) // 127.0.0.1, a free port
 * // rank side, anywhere that reaches server.url:
 * const client = yield* WebSocket.connect({ url: server.url, runToken, rank: "auto" })
 * ```
 *
 * @since 0.1.0
 */
export * as Transport from "./transport.ts"
export * as WebSocket from "./web-socket.ts"
export * as WebSocketRanks from "./web-socket-ranks.ts"
