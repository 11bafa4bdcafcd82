/**
 * This host's network addresses, for `cohort serve --listen 0.0.0.0:PORT` (or `[::]`), whose join
 * command needs an address another host can reach rather than the wildcard it listens on.
 *
 * @since 0.1.0
 * @category runtime
 */
import { networkInterfaces } from "node:os"

/**
 * The host's addresses that are not loopback, IPv4 first then IPv6 (link-local IPv6 left out: it
 * needs a zone to be reached), each once, in the order the system lists its interfaces. Empty
 * when the runtime cannot list them or the host has none.
 *
 * @since 0.1.0
 * @category runtime
 */
export const externalAddresses = (): ReadonlyArray<string> => {
  let interfaces: ReturnType<typeof networkInterfaces>
  try {
    interfaces = networkInterfaces()
  } catch {
    return []
  }
  const v4: Array<string> = []
  const v6: Array<string> = []
  for (const entries of Object.values(interfaces)) {
    for (const entry of entries ?? []) {
      if (entry.internal) continue
      if (entry.family === "IPv4" || (entry.family as unknown) === 4) v4.push(entry.address)
      else if (!entry.address.toLowerCase().startsWith("fe80:")) v6.push(entry.address)
    }
  }
  return [...new Set([...v4, ...v6])]
}
