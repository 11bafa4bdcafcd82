/**
 * Plain HTTP beside a WebSocket server (`ServeOptions.http`): the runtime-neutral part of
 * answering a request, shared by `node.ts`, `bun.ts` and `deno.ts`.
 *
 * @since 0.1.0
 */
import type { HttpRequest, HttpResponse, HttpSink, HttpStreamResponse } from "./types.ts"

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
export const answer = async <R extends HttpResponse | HttpStreamResponse>(
  handler: ((request: HttpRequest) => Promise<R>) | undefined,
  method: string,
  target: string,
  header: (name: string) => string | undefined = () => undefined
): Promise<R | HttpResponse> => {
  if (handler === undefined) return upgradeRequired
  const url = new URL(target, "http://localhost")
  let path: string
  try {
    path = decodeURIComponent(url.pathname)
  } catch {
    return { status: 400, headers: { "content-type": "text/plain; charset=utf-8" }, body: "bad request target" }
  }
  try {
    return await handler({ method, path, query: url.search, header })
  } catch {
    return { status: 500, headers: { "content-type": "text/plain; charset=utf-8" }, body: "internal error" }
  }
}

/**
 * `answer` as a web `Response` (Bun and Deno): a whole body as is; a streamed one through a
 * `ReadableStream` whose cancel (the client went away) calls the stream's cleanup.
 *
 * @since 0.1.0
 * @category model
 */
export const toWebResponse = (answer: HttpResponse | HttpStreamResponse): Response => {
  if ("body" in answer) return new Response(answer.body as BodyInit, { status: answer.status, headers: answer.headers })
  const encoder = new TextEncoder()
  let cleanup: (() => void) | undefined
  let open = true
  const stop = (): void => {
    if (!open) return
    open = false
    cleanup?.()
  }
  const body = new ReadableStream<Uint8Array>({
    start: (controller) => {
      const sink: HttpSink = {
        write: (text) => {
          if (open) controller.enqueue(encoder.encode(text))
        },
        end: () => {
          if (!open) return
          open = false
          controller.close()
        }
      }
      cleanup = answer.stream(sink)
    },
    cancel: stop
  })
  return new Response(body, { status: answer.status, headers: answer.headers })
}
