/**
 * Imported for its effect, first, by a rank worker's entry: inside a worker started by
 * `spawnWorker`, everything printed from here on goes to the parent's `handlers.output`
 * (`redirectWorkerOutput` in `node.ts`), including what a trainer module prints while it loads.
 * Does nothing elsewhere.
 *
 * @since 0.1.0
 */
import { redirectWorkerOutput } from "./node.ts"

redirectWorkerOutput()
