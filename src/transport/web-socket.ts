/**
 * The WebSocket transport: the coordinator serves, ranks connect (docs/design.md §5).
 *
 * The server is `ws` on Node, `Bun.serve` under Bun and `Deno.serve` under Deno; the client is
 * `ws` on Node and the global `WebSocket` elsewhere (all in `src/platform/`).
 *
 * The join handshake, protocol version `joinProtocolVersion` (1): a client joins with one text
 * message `{"v": 1, "token", "rank"}` where `rank` is an integer or `"auto"` (the lowest rank not
 * yet joined, dead or alive); `v` may be absent (read as 1). The server answers
 * `{"v": 1, "welcome": rank, "run"?: value}` (`rank` the one assigned; `run` what
 * `ServerOptions.welcome` gives for it, absent without it) or closes with a refusal code
 * (`Transport.CloseCode`): `BadJoin` 4000 (not a join, or a `v` other than 1), `WrongToken` 4001,
 * `RankOutOfRange` 4002, `RankDead` 4011 (the rank's link ended or it was ended from outside: a
 * dead rank never comes back), `RunFormed` 4010 (after `markFormed`, in a run that cannot grow; one
 * that can has `ServerOptions.admit` decide instead: its refusals are 4013-4020,
 * `Transport.joinRefusalCloseCode`), `DuplicateRank` 4003 (a live
 * rank's second connection; `"auto"` with every rank taken), `JoinTimeout` 4004, `TryAgainLater` 1013 past `pendingJoinsMax` and
 * `AddressBusy` 4008 past `pendingJoinsPerAddressMax` (and, in a run that may grow, before
 * `markFormed`: `TryAgainLater` for a join the formation cannot take, `"auto"` with every formation
 * rank taken or an index `>= worldSize`); the first message decides at once, so a
 * connection without the token holds a pending-join slot no longer than its first message.
 * `connect` retries 1013 and 4008 with jittered exponential back-off; every other refusal is
 * final. A joined rank's frame that names another sender (with `WireFrames.inspect`) closes with 1008 and is not
 * delivered. Nothing reaches the inbox before a join is accepted. After the join, frames travel as
 * binary batches; a message over `messageBytesMax` closes with 1009. A connection's end is `Ended{rank, Disconnected{closeCode}}`, after its last frame.
 *
 * Protocol 2 (`joinProtocolVersion`; `ClientOptions.resumable`): the join is
 * `{"v": 2, "token", "rank"}` and the welcome adds `"session"` (an id) and `"received": 0`; the
 * batches then travel numbered and in pieces (`internal/session.ts`), acknowledged, with pings. A
 * rank whose link dropped or went silent joins again with
 * `{"v": 2, "token", "rank", "resume": {"session", "received", "attempt"}}` and is welcomed with
 * the messages the server received; both send again what the other missed and the link goes on
 * (`internal/held-link.ts`, `internal/resuming-link.ts`). Refusals of a resume: `RankDead` 4011
 * (the link ended, or the coordinator declared the rank), `ResumeLost` 4030 (an unknown session, or
 * messages no longer held), `DuplicateRank` 4003 (an older attempt than one already taken). The
 * server reads joins of both versions; docs/liveness-links.md gives the timeouts' bounds.
 *
 * @since 0.1.0
 */
export * from "./web-socket-client.ts"
export * from "./web-socket-protocol.ts"
export * from "./web-socket-server.ts"
