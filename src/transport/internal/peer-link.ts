/**
 * One TCP connection of a direct ring link (`PeerRing`), each side of it: its frames
 * (`LinkFrames`) and the handshake in which both ends prove they hold the generation's secret
 * (`PeerRing`'s module doc says who may connect, how and why). The connector's side is
 * `connect`, the listener's `accept`; `PeerRing` ties the connections to its generations.
 *
 * @since 0.1.0
 * @internal
 */
import type { Rank } from "../../core/messages.ts"
import * as Select from "../../platform/select.ts"
import type * as RuntimeTypes from "../../platform/types.ts"
import * as LinkFrames from "./link-frames.ts"

/**
 * Close codes of a refused or ended connection, sent in a close frame before the stream ends: `BadHello` (4020: not a hello, or a proof that does
 * not check), `BadAnswer` (4025: the listener's answer to the connector's challenge does not check),
 * `NotNeighbour` (4021: the sender is not this generation's previous neighbour, or the generation is
 * over), `TooManyParked` (4022), `BadStep` (4023: a frame that is not a step of this generation, or one over `messageBytesMax`),
 * `Superseded` (4024: a newer generation opened, or the rank ends).
 *
 * @since 0.1.0
 * @category model
 */
export const closeCodes = {
  BadHello: 4020,
  NotNeighbour: 4021,
  TooManyParked: 4022,
  BadStep: 4023,
  Superseded: 4024,
  BadAnswer: 4025
} as const

/** Random bytes in each side's challenge. @since 0.1.0 @category limits */
export const challengeBytes = 32

export interface Hello {
  readonly generation: number
  readonly from: number
  readonly challenge: string
  readonly proof: string
}

/** The largest frame either side takes before the other proved it holds the token (the handshake's JSON). @since 0.1.0 @category limits */
export const handshakeBytesMax = 4096

/** Milliseconds a closed link waits for its peer to end the stream after the close frame, before it drops it. */
const closeLingerMs = 1000

const parsed = (text: string): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

const helloOf = (text: string): Hello | undefined => {
  const value = parsed(text)
  if (value === undefined || !Number.isSafeInteger(value["generation"]) || !Number.isSafeInteger(value["from"])) return undefined
  if (typeof value["challenge"] !== "string" || typeof value["proof"] !== "string") return undefined
  return value as unknown as Hello
}

/** A field `key` of a text frame's JSON that is a string, else `undefined`. */
const fieldOf = (text: string, key: string): string | undefined => {
  const value = parsed(text)?.[key]
  return typeof value === "string" ? value : undefined
}

const textOf = (frame: LinkFrames.Frame): string => new TextDecoder().decode(frame.payload)

const hex = (bytes: Uint8Array): string => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")

const unhex = (text: string): Uint8Array<ArrayBuffer> | undefined => {
  if (text.length % 2 !== 0 || !/^[0-9a-f]*$/.test(text)) return undefined
  const bytes = new Uint8Array(new ArrayBuffer(text.length / 2))
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16)
  return bytes
}

const challenge = (): string => hex(globalThis.crypto.getRandomValues(new Uint8Array(challengeBytes)))

/**
 * The run token as an HMAC-SHA256 key (WebCrypto, the same on every runtime). Each proof names its
 * direction, generation and both ranks, so one cannot be replayed as another.
 */
export const proofKey = (token: string) => {
  const key = globalThis.crypto.subtle.importKey("raw", new TextEncoder().encode(token), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
    "verify"
  ])
  const text = (parts: ReadonlyArray<string | number>) => new TextEncoder().encode(["cohort-peer-ring", ...parts].join("|"))
  return {
    sign: async (parts: ReadonlyArray<string | number>): Promise<string> =>
      hex(new Uint8Array(await globalThis.crypto.subtle.sign("HMAC", await key, text(parts)))),
    // `verify` compares in time independent of where the proofs differ.
    check: async (proof: string, parts: ReadonlyArray<string | number>): Promise<boolean> => {
      const bytes = unhex(proof)
      return bytes !== undefined && globalThis.crypto.subtle.verify("HMAC", await key, bytes, text(parts))
    }
  }
}

export type ProofKey = ReturnType<typeof proofKey>

/** A TCP stream with this module's frames on it. */
interface Framed {
  readonly sendText: (words: string) => void
  readonly sendStep: (message: RuntimeTypes.RingWire) => void
  /** Sends a close frame with `code` and ends the stream; drops it if the peer has not closed within `closeLingerMs`. */
  readonly close: (code: number, reason: string) => void
  readonly destroy: () => void
}

/**
 * The frames of `stream`. A step's buffer is the link's once sent (`Ring.PeerLink`): when the
 * step's values fill it, or it starts a buffer the pool gave, it goes back to `pool` as soon as the
 * stream is done with it.
 */
const framed = (stream: RuntimeTypes.TcpStream, pool: LinkFrames.BufferPool): Framed => {
  let closing = false
  return {
    sendText: (words) => stream.write(LinkFrames.text(words)),
    sendStep: (message) => {
      const { buffer, byteOffset, byteLength } = message.data
      // The sender gave the step up: a buffer the step fills, or one the pool gave, goes back.
      const whole = buffer instanceof ArrayBuffer && byteOffset === 0 && byteLength === buffer.byteLength
      stream.write(
        LinkFrames.step(message.generation, message.round, message.step, message.data),
        whole || pool.issued(message.data) ? () => pool.give(buffer as ArrayBuffer) : undefined
      )
    },
    close: (code, reason) => {
      if (closing) return
      closing = true
      stream.write(LinkFrames.close(code, reason))
      stream.end()
      setTimeout(stream.destroy, closeLingerMs)
    },
    destroy: stream.destroy
  }
}

/**
 * Where a rank's listener is (`ws://host:port/`, `tcp://host:port`, or `unix:/path` for a Unix
 * socket on this machine); `undefined` when `url` names none.
 */
export const addressOf = (url: string): { readonly host: string; readonly port: number } | { readonly path: string } | undefined => {
  if (url.startsWith(unixScheme)) {
    const path = url.slice(unixScheme.length)
    return path.startsWith("/") ? { path } : undefined
  }
  try {
    const parsedUrl = new URL(url)
    const port = Number(parsedUrl.port)
    if (!Number.isInteger(port) || port <= 0) return undefined
    return { host: parsedUrl.hostname.replace(/^\[(.*)\]$/, "$1"), port }
  } catch {
    return undefined
  }
}

/** The scheme of a listener's address on a Unix socket: `unix:` and its absolute path. */
export const unixScheme = "unix:"

export interface Incoming {
  readonly socket: Framed
  deliver: ((message: RuntimeTypes.RingWire) => void) | undefined
}

const connectTo = (
  address: { readonly host: string; readonly port: number } | { readonly path: string },
  handlers: RuntimeTypes.TcpHandlers & { readonly open: () => void }
): RuntimeTypes.TcpStream =>
  "path" in address ? Select.connectPath(address.path, handlers) : Select.connectTcp(address.host, address.port, handlers)

/**
 * The outgoing link of `generation` to rank `next`: `connected` resolves `true` once the listener
 * proved it holds the token (module doc), `false` when that does not happen within
 * `connectTimeoutMs`, its proof does not check, or the link closes first.
 */
export const connect = (
  rank: Rank,
  pool: LinkFrames.BufferPool,
  key: ProofKey,
  connectTimeoutMs: number,
  generation: number,
  next: Rank,
  url: string | undefined
): { readonly connected: Promise<boolean>; readonly socket: () => Framed | undefined; readonly close: () => void } => {
  // Start data travels as JSON: a rank without a listener has `null` there.
  const address = typeof url === "string" && next !== rank ? addressOf(url) : undefined
  if (address === undefined) return { connected: Promise.resolve(false), socket: () => undefined, close: () => {} }
  let open = false
  let ended = false
  let socket: Framed | undefined
  const connected = new Promise<boolean>((resolve) => {
    const fail = (code: number, reason: string) => {
      if (ended) return
      ended = true
      clearTimeout(timer)
      socket?.close(code, reason)
      resolve(false)
    }
    const timer = setTimeout(() => {
      if (open) return
      ended = true
      socket?.destroy()
      resolve(false)
    }, connectTimeoutMs)
    const mine = challenge()
    let theirs: string | undefined
    const answer = async (text: string): Promise<void> => {
      if (theirs === undefined) {
        theirs = fieldOf(text, "challenge")
        if (theirs === undefined) return fail(closeCodes.BadAnswer, "no challenge")
        const proof = await key.sign(["hello", theirs, generation, rank, next])
        if (!ended) socket!.sendText(JSON.stringify({ generation, from: rank, challenge: mine, proof }))
        return
      }
      const proof = fieldOf(text, "proof")
      if (proof === undefined || !(await key.check(proof, ["answer", mine, theirs, generation, rank, next]))) {
        return fail(closeCodes.BadAnswer, "the listener does not hold the run token")
      }
      if (ended) return
      open = true
      clearTimeout(timer)
      resolve(true)
    }
    const reader = new LinkFrames.FrameReader(
      handshakeBytesMax,
      (frame) => {
        // A close frame ends the link; once the link is made the listener sends nothing else.
        if (frame.kind === LinkFrames.kinds.Close) return socket?.destroy()
        if (open || ended) return
        if (frame.kind !== LinkFrames.kinds.Text) return fail(closeCodes.BadAnswer, "not a handshake frame")
        void answer(textOf(frame)).catch(() => fail(closeCodes.BadAnswer, "no proof"))
      },
      (reason) => fail(closeCodes.BadAnswer, reason)
    )
    socket = framed(
      connectTo(address, {
        open: () => {},
        data: (chunk) => reader.push(chunk),
        close: () => {
          ended = true
          open = false
          clearTimeout(timer)
          resolve(false)
        }
      }),
      pool
    )
  })
  return {
    connected,
    socket: () => (open && !ended ? socket : undefined),
    close: () => {
      ended = true
      socket?.close(1000, "generation over")
    }
  }
}

/**
 * The listener's side of one connection (module doc): sends a challenge, checks the hello's proof,
 * answers the connector's challenge and hands the hello to `accepted`; later frames go to `step`,
 * each at most `messageBytesMax`.
 */
export const accept = (
  stream: RuntimeTypes.TcpStream,
  pool: LinkFrames.BufferPool,
  keyFor: (generation: number) => Promise<ProofKey | number>,
  rank: Rank,
  messageBytesMax: number,
  accepted: (hello: Hello, incoming: Incoming) => void,
  step: (hello: Hello, incoming: Incoming, frame: LinkFrames.Frame) => void,
  closed: (incoming: Incoming) => void
): RuntimeTypes.TcpHandlers => {
  const socket = framed(stream, pool)
  const incoming: Incoming = { socket, deliver: undefined }
  const mine = challenge()
  let hello: Hello | undefined
  let checking = false
  let gone = false
  const refuse = () => socket.close(closeCodes.BadHello, "bad hello")
  const reader = new LinkFrames.FrameReader(
    handshakeBytesMax,
    (frame) => {
      if (frame.kind === LinkFrames.kinds.Close) return socket.destroy()
      if (hello !== undefined) return step(hello, incoming, frame)
      // Nothing may come between the hello and this side's answer.
      const said = frame.kind === LinkFrames.kinds.Text && !checking ? helloOf(textOf(frame)) : undefined
      if (said === undefined) return refuse()
      checking = true
      void welcome(said).catch(refuse)
    },
    (reason) => socket.close(hello === undefined ? closeCodes.BadHello : closeCodes.BadStep, reason),
    (bytes) => pool.take(bytes)
  )
  const welcome = async (said: Hello): Promise<void> => {
    const key = await keyFor(said.generation)
    if (typeof key === "number") return gone ? undefined : socket.close(key, "no secret for this generation")
    if (!(await key.check(said.proof, ["hello", mine, said.generation, said.from, rank])) || gone) return gone ? undefined : refuse()
    const proof = await key.sign(["answer", said.challenge, mine, said.generation, said.from, rank])
    if (gone) return
    hello = said
    reader.payloadBytesMax = messageBytesMax
    socket.sendText(JSON.stringify({ proof }))
    accepted(said, incoming)
  }
  socket.sendText(JSON.stringify({ challenge: mine }))
  return {
    data: (chunk) => reader.push(chunk),
    readInto: () => reader.readTarget(),
    filled: (bytes) => reader.filled(bytes),
    close: () => {
      gone = true
      closed(incoming)
    }
  }
}
