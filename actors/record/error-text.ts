/**
 * One line of text for an error, as Cohort prints errors (`cohort: ...` lines, refusals).
 *
 * @since 0.1.0
 */

/**
 * The first non-empty line of an error's message; when that line only announces what follows
 * (it ends with `:`, as esbuild's `Transform failed with 1 error:`), the next line joins it.
 *
 * @since 0.1.0
 * @category errors
 */
export const firstLine = (error: unknown): string => {
  const text = error instanceof Error ? error.message : String(error)
  const lines = text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
  const first = lines[0] ?? "unknown error"
  return first.endsWith(":") && lines[1] !== undefined ? `${first} ${lines[1]}` : first
}
