/**
 * Plain HTTP beside a WebSocket server (`ServeOptions.http`): the runtime-neutral part of
 * answering a request, shared by `node.ts`, `bun.ts` and `deno.ts`.
 *
 * @since 0.1.0
 */
import type { HttpHandler, HttpResponse } from "./types.ts"

/** The answer to a plain HTTP request on a server without an `http` handler: 426. @since 0.1.0 @category model */
export const upgradeRequired: HttpResponse = {
  status: 426,
  headers: { "content-type": "text/plain; charset=utf-8" },
  body: "WebSocket upgrade required"
}

/**
 * `handler`'s answer to a request: `method`, and `target`, the request line's target
 * (`/path?query`, or an absolute URL as Bun and Deno give it). 426 without a handler, 500 when
 * it rejects; the handler sees the URL-decoded pathname as `path` (a target that does not decode
 * is answered 400). Never rejects.
 *
 * @since 0.1.0
 * @category model
 */
export const answer = async (handler: HttpHandler | undefined, method: string, target: string): Promise<HttpResponse> => {
  if (handler === undefined) return upgradeRequired
  const url = new URL(target, "http://localhost")
  let path: string
  try {
    path = decodeURIComponent(url.pathname)
  } catch {
    return { status: 400, headers: { "content-type": "text/plain; charset=utf-8" }, body: "bad request target" }
  }
  try {
    return await handler({ method, path, query: url.search })
  } catch {
    return { status: 500, headers: { "content-type": "text/plain; charset=utf-8" }, body: "internal error" }
  }
}
