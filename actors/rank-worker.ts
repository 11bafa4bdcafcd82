/**
 * Entry of a rank's worker thread: connects to the launcher's worker host and runs the rank.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Worker from "../src/transport/worker.ts"
import * as Rank from "./rank.ts"

const program = Effect.gen(function*() {
  const link = yield* Worker.connect()
  yield* Rank.run(link, (code) => process.exit(code))
})

await Effect.runPromise(Effect.orDie(program))
