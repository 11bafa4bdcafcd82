/**
 * Direct ring links between ranks in separate processes: each rank listens on a TCP port of its
 * own, and in every ring generation connects to its next ring neighbour's port and sends it that
 * generation's ring steps, so that a step travels rank to rank instead of through the
 * coordinator's relay (docs/averaging.md, docs/ring.md).
 *
 * The link is a plain TCP stream of length-prefixed binary frames (`LinkFrames`): a step is a
 * 20-byte header (generation, round, step) and its values as raw floats, read into a buffer of
 * their own and handed on as a typed-array view; no CBOR, no WebSocket framing or masking. A
 * rank whose address is `unix:/path` listens on that Unix socket instead, and its previous
 * neighbour connects there: the same stream and frames between ranks on one machine, without
 * TCP's own work in the kernel.
 *
 * Who may connect: both ends prove they hold the run's `token` (a secret the host handed every
 * rank with its start data) without ever sending it, since whoever listens on a neighbour's port
 * may be another process that took the port first. The listener sends a text frame challenge
 * `{challenge}` (random, `challengeBytes`) as the connection opens; the connector answers with a
 * hello `{generation, from, challenge, proof}`, `proof` the HMAC-SHA256 under the token of the
 * listener's challenge, the generation and both ranks; the listener answers `{proof}` over the
 * connector's challenge in turn, and the connector counts the link as made only once that checks.
 * Until then each side takes only small text frames (`handshakeBytesMax`). The listener takes a
 * connection only from the rank that is its previous neighbour in that generation; anything else
 * is closed with a close frame carrying a code (`closeCodes`). A hello for a generation this rank
 * has not opened yet (its `FormRing` is still on the way) is held, at most `parkedMax` of them for
 * `parkedMs`, until it is opened.
 *
 * Between hosts (`cohort serve`/`join`) there is no secret of the run: each `FormRing` hands its
 * generation's secret and the next neighbour's address to `open` instead (docs/ring.md), and a
 * hello for a generation not opened yet waits for its secret (the same bounds) before its proof is
 * checked.
 *
 * Where a link cannot be made (no address for the neighbour, a refused or timed-out connection, a
 * listener that could not bind its port, one that cannot prove the token) `PeerEnd.connected`
 * resolves `false` and the caller sends
 * that generation's steps through the relay; the receiving side takes steps from both. A link that
 * closes after it opened sends nothing more (`send` answers `false`): a neighbour that died is
 * declared by the coordinator, which re-forms the ring.
 *
 * @since 0.1.0
 */
import type { Rank } from "../core/messages.ts"
import * as Select from "../platform/select.ts"
import type * as RuntimeTypes from "../platform/types.ts"
import * as LinkFrames from "./internal/link-frames.ts"
import { accept, addressOf, closeCodes, connect, type Hello, type Incoming, type ProofKey, proofKey } from "./internal/peer-link.ts"

/** The link's close codes and handshake bounds (`PeerLink`), part of this module's contract. */
export { challengeBytes, closeCodes, handshakeBytesMax } from "./internal/peer-link.ts"

/**
 * What a rank needs to link up directly: its own `rank`, the run's `token`, each rank's listener
 * URL by rank (`urls[r]`: `tcp://host:port`, `ws://host:port/` or `unix:/path`; `undefined` where
 * a rank has none) and where this rank listens
 * (`host`, `port`; it listens when `listen`, by default when `urls[rank]` is a string). Without a
 * `token` (empty), each generation's secret and next address come with `open`, and the rank
 * advertises its listener to the coordinator as reached at `advertise`.
 *
 * @since 0.1.0
 * @category model
 */
export interface PeerAddresses {
  readonly token: string
  readonly urls: ReadonlyArray<string | undefined>
  readonly host: string
  readonly port: number
  readonly listen?: boolean
  /** The host neighbours reach this rank's listener at, when it advertises one (`advertisedUrl`). */
  readonly advertise?: string | undefined
}

/**
 * The listener URL a rank advertises: `ws://host:port/` (an IPv6 `host` in brackets).
 *
 * @since 0.1.0
 * @category constructors
 */
export const advertisedUrl = (host: string, port: number): string => `ws://${host.includes(":") ? `[${host}]` : host}:${port}/`

/**
 * One generation's neighbours (`PeerRing.open`): `prev` (the only rank whose link this rank takes),
 * `next` (the rank it connects to), and, between hosts, the next one's listener `nextUrl` and the
 * generation's `secret` (each in place of `PeerAddresses.urls[next]` and `token` when non-empty).
 *
 * @since 0.1.0
 * @category model
 */
export interface Neighbours {
  readonly prev: Rank
  readonly next: Rank
  readonly nextUrl?: string | undefined
  readonly secret?: string | undefined
}

/**
 * The `Neighbours` of ring rank `ringRank` in ring order `peers`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const neighboursOf = (peers: ReadonlyArray<Rank>, ringRank: number): Neighbours => {
  const n = peers.length
  return { prev: peers[(ringRank - 1 + n) % n]!, next: peers[(ringRank + 1) % n]! }
}

/**
 * Bounds of `start`: `connectTimeoutMs` (default 5000) for a connection to open before its
 * generation falls back to the relay; `parkedMax` (default 16) hellos held for generations not
 * opened yet, each for at most `parkedMs` (default 30000); `messageBytesMax` (default 256 MiB) the
 * largest step taken.
 *
 * @since 0.1.0
 * @category options
 */
export interface PeerRingOptions extends PeerAddresses {
  readonly rank: Rank
  readonly connectTimeoutMs?: number
  readonly parkedMax?: number
  readonly parkedMs?: number
  readonly messageBytesMax?: number
  /** Step buffers kept for reuse (`LinkFrames.BufferPool`; default `keptBuffersMaxDefault`). */
  readonly keptBuffersMax?: number
  /**
   * Makes a new buffer of at least the bytes given for received steps (`LinkFrames.BufferPool`'s
   * `allocate`; default a plain `ArrayBuffer`): the ring's `RingSimd.stepBuffer`, whose SIMD loops
   * then work on a step where it lies.
   */
  readonly allocateStep?: ((capacityBytes: number) => ArrayBuffer) | undefined
}

/** Default `PeerRingOptions.connectTimeoutMs`. @since 0.1.0 @category limits */
export const connectTimeoutMsDefault = 5000
/** Default `PeerRingOptions.parkedMax`. @since 0.1.0 @category limits */
export const parkedMaxDefault = 16
/** Default `PeerRingOptions.parkedMs`. @since 0.1.0 @category limits */
export const parkedMsDefault = 30_000
/** Default `PeerRingOptions.messageBytesMax`. @since 0.1.0 @category limits */
export const messageBytesMaxDefault = 256 * 1024 * 1024
/**
 * Default `PeerRingOptions.keptBuffersMax`: a round's steps in flight on one rank's two links, for
 * rings of up to 16 ranks, with room to spare.
 *
 * @since 0.1.0
 * @category limits
 */
export const keptBuffersMaxDefault = 32

/**
 * Steps a parked link (its generation not opened here yet) may bring before it is opened: an
 * honest neighbour sends at most `ringSize - 1` of one collective before it needs this rank's
 * first step. More close the link with `TooManyParked`.
 *
 * @since 0.1.0
 * @category limits
 */
export const parkedStepsMax = 1024

/**
 * The bytes a ring step takes on a direct link: its frame's header (`LinkFrames.headerBytes`)
 * and its values (a packed step's bytes with `--compress`). What a rank counts of the steps it
 * sends and takes (`LinkBytes`).
 *
 * @since 0.1.0
 * @category frames
 */
export const stepBytes = (message: RuntimeTypes.RingWire): number => LinkFrames.headerBytes + message.data.byteLength

/**
 * One generation's two direct links: the outgoing one to the next neighbour and the incoming one
 * from the previous neighbour (module doc).
 *
 * - `connected`: resolves `true` once the outgoing link is open, `false` when it cannot be made
 *   (then send through the relay).
 * - `send`: sends one step on the outgoing link; `false` when it is not open (not yet, or no more).
 * - `onMessage`: the incoming link's steps, in the order sent.
 * - `close`: closes both.
 *
 * @since 0.1.0
 * @category model
 */
export interface PeerEnd {
  readonly generation: number
  readonly connected: Promise<boolean>
  readonly send: (message: RuntimeTypes.RingWire) => boolean
  readonly onMessage: (callback: (message: RuntimeTypes.RingWire) => void) => void
  readonly close: () => void
}

/**
 * A rank's direct ring links (`start`): `open` one generation's links (its `Neighbours`);
 * `listening()` whether its listener is bound; `bound` the port it listens on once bound
 * (`undefined` when it does not listen or cannot bind); `close` everything.
 *
 * @since 0.1.0
 * @category model
 */
export interface PeerRing {
  readonly open: (generation: number, neighbours: Neighbours) => PeerEnd
  readonly listening: () => boolean
  readonly bound: Promise<number | undefined>
  readonly close: () => void
}

interface Generation {
  readonly generation: number
  readonly prev: Rank
  readonly received: Array<RuntimeTypes.RingWire>
  deliver: ((message: RuntimeTypes.RingWire) => void) | undefined
  incoming: Incoming | undefined
  closed: boolean
}

/** Takes one step frame of generation `into` from its previous neighbour; `false` when it is not one. */
const take = (frame: LinkFrames.Frame, into: Generation): boolean => {
  if (!LinkFrames.isStep(frame.kind) || frame.generation !== into.generation) return false
  const step = { generation: frame.generation, round: frame.round, step: frame.step, data: LinkFrames.valuesOf(frame) }
  if (into.deliver !== undefined) into.deliver(step)
  else into.received.push(step)
  return true
}

/** Older generations are over: their incoming links close. */
const closeOlder = (generations: Map<number, Generation>, generation: number): void => {
  for (const [g, older] of generations) {
    if (g >= generation) continue
    older.closed = true
    older.incoming?.socket.close(closeCodes.Superseded, "generation over")
    generations.delete(g)
  }
}

/**
 * Starts listening on `options.host`:`options.port` (in the background: until it is bound, and
 * for good when it cannot bind, neighbours fall back to the relay) and returns the rank's links.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = (options: PeerRingOptions): PeerRing => {
  // Long because the listener's handshake in order (challenge, proof, answer), sharing one socket's state.
  const connectTimeoutMs = options.connectTimeoutMs ?? connectTimeoutMsDefault
  const parkedMax = options.parkedMax ?? parkedMaxDefault
  const parkedMs = options.parkedMs ?? parkedMsDefault
  const messageBytesMax = options.messageBytesMax ?? messageBytesMaxDefault
  const pool = new LinkFrames.BufferPool(options.keptBuffersMax ?? keptBuffersMaxDefault, options.allocateStep)
  // The run's secret (processes one host started), else each generation's from its `open`.
  const runKey = options.token === "" ? undefined : proofKey(options.token)
  const keys = new Map<number, ProofKey>()
  const generations = new Map<number, Generation>()
  let newest = -1
  // Hellos of generations not opened yet that wait for their secret (no run secret).
  const waiting: Array<{
    readonly generation: number
    readonly resolve: (key: ProofKey | number) => void
    timer?: ReturnType<typeof setTimeout>
  }> = []
  const keyFor = (generation: number): Promise<ProofKey | number> => {
    if (runKey !== undefined) return Promise.resolve(runKey)
    if (generation <= newest) return Promise.resolve(keys.get(generation) ?? closeCodes.NotNeighbour)
    if (waiting.length >= parkedMax) return Promise.resolve(closeCodes.TooManyParked)
    return new Promise((resolve) => {
      const entry: (typeof waiting)[number] = { generation, resolve }
      waiting.push(entry)
      entry.timer = setTimeout(() => {
        const at = waiting.indexOf(entry)
        if (at >= 0) waiting.splice(at, 1)
        resolve(closeCodes.NotNeighbour)
      }, parkedMs)
    })
  }
  /** Hands the waiting hellos of opened generations their secret (`all`: every one, none left). */
  const release = (all = false): void => {
    for (let i = waiting.length - 1; i >= 0; i--) {
      const entry = waiting[i]!
      if (entry.generation > newest && !all) continue
      waiting.splice(i, 1)
      clearTimeout(entry.timer)
      entry.resolve((all ? undefined : keys.get(entry.generation)) ?? closeCodes.NotNeighbour)
    }
  }
  // Steps can come on a parked link before its generation opens here (the neighbour's link was
  // made first): they wait with it, in order, and go to the generation once it opens.
  const parked: Array<{
    readonly hello: Hello
    readonly incoming: Incoming
    readonly atMs: number
    readonly early: Array<LinkFrames.Frame>
  }> = []
  let bound = false
  let closed = false
  let server: RuntimeTypes.RawServer | undefined

  /** Attaches an authenticated incoming link to its generation, or closes it. */
  const attach = (hello: Hello, incoming: Incoming): void => {
    const target = generations.get(hello.generation)
    if (target === undefined || target.closed || target.prev !== hello.from || target.incoming !== undefined) {
      return incoming.socket.close(closeCodes.NotNeighbour, "not this generation's previous neighbour")
    }
    target.incoming = incoming
    incoming.deliver = (step) => (target.deliver !== undefined ? target.deliver(step) : void target.received.push(step))
  }

  /** One frame from an authenticated link: a step of its generation, kept while the link is parked. */
  const onStep = (hello: Hello, incoming: Incoming, frame: LinkFrames.Frame): void => {
    const target = generations.get(hello.generation)
    if (target === undefined) {
      const waiting = parked.find((entry) => entry.incoming === incoming)
      // Not parked: its generation is over here, and its steps are of no use.
      if (waiting === undefined) return
      if (waiting.early.length >= parkedStepsMax)
        return incoming.socket.close(closeCodes.TooManyParked, "too many steps before the generation opened")
      return void waiting.early.push(frame)
    }
    if (target.incoming !== incoming || !take(frame, target))
      incoming.socket.close(closeCodes.BadStep, "not a ring step of this generation")
  }

  const unpark = (): void => {
    const nowMs = Date.now()
    for (let i = parked.length - 1; i >= 0; i--) {
      const entry = parked[i]!
      if (entry.hello.generation <= newest) {
        parked.splice(i, 1)
        attach(entry.hello, entry.incoming)
        for (const frame of entry.early) onStep(entry.hello, entry.incoming, frame)
      } else if (nowMs - entry.atMs > parkedMs) {
        parked.splice(i, 1)
        entry.incoming.socket.close(closeCodes.NotNeighbour, "its generation never came")
      }
    }
  }

  /** A connection whose hello checked: it attaches to its generation, or waits for it. */
  const accepted = (said: Hello, incoming: Incoming): void => {
    if (said.generation <= newest) return attach(said, incoming)
    unpark()
    if (parked.length >= parkedMax) return incoming.socket.close(closeCodes.TooManyParked, "too many links wait for their generation")
    parked.push({ hello: said, incoming, atMs: Date.now(), early: [] })
  }

  const open = (stream: RuntimeTypes.TcpStream): RuntimeTypes.TcpHandlers =>
    accept(stream, pool, keyFor, options.rank, messageBytesMax, accepted, onStep, (incoming) => {
      const at = parked.findIndex((entry) => entry.incoming === incoming)
      if (at >= 0) parked.splice(at, 1)
    })

  const own = options.urls[options.rank]
  const ownPath = typeof own === "string" ? addressOf(own) : undefined
  const listen =
    (options.listen ?? typeof own === "string")
      ? Select.listenTcp({
          host: options.host,
          port: options.port,
          path: ownPath !== undefined && "path" in ownPath ? ownPath.path : undefined,
          open
        })
      : Promise.reject(new Error("no port"))
  const boundPort = listen.then(
    (listening) => {
      if (closed) return void listening.close()
      server = listening
      bound = true
      return listening.port
    },
    () => {
      // Another process took the port: neighbours fall back to the relay for this rank.
      return undefined
    }
  )

  return {
    listening: () => bound,
    bound: boundPort,
    open: (generation, { prev, next, nextUrl, secret }) => {
      const key = secret !== undefined && secret !== "" ? proofKey(secret) : runKey
      if (key !== undefined) keys.set(generation, key)
      for (const g of keys.keys()) if (g < generation) keys.delete(g)
      const entry: Generation = { generation, prev, received: [], deliver: undefined, incoming: undefined, closed: false }
      generations.set(generation, entry)
      newest = Math.max(newest, generation)
      closeOlder(generations, generation)
      unpark()
      release()
      const url = nextUrl !== undefined && nextUrl !== "" ? nextUrl : options.urls[next]
      const outgoing =
        key === undefined
          ? { connected: Promise.resolve(false), socket: () => undefined, close: () => {} }
          : connect(options.rank, pool, key, connectTimeoutMs, generation, next, url)
      return {
        generation,
        connected: outgoing.connected,
        send: (message) => {
          const socket = outgoing.socket()
          if (socket === undefined) return false
          socket.sendStep(message)
          return true
        },
        onMessage: (callback) => {
          entry.deliver = callback
          for (const step of entry.received.splice(0)) callback(step)
        },
        close: () => {
          entry.closed = true
          outgoing.close()
          entry.incoming?.socket.close(closeCodes.Superseded, "generation over")
          if (generations.get(generation) === entry) generations.delete(generation)
        }
      }
    },
    close: () => {
      closed = true
      release(true)
      for (const entry of generations.values()) entry.incoming?.socket.close(closeCodes.Superseded, "rank ends")
      generations.clear()
      void server?.close()
    }
  }
}
