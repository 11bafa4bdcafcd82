/**
 * The SHA-256 of a trainer module's file, recorded in a run's journal (`started.options.trainerSha256`)
 * so that `cohort resume` can tell the same trainer from another one. Only the module's
 * own file is hashed, not what it imports.
 *
 * @since 0.1.0
 */
import * as Files from "../../src/platform/files.ts"

/**
 * The hex SHA-256 of the file at `url` (a `file:` URL or a path), or `undefined` when it cannot be
 * read (the trainer was loaded from elsewhere). Web Crypto's `subtle.digest`: the same on Node 20,
 * Bun and Deno.
 *
 * @since 0.1.0
 * @category resume
 */
export const trainerSha256 = async (url: string): Promise<string | undefined> => {
  try {
    const bytes = await Files.readFile(Files.pathOf(url))
    const digest = await globalThis.crypto.subtle.digest("SHA-256", new Uint8Array(bytes))
    return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("")
  } catch {
    return undefined
  }
}
