/**
 * A child process of bench/churn.ts: many served ranks in one process (`SocketRanks.joinRanks`),
 * made to leave and join on the bench's word.
 *
 * argv[2] is a JSON `{ url, runToken, trainer, ranks, saveDir, seed }`. Messages from the parent:
 * `{ op: "churn", graceful, crash, silent, join }` (that many of this process's training ranks,
 * picked at random, leave each way, and that many new ones join), `{ op: "trained", rank }` (with
 * `churnAfter` "trained": that joiner can now be picked), `{ op: "end" }` (stop whatever is left
 * and exit). To the parent: `{ welcomed: rank }` once a rank trains, `{ left: rank, kind,
 * atMs }` as it makes one leave (`atMs` wall clock), `{ done: true }` once its first ranks ended.
 */
import * as SocketRanks from "../actors/rank/socket-ranks.ts"

interface Given {
  readonly url: string
  readonly runToken: string
  readonly trainer: string
  readonly ranks: number
  readonly saveDir: string
  readonly seed: number
  /** `trained`: a joiner of a churn can be picked to leave only once the parent says it trained. */
  readonly churnAfter: "welcomed" | "trained"
}

const given = JSON.parse(process.argv[2] ?? "{}") as Given
const post = (message: unknown): void => void process.send?.(message)

// A small seeded generator: which ranks leave is the same from run to run.
let seed = given.seed >>> 0
const random = (): number => {
  seed = (seed + 0x6d2b79f5) >>> 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const live = new Set<SocketRanks.JoinedRank>()
// Joiners of a churn welcomed but not yet trained (churnAfter "trained"), by rank index.
const untrained = new Map<number, SocketRanks.JoinedRank>()
const all: Array<SocketRanks.JoinedRank> = []

const join = (count: number, initial: boolean): void => {
  for (const rank of SocketRanks.joinRanks({
    url: given.url,
    runToken: given.runToken,
    ranks: count,
    rank: "auto",
    trainer: given.trainer,
    saveDir: given.saveDir,
    connectTimeoutMs: 120_000,
    // Protocol 1: a dropped socket is a crash at once, as for a local rank (a resumable link holds
    // a dropped socket for a resume first: docs/churn.md).
    resumable: false,
    say: () => {}
  })) {
    all.push(rank)
    // Welcomed once it has an index; checked on a short timer, not per frame.
    const poll = setInterval(() => {
      const index = rank.rank()
      if (index === undefined) return
      clearInterval(poll)
      if (initial || given.churnAfter !== "trained") live.add(rank)
      else untrained.set(index, rank)
      post({ welcomed: index })
    }, 5)
    void rank.ended.then(() => {
      clearInterval(poll)
      live.delete(rank)
      const index = rank.rank()
      if (index !== undefined && untrained.get(index) === rank) untrained.delete(index)
    })
  }
}

const pick = (count: number): Array<SocketRanks.JoinedRank> => {
  const pool = [...live]
  const out: Array<SocketRanks.JoinedRank> = []
  while (out.length < count && pool.length > 0) out.push(pool.splice(Math.floor(random() * pool.length), 1)[0]!)
  for (const rank of out) live.delete(rank)
  return out
}

process.on("message", (message: { op: string; graceful?: number; crash?: number; silent?: number; join?: number; rank?: number }) => {
  if (message.op === "trained" && message.rank !== undefined) {
    const rank = untrained.get(message.rank)
    if (rank === undefined) return
    untrained.delete(message.rank)
    live.add(rank)
  } else if (message.op === "churn") {
    const leave = (rank: SocketRanks.JoinedRank, kind: "graceful" | "crash" | "silent"): void => {
      post({ left: rank.rank(), kind, atMs: Date.now() })
      void (kind === "graceful" ? rank.leave() : kind === "crash" ? rank.crash() : rank.silence())
    }
    for (const rank of pick(message.graceful ?? 0)) leave(rank, "graceful")
    for (const rank of pick(message.crash ?? 0)) leave(rank, "crash")
    for (const rank of pick(message.silent ?? 0)) leave(rank, "silent")
    join(message.join ?? 0, false)
  } else if (message.op === "end") {
    process.exit(0)
  }
})

join(given.ranks, true)
void Promise.all(all.map((rank) => rank.ended)).then(() => post({ done: true }))
