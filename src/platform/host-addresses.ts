/**
 * This host's network addresses, for `cohort serve --listen 0.0.0.0:PORT` (or `[::]`), whose join
 * command needs an address another host can reach rather than the wildcard it listens on.
 *
 * @since 0.1.0
 * @category runtime
 */
import * as Dgram from "node:dgram"
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

/**
 * The address of this host's interface that its route to `host` leaves from (a UDP socket
 * `connect`ed to `host`:`port`, which sends nothing), e.g. the address a joined rank's ring
 * neighbours can reach it at. `undefined` when the runtime cannot say (or there is no route)
 * within `timeoutMs`.
 *
 * @since 0.1.0
 * @category runtime
 */
export const localAddressTowards = (host: string, port: number, timeoutMs = 2000): Promise<string | undefined> =>
  new Promise((resolve) => {
    const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host
    let socket: Dgram.Socket | undefined
    const done = (address: string | undefined) => {
      clearTimeout(timer)
      try {
        socket?.close()
      } catch {
        // already closed
      }
      resolve(address)
    }
    const timer = setTimeout(() => done(undefined), timeoutMs)
    try {
      socket = Dgram.createSocket(bare.includes(":") ? "udp6" : "udp4")
      socket.on("error", () => done(undefined))
      socket.connect(port, bare, () => {
        try {
          const address = socket!.address().address
          done(address === "0.0.0.0" || address === "::" ? undefined : address)
        } catch {
          done(undefined)
        }
      })
    } catch {
      done(undefined)
    }
  })
