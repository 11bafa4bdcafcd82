/**
 * Entry of a rank's worker (TypeScript, for Bun, Deno, or Node through tsx).
 *
 * @since 0.1.0
 */
import "../../src/platform/redirect-worker-output.ts"
import * as Worker from "../../src/transport/worker.ts"
import * as Rank from "./rank.ts"

await Rank.main(Worker.connect())
