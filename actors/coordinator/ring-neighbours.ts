/**
 * What the coordinator sends a ring member in its `FormRing` (docs/ring.md, "Direct links between
 * hosts"): its position, the ring size and its two neighbours, not the whole ring (the core's
 * `FormRing` lists every member: sent to every member, its bytes grew with the square of the ring
 * size), with the next neighbour's listener address and the generation's secret for direct links.
 *
 * The addresses are the ones ranks advertised in their `Hello` (`ringAddress`). The secret is new
 * for every generation (random, 32 hex characters), never the run token: a rank that is no longer a
 * member (dead, left, revoked) does not get the next one, and a link of one generation proves
 * nothing in another. It travels on the coordinator's link to each rank, so under TLS when the run
 * is served with TLS. A run where no rank advertised an address sends none.
 *
 * @since 0.1.0
 */
import type { FormRing, Rank } from "../../src/core/messages.ts"

/** Generations whose secret is kept: a re-issued `FormRing` of a recent generation gets the same one. */
const secretsKept = 4

/** Random characters in a generation's secret (hex of 16 random bytes). @since 0.1.0 @category limits */
export const ringSecretChars = 32

/**
 * The ring members' advertised listeners (`advertised`) and each generation's secret, and the
 * `FormRing` each member gets (`neighbourRing`).
 *
 * @since 0.1.0
 * @category model
 */
export class RingNeighbours {
  private readonly addresses = new Map<Rank, string>()
  private readonly secrets = new Map<number, string>()

  /** Rank `rank` listens at `address` (its `Hello`'s `ringAddress`); `undefined`: it does not. */
  advertised(rank: Rank, address: string | undefined): void {
    if (address === undefined || address === "") this.addresses.delete(rank)
    else this.addresses.set(rank, address)
  }

  /** Whether `rank` advertised a listener: its previous ring neighbour is given its address. */
  advertises(rank: Rank): boolean {
    return this.addresses.has(rank)
  }

  /** How many ranks advertised a listener. */
  get listening(): number {
    return this.addresses.size
  }

  /**
   * The core's `FormRing` (every member in `peers`) as its receiver gets it: `peers` empty, its
   * `prev` and `next` neighbours, the next one's address (empty: none) and the generation's secret
   * (empty when no rank listens). A ring of one keeps itself as both neighbours.
   */
  neighbourRing(message: FormRing): FormRing {
    const n = message.peers.length
    if (n === 0 || message.ringRank >= n) return message
    const prev = message.peers[(message.ringRank - 1 + n) % n]!
    const next = message.peers[(message.ringRank + 1) % n]!
    return {
      _tag: "FormRing",
      generation: message.generation,
      ringRank: message.ringRank,
      ringSize: message.ringSize,
      peers: [],
      prev,
      next,
      nextAddress: this.addresses.get(next) ?? "",
      ringSecret: this.addresses.size === 0 ? "" : this.secretOf(message.generation)
    }
  }

  private secretOf(generation: number): string {
    let secret = this.secrets.get(generation)
    if (secret !== undefined) return secret
    const bytes = globalThis.crypto.getRandomValues(new Uint8Array(ringSecretChars / 2))
    secret = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")
    this.secrets.set(generation, secret)
    for (const g of this.secrets.keys()) if (g <= generation - secretsKept) this.secrets.delete(g)
    return secret
  }
}
