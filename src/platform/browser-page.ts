/**
 * The page of a browser rank (`index.html` of `cohort bundle`, served by
 * `cohort serve --serve-browser`): it starts the rank's Web Worker (`rankModuleFile`, a module
 * worker) and shows what the worker reports (`Browser.BrowserStatus`): the rank, the epoch and
 * the samples trained, then how the rank ended.
 *
 * The page reads its own address: `?token=` is the run token (removed from the address bar once
 * read, so that it stays out of the history); `?rank=N` asks for rank N (default `auto`: the
 * coordinator assigns the lowest free rank); `?coordinator=ws://HOST:PORT/` names the coordinator
 * when the page is hosted elsewhere (default: the page's own host, where `cohort serve` serves it).
 * The page's `<body data-state>` is `connecting`, `joined`, `training` or `ended`, for scripts
 * that drive the page.
 *
 * @since 0.1.0
 */

/** The file name of the rank's worker module beside the page. @since 0.1.0 @category page */
export const rankModuleFile = "cohort-rank.js"

/** The page's file name. @since 0.1.0 @category page */
export const pageFile = "index.html"

const script = `
const params = new URLSearchParams(location.search)
const token = params.get("token") ?? ""
const asked = params.get("rank")
const rank = asked === null || asked === "auto" ? "auto" : Number(asked)
const url = params.get("coordinator") ?? \`\${location.protocol === "https:" ? "wss" : "ws"}://\${location.host}/\`
if (params.has("token")) {
  params.delete("token")
  const rest = params.toString()
  history.replaceState(null, "", location.pathname + (rest === "" ? "" : "?" + rest))
}
const field = (name) => document.getElementById(name)
const show = (state, text) => {
  document.body.dataset.state = state
  field("state").textContent = text
}
if (token === "") show("ended", "no token: open the address that cohort serve printed (…/?token=…)")
else {
  const worker = new Worker(new URL("./${rankModuleFile}", location.href), { type: "module" })
  worker.onmessage = (event) => {
    const status = event.data
    if (status._tag === "joined") {
      field("rank").textContent = String(status.rank)
      document.title = "cohort rank " + status.rank
      show("joined", "joined, waiting for the run to start")
    } else if (status._tag === "training") {
      field("epoch").textContent = String(status.epoch)
      field("samples").textContent = status.samplesDone.toLocaleString("en") + " in this epoch, " +
        status.samplesTotal.toLocaleString("en") + " in all"
      show("training", "training")
    } else if (status._tag === "ended") {
      show("ended", (status.code === 0 ? "done: " : "stopped: ") + status.detail)
    }
  }
  worker.onerror = (event) => show("ended", "the rank's worker failed: " + event.message)
  worker.postMessage({ url, token, rank })
  show("connecting", "joining " + url)
}
`

/**
 * The page's HTML: self-contained (inline style and script, no favicon request), loading only
 * `rankModuleFile` from its own folder.
 *
 * @since 0.1.0
 * @category page
 */
export const indexHtml = (): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>cohort rank</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 36rem; padding: 0 1rem; }
dt { font-weight: 600; float: left; width: 6rem; }
dd { margin: 0 0 .25rem 6rem; font-variant-numeric: tabular-nums; }
</style>
</head>
<body data-state="connecting">
<h1>cohort rank</h1>
<dl>
<dt>status</dt><dd id="state">starting</dd>
<dt>rank</dt><dd id="rank">–</dd>
<dt>epoch</dt><dd id="epoch">–</dd>
<dt>samples</dt><dd id="samples">–</dd>
</dl>
<p>Closing this tab leaves the run: the coordinator declares this rank dead and hands its samples to the others.</p>
<script type="module">${script}</script>
</body>
</html>
`
