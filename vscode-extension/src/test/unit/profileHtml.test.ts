/** Tests of the profile view's HTML: rows, chart, links, escaping, CSP, and the page's messages. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { RunProfile } from "../../common/protocol";
import { CHART_LIMIT, deviceLabel, escapeHtml, formatMs, lineRows, locationLabel, MEASURES, parseProfileViewMessage, renderProfileHtml } from "../../views/profileHtml";

const RUN = "run_2026_01_02_03_04_05_000001-pid_42";
const OUTPUT = `file:///w/examples/torch_compile_debug/${RUN}/lens/graph_0/output_code.py`;
const PROFILE: RunProfile = {
  run_id: RUN,
  graphs: [
    {
      graph_id: "graph_0",
      eager_ms: 1.2,
      compiled_ms: 0.4,
      speedup: 3.0,
      categories: [
        { kind: "pointwise", total_ms: 0.3, percent: 75 },
        { kind: "reduction", total_ms: 0.1, percent: 25 },
      ],
      kernels: [
        { name: "cpp_fused_sum_1", kind: "reduction", calls: 1, total_ms: 0.1, percent: 25, uri: OUTPUT, line: 60, source: null },
        {
          name: "cpp_fused_maximum_neg_0",
          kind: "pointwise",
          calls: 1,
          total_ms: 0.3,
          percent: 75,
          uri: OUTPUT,
          line: 20,
          source: { uri: "file:///w/examples/foo1.py", line: 3 },
        },
      ],
    },
  ],
};
const CONTEXT = { cspSource: "vscode-webview://abc", nonce: "n0nce" };

function rows(html: string): string[] {
  return [...html.matchAll(/<tr class="kernel-row" data-kernel="([^"]+)"/g)].map((m) => m[1]);
}

test("one table row per kernel, slowest first", () => {
  assert.deepEqual(rows(renderProfileHtml(PROFILE, CONTEXT)), ["cpp_fused_maximum_neg_0", "cpp_fused_sum_1"]);
});

test("kernel links open output_code.py at the kernel line; source links open the user's line", () => {
  const html = renderProfileHtml(PROFILE, CONTEXT);
  assert.ok(html.includes(`class="kernel-link" data-open-uri="${OUTPUT}" data-open-line="20"`));
  assert.ok(html.includes(`class="source-link" data-open-uri="file:///w/examples/foo1.py" data-open-line="3"`));
  assert.ok(html.includes(">foo1.py:4</a>"), "the label shows the 1-based line");
});

test("the bar chart scales bars to the slowest kernel and colours them by kind", () => {
  const html = renderProfileHtml(PROFILE, CONTEXT);
  const chart = html.slice(html.indexOf('<div class="chart"'), html.indexOf("<h3>Kernels</h3>"));
  const widths = [...chart.matchAll(/style="width:([\d.]+)%;background:([^"]+)"/g)].map((m) => [Number(m[1]), m[2]]);
  assert.equal(widths.length, 2);
  assert.deepEqual(widths[0], [100, "var(--vscode-charts-blue)"]);
  assert.ok(Math.abs((widths[1][0] as number) - 33.33) < 0.01);
  assert.equal(widths[1][1], "var(--vscode-charts-orange)");
});

test("the chart shows at most CHART_LIMIT kernels but the table shows all", () => {
  const many = Array.from({ length: CHART_LIMIT + 5 }, (_, i) => ({ ...PROFILE.graphs[0].kernels[0], name: `k${i}`, total_ms: i + 1 }));
  const html = renderProfileHtml({ run_id: RUN, graphs: [{ ...PROFILE.graphs[0], kernels: many }] }, CONTEXT);
  assert.equal((html.match(/class="chart-row"/g) ?? []).length, CHART_LIMIT);
  assert.equal(rows(html).length, CHART_LIMIT + 5);
});

test("summary and category shares are shown", () => {
  const html = renderProfileHtml(PROFILE, CONTEXT);
  assert.ok(html.includes("speedup <b>3.00×</b>"));
  assert.ok(html.includes('<tr class="category-row" data-kind="pointwise"><td>pointwise</td><td class="num">0.300</td><td class="num">75.0%</td>'));
});

test("names from disk are escaped and only our nonce'd script may run", () => {
  const evil = { ...PROFILE.graphs[0].kernels[0], name: '<img src=x onerror="alert(1)">' };
  const html = renderProfileHtml({ run_id: "<b>r</b>", graphs: [{ ...PROFILE.graphs[0], kernels: [evil] }] }, CONTEXT);
  assert.ok(!html.includes("<img"));
  assert.ok(!html.includes("<b>r</b>"));
  assert.ok(html.includes("script-src 'nonce-n0nce'"));
  assert.equal((html.match(/<script/g) ?? []).length, 1);
  assert.ok(html.includes('<script nonce="n0nce">'));
});

test("no profile and a profile without kernels say so", () => {
  assert.match(renderProfileHtml(null, CONTEXT), /No profile for the selected run/);
  const empty = renderProfileHtml({ run_id: RUN, graphs: [{ ...PROFILE.graphs[0], kernels: [] }] }, CONTEXT);
  assert.match(empty, /No kernel times recorded/);
  assert.deepEqual(rows(empty), []);
});

test("number and location formatting", () => {
  assert.equal(formatMs(null), "–");
  assert.equal(formatMs(0.01234), "0.012");
  assert.equal(formatMs(12.345), "12.35");
  assert.equal(formatMs(1234.5), "1234.5");
  assert.equal(locationLabel("file:///a/b%20c/x.py", 0), "x.py:1");
  assert.equal(escapeHtml(`a&b"'`), "a&amp;b&quot;&#39;");
});

test("messages from the page are validated", () => {
  assert.deepEqual(parseProfileViewMessage({ type: "open", uri: OUTPUT, line: 3 }), { type: "open", uri: OUTPUT, line: 3 });
  assert.deepEqual(parseProfileViewMessage({ type: "refresh" }), { type: "refresh" });
  assert.equal(parseProfileViewMessage({ type: "open", uri: OUTPUT, line: -1 }), undefined);
  assert.equal(parseProfileViewMessage({ type: "open", uri: 5, line: 1 }), undefined);
  assert.equal(parseProfileViewMessage({ type: "exec" }), undefined);
  assert.equal(parseProfileViewMessage(null), undefined);
});

/** The shape kernelLens.getProfile returns for a real Inductor `-p` run on an H100 (the values that
 * tests/lsp_server/test_server_gpu.py asserts for its committed fixtures): no eager time, a busy share. */
const GPU_OUTPUT = `file:///w/torch_compile_debug/${RUN}/torchinductor/model__0_forward_1.0/output_code.py`;
const GPU_PROFILE: RunProfile = {
  run_id: RUN,
  graphs: [
    {
      graph_id: "model__0_forward_1.0",
      eager_ms: null,
      compiled_ms: 0.055,
      speedup: null,
      busy_percent: 17.81,
      device: "cuda",
      categories: [
        { kind: "persistent_reduction", total_ms: 0.0016, percent: 2.93 },
        { kind: "extern", total_ms: 0.0082, percent: 14.87 },
        { kind: "unknown", total_ms: 0.0001, percent: 0.1 },
      ],
      kernels: [
        { name: "triton_per_fused_gelu_native_layer_norm_0", kind: "persistent_reduction", calls: 1, total_ms: 0.0016, percent: 2.93, uri: GPU_OUTPUT, line: 40, source: { uri: "file:///w/prog.py", line: 9 } },
        { name: "extern_kernels.mm", kind: "extern", calls: 2, total_ms: 0.0082, percent: 14.87, uri: GPU_OUTPUT, line: 0, source: null },
      ],
    },
  ],
};

test("a GPU profile shows its device and busy share, and n/a for the eager time and speedup it lacks", () => {
  const html = renderProfileHtml(GPU_PROFILE, CONTEXT);
  assert.ok(
    html.includes('eager <b>n/a</b> · compiled <b>0.055 ms</b> · speedup <b>n/a</b> · <span class="device">cuda · GPU busy 17.8%</span>'),
    html.slice(html.indexOf('<p class="summary">'), html.indexOf("</p>", html.indexOf('<p class="summary">'))),
  );
  assert.deepEqual(rows(html), ["extern_kernels.mm", "triton_per_fused_gelu_native_layer_norm_0"]);
});

test("every category name is rendered, known kinds in their colour and others in the neutral one", () => {
  const html = renderProfileHtml(GPU_PROFILE, CONTEXT);
  const categories = [...html.matchAll(/<tr class="category-row" data-kind="([^"]+)"><td>([^<]+)<\/td>.*?background:([^"]+)"/g)].map((m) => [m[1], m[2], m[3]]);
  assert.deepEqual(categories, [
    ["persistent_reduction", "persistent_reduction", "var(--vscode-charts-yellow)"],
    ["extern", "extern", "var(--vscode-charts-purple)"],
    ["unknown", "unknown", "var(--vscode-charts-foreground)"],
  ]);
});

test("device label: CPU benchmarks, missing busy share, and older servers without a device", () => {
  const graph = GPU_PROFILE.graphs[0];
  assert.equal(deviceLabel(graph), "cuda · GPU busy 17.8%");
  assert.equal(deviceLabel({ ...graph, device: "cpu", busy_percent: 98.27 }), "cpu · CPU busy 98.3%");
  assert.equal(deviceLabel({ ...graph, busy_percent: null }), "cuda");
  assert.equal(deviceLabel({ ...graph, device: undefined, busy_percent: undefined }), "");
  const old = renderProfileHtml({ run_id: RUN, graphs: [{ ...PROFILE.graphs[0] }] }, CONTEXT);
  assert.ok(!old.includes('class="device"'));
  assert.ok(old.includes("eager <b>1.20 ms</b> · compiled <b>0.400 ms</b>"));
});

test("source lines by cost link back to the line and say how the time was split", () => {
  const html = lineRows([
    { uri: "file:///w/foo1.py", file: "foo1.py", line: 4, code: "a = torch.neg(x1)", percent: 30.5, ms: 0.12, kernels: ["k0"] },
  ]);
  assert.match(html, /<h2>Source lines by cost<\/h2>/);
  assert.match(html, /data-open-uri="file:\/\/\/w\/foo1.py" data-open-line="4"[^>]*>foo1.py:5<\/a>/);
  assert.match(html, /split evenly over the source lines/);
  assert.equal(lineRows([]), "");
  const page = renderProfileHtml({ ...PROFILE, lines: [] }, { cspSource: "x", nonce: "n" });
  assert.ok(page.includes(MEASURES));
});

test("a rank's profile names its rank after the run; a run outside a job its id alone", () => {
  assert.ok(renderProfileHtml(PROFILE, CONTEXT).includes(`<span class="run-id">${RUN}</span>`));
  const ranked = renderProfileHtml({ ...PROFILE, rank_label: "rank 1 of 2" }, CONTEXT);
  assert.ok(ranked.includes(`<span class="run-id">${RUN} (rank 1 of 2)</span>`));
});
