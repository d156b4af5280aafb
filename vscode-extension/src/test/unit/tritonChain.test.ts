/** Tests of the kernel view's Triton chain: stages offered and opened first, labels both ways, costs. The chain is
 * the shape `kernelLens.tritonChain` answers for the gelu kernel's erf line of the H100 training run
 * (tests/fixtures/inductor_gpu_train/transformer_train). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LineCosts, RunProfile } from "../../common/protocol";
import { TritonChain } from "../../common/protocolGpu";
import {
  chainError, chainStarts, firstStage, isChain, kernelCost, kernelLabel, launchHover, launchLabel, lineCostMs, stageLineLabel, stagesOf,
  startItem, tritonLineLabel,
} from "../../views/tritonChain";

const ENTRY = "file:///ws/torch_compile_debug/run_1/triton_cache/KNZY7K2I";
const CODE = "file:///ws/torch_compile_debug/run_1/torchinductor/model__0_forward_1.0/output_code.py";
const CHAIN: TritonChain = {
  kernel: "triton_poi_fused_gelu_view_7",
  graph_id: "model__0_forward_1.0",
  run_id: "run_1",
  entry: "KNZY7K2I",
  stage: "ptx",
  line: 51,
  launch: {
    settings: [{ name: "XBLOCK", value: "512", origin: ".best_config" }, { name: "num_warps", value: "4", origin: "cache entry" },
      { name: "num_stages", value: "1", origin: "cache entry" }],
    chosen_by: ".best_config",
    tried: [
      { config: "XBLOCK: 512, num_warps: 4, num_ctas: 1, num_stages: 1, maxnreg: None", ms: 0.003616, registers: 18, spills: 0, chosen: true, search: "autotune" },
      { config: "XBLOCK: 1024, num_warps: 4, num_ctas: 1, num_stages: 1, maxnreg: None", ms: 0.004102, registers: 24, spills: 0, chosen: false, search: "autotune" },
    ],
  },
  triton: { uri: CODE, line: 820, kernel_file_line: 33, text: "tmp5 = libdevice.erf(tmp4)" },
  nodes: ["erf", "erf_1"],
  precision: "line",
  source: { uri: "file:///ws/prog.py", line: 31 },
  stages: {
    ttir: { uri: `${ENTRY}/triton_poi_fused_gelu_view_7.ttir`, lines: [20] },
    llir: { uri: `${ENTRY}/triton_poi_fused_gelu_view_7.llir`, lines: [23, 24] },
    sass: { uri: `${ENTRY}/triton_poi_fused_gelu_view_7.sass`, lines: [23, 24] },
    ptx: { uri: `${ENTRY}/triton_poi_fused_gelu_view_7.ptx`, lines: [51, 52, 53] },
  },
};

test("stages come in compile order; PTX opens first, else SASS, else the latest the entry has", () => {
  assert.deepEqual(stagesOf(CHAIN), ["ttir", "llir", "ptx", "sass"]);
  assert.equal(firstStage(CHAIN), "ptx");
  const { ptx: _ptx, sass: _sass, ...rest } = CHAIN.stages;
  assert.equal(firstStage({ ...CHAIN, stages: rest }), "llir");
  assert.equal(firstStage({ ...CHAIN, stages: {} }), undefined);
});

test("an answer is a chain or an error", () => {
  assert.ok(isChain(CHAIN));
  assert.ok(!isChain({ error: "not a line of a Triton kernel or of its Triton cache entry" }));
  assert.equal(chainError({ error: "no location record" }), "no location record");
  assert.ok(!isChain(null));
});

test("labels: a stage line names its Triton line's stage line, user line and that line's cost; and back", () => {
  assert.equal(tritonLineLabel(CHAIN, 51, 0.0018), "◀ PTX:52 · prog.py:32 · 0.002 ms");
  assert.equal(stageLineLabel(CHAIN, undefined), "◀ output_code.py:821 · prog.py:32");
  assert.equal(tritonLineLabel({ ...CHAIN, precision: "kernel" }, 0, undefined), "◀ PTX:1 · prog.py:32 (kernel)");
  assert.equal(tritonLineLabel({ ...CHAIN, source: null }, 0, 1), "◀ PTX:1");
});

test("costs: the kernel's time and share from the profile, the user line's share of it from lineCosts", () => {
  const profile = {
    run_id: "run_1",
    graphs: [{ graph_id: "model__0_forward_1.0", kernels: [{ name: "triton_poi_fused_gelu_view_7", total_ms: 0.0123, percent: 4.25 }] }],
  } as unknown as RunProfile;
  assert.deepEqual(kernelCost(profile, CHAIN), { ms: 0.0123, percent: 4.25 });
  assert.equal(kernelCost(profile, { ...CHAIN, graph_id: "model__0_backward_3.1" }), undefined);
  assert.equal(kernelLabel({ ms: 0.0123, percent: 4.25 }, "sass"), "⏱ 0.012 ms · 4.3% of the graph call · SASS beside");
  assert.equal(kernelLabel(undefined, "ptx"), "⏱ PTX beside");
  const costs: LineCosts = {
    run_id: "run_1",
    uri: "file:///ws/prog.py",
    measures: "",
    lines: [{ line: 31, percent: 2, ms: 0.02, kernels: [
      { name: "triton_poi_fused_gelu_view_7", graph_id: "model__0_backward_3.1", lines_sharing: 1, percent: 1, ms: 0.009 },
      { name: "triton_poi_fused_gelu_view_7", graph_id: "model__0_forward_1.0", lines_sharing: 2, percent: 1, ms: 0.006 },
    ] }],
  };
  assert.equal(lineCostMs(costs, CHAIN), 0.006); // this graph's kernel, not the backward's of the same name
  assert.equal(lineCostMs(costs, { ...CHAIN, source: { uri: "file:///ws/prog.py", line: 3 } }), undefined);
  assert.equal(lineCostMs(undefined, CHAIN), undefined);
});

test("a line leads to its kernels' chains, or says why not; a pick shows each kernel's graph and time", () => {
  const start = { kernel: CHAIN.kernel, graph_id: CHAIN.graph_id, run_id: "run_1", uri: CODE, line: 820, ms: 0.004006 };
  assert.deepEqual(chainStarts({ kernels: [start] }), [start]);
  assert.equal(chainStarts({ error: "no Triton kernel with a Triton cache entry kept beside its run computes this line" }),
    "no Triton kernel with a Triton cache entry kept beside its run computes this line");
  assert.equal(chainStarts(null), "no answer from the language server");
  assert.deepEqual(startItem(start), { label: "triton_poi_fused_gelu_view_7", description: "model__0_forward_1.0 · 0.004 ms" });
  assert.equal(startItem({ ...start, ms: null }).description, "model__0_forward_1.0 · not profiled");
});

test("the launched config's line says its settings, where untuned ones come from, and how it was chosen", () => {
  assert.equal(launchLabel(CHAIN.launch), "⚙ XBLOCK=512 · num_warps=4 · num_stages=1 · fastest of 2 configs tried (3.62 µs; next 4.10 µs)");
  const single = {
    settings: [{ name: "R0_BLOCK", value: "512", origin: "kernel source" }, { name: "XBLOCK", value: "2", origin: "launch grid" },
      { name: "num_warps", value: "1", origin: "cache entry" }],
    chosen_by: "only entry", tried: [],
  };
  assert.equal(launchLabel(single), "⚙ R0_BLOCK=512 (kernel source) · XBLOCK=2 (launch grid) · num_warps=1 · one config (only entry)");
  const table = launchHover(CHAIN.launch).split("\n");
  assert.equal(table.length, 6);
  assert.ok(table[4].startsWith("| `XBLOCK: 512,") && table[4].endsWith("| 3.62 µs | 18 | 0 | **chosen** |"), table[4]);
  assert.match(launchHover(single), /R0_BLOCK=512 from kernel source, XBLOCK=2 from launch grid/);
});

test("a config coordinate descent kept says so, timed against the search's next, not autotuning's configs", () => {
  // the H100 max-autotune run's triton_red_fused_mul_sum_0 (tests/fixtures/inductor_gpu_train/autotune_gemm)
  const row = (config: string, ms: number, registers: number, search: string, chosen = false) =>
    ({ config: `${config}, num_ctas: 1, num_stages: 1, maxnreg: None`, ms, registers, spills: 0, chosen, search });
  const launch = {
    settings: [{ name: "R0_BLOCK", value: "1024", origin: ".best_config" }, { name: "XBLOCK", value: "1", origin: ".best_config" },
      { name: "num_warps", value: "16", origin: "cache entry" }, { name: "num_stages", value: "1", origin: "cache entry" }],
    chosen_by: "coordinate descent",
    tried: [row("XBLOCK: 1, R0_BLOCK: 2048, num_warps: 16", 0.019328, 32, "autotune"),
      row("XBLOCK: 4, R0_BLOCK: 512, num_warps: 4", 0.031424, 143, "autotune"),
      row("XBLOCK: 1, R0_BLOCK: 1024, num_warps: 16", 0.018624, 30, "coordinate descent", true),
      row("XBLOCK: 1, R0_BLOCK: 2048, num_warps: 16", 0.02144, 47, "coordinate descent"),
      row("XBLOCK: 1, R0_BLOCK: 4096, num_warps: 16", 0.024512, 29, "coordinate descent")],
  };
  assert.equal(launchLabel(launch), "⚙ R0_BLOCK=1024 · XBLOCK=1 · num_warps=16 · num_stages=1 · "
    + "kept by coordinate descent of 3 configs (0.019 ms; next 0.021 ms) after 2 autotuned");
  const table = launchHover(launch).split("\n");
  assert.equal(table[0], "Autotuning (cache entry chosen by coordinate descent)");
  assert.ok(table[6].startsWith("| `XBLOCK: 1, R0_BLOCK: 1024,") && table[6].endsWith("| coordinate descent | 0.019 ms | 30 | 0 | **chosen** |"), table[6]);
  const only = { ...launch, tried: [], settings: [{ name: "R0_BLOCK", value: "64", origin: "only config" }] };
  assert.equal(launchLabel(only), "⚙ R0_BLOCK=64 (only config) · one config (coordinate descent)");
});
