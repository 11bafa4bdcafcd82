/**
 * Entry of a rank's process (TypeScript, for Bun, Deno, or Node through tsx).
 *
 * @since 0.1.0
 */
import * as ChildProcess from "../../src/transport/child-process.ts"
import * as Rank from "./rank.ts"

await Rank.main(ChildProcess.connect())
