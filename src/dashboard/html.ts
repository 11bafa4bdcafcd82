/**
 * The run page's HTML document, for the live dashboard and the static report alike: one file
 * with its style (uPlot's included), its script (`page.ts`, bundled) and its configuration
 * inline, so it opens without a network; a static page carries its model (folded from the
 * journal) inline too.
 *
 * @since 0.1.0
 */

/**
 * What the page needs: the bundled `script` and `css` (`src/platform/bundle.ts` `bundlePage`),
 * `mode`, and for a `static` page the `model` to show (`model.ts`, folded from the journal); for a `live` page `faults`
 * (kill buttons; `--dashboard-faults`) and `key`, the per-process secret the kill requests carry
 * in their `x-cohort-dashboard` header (a page from another origin cannot read it, so it cannot
 * kill a rank).
 *
 * @since 0.1.0
 * @category page
 */
export type PageInput =
  | { readonly mode: "static"; readonly script: string; readonly css: string; readonly title: string; readonly model: unknown }
  | {
      readonly mode: "live"
      readonly script: string
      readonly css: string
      readonly title: string
      readonly faults: boolean
      readonly key: string
    }

/**
 * `value` as JSON that is safe inside a `<script type="application/json">`: every `<`, `>`, `&`
 * and line or paragraph separator is written as a `\u` escape, so no text from a journal can
 * close the element.
 *
 * @since 0.1.0
 * @category page
 */
export const inlineJson = (value: unknown): string =>
  JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** `text` as HTML text (the title). */
const escapeText = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** A script's text that cannot end its element early (`</script` written as `<\/script`, the same in JS). */
const inlineScript = (script: string): string => script.replace(/<\/(script)/gi, "<\\/$1")

const style = `
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5rem auto; max-width: 72rem; padding: 0 1rem; color: #1f2937; }
h1 { font-size: 1.3rem; margin: 0 0 .25rem; }
h2 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
p.meta { margin: .1rem 0; color: #4b5563; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: .2rem .6rem .2rem 0; border-bottom: 1px solid #e5e7eb; vertical-align: top; }
th { font-weight: 600; }
tr[data-status="dead"] td { color: #b91c1c; }
tr[data-status="exited"] td, tr[data-status="saving"] td { color: #6b7280; }
.chart { min-height: 2rem; }
.u-legend.u-live.idle tr.u-series:first-child, .u-legend.u-live.idle .u-value { display: none; }
`

const section = (title: string, id: string, headings: ReadonlyArray<string>): string =>
  `<h2>${title}</h2>\n<table><thead><tr>${headings.map((h) => `<th>${h}</th>`).join("")}</tr></thead><tbody id="${id}"></tbody></table>`

/**
 * The page's HTML (UTF-8 text). Throws nothing.
 *
 * @since 0.1.0
 * @category page
 */
export const render = (input: PageInput): string => {
  const config =
    input.mode === "static" ? { mode: "static", faults: false, key: "" } : { mode: "live", faults: input.faults, key: input.key }
  const rankHeadings = ["rank", "state", "epoch", "samples in epoch", "samples/s", "since last frame", ...(config.faults ? ["fault"] : [])]
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${escapeText(input.title)}</title>
<style>${input.css}</style>
<style>${style}</style>
</head>
<body data-state="loading">
<h1>${escapeText(input.title)}</h1>
<p class="meta" id="run"></p>
<p class="meta" id="clock"></p>
<p class="meta">outcome: <span id="outcome"></span></p>
${section("Ranks", "ranks", rankHeadings)}
<h2>Timeline</h2>
<p class="meta">Averaging rounds on lane -1; each death on its rank's lane: fault injected (or first silence), declared dead (a red ring), remainder held by the survivors. Blue lines: epoch ends.</p>
<div class="chart" id="timeline"></div>
${section("Deaths", "deaths", ["rank", "epoch", "detector", "cause", "fault", "declared", "remainder held", "fault → declared", "declared → held", "remainder samples"])}
<p class="meta" id="deaths-none" hidden></p>
${section("Departures", "leaves", ["rank", "epoch", "kind", "declared", "detection", "recovery", "remainder", "lost", "duplicated", "redone", "bytes moved"])}
<p class="meta" id="leaves-none" hidden></p>
<h2>Detection and recovery by kind</h2>
<p class="meta">Each departure at the time it was declared: filled dots its detection (from its last frame to its declaration), rings its recovery (from its declaration until the survivors held its remainder), by kind. Log scale; 0 ms is drawn at 0.1 ms.</p>
<div class="chart" id="leaves-chart"></div>
${section("Joins", "joins", ["rank", "epoch", "connected", "connect → welcome", "connect → first training", "bytes to bring it up to date"])}
<p class="meta" id="joins-none" hidden></p>
<h2>Averaging rounds</h2>
<div class="chart" id="rounds-chart"></div>
<h2>Averaging traffic per round</h2>
<p class="meta">Bytes of the round's frames at the coordinator: contributions (or relayed ring steps) received, updates (or relayed steps) sent (with <code>--compress</code>, packed; docs/edge-averaging.md); and, with the ring over direct links, the bytes of the round's steps the ranks sent and received rank to rank, which the coordinator never sees (summed over the ranks).</p>
<div class="chart" id="bytes-chart"></div>
<h2>Training loss per round</h2>
<p class="meta">The round's contributors' mean training loss since their previous round, weighted by the samples each trained.</p>
<div class="chart" id="loss-chart"></div>
<h2>Test accuracy and loss per epoch</h2>
<div class="chart" id="accuracy-chart"></div>
${section("Epoch audits", "audits", ["epoch", "committed", "lost", "duplicated", "deaths", "test accuracy", "audit"])}
${section("Alerts", "alerts", ["at", "severity", "class", "path", "detail"])}
<script type="application/json" id="cohort-config">${inlineJson(config)}</script>
${input.mode === "static" ? `<script type="application/json" id="cohort-model">${inlineJson(input.model)}</script>` : ""}
<script>${inlineScript(input.script)}</script>
</body>
</html>
`
}
