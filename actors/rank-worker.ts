/**
 * Entry of a rank's worker (TypeScript, for Bun, Deno, or Node through tsx).
 *
 * @since 0.1.0
 */
import { main } from "./rank-worker-main.ts"

await main()
