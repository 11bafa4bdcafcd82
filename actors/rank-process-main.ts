/**
 * The body of a rank's process entry: connects to the launcher's host and runs the rank;
 * `loadTrainer` imports the trainer module (bundled entries pass the module they contain).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as ChildProcess from "../src/transport/child-process.ts"
import * as Rank from "./rank.ts"

/** Runs the rank; resolves when it leaves. @since 0.1.0 @category entry */
export const main = (loadTrainer?: (url: string) => Promise<unknown>): Promise<void> =>
  Effect.runPromise(
    Effect.orDie(
      Effect.gen(function*() {
        const link = yield* ChildProcess.connect()
        yield* Rank.run(link, (code) => process.exit(code), loadTrainer)
      })
    )
  )
