/**
 * The run page, in the browser: one module (bundled by esbuild with uPlot, `src/platform/bundle.ts`
 * `bundlePage`) for both the live dashboard (`--dashboard`) and the static report
 * (`cohort report --html`). It folds journal events with `model.ts` and draws the rank rows, the
 * timeline (epochs, averaging rounds, each death's three marks), the round and epoch charts, the
 * audits, the deaths and the alerts.
 *
 * Where the events come from is in the page's `#cohort-config` JSON (`html.ts`): `static` pages
 * carry the model folded from the journal in `#cohort-model`; `live` pages open an `EventSource` on `events` beside
 * the page (the `?token=` of the page's own address is passed on). Every string from the journal is
 * shown as text (`textContent`), never as markup.
 *
 * For scripts that drive the page: `<body data-state>` is `loading`, `live`, `ended` (the run
 * ended, or failed: `#outcome` says which), `cut` (a static page whose journal stops before the end) or `lost` (the live stream closed before the run ended); every chart's box has
 * `data-points` (the points drawn: `#loss-chart` one per round with a loss); rank rows are `tr[data-rank][data-status]`, death rows
 * `tr[data-death-rank]`, audit rows `tr[data-epoch]`.
 *
 * @since 0.1.0
 */
import uPlot from "uplot"
import * as Model from "./model.ts"

interface Config {
  readonly mode: "live" | "static"
  readonly faults: boolean
  readonly key: string
}

const byId = (id: string): HTMLElement => {
  const found = document.getElementById(id)
  if (found === null) throw new Error(`the page has no #${id}`)
  return found
}

const readJson = (id: string): unknown => JSON.parse(byId(id).textContent ?? "null")

const seconds = (ms: number | undefined): string => (ms === undefined ? "–" : `${(ms / 1000).toFixed(1)} s`)
const millis = (ms: number | undefined): string => (ms === undefined ? "–" : `${Math.round(ms)} ms`)
const integer = (n: number): string => Math.round(n).toLocaleString("en")

/**
 * Brings `body`'s rows up to date: one `<tr>` per item, cells as text (or a node kept across
 * updates). Rows and cells are updated in place, never rebuilt: a button under the pointer stays
 * the same element.
 */
const fillRows = <A>(
  body: HTMLElement,
  items: ReadonlyArray<A>,
  cells: (item: A) => ReadonlyArray<string | Node>,
  mark: (row: HTMLTableRowElement, item: A) => void
): void => {
  const section = body as HTMLTableSectionElement
  while (section.rows.length > items.length) section.deleteRow(-1)
  items.forEach((item, i) => {
    const row = section.rows[i] ?? section.insertRow()
    cells(item).forEach((cell, j) => {
      const td = row.cells[j] ?? row.insertCell()
      if (typeof cell !== "string") {
        if (td.firstChild !== cell) td.replaceChildren(cell)
      } else if (td.textContent !== cell) td.textContent = cell
    })
    mark(row, item)
  })
}

/** Aligned uPlot data from scattered points: one x array (ascending), one y array per series. */
const aligned = (points: ReadonlyArray<readonly [x: number, series: number, y: number | null]>, seriesCount: number): uPlot.AlignedData => {
  const xs = [...new Set(points.map(([x]) => x))].sort((a, b) => a - b)
  const index = new Map(xs.map((x, i) => [x, i]))
  const ys = Array.from({ length: seriesCount }, () => new Array<number | null>(xs.length).fill(null))
  for (const [x, series, y] of points) if (y !== null) ys[series]![index.get(x)!] = y
  return [xs, ...ys]
}

/**
 * Marks a live legend `idle` while no point is hovered (`u.legend.idx` is then null): the page's
 * style hides the x series' entry and the values then, which would read `round: --`.
 */
const markIdle = (u: uPlot): void => {
  u.root.querySelector(".u-legend")?.classList.toggle("idle", u.legend.idx == null)
}

/** A chart in box `id`, made at the first data (uPlot measures its box), then updated in place. */
const chart = (id: string, options: (width: number) => uPlot.Options) => {
  const box = byId(id)
  let plot: uPlot | undefined
  return (data: uPlot.AlignedData, points: number): void => {
    box.dataset.points = String(points)
    if (plot !== undefined) return plot.setData(data)
    const made = options(Math.max(320, box.clientWidth))
    plot = new uPlot({ ...made, hooks: { ...made.hooks, setLegend: [...(made.hooks?.setLegend ?? []), markIdle] } }, data, box)
    markIdle(plot)
  }
}

const dots = (stroke: string, label: string, size = 9): uPlot.Series => ({
  label,
  stroke,
  fill: stroke,
  paths: () => null,
  points: { show: true, size, stroke, fill: stroke }
})

const ring = (stroke: string, label: string, size: number): uPlot.Series => ({
  label,
  stroke,
  width: 2.5,
  paths: () => null,
  points: { show: true, size, stroke, width: 2.5, fill: "rgba(0,0,0,0)" }
})

const line = (stroke: string, label: string, scale = "y"): uPlot.Series => ({
  label,
  stroke,
  scale,
  width: 2,
  points: { show: true, size: 5 }
})

const roundSteps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]

/** One row per departure and its cost (docs/churn.md); the table shows only once a rank left. */
const renderLeaves = (leaves: ReadonlyArray<Model.LeaveRow>): void => {
  fillRows(
    byId("leaves"),
    leaves,
    (l) => [
      String(l.rank),
      String(l.epoch),
      l.kind,
      seconds(l.declaredMs),
      millis(l.detectionMs),
      l.recoveryMs === undefined ? "nothing moved" : `${l.recoveryMs.toFixed(1)} ms`,
      integer(l.remainderSamples),
      integer(l.lostSamples),
      integer(l.duplicatedSamples),
      integer(l.redoneSamples),
      integer(l.bytesMoved)
    ],
    (tr, l) => {
      tr.dataset.leaveKind = l.kind
    }
  )
  byId("leaves").closest("table")!.hidden = leaves.length === 0
  byId("leaves-none").hidden = leaves.length > 0
  byId("leaves-none").textContent = "no rank left while the run trained"
}

/** One row per joiner that trained and what bringing it up to date cost (docs/churn.md); shown once one did. */
const renderJoins = (joins: ReadonlyArray<Model.JoinRow>): void => {
  fillRows(
    byId("joins"),
    joins,
    (j) => [String(j.rank), String(j.epoch), seconds(j.connectedMs), millis(j.welcomeMs), millis(j.trainingMs), integer(j.bytes)],
    (tr, j) => {
      tr.dataset.joinRank = String(j.rank)
    }
  )
  byId("joins").closest("table")!.hidden = joins.length === 0
  byId("joins-none").hidden = joins.length > 0
  byId("joins-none").textContent = "no rank joined the running run and trained"
}

/** The kinds of leaving, in the order of the legend, with their colours (docs/churn.md). */
const leaveKinds = [
  ["graceful", "#16a34a"],
  ["crash", "#dc2626"],
  ["silent", "#7c3aed"]
] as const

/**
 * The departures as points for the detection and recovery chart: x the declaration (s), series
 * `2k` the detection and `2k + 1` the recovery of kind `k` (ms, at least 0.1 for the log scale).
 */
const leavePoints = (leaves: ReadonlyArray<Model.LeaveRow>): Array<readonly [number, number, number | null]> => {
  const points: Array<readonly [number, number, number | null]> = []
  for (const l of leaves) {
    const k = leaveKinds.findIndex(([kind]) => kind === l.kind)
    if (k < 0) continue
    points.push([l.declaredMs / 1000, 2 * k, Math.max(0.1, l.detectionMs)])
    if (l.recoveryMs !== undefined) points.push([l.declaredMs / 1000, 2 * k + 1, Math.max(0.1, l.recoveryMs)])
  }
  return points
}

const start = (): void => {
  // Long because it wires the page's charts and handlers, which share the page's state.
  const config = readJson("cohort-config") as Config
  const model = Model.empty()
  document.body.dataset.state = "loading"

  // The timeline: x in seconds of the run; rounds on lane -1, each death's marks on its rank's lane;
  // epoch ends as vertical lines (drawn by a hook over the plot).
  const timeline = chart("timeline", (width) => ({
    width,
    height: 260,
    scales: { x: { time: false }, y: { range: (_u, min, max) => [Math.min(-1.5, min - 0.5), Math.max(model.worldSize - 0.5, max + 0.5)] } },
    axes: [{ label: "seconds since the run started" }, { label: "rank (rounds on -1)", incrs: [1] }],
    // No live legend: its values (the x series' "s: --" among them) say nothing on a timeline.
    legend: { live: false },
    // Declared dead comes last, as a ring wider than the other marks, so neither the fault's dot
    // (often a few milliseconds before) nor the remainder's (often in the same one) can hide it.
    series: [
      { label: "s" },
      dots("#7a869a", "round closed", 5),
      dots("#d97706", "fault injected / first silence", 13),
      dots("#16a34a", "remainder held by survivors", 7),
      ring("#dc2626", "declared dead", 21)
    ],
    hooks: {
      draw: [
        (u) => {
          const ctx = u.ctx
          ctx.save()
          ctx.strokeStyle = "#2563eb"
          ctx.fillStyle = "#2563eb"
          ctx.font = `${Math.round(11 * devicePixelRatio)}px sans-serif`
          for (const row of model.epochRows) {
            const x = u.valToPos(row.ms / 1000, "x", true)
            ctx.beginPath()
            ctx.moveTo(x, u.bbox.top)
            ctx.lineTo(x, u.bbox.top + u.bbox.height)
            ctx.stroke()
            ctx.fillText(`epoch ${row.epoch} ends`, x + 3, u.bbox.top + 12 * devicePixelRatio)
          }
          ctx.restore()
        }
      ]
    }
  }))
  const departures = chart("leaves-chart", (width) => ({
    width,
    height: 240,
    scales: { x: { time: false }, y: { distr: 3 } },
    axes: [{ label: "seconds since the run started (declared)" }, { label: "ms" }],
    series: [
      { label: "s" },
      ...leaveKinds.flatMap(([kind, colour]) => [dots(colour, `${kind}: detection`, 7), ring(colour, `${kind}: recovery`, 9)])
    ]
  }))
  const rounds = chart("rounds-chart", (width) => ({
    width,
    height: 220,
    scales: { x: { time: false } },
    axes: [{ label: "averaging round (counted over the run, from 0)", incrs: roundSteps }, { label: "ms" }],
    series: [
      { label: "round" },
      line("#2563eb", "round time (ms since the previous round)"),
      line("#9333ea", "open (ms after its first contribution)")
    ]
  }))
  const traffic = chart("bytes-chart", (width) => ({
    width,
    height: 220,
    scales: { x: { time: false } },
    axes: [{ label: "averaging round (counted over the run, from 0)", incrs: roundSteps }, { label: "bytes" }],
    series: [
      { label: "round" },
      line("#0891b2", "received (contributions)"),
      line("#ea580c", "sent (updates)"),
      line("#7c3aed", "direct links: sent by the ranks"),
      line("#16a34a", "direct links: received by the ranks")
    ]
  }))
  const losses = chart("loss-chart", (width) => ({
    width,
    height: 220,
    scales: { x: { time: false } },
    axes: [{ label: "averaging round (counted over the run, from 0)", incrs: roundSteps }, { label: "training loss" }],
    series: [{ label: "round" }, line("#dc2626", "training loss (contributors' mean)")]
  }))
  const accuracy = chart("accuracy-chart", (width) => ({
    width,
    height: 220,
    scales: { x: { time: false }, acc: { range: [0, 1] }, loss: {} },
    axes: [
      { label: "epoch", incrs: [1] },
      { label: "test accuracy", scale: "acc" },
      { label: "test loss", scale: "loss", side: 1, grid: { show: false } }
    ],
    series: [{ label: "epoch" }, line("#16a34a", "test accuracy", "acc"), line("#dc2626", "test loss", "loss")]
  }))

  const kill = async (rank: number, button: HTMLButtonElement): Promise<void> => {
    button.disabled = true
    const response = await fetch(`kill${location.search}${location.search === "" ? "?" : "&"}rank=${rank}`, {
      method: "POST",
      headers: { "x-cohort-dashboard": config.key }
    })
    button.textContent = response.ok ? "killed" : `refused (${response.status})`
  }

  const killButtons = new Map<number, HTMLButtonElement>()
  const render = (): void => {
    // Long because one pass draws every panel of the page from the model, panel after panel.
    const now = model.nowMs
    byId("run").textContent =
      model.runId === undefined
        ? "waiting for the run to start"
        : `run ${model.runId}: ${model.worldSize} ranks, ${model.epochs} epochs of ${integer(model.epochSamples)} samples, ` +
          `${model.mode ?? "?"} mode, ${model.transport ?? "?"} transport` +
          (model.resumedFrom === undefined ? "" : `, resumed from ${model.resumedFrom}`)
    // A finished run's page gives its duration; a journal cut short, how far it goes.
    byId("clock").textContent =
      model.ended !== undefined
        ? `the run took ${seconds(model.ended.ms)}`
        : model.failed !== undefined
          ? `the run failed ${seconds(model.failed.ms)} after it started`
          : config.mode === "static"
            ? `the journal stops ${seconds(now)} into the run`
            : `${seconds(now)} since the run started`
    byId("outcome").textContent =
      model.ended === undefined
        ? model.failed !== undefined
          ? `failed ${model.failed.formed ? `(${model.failed.stage})` : "at formation"}: ${model.failed.reason}; exit code 3`
          : config.mode === "live"
            ? "running"
            : "the journal stops before the run ended"
        : `${model.ended.status}${model.ended.reason === undefined ? "" : ` (${model.ended.reason})`}: ${model.ended.detail}` +
          (model.ended.exitCode === undefined ? "" : `; exit code ${model.ended.exitCode}`)

    fillRows(
      byId("ranks"),
      model.ranks,
      (row) => {
        const cells: Array<string | Node> = [
          String(row.rank),
          row.status === "dead" ? `dead (${row.detector ?? "?"}): ${row.cause ?? ""}` : row.status,
          row.epoch === undefined ? "–" : String(row.epoch),
          integer(row.samplesDone),
          row.status === "dead" || row.status === "exited" ? "–" : integer(row.samplesPerSecond),
          row.lastFrameMs === undefined ? "–" : seconds(Math.max(0, now - row.lastFrameMs))
        ]
        if (config.faults) {
          let button = killButtons.get(row.rank)
          if (button === undefined) {
            const made = document.createElement("button")
            made.textContent = "kill"
            made.addEventListener("click", () => void kill(row.rank, made).catch(() => (made.textContent = "failed")))
            killButtons.set(row.rank, made)
            button = made
          }
          if (row.status === "dead" || row.status === "exited" || model.ended !== undefined) button.disabled = true
          cells.push(button)
        }
        return cells
      },
      (tr, row) => {
        tr.dataset.rank = String(row.rank)
        tr.dataset.status = row.status
        if (row.detector !== undefined) tr.dataset.detector = row.detector
      }
    )

    fillRows(
      byId("deaths"),
      model.deaths,
      (d) => [
        String(d.rank),
        String(d.epoch),
        d.detector,
        d.cause,
        seconds(d.faultMs),
        seconds(d.declaredMs),
        d.recoveredMs === undefined ? "not redistributed" : seconds(d.recoveredMs),
        millis(d.detectedAfterFaultMs),
        millis(d.recoveredAfterDeclaredMs),
        integer(d.remainderSamples)
      ],
      (tr, d) => {
        tr.dataset.deathRank = String(d.rank)
        tr.dataset.marks = String([d.faultMs, d.declaredMs, d.recoveredMs].filter((m) => m !== undefined).length)
      }
    )
    // No deaths: a line says so instead of an empty table.
    const noDeaths = model.deaths.length === 0
    byId("deaths").closest("table")!.hidden = noDeaths
    byId("deaths-none").hidden = !noDeaths
    byId("deaths-none").textContent = model.ended === undefined && model.failed === undefined ? "no deaths so far" : "no deaths"

    renderLeaves(model.leaves)
    renderJoins(model.joins)
    const departurePoints = leavePoints(model.leaves)
    byId("leaves-chart").hidden = departurePoints.length === 0
    if (departurePoints.length > 0) departures(aligned(departurePoints, 2 * leaveKinds.length), departurePoints.length)

    fillRows(
      byId("audits"),
      model.epochRows,
      (e) => [
        String(e.epoch),
        `${integer(e.samplesCommitted)} of ${integer(e.epochSamples)}`,
        String(e.lost),
        String(e.duplicated),
        String(e.deaths),
        e.accuracy === undefined ? "pending" : e.accuracy.toFixed(4),
        e.lost === 0 && e.duplicated === 0 && e.samplesCommitted === e.epochSamples ? "passed" : "FAILED"
      ],
      (tr, e) => {
        tr.dataset.epoch = String(e.epoch)
      }
    )

    fillRows(
      byId("alerts"),
      model.alerts,
      (a) => [seconds(a.ms), a.severity, a.class, a.path, a.count > 1 ? `${a.detail} (×${a.count})` : a.detail],
      () => {}
    )

    const marks: Array<readonly [number, number, number | null]> = model.rounds.map((r) => [r.ms / 1000, 0, -1] as const)
    for (const d of model.deaths) {
      if (d.faultMs !== undefined) marks.push([d.faultMs / 1000, 1, d.rank])
      if (d.recoveredMs !== undefined) marks.push([d.recoveredMs / 1000, 2, d.rank])
      marks.push([d.declaredMs / 1000, 3, d.rank])
    }
    const points = marks.length
    // The timeline spans the run from its start to now, marks or not.
    marks.push([0, 0, null], [now / 1000, 0, null])
    timeline(aligned(marks, 4), points)
    // x: the journal's round numbers (a resumed run's start past 0).
    rounds([model.rounds.map((r) => r.round), model.rounds.map((r) => r.roundMs), model.rounds.map((r) => r.openMs)], model.rounds.length)
    // The coordinator's traffic, and beside it what ring steps moved rank to rank over direct links.
    const counted = model.rounds.filter((r) => r.receivedBytes !== undefined || r.linkSentBytes !== undefined)
    traffic(
      [
        counted.map((r) => r.round),
        counted.map((r) => r.receivedBytes ?? null),
        counted.map((r) => r.sentBytes ?? null),
        counted.map((r) => r.linkSentBytes ?? null),
        counted.map((r) => r.linkReceivedBytes ?? null)
      ],
      counted.length
    )
    const withLoss = model.rounds.filter((r) => r.loss !== undefined)
    losses([withLoss.map((r) => r.round), withLoss.map((r) => r.loss ?? null)], withLoss.length)
    const evaluated = model.epochRows.filter((e) => e.accuracy !== undefined)
    accuracy(
      [evaluated.map((e) => e.epoch), evaluated.map((e) => e.accuracy ?? null), evaluated.map((e) => e.loss ?? null)],
      evaluated.length
    )
  }

  if (config.mode === "static") {
    Object.assign(model, readJson("cohort-model"))
    render()
    document.body.dataset.state = model.ended === undefined && model.failed === undefined ? "cut" : "ended"
    return
  }
  // Live: batches of events (a JSON array per message); redraws at most 4 times a second.
  let pending = false
  const schedule = (): void => {
    if (pending) return
    pending = true
    setTimeout(() => {
      pending = false
      render()
    }, 250)
  }
  const source = new EventSource(`events${location.search}`)
  source.onopen = () => {
    document.body.dataset.state = model.ended === undefined && model.failed === undefined ? "live" : "ended"
  }
  source.onmessage = (message: MessageEvent<string>) => {
    for (const event of JSON.parse(message.data) as ReadonlyArray<unknown>) Model.apply(model, event)
    if (model.ended !== undefined || model.failed !== undefined) {
      source.close()
      // The run's last events are drawn at once, before the page says it ended: whoever reads
      // an ended page (a person, a test) sees its whole record, not the last redraw's.
      render()
      document.body.dataset.state = "ended"
      return
    }
    schedule()
  }
  source.onerror = () => {
    if (model.ended !== undefined || model.failed !== undefined) return
    // EventSource retries on its own; the page says the stream is gone until it is back.
    document.body.dataset.state = "lost"
  }
  render()
}

start()
