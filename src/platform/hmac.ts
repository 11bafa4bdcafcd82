/**
 * HMAC-SHA256, synchronous (`node:crypto`, which Node, Bun and Deno all provide): what a rank's
 * credential is signed with (`src/transport/credentials.ts`). Not in a browser bundle: only the
 * coordinator issues and checks credentials.
 *
 * @since 0.1.0
 */
import { createHmac } from "node:crypto"

/**
 * The HMAC-SHA256 of `message` (UTF-8) under `key` (UTF-8), as base64url without padding (43
 * characters).
 *
 * @since 0.1.0
 * @category crypto
 */
export const hmacSha256 = (key: string, message: string): string => createHmac("sha256", key).update(message).digest("base64url")
