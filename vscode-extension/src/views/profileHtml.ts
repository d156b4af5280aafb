/** Renders a run's profile as HTML for the profile webview: per graph a summary, the time per kernel kind,
 * a bar chart of kernel time and the per-kernel table whose links open the kernel and the source line.
 * Pure (no `vscode` import) so tests render real profiles and read the markup. */

import { CostlyLine, GraphProfile, KindShare, ProfiledKernel, RunProfile } from "../common/protocol";
import { runName } from "../common/runLabel";

/** Messages the page posts to the extension. */
export type ProfileViewMessage = { type: "open"; uri: string; line: number } | { type: "selectRun" } | { type: "refresh" };

export interface RenderContext {
  /** The webview's `cspSource`. */
  cspSource: string;
  /** A fresh random token allowing our one inline script. */
  nonce: string;
}

/** Bar colour per kernel kind: theme chart colours so light and dark themes both read. */
const KIND_COLOURS: Record<string, string> = {
  pointwise: "var(--vscode-charts-blue)",
  reduction: "var(--vscode-charts-orange)",
  persistent_reduction: "var(--vscode-charts-yellow)",
  extern: "var(--vscode-charts-purple)",
};
/** What the busy share of each device measures. */
const BUSY_LABELS: Record<string, string> = { cuda: "GPU busy", cpu: "CPU busy" };
/** Shown for a number the profile does not have (no eager time in a real Inductor GPU profile). */
const NOT_AVAILABLE = "n/a";
const OTHER_COLOUR = "var(--vscode-charts-foreground)";

/** Kernels drawn in the bar chart; the table lists them all. */
export const CHART_LIMIT = 25;

export function escapeHtml(text: string): string {
  const entities: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  return text.replace(/[&<>"']/g, (c) => entities[c]);
}

export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) {
    return "–";
  }
  return ms >= 100 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3);
}

function formatPercent(percent: number | null | undefined): string {
  return percent === null || percent === undefined || !Number.isFinite(percent) ? "–" : `${percent.toFixed(1)}%`;
}

function colourOf(kind: string): string {
  return KIND_COLOURS[kind] ?? OTHER_COLOUR;
}

/** "foo1.py:4" for a file URI and a 0-based line. */
export function locationLabel(uri: string, line: number): string {
  let file = uri;
  try {
    file = decodeURIComponent(new URL(uri).pathname);
  } catch {
    // not a URL: show it as given
  }
  return `${file.split("/").pop() ?? file}:${line + 1}`;
}

function openLink(uri: string, line: number, label: string, className: string): string {
  return `<a href="#" class="${className}" data-open-uri="${escapeHtml(uri)}" data-open-line="${line}" title="${escapeHtml(
    locationLabel(uri, line),
  )}">${escapeHtml(label)}</a>`;
}

function bar(percent: number, kind: string): string {
  const width = Math.max(0, Math.min(100, Number.isFinite(percent) ? percent : 0));
  return `<div class="bar-track"><div class="bar" style="width:${width.toFixed(2)}%;background:${colourOf(kind)}"></div></div>`;
}

function isNumber(value: number | null | undefined): value is number {
  return typeof value === "number" && Number.isFinite(value);
}

function msOrNotAvailable(ms: number | null | undefined): string {
  return isNumber(ms) ? `${formatMs(ms)} ms` : NOT_AVAILABLE;
}

/** "cuda · GPU busy 25.3%", "cpu", or "" when the profile names no device. */
export function deviceLabel(graph: GraphProfile): string {
  if (!graph.device) {
    return "";
  }
  const busy = isNumber(graph.busy_percent) ? ` · ${BUSY_LABELS[graph.device] ?? "busy"} ${graph.busy_percent.toFixed(1)}%` : "";
  return `${graph.device}${busy}`;
}

function summary(graph: GraphProfile): string {
  const speedup = isNumber(graph.speedup) ? `${graph.speedup.toFixed(2)}×` : NOT_AVAILABLE;
  const device = deviceLabel(graph);
  const deviceText = device ? ` · <span class="device">${escapeHtml(device)}</span>` : "";
  const profiled = isNumber(graph.profiled_ms) ? ` · profiled <b>${formatMs(graph.profiled_ms)} ms</b>` : "";
  return `<p class="summary">eager <b>${msOrNotAvailable(graph.eager_ms)}</b> · compiled <b>${msOrNotAvailable(
    graph.compiled_ms,
  )}</b> · speedup <b>${speedup}</b>${profiled}${deviceText}</p><p class="measures">${MEASURES}</p>`;
}

/** What each number measures, under every summary (the times differ on purpose). */
export const MEASURES =
  "eager and compiled: median wall time of one call without the profiler · profiled: one iteration under the profiler, which kernel times and shares are of (so they add up to at most it)";

/** The run's source lines, costliest first, each linking to the line. */
export function lineRows(lines: CostlyLine[]): string {
  if (lines.length === 0) {
    return "";
  }
  const rows = lines
    .map(
      (l) =>
        `<tr class="line-row"><td>${openLink(l.uri, l.line, `${l.file}:${l.line + 1}`, "line-link")}</td><td><code>${escapeHtml(
          l.code,
        )}</code></td><td class="num">${formatPercent(l.percent)}</td><td class="num">${isNumber(l.ms) ? formatMs(l.ms) : NOT_AVAILABLE}</td><td>${escapeHtml(
          l.kernels.join(", "),
        )}</td></tr>`,
    )
    .join("");
  return `<section class="lines"><h2>Source lines by cost</h2><p class="measures">a kernel's time is split evenly over the source lines it computes</p><table class="lines"><thead><tr><th>Line</th><th>Code</th><th class="num">Share</th><th class="num">ms/iter</th><th>Kernels</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

function categoryRows(categories: KindShare[]): string {
  if (categories.length === 0) {
    return "";
  }
  const rows = categories
    .map(
      (c) =>
        `<tr class="category-row" data-kind="${escapeHtml(c.kind)}"><td>${escapeHtml(c.kind)}</td><td class="num">${formatMs(
          c.total_ms,
        )}</td><td class="num">${formatPercent(c.percent)}</td><td class="bar-cell">${bar(c.percent, c.kind)}</td></tr>`,
    )
    .join("");
  return `<table class="categories"><thead><tr><th>Kind</th><th class="num">Time (ms)</th><th class="num">Share</th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
}

function chart(kernels: ProfiledKernel[]): string {
  const shown = [...kernels].sort((a, b) => b.total_ms - a.total_ms).slice(0, CHART_LIMIT);
  const longest = Math.max(...shown.map((k) => k.total_ms), 0);
  const rows = shown
    .map((k) => {
      const width = longest > 0 ? (100 * k.total_ms) / longest : 0;
      return `<div class="chart-row"><span class="chart-label">${openLink(k.uri, k.line, k.name, "kernel-link")}</span>${bar(
        width,
        k.kind,
      )}<span class="chart-value">${formatMs(k.total_ms)} ms</span></div>`;
    })
    .join("");
  return `<div class="chart" role="img" aria-label="Kernel time">${rows}</div>`;
}

function kernelRows(kernels: ProfiledKernel[]): string {
  const rows = [...kernels]
    .sort((a, b) => b.total_ms - a.total_ms)
    .map((k) => {
      const source = k.source ? openLink(k.source.uri, k.source.line, locationLabel(k.source.uri, k.source.line), "source-link") : "–";
      return `<tr class="kernel-row" data-kernel="${escapeHtml(k.name)}"><td>${openLink(k.uri, k.line, k.name, "kernel-link")}</td><td>${escapeHtml(
        k.kind,
      )}</td><td class="num">${k.calls}</td><td class="num">${formatMs(k.total_ms)}</td><td class="num">${formatPercent(
        k.percent,
      )}</td><td>${source}</td></tr>`;
    })
    .join("");
  return `<table class="kernels"><thead><tr><th>Kernel</th><th>Kind</th><th class="num">Calls</th><th class="num">Time (ms)</th><th class="num">Share</th><th>Source</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function graphSection(graph: GraphProfile): string {
  const body =
    graph.kernels.length === 0
      ? `<p class="empty">No kernel times recorded for this graph.</p>`
      : `${categoryRows(graph.categories)}<h3>Kernel time</h3>${chart(graph.kernels)}<h3>Kernels</h3>${kernelRows(graph.kernels)}`;
  return `<section class="graph" data-graph="${escapeHtml(graph.graph_id)}"><h2>${escapeHtml(graph.graph_id)}</h2>${summary(graph)}${body}</section>`;
}

const STYLE = `
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); padding: 0 16px 16px; }
header { display: flex; align-items: center; gap: 12px; flex-wrap: wrap; }
header h1 { font-size: 1.3em; margin: 12px 0; flex: 1; }
.run-id { font-size: 0.7em; font-weight: normal; color: var(--vscode-descriptionForeground); margin-left: 8px; }
button { background: var(--vscode-button-background); color: var(--vscode-button-foreground); border: none; padding: 4px 10px; cursor: pointer; }
button:hover { background: var(--vscode-button-hoverBackground); }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { text-align: left; padding: 3px 10px; border-bottom: 1px solid var(--vscode-editorWidget-border, #8884); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
a { color: var(--vscode-textLink-foreground); text-decoration: none; font-family: var(--vscode-editor-font-family); }
a:hover { text-decoration: underline; }
.bar-cell { width: 240px; }
.bar-track { flex: 1; min-width: 120px; height: 12px; background: var(--vscode-editorWidget-background, #8882); }
.bar { height: 100%; }
.chart-row { display: flex; align-items: center; gap: 8px; margin: 3px 0; }
.chart-label { width: 320px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.chart-value { width: 90px; text-align: right; font-variant-numeric: tabular-nums; }
.summary, .empty, .measures { color: var(--vscode-descriptionForeground); }
.measures { font-size: 0.9em; margin-top: -6px; }
`;

const SCRIPT = `
const vscode = acquireVsCodeApi();
document.addEventListener("click", (event) => {
  const target = event.target.closest("[data-open-uri],[data-action]");
  if (!target) { return; }
  event.preventDefault();
  if (target.dataset.openUri) {
    vscode.postMessage({ type: "open", uri: target.dataset.openUri, line: Number(target.dataset.openLine) });
  } else {
    vscode.postMessage({ type: target.dataset.action });
  }
});
`;

export function renderProfileHtml(profile: RunProfile | null, context: RenderContext): string {
  const csp = `default-src 'none'; style-src ${context.cspSource} 'unsafe-inline'; script-src 'nonce-${context.nonce}';`;
  const title = profile ? `Kernel Lens profile <span class="run-id">${escapeHtml(runName(profile.run_id, profile.rank_label))}</span>` : "No profile yet";
  const sections =
    profile === null
      ? `<p class="empty">No profile for the selected run. Run <b>Kernel Lens: Profile Current File</b> on a script that calls a function compiled with <code>torch.compile(fn, backend="lens")</code>, or <b>Select Run…</b> to pick a profiled run.</p>`
      : profile.graphs.length === 0
        ? `<p class="empty">This run has no profiled graphs.</p>`
        : lineRows(profile.lines ?? []) + profile.graphs.map(graphSection).join("");
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Kernel Lens Profile</title><style>${STYLE}</style></head>
<body><header><h1>${title}</h1><button data-action="selectRun">Select Run…</button><button data-action="refresh">Refresh</button></header>
${sections}
<script nonce="${context.nonce}">${SCRIPT}</script></body></html>`;
}

/** Checks a message from the page before the extension acts on it (the page is untrusted input). */
export function parseProfileViewMessage(message: unknown): ProfileViewMessage | undefined {
  if (message === null || typeof message !== "object") {
    return undefined;
  }
  const m = message as Record<string, unknown>;
  if (m.type === "open" && typeof m.uri === "string" && typeof m.line === "number" && Number.isInteger(m.line) && m.line >= 0) {
    return { type: "open", uri: m.uri, line: m.line };
  }
  if (m.type === "selectRun" || m.type === "refresh") {
    return { type: m.type };
  }
  return undefined;
}
