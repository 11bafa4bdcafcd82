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
 * it rejects; the handler sees the URL-decoded pathname as `path`, as sent (`//events` stays
 * `//events`); a target that does not parse or decode is answered 400. Never rejects.
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
  let url: URL
  let path: string
  try {
    // An origin-form target is a path, never a URL of its own: `//events` is the path `//events`
    // (as a relative URL it would be the host `events` and the path `/`).
    url = new URL(target.startsWith("/") ? `http://localhost${target}` : target)
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
 * `ReadableStream` whose cancel (the client went away) calls the stream's cleanup; the sink's
 * `bufferedBytes` is what the stream holds that the server has not read.
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
  // Queued bytes, not chunks: `desiredSize` is then minus the bytes the server has not taken.
  const body = new ReadableStream<Uint8Array>(
    {
      start: (controller) => {
        const sink: HttpSink = {
          write: (text) => {
            if (open) controller.enqueue(encoder.encode(text))
          },
          end: () => {
            if (!open) return
            open = false
            controller.close()
          },
          drop: () => {
            if (!open) return
            open = false
            controller.error(new Error("the response was dropped"))
          },
          bufferedBytes: () => (open ? Math.max(0, -(controller.desiredSize ?? 0)) : 0)
        }
        cleanup = answer.stream(sink)
      },
      cancel: stop
    },
    { highWaterMark: 0, size: (chunk) => chunk.byteLength }
  )
  return new Response(body, { status: answer.status, headers: answer.headers })
}
