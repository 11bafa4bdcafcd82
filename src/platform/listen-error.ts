/**
 * What a listener's failed bind means, whatever the runtime words it as.
 *
 * @since 0.1.0
 */

/**
 * Whether a bind failed because the address is already in use: each runtime words it its own
 * way (Node `listen EADDRINUSE: address already in use 127.0.0.1:8123`, Bun `Failed to start
 * server. Is port 8123 in use?`, Deno `Address already in use (os error 98)`).
 *
 * @since 0.1.0
 * @category sockets
 */
export const addressInUse = (message: string): boolean => /EADDRINUSE|AddrInUse|address already in use|Is port \d+ in use/i.test(message)

/**
 * The words for an address already in use, the same for the run's listener and the dashboard's.
 *
 * @since 0.1.0
 * @category sockets
 */
export const addressInUseText = "the address is already in use (another process listens on it)"
