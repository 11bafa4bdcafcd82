/**
 * The run page, built: `page.ts` bundled with uPlot (`src/platform/bundle.ts` `bundlePage`, once
 * per process) and laid into `html.ts`'s document.
 *
 * @since 0.1.0
 */
import * as Bundle from "../platform/bundle.ts"
import * as Files from "../platform/files.ts"
import * as Html from "./html.ts"

/** The page module's file and the style sheets it needs. */
const pageEntry = (): string => Files.pathOf(Files.moduleUrl("./page.ts", import.meta.url).href)
const cssImports = ["uplot/dist/uPlot.min.css"]

/**
 * The page's HTML for `input` (`html.ts` `PageInput` without the script and style). Rejects with
 * `BrowserBundleError` when the page does not bundle (a broken install).
 *
 * @since 0.1.0
 * @category page
 */
export const pageHtml = async (input: DistributiveOmit<Html.PageInput, "script" | "css">): Promise<string> => {
  const bundled = await Bundle.bundlePage(pageEntry(), cssImports)
  return Html.render({ ...input, script: bundled.script, css: bundled.css } as Html.PageInput)
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never
