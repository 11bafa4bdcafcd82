/**
 * Secrets compared in constant time: the run token and credentials of a join, a beat link's
 * session and proof. Internal to `src/transport`.
 *
 * @since 0.1.0
 */

const encoder = new TextEncoder()

/** Whether `a` and `b` are equal, compared without an early exit so that the time taken does not reveal the matching prefix. */
export const sameToken = (a: string, b: string): boolean => {
  const x = encoder.encode(a)
  const y = encoder.encode(b)
  let diff = x.length ^ y.length
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0)
  return diff === 0
}
