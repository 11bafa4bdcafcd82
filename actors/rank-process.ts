/**
 * Entry of a rank's child process: connects to the launcher's process host and runs the rank.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "../src/transport/child-process.ts"
import * as Rank from "./rank.ts"

const program = Effect.gen(function*() {
  const link = yield* ChildProcess.connect()
  yield* Rank.run(link, (code) => process.exit(code))
})

await Effect.runPromise(Effect.orDie(program))
