/**
 * Entry of a rank's process (TypeScript, for Bun, Deno, or Node through tsx).
 *
 * @since 0.1.0
 */
import { main } from "./rank-process-main.ts"

await main()
